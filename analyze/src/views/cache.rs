//! `analyze cache`: page-cache use from `bpfperf:cachestat` samples, as cachestat shows it:
//! accesses, hits, misses and dirtied pages with the hit ratio, per process and per second
//! (cachestat's arithmetic: misses = pages added - pages dirtied, hits = accesses - misses).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use format::events::{CacheStat, CACHESTAT_EVENT};
use format::linux_perf_data::linux_perf_event_reader::EventRecord;
use format::linux_perf_data::PerfFileRecord;

/// One process's page-cache use over the interval that ends at `time`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    pub pid: i32,
    /// The process's name (its last COMM before the interval ended).
    pub comm: String,
    /// End of the interval (ns, CLOCK_MONOTONIC).
    pub time: u64,
    pub stat: CacheStat,
}

/// Every cachestat interval of a recording, in time order.
pub fn read_intervals(path: &Path) -> Result<Vec<Interval>, format::Error> {
    let mut reader = crate::files::input::open(path)?.reader;
    let cache_attrs: Vec<bool> = (0..reader.perf_file().event_attributes().len())
        .map(|i| reader.event_name(i) == CACHESTAT_EVENT)
        .collect();
    let mut names: HashMap<i32, String> = HashMap::new();
    let mut out = Vec::new();
    while let Some(record) = reader.next_record()? {
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        let is_cache = cache_attrs.get(attr_index).copied().unwrap_or(false);
        match format::parse_record(&record) {
            Ok(EventRecord::Comm(c)) if c.pid == c.tid => {
                names.insert(
                    c.pid,
                    String::from_utf8_lossy(&c.name.as_slice()).into_owned(),
                );
            }
            Ok(EventRecord::Sample(s)) if is_cache => {
                let Some(stat) = s.raw.and_then(|raw| CacheStat::from_raw(&raw.as_slice())) else {
                    continue;
                };
                let pid = s.pid.unwrap_or(-1);
                out.push(Interval {
                    pid,
                    comm: names
                        .get(&pid)
                        .cloned()
                        .unwrap_or_else(|| format!(":{pid}")),
                    time: s.timestamp.unwrap_or(0),
                    stat,
                });
            }
            _ => {}
        }
    }
    out.sort_by_key(|i| (i.time, i.pid));
    Ok(out)
}

/// Misses as cachestat counts them: pages added to the cache that were not new pages written
/// (those are dirtied as they are added).
fn misses(s: &CacheStat) -> u64 {
    s.added.saturating_sub(s.dirtied)
}

/// Hits: accesses that found their page (readahead can bring in more pages than were asked
/// for yet: then none).
fn hits(s: &CacheStat) -> u64 {
    s.accesses.saturating_sub(misses(s))
}

fn ratio(s: &CacheStat) -> String {
    if s.accesses == 0 {
        return "-".into();
    }
    format!("{:.1}%", 100.0 * hits(s) as f64 / s.accesses as f64)
}

fn add(into: &mut CacheStat, s: &CacheStat) {
    into.accesses += s.accesses;
    into.added += s.added;
    into.dirtied += s.dirtied;
    into.interval_ns += s.interval_ns;
}

/// The whole `analyze cache` report.
pub fn report(intervals: &[Interval]) -> String {
    let mut o = String::new();
    if intervals.is_empty() {
        let _ = writeln!(o, "no page-cache counts in this recording (record counts them by default; --no-cache turns it off)");
        return o;
    }
    let mut all = CacheStat::default();
    let mut by_proc: BTreeMap<(i32, &str), CacheStat> = BTreeMap::new();
    for i in intervals {
        add(&mut all, &i.stat);
        add(by_proc.entry((i.pid, &i.comm)).or_default(), &i.stat);
    }
    let _ = writeln!(
        o,
        "page cache: {} accesses, {} hits, {} misses, {} dirtied (pages), hit ratio {}",
        all.accesses,
        hits(&all),
        misses(&all),
        all.dirtied,
        ratio(&all)
    );
    let header = |o: &mut String, first: &str| {
        let _ = writeln!(
            o,
            "  {first:<12} {:<16} {:>8} {:>12} {:>12} {:>12} {:>12} {:>8}",
            "comm", "pid", "accesses", "hits", "misses", "dirtied", "ratio"
        );
    };
    let row = |o: &mut String, first: &str, comm: &str, pid: i32, s: &CacheStat| {
        let _ = writeln!(
            o,
            "  {first:<12} {comm:<16} {pid:>8} {:>12} {:>12} {:>12} {:>12} {:>8}",
            s.accesses,
            hits(s),
            misses(s),
            s.dirtied,
            ratio(s)
        );
    };
    let _ = writeln!(o, "\nper process:");
    header(&mut o, "");
    let mut procs: Vec<_> = by_proc.iter().collect();
    procs.sort_by_key(|((pid, _), s)| (std::cmp::Reverse(s.accesses + s.added + s.dirtied), *pid));
    for ((pid, comm), s) in procs {
        row(&mut o, "", comm, *pid, s);
    }
    let _ = writeln!(o, "\nover time (each process, each second):");
    header(&mut o, "time (s)");
    let start = intervals[0]
        .time
        .saturating_sub(intervals[0].stat.interval_ns);
    for i in intervals {
        let at = format!("{:.3}", i.time.saturating_sub(start) as f64 / 1e9);
        row(&mut o, &at, &i.comm, i.pid, &i.stat);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(
        pid: i32,
        comm: &str,
        time: u64,
        accesses: u64,
        added: u64,
        dirtied: u64,
    ) -> Interval {
        Interval {
            pid,
            comm: comm.into(),
            time,
            stat: CacheStat {
                accesses,
                added,
                dirtied,
                interval_ns: 1_000_000_000,
            },
        }
    }

    #[test]
    fn totals_ratios_and_rows() {
        let text = report(&[
            interval(7, "reader", 2_000_000_000, 100, 25, 0),
            interval(8, "writer", 2_000_000_000, 0, 50, 50),
            interval(7, "reader", 3_000_000_000, 100, 0, 0),
        ]);
        assert!(
            text.starts_with("page cache: 200 accesses, 175 hits, 25 misses, 50 dirtied (pages), hit ratio 87.5%"),
            "{text}"
        );
        let procs = &text[text.find("per process:").unwrap()..text.find("over time").unwrap()];
        let reader = procs.lines().find(|l| l.contains("reader")).expect(procs);
        assert!(
            reader
                .split_whitespace()
                .eq(["reader", "7", "200", "175", "25", "0", "87.5%"]),
            "{reader}"
        );
        let writer = procs.lines().find(|l| l.contains("writer")).expect(procs);
        assert!(writer.ends_with(" -"), "no accesses, no ratio: {writer}");
        let times = &text[text.find("over time").unwrap()..];
        assert!(
            times.contains("1.000") && times.contains("2.000"),
            "{times}"
        );
    }
}
