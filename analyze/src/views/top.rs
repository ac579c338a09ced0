//! `analyze top`: what a live view shows of a recording it reads again every second. The
//! function rows are the report's ([`super::report::lines`]: Self and Total as `analyze
//! report` counts them); this module adds the hottest stacks, the processes to filter by,
//! and lays each view out as a [`Table`] of text that the terminal view draws and the text
//! mode prints.

use std::fmt::Write as _;

use rustc_hash::FxHashMap;

use super::report::{self, pct, Rows, SortKey};
use crate::aggregate::Profile;

/// What the table lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    /// Functions by the weight of the samples they are the leaf of (perf top's default).
    #[default]
    BySelf,
    /// Functions by the weight of the stacks they appear in (perf's --children).
    ByTotal,
    /// Whole stacks, heaviest first.
    Stacks,
}

impl View {
    pub fn parse(s: &str) -> Option<View> {
        Some(match s {
            "self" => View::BySelf,
            "total" => View::ByTotal,
            "stacks" => View::Stacks,
            _ => return None,
        })
    }

    pub fn title(self) -> &'static str {
        match self {
            View::BySelf => "functions by self",
            View::ByTotal => "functions by total",
            View::Stacks => "hottest stacks",
        }
    }
}

/// A process of the recording and what its samples weigh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: i32,
    /// The command of its heaviest stack.
    pub comm: String,
    pub weight: u64,
    pub count: u64,
}

/// The processes with samples in `profile`, heaviest first (ties by pid).
pub fn processes(profile: &Profile) -> Vec<Process> {
    // pid -> (weight, count, heaviest stack's comm and weight)
    let mut by_pid: FxHashMap<i32, (u64, u64, u32, u64)> = FxHashMap::default();
    for s in &profile.stacks {
        let e = by_pid.entry(s.pid).or_insert((0, 0, s.comm, 0));
        e.0 += s.weight;
        e.1 += s.count;
        if s.weight > e.3 {
            (e.2, e.3) = (s.comm, s.weight);
        }
    }
    let mut out: Vec<Process> = by_pid
        .into_iter()
        .map(|(pid, (weight, count, comm, _))| Process {
            pid,
            comm: profile.comms[comm as usize].clone(),
            weight,
            count,
        })
        .collect();
    out.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.pid.cmp(&b.pid)));
    out
}

/// `profile` with the samples of process `pid` only (percentages then are of that process).
pub fn of_process(profile: &Profile, pid: i32) -> Profile {
    let stacks: Vec<_> = profile
        .stacks
        .iter()
        .filter(|s| s.pid == pid)
        .cloned()
        .collect();
    Profile {
        comms: profile.comms.clone(),
        frames: profile.frames.clone(),
        total: stacks.iter().map(|s| s.weight).sum(),
        stats: crate::symbolize::Stats {
            samples: stacks.iter().map(|s| s.count).sum(),
            ..profile.stats.clone()
        },
        stacks,
        event: profile.event.clone(),
        unit: profile.unit.clone(),
    }
}

/// Rows of text cells under column titles; the first `numeric` columns are numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub columns: Vec<&'static str>,
    pub numeric: usize,
    pub rows: Vec<Vec<String>>,
}

/// How a stack is written on one line: leaf first, each caller after an arrow.
pub const CALLED_FROM: &str = " <- ";

