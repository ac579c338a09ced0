//! `analyze critical`'s table: a thread's wall time by the thread and function it was charged
//! to (see `aggregate::critical`): the thread's own functions, its wakers' (the innermost
//! `[waits on COMM TID]` of a stack names the thread), and the run queue and devices.

use std::fmt::Write;

use crate::aggregate::Profile;

/// What the critical path's stacks put before a waker's part.
const WAITS_ON: &str = "[waits on ";

/// The table: a header with the thread and its wall time, then `top` rows of (ms, %, thread,
/// function), largest first, and what the rest hold.
pub fn table(p: &Profile, tid: i32, wall: u64, top: usize) -> String {
    let name = |f: u32| p.frames[f as usize].function.as_str();
    let mut rows: std::collections::HashMap<(String, String), u64> = Default::default();
    let mut comm = "";
    for s in &p.stacks {
        comm = &p.comms[s.comm as usize];
        let thread = s
            .frames
            .iter()
            .rev()
            .map(|&f| name(f))
            .find_map(|n| n.strip_prefix(WAITS_ON)?.strip_suffix(']'))
            .map_or_else(|| format!("{comm} {tid}"), str::to_string);
        let function = s.frames.last().map_or("[unknown]", |&f| name(f));
        *rows.entry((thread, function.to_string())).or_insert(0) += s.weight;
    }
    let mut rows: Vec<((String, String), u64)> = rows.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let ms = |ns: u64| ns as f64 / 1e6;
    let pct = |ns: u64| 100.0 * ns as f64 / wall.max(1) as f64;
    let mut out = String::new();
    let charged: u64 = p.stacks.iter().map(|s| s.weight).sum();
    let _ = writeln!(
        out,
        "critical path of {comm} {tid}: {:.3} ms of wall time ({:.3} ms charged)",
        ms(wall),
        ms(charged)
    );
    let _ = writeln!(out, "{:>12} {:>7}  {:<24} function", "ms", "%", "thread");
    for ((thread, function), ns) in rows.iter().take(top) {
        let _ = writeln!(
            out,
            "{:>12.3} {:>6.2}%  {:<24} {function}",
            ms(*ns),
            pct(*ns),
            thread
        );
    }
    let rest: u64 = rows.iter().skip(top).map(|(_, ns)| ns).sum();
    if rest > 0 {
        let _ = writeln!(
            out,
            "{:>12.3} {:>6.2}%  ({} more rows)",
            ms(rest),
            pct(rest),
            rows.len() - top
        );
    }
    out
}
