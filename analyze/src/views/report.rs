//! A top table like `perf report --stdio --no-children`: the share of the weight whose leaf
//! frame has each key (Self), and the share of stacks the key appears in at all (Total); with
//! `-g`, each row's call graph under it, as perf draws it.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::aggregate::Profile;

/// Report columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Sym,
    Dso,
    Comm,
    Pid,
    /// `file:line` of the frame (of the inlined function where there is one).
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

    fn title(self) -> &'static str {
        match self {
            SortKey::Sym => "Symbol",
            SortKey::Dso => "Shared Object",
            SortKey::Comm => "Command",
            SortKey::Pid => "Pid:Command",
            SortKey::Srcline => "Source:Line",
        }
    }
}

/// Which rows a report shows, in what order (perf report's options of the same names).
#[derive(Debug, Clone, Copy, Default)]
pub struct Rows {
    /// Leave out rows under this percentage (of the column they are sorted by).
    pub percent_limit: f64,
    /// Sort by Total (the weight of the stacks passing through: perf's --children), not Self.
    pub children: bool,
    /// Draw each row's call graph in this order (perf's -g).
    pub call_graph: Option<CallOrder>,
}

/// The order of call graph paths (perf's `-g caller|callee`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOrder {
    /// From the root down to the row's function.
    Caller,
    /// From the row's function up to the root: who called it (perf's default).
    Callee,
}

/// Paths merged into a tree, each node with the weight passing through it.
#[derive(Debug, Default)]
struct CallTree {
    weight: u64,
    children: HashMap<String, CallTree>,
}

impl CallTree {
    fn add(&mut self, path: impl Iterator<Item = String>, weight: u64) {
        self.weight += weight;
        let mut node = self;
        for name in path {
            node = node.children.entry(name).or_default();
            node.weight += weight;
        }
    }

    /// perf's graph: straight lines where one path goes on, `|--PCT%--name` where paths part;
    /// branches under `min` of the total are left out. `self` is the root's single child.
    fn write(&self, o: &mut String, indent: &str, pct: &dyn Fn(u64) -> f64, min: f64) {
        let mut kids: Vec<(&String, &CallTree)> = self
            .children
            .iter()
            .filter(|(_, k)| pct(k.weight) >= min)
            .collect();
        kids.sort_by(|a, b| b.1.weight.cmp(&a.1.weight).then(a.0.cmp(b.0)));
        if let [(name, kid)] = kids[..] {
            if kid.weight == self.weight {
                let _ = writeln!(o, "{indent}{name}");
                return kid.write(o, indent, pct, min);
            }
        }
        let n = kids.len();
        for (k, (name, kid)) in kids.into_iter().enumerate() {
            let last = k + 1 == n;
            let head = format!("--{:.2}%--", pct(kid.weight));
            let _ = writeln!(o, "{indent}|");
            let _ = writeln!(o, "{indent}{}{head}{name}", if last { " " } else { "|" });
            let more = format!(
                "{indent}{}{}",
                if last { " " } else { "|" },
                " ".repeat(head.len())
            );
            kid.write(o, &more, pct, min);
        }
    }
}

/// Call graph branches under this percentage of the total are left out (perf's default), or
/// under --percent-limit where that is higher (as perf applies it to call graphs too).
const CALL_GRAPH_MIN_PERCENT: f64 = 0.5;

