//! What the unit tests of the wakeup views share: frames, per-sample stacks and wakeup payloads
//! made in memory.

use crate::symbolize::{FrameInfo, Symbolized, SymbolizedStack};
use format::events::Wakeup;

/// A frame of function `name` (no file).
pub fn frame(name: &str) -> FrameInfo {
    FrameInfo::new(name, "")
}

/// A per-sample stack of thread `tid` (its own process, command `tid - 1`), event `event`, at
/// (time, CPU 0).
pub fn stack(event: u32, tid: i32, time: u64, period: u64, frames: &[u32]) -> SymbolizedStack {
    SymbolizedStack {
        comm: (tid as u32).saturating_sub(1),
        pid: tid,
        tid,
        time,
        cpu: 0,
        event,
        period,
        weight: period,
        count: 1,
        frames: frames.to_vec(),
        user_len: frames.len() as u32,
        addrs: Vec::new(),
    }
}

/// The folded lines of `sym`'s stacks: frame names joined by `;`, and the weight.
pub fn folded(sym: &Symbolized) -> Vec<(String, u64)> {
    sym.stacks
        .iter()
        .map(|s| {
            let names: Vec<&str> = s
                .frames
                .iter()
                .map(|&f| sym.frames[f as usize].function.as_str())
                .collect();
            (names.join(";"), s.weight)
        })
        .collect()
}

/// The payload of a wakeup event: thread `wakee` (its own process) woken at `wake_ns`.
pub fn wake(wake_ns: u64, wakee: u32) -> Vec<u8> {
    Wakeup {
        wakee_pid: wakee,
        wakee_tid: wakee,
        blocked_ns: 0,
        wake_ns,
    }
    .to_raw(0)
    .to_vec()
}
