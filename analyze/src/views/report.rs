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

/// One row of a report: its cells (one per key) and what the stacks behind it weigh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub cells: Vec<String>,
    /// The weight of the stacks whose leaf frame is this row's (Self).
    pub self_weight: u64,
    /// The weight of the stacks this row appears in at all, each stack once (Total).
    pub total_weight: u64,
    /// The recorded samples behind `self_weight` and `total_weight`.
    pub self_count: u64,
    pub total_count: u64,
}

/// Weight and samples summed.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    weight: u64,
    count: u64,
}

impl Sums {
    fn add(&mut self, s: &crate::aggregate::Stack) {
        self.weight += s.weight;
        self.count += s.count;
    }
}

/// The rows a report shows, in its order (`shown`'s call graphs are not drawn here): what
/// `analyze report` prints and `analyze top` shows.
pub fn lines(profile: &Profile, keys: &[SortKey], shown: Rows) -> Vec<Line> {
    tally(profile, keys, shown).0
}

/// The rows, sorted and cut at the percent limit, and each row's call tree where `shown`
/// asks for call graphs.
fn tally(
    profile: &Profile,
    keys: &[SortKey],
    shown: Rows,
) -> (Vec<Line>, HashMap<Vec<String>, CallTree>) {
    let total = profile.total;
    let mut self_w: HashMap<Vec<String>, Sums> = HashMap::new();
    let mut total_w: HashMap<Vec<String>, Sums> = HashMap::new();
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
        self_w.entry(row(leaf)).or_default().add(s);
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
                total_w.entry(r.clone()).or_default().add(s);
                seen.push(r);
            }
        }
    }
    // Rows by Self; with children, every row with Total weight (callers too), by Total.
    let mut rows: Vec<Line> = if shown.children {
        total_w
            .iter()
            .map(|(r, t)| (r, self_w.get(r).copied().unwrap_or_default(), *t))
            .map(|(r, own, t)| line(r, own, t))
            .collect()
    } else {
        self_w
            .iter()
            .map(|(r, own)| line(r, *own, total_w.get(r).copied().unwrap_or(*own)))
            .collect()
    };
    let sorted_by = |l: &Line| {
        if shown.children {
            l.total_weight
        } else {
            l.self_weight
        }
    };
    rows.retain(|l| pct(total, sorted_by(l)) >= shown.percent_limit);
    rows.sort_by(|a, b| sorted_by(b).cmp(&sorted_by(a)).then(a.cells.cmp(&b.cells)));
    (rows, trees)
}

fn line(cells: &[String], own: Sums, total: Sums) -> Line {
    Line {
        cells: cells.to_vec(),
        self_weight: own.weight,
        total_weight: total.weight,
        self_count: own.count,
        total_count: total.count,
    }
}

/// `w` in percent of `total`.
pub fn pct(total: u64, w: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * w as f64 / total as f64
    }
}

pub fn report(profile: &Profile, keys: &[SortKey], shown: Rows) -> String {
    let total = profile.total;
    let (rows, trees) = tally(profile, keys, shown);
    let pct = |w: u64| pct(total, w);
    let widths: Vec<usize> = (0..keys.len())
        .map(|c| {
            rows.iter()
                .map(|r| r.cells[c].len())
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
    for row in &rows {
        let (w, t) = (row.self_weight, row.total_weight);
        let _ = writeln!(
            o,
            "  {:>6.2}% {:>6.2}%  {}",
            pct(w),
            pct(t),
            line(&row.cells)
        );
        if let Some(tree) = trees.get(&row.cells) {
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