pub fn report(profile: &Profile, keys: &[SortKey], shown: Rows) -> String {
    let total = profile.total;
    let mut self_w: HashMap<Vec<String>, u64> = HashMap::new();
    let mut total_w: HashMap<Vec<String>, u64> = HashMap::new();
    let mut trees: HashMap<Vec<String>, CallTree> = HashMap::new();
    let mut seen: Vec<Vec<String>> = Vec::new();
    for s in &profile.stacks {
        let row = |i: Option<usize>| -> Vec<String> {
            let f = i.map(|i| &profile.frames[s.frames[i] as usize]);
            keys.iter()
                .map(|k| match k {
                    SortKey::Sym => {
                        let mark = match i {
                            Some(i) if s.is_kernel(i) => "[k]",
                            _ => "[.]",
                        };
                        format!("{mark} {}", f.map_or("[unknown]", |f| f.function.as_str()))
                    }
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
        let leaf = s.frames.len().checked_sub(1);
        *self_w.entry(row(leaf)).or_insert(0) += s.weight;
        // The call graph of a row: from its innermost frame in the stack (the leaf for Self).
        let path = |i: usize| -> Vec<String> {
            let name = |&f: &u32| profile.frames[f as usize].function.clone();
            match shown.call_graph {
                Some(CallOrder::Callee) => s.frames[..=i].iter().rev().map(name).collect(),
                _ => s.frames[..=i].iter().map(name).collect(),
            }
        };
        if shown.call_graph.is_some() && !shown.children {
            if let Some(i) = leaf {
                trees
                    .entry(row(leaf))
                    .or_default()
                    .add(path(i).into_iter(), s.weight);
            }
        }
        seen.clear();
        let all: Vec<Option<usize>> = if s.frames.is_empty() {
            vec![None]
        } else {
            (0..s.frames.len()).rev().map(Some).collect()
        };
        for i in all {
            let r = row(i);
            if !seen.contains(&r) {
                if let (Some(i), Some(_), true) = (i, shown.call_graph, shown.children) {
                    trees
                        .entry(r.clone())
                        .or_default()
                        .add(path(i).into_iter(), s.weight);
                }
                *total_w.entry(r.clone()).or_insert(0) += s.weight;
                seen.push(r);
            }
        }
    }
    let pct = |w: u64| {
        if total == 0 {
            0.0
        } else {
            100.0 * w as f64 / total as f64
        }
    };
    // Rows by Self; with children, every row with Total weight (callers too), by Total.
    let sorted_by = |row: &Vec<String>, own: u64| {
        if shown.children {
            total_w.get(row).copied().unwrap_or(own)
        } else {
            own
        }
    };
    let mut rows: Vec<(&Vec<String>, &u64)> = if shown.children {
        total_w
            .keys()
            .map(|r| (r, self_w.get(r).unwrap_or(&0)))
            .collect()
    } else {
        self_w.iter().collect()
    };
    rows.retain(|(r, w)| pct(sorted_by(r, **w)) >= shown.percent_limit);
    rows.sort_by(|a, b| {
        sorted_by(b.0, *b.1)
            .cmp(&sorted_by(a.0, *a.1))
            .then(a.0.cmp(b.0))
    });
    let widths: Vec<usize> = (0..keys.len())
        .map(|c| {
            rows.iter()
                .map(|(r, _)| r[c].len())
                .chain(std::iter::once(keys[c].title().len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| -> String {
        let n = cells.len();
        cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i + 1 == n {
                    c.clone()
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Samples: {} of event '{}'",
        profile.stats.samples, profile.event
    );
    let _ = writeln!(o, "# Total weight: {total} {}", profile.unit);
    let _ = writeln!(o, "#");
    let titles: Vec<String> = keys.iter().map(|k| k.title().to_string()).collect();
    let _ = writeln!(o, "# {:>7} {:>7}  {}", "Self", "Total", line(&titles));
    let dots: Vec<String> = widths.iter().map(|w| ".".repeat(*w)).collect();
    let _ = writeln!(o, "# {:>7} {:>7}  {}", ".......", ".......", line(&dots));
    let _ = writeln!(o, "#");
    for (row, w) in rows {
        let t = total_w.get(row).copied().unwrap_or(*w);
        let _ = writeln!(o, "  {:>6.2}% {:>6.2}%  {}", pct(*w), pct(t), line(row));
        if let Some(tree) = trees.get(row) {
            let indent = " ".repeat(18);
            let _ = writeln!(o, "{indent}|");
            let mut root: Vec<(&String, &CallTree)> = tree.children.iter().collect();
            root.sort_by(|a, b| b.1.weight.cmp(&a.1.weight).then(a.0.cmp(b.0)));
            for (name, node) in root {
                let _ = writeln!(o, "{indent}---{name}");
                node.write(
                    &mut o,
                    &format!("{indent}   "),
                    &pct,
                    CALL_GRAPH_MIN_PERCENT.max(shown.percent_limit),
                );
            }
            let _ = writeln!(o);
        }
    }
    o
}
