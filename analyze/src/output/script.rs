//! perf-script-like text: a header line per sample (`comm pid/tid [cpu] time: period event:`),
//! then one frame per line, leaf first (`address symbol+offset (object)`), then a blank line.
//! stackcollapse-perf.pl and inferno-collapse-perf read it unchanged. Inlined functions get a
//! line of their own (at the address of the function they were inlined into).

use std::io::{self, Write};

use crate::symbolized::Symbolized;

pub fn write_script(s: &Symbolized, out: &mut impl Write) -> io::Result<()> {
    for st in &s.stacks {
        let event = s
            .events
            .get(st.event as usize)
            .map_or("unknown", String::as_str);
        writeln!(
            out,
            "{} {:>7}/{:<7} [{:03}] {:>5}.{:06}: {:>10} {}:",
            s.comms[st.comm as usize],
            st.pid,
            st.tid,
            st.cpu,
            st.time / 1_000_000_000,
            st.time % 1_000_000_000 / 1000,
            st.period,
            event
        )?;
        for (i, &f) in st.frames.iter().enumerate().rev() {
            let f = &s.frames[f as usize];
            let a = st.addrs.get(i).copied();
            let addr = a.map_or(0, |a| a.addr);
            match a.and_then(|a| a.offset).filter(|_| !f.is_unknown()) {
                Some(off) => writeln!(out, "\t{addr:>16x} {}+{off:#x} ({})", f.function, f.dso)?,
                None => writeln!(out, "\t{addr:>16x} {} ({})", f.function, f.dso)?,
            }
        }
        writeln!(out)?;
    }
    Ok(())
}
