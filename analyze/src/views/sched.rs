//! `analyze sched`: run-queue latency from `runq-time` samples, as runqlat shows it: a log2
//! histogram per process (runqlat -P), then the threads that waited most for a CPU.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use format::events::RUNQ_EVENT;

use crate::read::Recording;
use crate::views::latency::{self, render_histogram, us};

/// One wait for a CPU: from a thread's preemption, or its wakeup, to running again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub pid: i32,
    pub tid: i32,
    /// The thread's name then.
    pub comm: String,
    /// When it ran again (ns, the recording's clock).
    pub time: u64,
    pub ns: u64,
}

/// Every run-queue wait of `rec`, in time order.
pub fn waits(rec: &Recording) -> Vec<Wait> {
    let Some(event) = rec.events.iter().position(|n| n == RUNQ_EVENT) else {
        return Vec::new();
    };
    let mut out: Vec<Wait> = rec
        .samples
        .iter()
        .filter(|s| s.event == event)
        .map(|s| Wait {
            pid: s.pid,
            tid: s.tid,
            comm: rec.comms.get(s.comm as usize).cloned().unwrap_or_default(),
            time: s.time,
            ns: s.period,
        })
        .collect();
    out.sort_by_key(|w| w.time);
    out
}

/// The whole `analyze sched` report; `top` limits the table of threads.
pub fn report(waits: &[Wait], top: usize) -> String {
    let mut o = String::new();
    if waits.is_empty() {
        let _ = writeln!(o, "no run-queue waits in this recording (record writes them with off-CPU time, on by default: runq-time samples)");
        return o;
    }
    let all = latency::summary(waits.iter().map(|w| w.ns));
    let _ = writeln!(
        o,
        "run-queue latency: {} waits, {:.3} ms in all, p50 {} us, p99 {} us, max {} us",
        all.count,
        all.total_ns as f64 / 1e6,
        us(all.p50_ns),
        us(all.p99_ns),
        us(all.max_ns)
    );

    // Processes named by their most frequent thread name, ordered by time waited.
    let mut by_pid: BTreeMap<i32, Vec<&Wait>> = BTreeMap::new();
    let mut by_tid: BTreeMap<(i32, i32), Vec<&Wait>> = BTreeMap::new();
    for w in waits {
        by_pid.entry(w.pid).or_default().push(w);
        by_tid.entry((w.pid, w.tid)).or_default().push(w);
    }
    let name = |ws: &[&Wait]| -> String {
        let mut n: BTreeMap<&str, usize> = BTreeMap::new();
        for w in ws {
            *n.entry(&w.comm).or_default() += 1;
        }
        n.into_iter()
            .max_by_key(|&(name, c)| (c, std::cmp::Reverse(name)))
            .map(|(name, _)| name.to_string())
            .unwrap_or_default()
    };
    let total = |ws: &[&Wait]| ws.iter().map(|w| w.ns).sum::<u64>();
    let mut procs: Vec<(&i32, &Vec<&Wait>)> = by_pid.iter().collect();
    procs.sort_by_key(|(pid, ws)| (std::cmp::Reverse(total(ws)), **pid));
    for (pid, ws) in procs {
        let _ = writeln!(o);
        let title = format!(
            "pid {pid} [{}]: {} waits, {:.3} ms",
            name(ws),
            ws.len(),
            total(ws) as f64 / 1e6
        );
        render_histogram(
            &mut o,
            &title,
            &latency::histogram_us(ws.iter().map(|w| w.ns)),
        );
    }

    let mut threads: Vec<(&(i32, i32), &Vec<&Wait>)> = by_tid.iter().collect();
    threads.sort_by_key(|(id, ws)| (std::cmp::Reverse(total(ws)), **id));
    let _ = writeln!(o, "\nthreads that waited most:");
    let _ = writeln!(
        o,
        "  {:<16} {:>8} {:>8} {:>8} {:>12} {:>10} {:>10} {:>10}",
        "comm", "pid", "tid", "waits", "total ms", "p50 us", "p99 us", "max us"
    );
    for ((pid, tid), ws) in threads.into_iter().take(top) {
        let s = latency::summary(ws.iter().map(|w| w.ns));
        let _ = writeln!(
            o,
            "  {:<16} {:>8} {:>8} {:>8} {:>12.3} {:>10} {:>10} {:>10}",
            name(ws),
            pid,
            tid,
            s.count,
            s.total_ns as f64 / 1e6,
            us(s.p50_ns),
            us(s.p99_ns),
            us(s.max_ns)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(pid: i32, tid: i32, comm: &str, us: u64) -> Wait {
        Wait {
            pid,
            tid,
            comm: comm.into(),
            time: us,
            ns: us * 1000,
        }
    }

    #[test]
    fn processes_by_time_waited_and_threads_ranked() {
        let waits = vec![
            wait(1, 1, "quiet", 3),
            wait(2, 20, "spin", 100),
            wait(2, 21, "spin", 1000),
            wait(2, 21, "spin", 2000),
        ];
        let text = report(&waits, 10);
        assert!(
            text.starts_with("run-queue latency: 4 waits, 3.103 ms"),
            "{text}"
        );
        let spin = text.find("pid 2 [spin]: 3 waits, 3.100 ms").expect(&text);
        let quiet = text.find("pid 1 [quiet]: 1 waits").expect(&text);
        assert!(
            spin < quiet,
            "the process that waited most comes first: {text}"
        );
        let table = &text[text.find("threads that waited most").unwrap()..];
        let t21 = table.find("      21 ").expect(table);
        let t20 = table.find("      20 ").expect(table);
        assert!(t21 < t20, "{table}");
    }
}
