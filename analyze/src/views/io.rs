//! `analyze io`: block I/O from `bpfperf:block_io` samples, the way biolatency and biosnoop
//! show it: a log2 latency histogram, per-device and per-process tables, the slowest requests,
//! reads and writes apart.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use format::events::{BlockIo, BLOCK_IO_EVENT};

use crate::views::latency::{self, render_histogram, us};
use format::linux_perf_data::linux_perf_event_reader::EventRecord;
use format::linux_perf_data::PerfFileRecord;

/// One completed request with who issued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub io: BlockIo,
    /// The issuer (the RAW's common_pid).
    pub pid: i32,
    /// The sample's thread: the issuer's, or the dirtier's when the request is charged to it.
    pub tid: i32,
    /// Completion time (ns, CLOCK_MONOTONIC).
    pub time: u64,
    /// Writeback of pages a recorded thread dirtied: that process (pid, name).
    pub dirtier: Option<(i32, String)>,
}

impl Request {
    fn is_write(&self) -> bool {
        self.io.rwbs_str().contains('W')
    }
    fn is_read(&self) -> bool {
        self.io.rwbs_str().contains('R')
    }
}

/// A recording's block I/O.
#[derive(Debug, Default)]
pub struct Requests {
    /// Every request, in completion order.
    pub requests: Vec<Request>,
    /// Block I/O events lost while recording (LOST records naming the event): requests, or
    /// the write() stacks that writeback would be charged to.
    pub lost: u64,
}

/// Every block I/O request of a recording, in completion order.
pub fn read_requests(path: &Path) -> Result<Vec<Request>, format::Error> {
    Ok(read(path)?.requests)
}

/// A recording's block I/O: its requests and how many were lost.
pub fn read(path: &Path) -> Result<Requests, format::Error> {
    let mut reader = crate::files::input::open(path)?.reader;
    let io_attrs: Vec<bool> = (0..reader.perf_file().event_attributes().len())
        .map(|i| reader.event_name(i) == BLOCK_IO_EVENT)
        .collect();
    let event_ids = crate::read::event_ids(reader.perf_file());
    let mut lost = 0u64;
    let mut out = Vec::new();
    let mut names: std::collections::HashMap<i32, String> = Default::default();
    while let Some(record) = reader.next_record()? {
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        let is_io = io_attrs.get(attr_index).copied().unwrap_or(false);
        let s = match format::parse_record(&record) {
            Ok(EventRecord::Comm(c)) if c.pid == c.tid => {
                names.insert(
                    c.pid,
                    String::from_utf8_lossy(&c.name.as_slice()).into_owned(),
                );
                continue;
            }
            Ok(EventRecord::Sample(s)) if is_io => s,
            Ok(EventRecord::Lost(l)) => {
                let of_io = crate::read::event_of_id(&event_ids, l.id)
                    .is_some_and(|e| io_attrs.get(e) == Some(&true));
                if of_io {
                    lost = lost.saturating_add(l.count);
                }
                continue;
            }
            _ => continue,
        };
        let Some(io) = s.raw.and_then(|raw| BlockIo::from_raw(&raw.as_slice())) else {
            continue;
        };
        let pid = s.pid.unwrap_or(-1);
        let dirtier = (io.dirtied != 0).then(|| {
            let name = names
                .get(&pid)
                .cloned()
                .unwrap_or_else(|| format!(":{pid}"));
            (pid, name)
        });
        out.push(Request {
            pid: if io.dirtied != 0 { io.issuer_pid } else { pid },
            io,
            tid: s.tid.unwrap_or(-1),
            time: s.timestamp.unwrap_or(0),
            dirtier,
        });
    }
    Ok(Requests {
        requests: out,
        lost,
    })
}

/// Latency statistics of a group of requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub requests: u64,
    pub bytes: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
}

pub fn stats<'a>(reqs: impl IntoIterator<Item = &'a Request>) -> Stats {
    let mut bytes = 0;
    let l = latency::summary(reqs.into_iter().map(|r| {
        bytes += r.io.bytes as u64;
        r.io.latency_ns
    }));
    Stats {
        requests: l.count,
        bytes,
        p50_ns: l.p50_ns,
        p99_ns: l.p99_ns,
        max_ns: l.max_ns,
        total_ns: l.total_ns,
    }
}

/// log2 histogram of the requests' latencies ([`latency::histogram_us`]).
pub fn histogram_us<'a>(reqs: impl IntoIterator<Item = &'a Request>) -> Vec<u64> {
    latency::histogram_us(reqs.into_iter().map(|r| r.io.latency_ns))
}

