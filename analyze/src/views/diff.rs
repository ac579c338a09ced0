//! Differential profiles: two recordings' folded stacks side by side (inferno's differential
//! folding: `stack BEFORE AFTER`, the first normalized to the second's total unless told
//! otherwise), drawn as a flame graph of AFTER colored by the change (red: grew, blue: shrank),
//! and a table of the functions whose share changed most.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use crate::aggregate::Profile;

/// The differential folded lines of `before` and `after` (folded stacks, `stack COUNT`).
pub fn folded(before: &[String], after: &[String], normalize: bool) -> io::Result<Vec<String>> {
    let opts = inferno::differential::Options {
        normalize,
        strip_hex: false,
    };
    let mut out = Vec::new();
    inferno::differential::from_readers(
        opts,
        before.join("\n").as_bytes(),
        after.join("\n").as_bytes(),
        &mut out,
    )?;
    let mut lines: Vec<String> = String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    Ok(lines)
}

/// A flame graph of the differential lines: widths from AFTER, colors from the change.
pub fn write_svg(lines: &[String], title: &str, unit: &str, out: impl Write) -> io::Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = unit.to_string();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
}

/// A function's share of each profile: self (as the leaf) and total (anywhere in the stack).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub function: String,
    pub self_before: f64,
    pub self_after: f64,
    pub total_before: f64,
    pub total_after: f64,
}

impl Change {
    pub fn self_delta(&self) -> f64 {
        self.self_after - self.self_before
    }
    pub fn total_delta(&self) -> f64 {
        self.total_after - self.total_before
    }
}

/// Self and total shares (percent) of each function, by name as folded output spells it.
fn shares(p: &Profile) -> BTreeMap<String, (f64, f64)> {
    let names: Vec<String> = p
        .frames
        .iter()
        .map(|f| super::folded::frame_name(f).into_owned())
        .collect();
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let total = p.total.max(1) as f64;
    for s in &p.stacks {
        let w = 100.0 * s.weight as f64 / total;
        if let Some(&leaf) = s.frames.last() {
            out.entry(names[leaf as usize].clone()).or_default().0 += w;
        }
        let distinct: BTreeSet<&str> = s
            .frames
            .iter()
            .map(|&f| names[f as usize].as_str())
            .collect();
        for name in distinct {
            out.entry(name.to_string()).or_default().1 += w;
        }
    }
    out
}

/// Every function of either profile with its shares, those whose self or total share changed
/// most first.
pub fn changes(before: &Profile, after: &Profile) -> Vec<Change> {
    let (b, a) = (shares(before), shares(after));
    let names: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
    let mut out: Vec<Change> = names
        .into_iter()
        .map(|n| {
            let (sb, tb) = b.get(n).copied().unwrap_or_default();
            let (sa, ta) = a.get(n).copied().unwrap_or_default();
            Change {
                function: n.clone(),
                self_before: sb,
                self_after: sa,
                total_before: tb,
                total_after: ta,
            }
        })
        .collect();
    out.sort_by(|x, y| {
        let key = |c: &Change| {
            let (s, t) = (c.self_delta().abs(), c.total_delta().abs());
            (s.max(t), s)
        };
        key(y)
            .partial_cmp(&key(x))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| x.function.cmp(&y.function))
    });
    out
}

/// The table: the `top` functions whose share changed most.
pub fn table(changes: &[Change], top: usize) -> String {
    let mut out = String::from(
        "# Self share (before -> after, change) and Total share, percent of each profile\n",
    );
    out.push_str(&format!(
        "# {:>7} {:>7} {:>8}  {:>7} {:>7} {:>8}  Function\n",
        "Self", "", "", "Total", "", ""
    ));
    // No "-0.00%" for what did not change.
    let delta = |d: f64| if d.abs() < 0.005 { 0.0 } else { d };
    for c in changes.iter().take(top) {
        out.push_str(&format!(
            "{:>8.2}% {:>6.2}% {:>+7.2}%  {:>6.2}% {:>6.2}% {:>+7.2}%  {}\n",
            c.self_before,
            c.self_after,
            delta(c.self_delta()),
            c.total_before,
            c.total_after,
            delta(c.total_delta()),
            c.function
        ));
    }
    out
}
