//! BPF events and side-band facts -> perf records: the events' attrs, and the recorder that
//! writes each event as its sample, merged by time into rounds.

pub mod attrs;
pub mod item;
pub mod recorder;
pub mod take;

mod bursts;
mod facts;
mod io;
mod lost;
mod net;
mod offcpu;
mod oncpu;
mod requests;
mod rounds;
mod stacks;
mod traced;