/// The line that says how many block I/O events were lost, if any were.
fn lost_line(lost: u64) -> String {
    if lost == 0 {
        return String::new();
    }
    format!(
        "  lost while recording: {lost} block I/O events (requests, or the write() stacks \
         writeback is charged to), not in the figures\n"
    )
}

/// The whole `analyze io` report. `slowest` limits the slowest-requests table.
pub fn report(io: &Requests, slowest: usize) -> String {
    let reqs = &io.requests[..];
    let mut o = String::new();
    if reqs.is_empty() {
        let _ = writeln!(o, "no block I/O in this recording (record with I/O on: it is by default, --no-io turns it off)");
        o.push_str(&lost_line(io.lost));
        return o;
    }
    let all = stats(reqs);
    let _ = writeln!(
        o,
        "block I/O: {} requests, {} bytes, latency p50 {} us, p99 {} us, max {} us",
        all.requests,
        all.bytes,
        us(all.p50_ns),
        us(all.p99_ns),
        us(all.max_ns)
    );
    o.push_str(&lost_line(io.lost));
    for (label, pick) in [
        ("reads", Request::is_read as fn(&Request) -> bool),
        ("writes", Request::is_write),
    ] {
        let s = stats(reqs.iter().filter(|r| pick(r)));
        let _ = writeln!(o, "  {label:<7} {:>8} requests {:>14} bytes   p50 {:>10} us   p99 {:>10} us   max {:>10} us", s.requests, s.bytes, us(s.p50_ns), us(s.p99_ns), us(s.max_ns));
    }
    let _ = writeln!(o);
    render_histogram(
        &mut o,
        "latency histogram (all requests):",
        &histogram_us(reqs),
    );
    for (label, pick) in [
        ("reads", Request::is_read as fn(&Request) -> bool),
        ("writes", Request::is_write),
    ] {
        let h = histogram_us(reqs.iter().filter(|r| pick(r)));
        if !h.is_empty() {
            let _ = writeln!(o);
            render_histogram(&mut o, &format!("latency histogram ({label}):"), &h);
        }
    }

    let mut by_dev: BTreeMap<(u32, u32), Vec<&Request>> = BTreeMap::new();
    let mut by_proc: BTreeMap<(String, i32), Vec<&Request>> = BTreeMap::new();
    for r in reqs {
        by_dev.entry(r.io.major_minor()).or_default().push(r);
        by_proc.entry((r.io.comm_str(), r.pid)).or_default().push(r);
    }
    let _ = writeln!(o, "\nper device:");
    let _ = writeln!(
        o,
        "  {:<10} {:>9} {:>14} {:>12} {:>12} {:>12}",
        "device", "requests", "bytes", "p50 us", "p99 us", "max us"
    );
    for ((maj, min), rs) in &by_dev {
        let s = stats(rs.iter().copied());
        let _ = writeln!(
            o,
            "  {:<10} {:>9} {:>14} {:>12} {:>12} {:>12}",
            format!("{maj},{min}"),
            s.requests,
            s.bytes,
            us(s.p50_ns),
            us(s.p99_ns),
            us(s.max_ns)
        );
    }
    let _ = writeln!(o, "\nper process (issuer):");
    let _ = writeln!(
        o,
        "  {:<20} {:>8} {:>8} {:>9} {:>14} {:>12} {:>12} {:>12}",
        "comm", "pid", "tracked", "requests", "bytes", "p50 us", "p99 us", "max us"
    );
    let mut procs: Vec<_> = by_proc.iter().collect();
    procs.sort_by_key(|(_, rs)| std::cmp::Reverse(stats(rs.iter().copied()).total_ns));
    for ((comm, pid), rs) in procs {
        let s = stats(rs.iter().copied());
        let tracked = if rs.iter().any(|r| r.io.tracked != 0) {
            "yes"
        } else {
            "no"
        };
        let _ = writeln!(
            o,
            "  {:<20} {:>8} {:>8} {:>9} {:>14} {:>12} {:>12} {:>12}",
            comm,
            pid,
            tracked,
            s.requests,
            s.bytes,
            us(s.p50_ns),
            us(s.p99_ns),
            us(s.max_ns)
        );
    }
    let mut by_dirtier: BTreeMap<(String, i32), Vec<&Request>> = BTreeMap::new();
    for r in reqs {
        if let Some((pid, name)) = &r.dirtier {
            by_dirtier.entry((name.clone(), *pid)).or_default().push(r);
        }
    }
    if !by_dirtier.is_empty() {
        let _ = writeln!(
            o,
            "\nwriteback by the process that dirtied the pages (its stack is the sample's):"
        );
        let _ = writeln!(
            o,
            "  {:<20} {:>8} {:>9} {:>14}   issued by",
            "dirtier", "pid", "requests", "bytes"
        );
        for ((name, pid), rs) in &by_dirtier {
            let s = stats(rs.iter().copied());
            let mut issuers: Vec<String> = rs.iter().map(|r| r.io.comm_str()).collect();
            issuers.sort();
            issuers.dedup();
            let _ = writeln!(
                o,
                "  {:<20} {:>8} {:>9} {:>14}   {}",
                name,
                pid,
                s.requests,
                s.bytes,
                issuers.join(", ")
            );
        }
    }
    let mut slow: Vec<&Request> = reqs.iter().collect();
    slow.sort_by_key(|r| (std::cmp::Reverse(r.io.latency_ns), r.time));
    let _ = writeln!(o, "\nslowest requests:");
    let _ = writeln!(
        o,
        "  {:>16} {:<16} {:>8} {:<8} {:<5} {:>14} {:>9} {:>12}",
        "completed (s)", "comm", "pid", "device", "rwbs", "sector", "bytes", "latency us"
    );
    for r in slow.into_iter().take(slowest) {
        let (maj, min) = r.io.major_minor();
        let _ = writeln!(
            o,
            "  {:>16.6} {:<16} {:>8} {:<8} {:<5} {:>14} {:>9} {:>12}",
            r.time as f64 / 1e9,
            r.io.comm_str(),
            r.pid,
            format!("{maj},{min}"),
            r.io.rwbs_str(),
            r.io.sector,
            r.io.bytes,
            us(r.io.latency_ns)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(lat_us: u64, rwbs: &str, comm: &str) -> Request {
        let mut io = BlockIo {
            dev: (8 << 20) | 1,
            bytes: 4096,
            latency_ns: lat_us * 1000,
            ..Default::default()
        };
        io.rwbs[..rwbs.len()].copy_from_slice(rwbs.as_bytes());
        io.comm[..comm.len()].copy_from_slice(comm.as_bytes());
        Request {
            io,
            pid: 1,
            tid: 1,
            time: lat_us,
            dirtier: None,
        }
    }

    #[test]
    fn quantiles_and_histogram() {
        let reqs: Vec<Request> = (1..=100)
            .map(|i| req(i * 10, if i % 2 == 0 { "W" } else { "R" }, "tar"))
            .collect();
        let s = stats(&reqs);
        assert_eq!(
            (s.requests, s.bytes, s.p50_ns, s.p99_ns, s.max_ns),
            (100, 409600, 500_000, 990_000, 1_000_000)
        );
        let h = histogram_us(&reqs);
        // 10 us lands in [8, 16), 1000 us in [512, 1024).
        assert_eq!(h.len(), 10);
        assert_eq!(h.iter().sum::<u64>(), 100);
        assert_eq!(h[3], 1);
        let io = |requests: &[Request], lost| Requests {
            requests: requests.to_vec(),
            lost,
        };
        let text = report(&io(&reqs, 0), 3);
        assert!(text.contains("reads         50 requests"), "{text}");
        assert!(!text.contains("lost"), "{text}");
        let text = report(&io(&reqs, 6), 3);
        assert!(
            text.lines()
                .nth(1)
                .is_some_and(|l| l.contains("lost while recording: 6 block I/O events")),
            "{text}"
        );
        let text = report(&io(&[], 2), 3);
        assert!(
            text.contains("no block I/O") && text.contains("lost while recording: 2"),
            "{text}"
        );
        assert!(
            !text.contains("writeback by"),
            "no dirtier, no table: {text}"
        );
        let mut charged = reqs.clone();
        charged[1].dirtier = Some((7, "writer".into()));
        let text = report(&io(&charged, 0), 3);
        let table = &text[text.find("writeback by").expect(&text)..];
        assert!(
            table
                .lines()
                .nth(2)
                .is_some_and(|l| l.split_whitespace().eq(["writer", "7", "1", "4096", "tar"])),
            "{table}"
        );
        assert!(text.contains("8,1"), "{text}");
        assert!(text.contains("1000.0"), "slowest listed: {text}");
    }
}
