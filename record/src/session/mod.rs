//! One recording's life: start the probes and the workload (held until they are on), the
//! loop that takes BPF events and side-band facts into rounds, and the end: last events,
//! features and build ids, the summary.

mod dumps;
mod phases;
mod record;
mod runtimes;
mod settings;
mod status;
mod summary;
mod workload;

pub use record::record;
pub use summary::Summary;
