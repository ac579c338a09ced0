//! record, end to end, as root on the real kernel; perf reads what it writes.

mod aggregate;
mod any_event;
mod bpf_programs;
mod common;
mod dwarf;
mod errors;
mod faults;
mod follow;
mod habits;
mod heatmap;
mod layers;
mod loss;
mod net;
mod offcpu_io;
mod python;
mod python_versions;
#[path = "../../../fixtures/record_said.rs"]
mod record_said;
mod requests;
mod rotation;
mod runtimes;
mod sampling;
mod sched;
mod signals;
mod writeback;
