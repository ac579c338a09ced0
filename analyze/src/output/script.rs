//! perf-script-like text: a header line per sample, one frame per line, leaf first, so that
//! stackcollapse-perf.pl and inferno-collapse-perf read it unchanged.

use std::fmt::Write as _;

use crate::pipeline::Profile;

pub fn script(profile: &Profile, event: &str) -> String {
    let mut o = String::new();
    for s in &profile.stacks {
        let _ = writeln!(
            o,
            "{} {}/{} {}: {}:",
            profile.comms[s.comm as usize], s.pid, s.tid, s.weight, event
        );
        for &f in s.frames.iter().rev() {
            let f = &profile.frames[f as usize];
            let _ = writeln!(o, "\t{:>16x} {} ({})", 0, f.function, f.dso);
        }
        o.push('\n');
    }
    o
}
