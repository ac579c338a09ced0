//! A top table like `perf report --stdio --no-children`: self and total share per key.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::pipeline::Profile;

/// Report columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Sym,
    Dso,
    Comm,
    Pid,
    Srcline,
}

impl SortKey {
    pub fn parse(s: &str) -> Option<SortKey> {
        Some(match s {
            "sym" => SortKey::Sym,
            "dso" => SortKey::Dso,
            "comm" => SortKey::Comm,
            "pid" => SortKey::Pid,
            "srcline" => SortKey::Srcline,
            _ => return None,
        })
    }
}

pub fn report(profile: &Profile, keys: &[SortKey], weight_name: &str) -> String {
    let total: u64 = profile.stacks.iter().map(|s| s.weight).sum();
    let mut self_w: HashMap<Vec<String>, u64> = HashMap::new();
    let mut total_w: HashMap<Vec<String>, u64> = HashMap::new();
    for s in &profile.stacks {
        let row = |i: usize| -> Vec<String> {
            let f = s.frames.get(i).map(|&f| &profile.frames[f as usize]);
            keys.iter()
                .map(|k| match k {
                    SortKey::Sym => f.map_or("[unknown]".into(), |f| f.function.clone()),
                    SortKey::Dso => f.map_or("[unknown]".into(), |f| {
                        f.dso.rsplit('/').next().unwrap_or("").to_string()
                    }),
                    SortKey::Comm => profile.comms[s.comm as usize].clone(),
                    SortKey::Pid => format!("{}:{}", s.pid, profile.comms[s.comm as usize]),
                    SortKey::Srcline => f
                        .and_then(|f| f.srcline.clone())
                        .unwrap_or_else(|| "??:0".into()),
                })
                .collect()
        };
        let leaf = s.frames.len().saturating_sub(1);
        *self_w.entry(row(leaf)).or_insert(0) += s.weight;
        let mut seen: Vec<Vec<String>> = Vec::new();
        for i in 0..s.frames.len().max(1) {
            let r = row(i);
            if !seen.contains(&r) {
                *total_w.entry(r.clone()).or_insert(0) += s.weight;
                seen.push(r);
            }
        }
    }
    let mut rows: Vec<(&Vec<String>, &u64)> = self_w.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let pct = |w: u64| {
        if total == 0 {
            0.0
        } else {
            100.0 * w as f64 / total as f64
        }
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Total: {total} {weight_name}, {} stacks",
        profile.stacks.len()
    );
    let names: Vec<&str> = keys
        .iter()
        .map(|k| match k {
            SortKey::Sym => "Symbol",
            SortKey::Dso => "Shared Object",
            SortKey::Comm => "Command",
            SortKey::Pid => "Pid:Command",
            SortKey::Srcline => "Source:Line",
        })
        .collect();
    let _ = writeln!(o, "# {:>8} {:>8}  {}", "Self", "Total", names.join("  "));
    for (row, w) in rows {
        let t = total_w.get(row).copied().unwrap_or(*w);
        let _ = writeln!(
            o,
            "  {:>7.2}% {:>7.2}%  {}",
            pct(*w),
            pct(t),
            row.join("  ")
        );
    }
    o
}
