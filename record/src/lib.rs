//! record as a library: everything the `record` binary does, in folders by concern, each
//! importing only the ones below it (tests/integration_tests/layers.rs checks):
//!
//! - [`cli`]: the command line (and [`cli::command`] for man pages), the summary line;
//! - [`session`]: one recording's life: start, run the workload, stop;
//! - `capture`: BPF events and side-band facts -> perf records, in rounds;
//! - `config`: what to record, as the command line asked;
//! - [`output`]: the files: features and build ids, rotation, archive;
//! - `tracing`, `runtimes`, `unwinding`: any event; Python and JVM frames; the unwind tables;
//! - `sideband`: what is known of processes and the kernel: side-band records, /proc, build
//!   ids, kernel symbols;
//! - `host`: what a recording asks of the system.

pub mod cli;
pub mod output;
pub mod session;

mod capture;
mod config;
mod host;
mod runtimes;
mod sideband;
mod tracing;
mod unwinding;
