//! What is known of processes and the kernel beside the BPF events: the side-band records of
//! a dummy perf event per CPU (`perf_events.rs`, as [`Fact`]s), the processes that already
//! ran (`procfs.rs`), what the file told its reader so far (`known.rs`), the kernel's symbols
//! and BPF programs (`kernel.rs`; kallsyms read, or kept for the boot, in `kallsyms.rs`),
//! build ids (`buildid.rs`), and the files of processes in
//! other mount namespaces (`foreign.rs`).

pub mod buildid;
pub mod fact;
pub mod foreign;
pub mod kallsyms;
pub mod kernel;
pub mod known;
pub mod perf_events;
pub mod procfs;

pub use fact::{Fact, TimedFact};
pub use perf_events::SideBand;
