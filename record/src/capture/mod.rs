//! BPF events and side-band facts -> perf records: the events' attrs, and the recorder that
//! writes each event as its sample, merged by time into rounds.

pub mod attrs;
pub mod recorder;