/// The `limit` first rows of `view` over `profile`.
pub fn table(profile: &Profile, view: View, limit: usize) -> Table {
    let percent = |w: u64| format!("{:.2}%", pct(profile.total, w));
    match view {
        View::BySelf | View::ByTotal => {
            let rows = Rows {
                children: view == View::ByTotal,
                ..Rows::default()
            };
            let lines = report::lines(profile, &[SortKey::Dso, SortKey::Sym], rows);
            Table {
                columns: vec![
                    "Self",
                    "Total",
                    "Self samples",
                    "Total samples",
                    "Shared Object",
                    "Symbol",
                ],
                numeric: 4,
                rows: lines
                    .into_iter()
                    .take(limit)
                    .map(|l| {
                        let mut row = vec![
                            percent(l.self_weight),
                            percent(l.total_weight),
                            l.self_count.to_string(),
                            l.total_count.to_string(),
                        ];
                        row.extend(l.cells);
                        row
                    })
                    .collect(),
            }
        }
        View::Stacks => {
            // Threads of one command with the same stack, as named, are one row (frames
            // apart by their lines are not).
            let mut by_ids: FxHashMap<(u32, &[u32]), (u64, u64)> = FxHashMap::default();
            for s in &profile.stacks {
                let e = by_ids.entry((s.comm, &s.frames)).or_insert((0, 0));
                e.0 += s.weight;
                e.1 += s.count;
            }
            let mut merged: FxHashMap<(u32, String), (u64, u64)> = FxHashMap::default();
            for ((comm, frames), (weight, count)) in by_ids {
                let names: Vec<&str> = frames
                    .iter()
                    .rev()
                    .map(|&f| profile.frames[f as usize].function.as_str())
                    .collect();
                let stack = if names.is_empty() {
                    crate::UNKNOWN.to_string()
                } else {
                    names.join(CALLED_FROM)
                };
                let e = merged.entry((comm, stack)).or_insert((0, 0));
                e.0 += weight;
                e.1 += count;
            }
            let mut stacks: Vec<((u32, String), (u64, u64))> = merged.into_iter().collect();
            stacks.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
            Table {
                columns: vec!["Share", "Samples", "Command", "Stack (leaf first)"],
                numeric: 2,
                rows: stacks
                    .into_iter()
                    .take(limit)
                    .map(|((comm, stack), (weight, count))| {
                        vec![
                            percent(weight),
                            count.to_string(),
                            profile.comms[comm as usize].clone(),
                            stack,
                        ]
                    })
                    .collect(),
            }
        }
    }
}

impl Table {
    /// Each column's width: its widest cell or title.
    pub fn widths(&self) -> Vec<usize> {
        (0..self.columns.len())
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r[c].chars().count())
                    .chain([self.columns[c].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Aligned text, titles first: numbers right-aligned, the last column not padded.
    pub fn to_text(&self) -> String {
        let widths = self.widths();
        let mut o = String::new();
        let mut write = |cells: &mut dyn Iterator<Item = &str>| {
            let mut line = String::new();
            for (c, cell) in cells.enumerate() {
                let w = widths[c];
                if c > 0 {
                    line.push_str("  ");
                }
                if c < self.numeric {
                    let _ = write!(line, "{cell:>w$}");
                } else if c + 1 < widths.len() {
                    let _ = write!(line, "{cell:<w$}");
                } else {
                    line.push_str(cell);
                }
            }
            let _ = writeln!(o, "{}", line.trim_end());
        };
        write(&mut self.columns.iter().copied());
        for r in &self.rows {
            write(&mut r.iter().map(String::as_str));
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Stack;
    use crate::symbolize::FrameInfo;

    fn frame(name: &str) -> FrameInfo {
        FrameInfo::new(name, "/bin/prog")
    }

    fn profile() -> Profile {
        let stack = |pid, comm, frames: &[u32], weight| Stack {
            comm,
            pid,
            tid: pid,
            frames: frames.to_vec(),
            user_len: frames.len() as u32,
            weight,
            count: weight,
        };
        let stacks = vec![
            stack(10, 0, &[0, 1], 6),
            stack(10, 0, &[0, 2], 3),
            stack(20, 1, &[0, 2], 1),
        ];
        Profile {
            comms: vec!["a".into(), "b".into()],
            frames: vec![frame("main"), frame("hot"), frame("warm")],
            total: 10,
            stats: crate::symbolize::Stats {
                samples: 10,
                ..Default::default()
            },
            stacks,
            event: "cpu-clock".into(),
            unit: "samples".into(),
        }
    }

    #[test]
    fn views_and_processes() {
        let p = profile();
        let t = table(&p, View::BySelf, 10);
        assert_eq!(t.rows[0][..4], ["60.00%", "60.00%", "6", "6"]);
        assert_eq!(t.rows[0][5], "[.] hot");
        let t = table(&p, View::ByTotal, 10);
        assert_eq!(t.rows[0][1..4], ["100.00%", "0", "10"]);
        assert_eq!(t.rows[0][5], "[.] main");
        let t = table(&p, View::Stacks, 1);
        assert_eq!(t.rows, vec![vec!["60.00%", "6", "a", "hot <- main"]]);

        let procs = processes(&p);
        assert_eq!((procs[0].pid, procs[0].weight), (10, 9));
        assert_eq!((procs[1].pid, procs[1].comm.as_str()), (20, "b"));
        let only = of_process(&p, 20);
        let t = table(&only, View::BySelf, 10);
        assert_eq!(t.rows[0][..3], ["100.00%", "100.00%", "1"]);
        assert_eq!(t.rows.len(), 1);
        let text = t.to_text();
        assert!(text.starts_with("   Self    Total  Self samples"), "{text}");
    }
}
