//! perf-script-like text: a header line per sample (`comm pid/tid [cpu] time: period event:`,
//! a traced event's payload after it as perf prints it), then one frame per line, leaf first
//! (`address symbol+offset (object)`), then a blank line.
//! stackcollapse-perf.pl and inferno-collapse-perf read it unchanged. Inlined functions get a
//! line of their own (at the address of the function they were inlined into, with that
//! function's offset), marked `(inlined)` in place of their object, as perf script prints
//! them (`mix_step+0x4d (inlined)` over `hot_loop+0x4d (/path/prog)`).

use std::io::{self, Write};

use crate::symbolize::{Symbolized, SymbolizedStack};

/// Writes every sample of `s`'s timeline; `payload(i, out)` writes what follows the event's
/// name on the line of the timeline's `i`th sample.
pub fn write_script<W: Write>(
    s: &Symbolized,
    payload: impl Fn(usize, &mut W) -> io::Result<()>,
    out: &mut W,
) -> io::Result<()> {
    for (i, t) in s.timeline.iter().enumerate() {
        let st = &s.stacks[t.stack as usize];
        let event = s
            .events
            .get(st.event as usize)
            .map_or("unknown", String::as_str);
        write!(
            out,
            "{} {:>7}/{:<7} [{:03}] {:>5}.{:06}: {:>10} {}:",
            s.comms[st.comm as usize],
            st.pid,
            st.tid,
            t.cpu,
            t.time / 1_000_000_000,
            t.time % 1_000_000_000 / 1000,
            t.period,
            event
        )?;
        payload(i, out)?;
        writeln!(out)?;
        write_frames(s, st, out)?;
        writeln!(out)?;
    }
    Ok(())
}

/// The frames of `st` (one of `s`'s stacks), leaf first, one a line, as perf script prints
/// a sample's stack (`trace -g` prints them under its lines too).
pub fn write_frames(s: &Symbolized, st: &SymbolizedStack, out: &mut impl Write) -> io::Result<()> {
    for (i, &f) in st.frames.iter().enumerate().rev() {
        let f = &s.frames[f as usize];
        let a = st.addrs.get(i).copied();
        let addr = a.map_or(0, |a| a.addr);
        // An inlined function is marked as perf marks it, in place of its object.
        let object = if f.inlined {
            "(inlined)".to_string()
        } else {
            format!("({})", f.dso)
        };
        match a.and_then(|a| a.offset).filter(|_| !f.is_unknown()) {
            Some(off) => writeln!(out, "\t{addr:>16x} {}+{off:#x} {object}", f.function)?,
            None => writeln!(out, "\t{addr:>16x} {} {object}", f.function)?,
        }
    }
    Ok(())
}
