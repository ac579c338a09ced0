//! The critical path of one thread: every nanosecond of its wall time charged once, to what
//! held it up (as wPerf's wait-for graphs and Perfetto's critical path do). While the thread
//! runs, its own on-CPU stacks; while it is blocked, whatever its waker did until the wakeup
//! (the waker's on-CPU stacks, or the waker's own waits, followed the same way); while it
//! waits for a CPU, the run queue; a wakeup from an interrupt, the device (disk, network,
//! timer).
//!
//! Each charge is a stack, root first: the thread's stack where it blocked, `[waits on COMM
//! TID]`, then the waker's (its stack where it ran, or where it blocked in turn, and so on),
//! or a leaf that says where the time went: `[run queue]`, `[disk]`, `[network]`, `[timer]`,
//! `[interrupt]`, `[not followed: COMM PID]`, `[waker not recorded]`, `[on CPU, not
//! sampled]`. The stacks' weights sum to the thread's wall time, from its first recorded
//! event to its last.

use rustc_hash::{FxHashMap, FxHashSet};

use super::wakeups::{wake_times, PseudoFrames};
use crate::read::Recording;
use crate::symbolize::{FrameInfo, Symbolized, SymbolizedStack};

/// The events of the stacks (indices into [`Symbolized::events`]); the others are on-CPU
/// samples.
pub struct Events {
    pub offcpu: u32,
    pub runq: Option<u32>,
    pub wakeup: Option<u32>,
}

/// How many wakers deep the path is followed; past that, `[wakers too deep]`.
const MAX_DEPTH: usize = 16;
/// How far from a stretch on the CPU a sample of the thread may lie and still name it, when
/// none lies inside (a stretch shorter than the sampling period).
const NEAREST_SAMPLE_NS: u64 = 2_000_000;

/// One off-CPU interval of a thread.
#[derive(Clone, Copy)]
struct Wait {
    start: u64,
    end: u64,
    /// When it was woken (`end` for a preemption: it waited for a CPU all along).
    woken: u64,
    /// Its off-CPU stack.
    stack: usize,
    /// Its waker's stack (a `bpfperf:wakeup` sample), if one was recorded.
    waker: Option<usize>,
}

/// A thread's recorded life: its waits and on-CPU samples, by time.
#[derive(Default)]
struct Thread {
    waits: Vec<Wait>,
    /// (time, stack) of its on-CPU samples.
    samples: Vec<(u64, usize)>,
}

struct Path<'a> {
    stacks: &'a [SymbolizedStack],
    comms: &'a [String],
    threads: FxHashMap<i32, Thread>,
    followed: FxHashSet<i32>,
    names: PseudoFrames<'a>,
    charged: FxHashMap<Vec<u32>, u64>,
}

impl Path<'_> {
    fn name(&mut self, name: &str) -> u32 {
        self.names.id(name)
    }

    fn charge(&mut self, frames: Vec<u32>, ns: u64) {
        if ns > 0 {
            *self.charged.entry(frames).or_insert(0) += ns;
        }
    }

    fn charge_leaf(&mut self, prefix: &[u32], leaf: &str, ns: u64) {
        let mut frames = prefix.to_vec();
        frames.push(self.name(leaf));
        self.charge(frames, ns);
    }

    /// Charges `from..to` of thread `tid`'s time under `prefix`: its stretches on the CPU to
    /// its samples there, its waits to what held them up.
    fn walk(&mut self, tid: i32, from: u64, to: u64, prefix: &[u32], depth: usize) {
        if from >= to {
            return;
        }
        let Some(thread) = self.threads.get(&tid) else {
            self.charge_leaf(prefix, "[on CPU, not sampled]", to - from);
            return;
        };
        // The waits that overlap from..to (by end, at most one overlaps another's start).
        let first = thread.waits.partition_point(|w| w.end <= from);
        let waits: Vec<Wait> = thread.waits[first..]
            .iter()
            .take_while(|w| w.start < to)
            .copied()
            .collect();
        let mut at = from;
        for w in waits {
            let (start, end) = (w.start.max(at), w.end.min(to));
            if start > at {
                self.on_cpu(tid, at, start, prefix);
            }
            if start < end {
                self.waited(tid, &w, start, end, prefix, depth);
            }
            at = at.max(end);
        }
        if at < to {
            self.on_cpu(tid, at, to, prefix);
        }
    }

    /// Charges `from..to`, when thread `tid` ran, to its samples in that stretch (evenly),
    /// or the nearest one.
    fn on_cpu(&mut self, tid: i32, from: u64, to: u64, prefix: &[u32]) {
        let samples = self.threads.get(&tid).map_or(&[][..], |t| &t.samples[..]);
        // A sample at time t stands for the period before it.
        let lo = samples.partition_point(|&(t, _)| t <= from);
        let hi = samples.partition_point(|&(t, _)| t <= to);
        let inside: Vec<usize> = samples[lo..hi].iter().map(|&(_, s)| s).collect();
        let chosen = if inside.is_empty() {
            // The nearest one, after or before, if near enough.
            let after = samples
                .get(hi)
                .filter(|&&(t, _)| t - to <= NEAREST_SAMPLE_NS);
            let before = lo
                .checked_sub(1)
                .map(|i| &samples[i])
                .filter(|&&(t, _)| from - t <= NEAREST_SAMPLE_NS);
            after.or(before).map(|&(_, s)| vec![s]).unwrap_or_default()
        } else {
            inside
        };
        if chosen.is_empty() {
            // No sample near: the user stack where it blocked next (or, at its end, where it
            // had blocked before), the code it ran last (a thread that issues a read and
            // blocks runs a few microseconds between its samples).
            let mut frames = prefix.to_vec();
            if let Some(s) = self.nearest_wait(tid, from, to) {
                let s = &self.stacks[s];
                frames.extend(&s.frames[..(s.user_len as usize).min(s.frames.len())]);
            }
            frames.push(self.name("[on CPU, not sampled]"));
            self.charge(frames, to - from);
            return;
        }
        let (n, ns) = (chosen.len() as u64, to - from);
        for (i, s) in chosen.iter().enumerate() {
            // Even shares, the remainder to the first: the sum is exact.
            let share = ns / n + u64::from((i as u64) < ns % n);
            let mut frames = prefix.to_vec();
            frames.extend(&self.stacks[*s].frames);
            self.charge(frames, share);
        }
    }

    /// The stack of thread `tid`'s wait that begins at `to` (the stretch `from..to` on the
    /// CPU ends in it), else of the one that ended at `from`.
    fn nearest_wait(&self, tid: i32, from: u64, to: u64) -> Option<usize> {
        let waits = &self.threads.get(&tid)?.waits;
        let next = waits.partition_point(|w| w.end <= to);
        waits
            .get(next)
            .filter(|w| w.start >= to)
            .or_else(|| {
                next.checked_sub(1)
                    .map(|i| &waits[i])
                    .filter(|w| w.end <= from)
            })
            .map(|w| w.stack)
    }

    /// Charges `from..to` of the wait `w` of thread `tid`: its part before the wakeup to
    /// what the waker did, the rest to the run queue.
    fn waited(&mut self, tid: i32, w: &Wait, from: u64, to: u64, prefix: &[u32], depth: usize) {
        let mut blocked = prefix.to_vec();
        blocked.extend(&self.stacks[w.stack].frames);
        let woken = w.woken.clamp(from, to);
        if woken < to {
            self.charge_leaf(&blocked, "[run queue]", to - woken);
        }
        if from >= woken {
            return;
        }
        let ns = woken - from;
        let Some(waker) = w.waker.map(|i| &self.stacks[i]) else {
            self.charge_leaf(&blocked, "[waker not recorded]", ns);
            return;
        };
        // An interrupt, or a kernel thread or softirq that completed a device's work for
        // it (a disk request's completion runs in either): the device its stack names.
        let device = device_of(waker, self.names.frames);
        if waker.pid == 0 || (device.is_some() && !self.followed.contains(&waker.pid)) {
            self.charge_leaf(&blocked, device.unwrap_or("[interrupt]"), ns);
            return;
        }
        let comm = self.comms[waker.comm as usize].replace(' ', "_");
        if !self.followed.contains(&waker.pid) {
            self.charge_leaf(
                &blocked,
                &format!("[not followed: {comm} {}]", waker.pid),
                ns,
            );
            return;
        }
        if depth >= MAX_DEPTH || waker.tid == tid {
            self.charge_leaf(&blocked, "[wakers too deep]", ns);
            return;
        }
        let waker_tid = waker.tid;
        blocked.push(self.name(&format!("[waits on {comm} {waker_tid}]")));
        self.walk(waker_tid, from, woken, &blocked, depth + 1);
    }
}

/// What device an interrupt (or a kernel thread) that woke a thread served, from its kernel
/// stack: `[disk]`, `[network]`, `[timer]`; `None` when it names none.
fn device_of(waker: &SymbolizedStack, frames: &[FrameInfo]) -> Option<&'static str> {
    let has = |part: &str| {
        waker
            .frames
            .iter()
            .any(|&f| frames[f as usize].function.contains(part))
    };
    if has("blk_") || has("bio_endio") || has("nvme") || has("scsi") {
        Some("[disk]")
    } else if has("net_rx") || has("napi") || has("netif_receive") || has("tcp_v") {
        Some("[network]")
    } else if has("hrtimer") || has("timer") {
        Some("[timer]")
    } else {
        None
    }
}

/// The thread the path is of unless told: the main thread (its id is its process's) of the
/// process whose samples come first.
fn main_thread(stacks: &[SymbolizedStack], wakeup: Option<u32>) -> Option<i32> {
    stacks
        .iter()
        .filter(|s| Some(s.event) != wakeup && s.pid == s.tid && s.pid > 0)
        .min_by_key(|s| s.time)
        .map(|s| s.tid)
}

/// Replaces the stacks by the critical path of thread `tid` (default: [`main_thread`]); the
/// stacks must be per sample. `window`: only the part of its wall time in these ranges (their
/// hull; `--time`). Returns the thread and its wall time (ns), `None` when the recording has
/// no such thread (or none in the window).
pub fn critical_path(
    sym: &mut Symbolized,
    rec: &Recording,
    events: &Events,
    tid: Option<i32>,
    window: Option<&[(u64, u64)]>,
) -> Option<(i32, u64)> {
    let stacks = std::mem::take(&mut sym.stacks);
    let tid = tid.or_else(|| main_thread(&stacks, events.wakeup))?;
    // Wake times and run-queue parts by the samples' (time, CPU) (and thread, for run-queue
    // samples: each is its off-CPU sample's twin).
    let wake_times = wake_times(rec);
    let mut wakers: FxHashMap<(u64, u32), usize> = FxHashMap::default();
    let mut runq: FxHashMap<(u64, u32, i32), u64> = FxHashMap::default();
    let mut threads: FxHashMap<i32, Thread> = FxHashMap::default();
    let mut followed = FxHashSet::default();
    for (i, s) in stacks.iter().enumerate() {
        if Some(s.event) == events.wakeup {
            wakers.insert((s.time, s.cpu), i);
        } else if Some(s.event) == events.runq {
            runq.insert((s.time, s.cpu, s.tid), s.period);
        } else {
            followed.insert(s.pid);
            if s.event != events.offcpu {
                threads.entry(s.tid).or_default().samples.push((s.time, i));
            }
        }
    }
    for (i, s) in stacks.iter().enumerate() {
        if s.event != events.offcpu {
            continue;
        }
        let key = (s.time, s.cpu);
        let start = s.time.saturating_sub(s.period);
        let waker = wakers.get(&key).copied();
        // Woken: from the wakeup's own time, else from the run-queue part, else (no
        // waker, no run-queue sample) a wait whose waker was not recorded.
        let woken = match (
            waker.and_then(|_| wake_times.get(&key)),
            runq.get(&(s.time, s.cpu, s.tid)),
        ) {
            (Some(&t), _) if (start..=s.time).contains(&t) => t,
            (_, Some(&r)) => s.time.saturating_sub(r).max(start),
            _ => s.time,
        };
        threads.entry(s.tid).or_default().waits.push(Wait {
            start,
            end: s.time,
            woken,
            stack: i,
            waker,
        });
    }
    for t in threads.values_mut() {
        t.waits.sort_unstable_by_key(|w| (w.end, w.start));
        t.samples.sort_unstable();
    }
    // Its name as it was last (a thread names itself after it starts).
    let root = stacks
        .iter()
        .filter(|s| s.tid == tid && Some(s.event) != events.wakeup)
        .max_by_key(|s| s.time)?;
    let thread = threads.get(&tid)?;
    // From its first recorded moment (a sample stands for the period before it) to its last.
    let first = thread
        .waits
        .iter()
        .map(|w| w.start)
        .chain(
            thread
                .samples
                .iter()
                .map(|&(t, s)| t.saturating_sub(stacks[s].period)),
        )
        .min()?;
    let last = thread
        .waits
        .iter()
        .map(|w| w.end)
        .chain(thread.samples.iter().map(|&(t, _)| t))
        .max()?;
    let (first, last) = match window {
        Some(ranges) => {
            let from = ranges.iter().map(|r| r.0).min()?;
            let to = ranges.iter().map(|r| r.1).max()?;
            (first.max(from), last.min(to))
        }
        None => (first, last),
    };
    if first >= last {
        return None;
    }
    let (comm, pid) = (root.comm, root.pid);
    let mut path = Path {
        stacks: &stacks,
        comms: &sym.comms,
        threads,
        followed,
        names: PseudoFrames::new(&mut sym.frames),
        charged: FxHashMap::default(),
    };
    path.walk(tid, first, last, &[], 0);
    let mut charged: Vec<(Vec<u32>, u64)> = path.charged.into_iter().collect();
    charged.sort_unstable();
    sym.stacks = charged
        .into_iter()
        .map(|(frames, ns)| SymbolizedStack {
            comm,
            pid,
            tid,
            time: first,
            cpu: 0,
            event: events.offcpu,
            period: ns,
            weight: ns,
            count: 1,
            user_len: frames.len() as u32,
            frames,
            addrs: Vec::new(),
        })
        .collect();
    Some((tid, last - first))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{folded, frame, stack, wake};
    use super::*;
    use crate::read::testing::sample;
    use format::events::{OFFCPU_EVENT, RUNQ_EVENT, WAKEUP_EVENT};

    /// Events: 0 cpu-clock, 1 offcpu-time, 2 runq-time, 3 wakeup.
    /// Thread a (1): runs 0-100 (samples at 50, 100), waits 100-400 (woken at 380 by b,
    /// runs at 400), runs 400-500 (sample at 500).
    /// Thread b (2): waits 50-300 (woken at 300 by a timer interrupt), runs 300-380 (sample
    /// at 350), which wakes a.
    fn two_threads() -> (Symbolized, Recording) {
        let mut samples = vec![
            sample(3, 2, 400, 0, &[], Some(wake(380, 1))),
            sample(3, 0, 300, 0, &[], Some(wake(300, 2))),
        ];
        for s in &mut samples {
            s.cpu = 0;
        }
        let rec = Recording {
            events: vec![
                "cpu-clock".into(),
                OFFCPU_EVENT.into(),
                RUNQ_EVENT.into(),
                WAKEUP_EVENT.into(),
            ],
            samples,
            ..Default::default()
        };
        let names = [
            "a_main",
            "a_work",
            "a_read",
            "b_main",
            "b_wait",
            "b_work",
            "b_write",
            "hrtimer_wakeup",
            "asm_irq",
        ];
        let mut b_waker = stack(3, 2, 400, 0, &[3, 6]);
        b_waker.comm = 1;
        let mut timer = stack(3, 0, 300, 0, &[8, 7]);
        timer.comm = 0;
        let sym = Symbolized {
            comms: ["a", "b"].map(String::from).to_vec(),
            events: rec.events.clone(),
            frames: names.iter().map(|n| frame(n)).collect(),
            stacks: vec![
                stack(0, 1, 50, 50, &[0, 1]),
                stack(0, 1, 100, 50, &[0, 1]),
                stack(1, 2, 300, 250, &[3, 4]),
                stack(0, 2, 350, 50, &[3, 5]),
                stack(1, 1, 400, 300, &[0, 2]),
                stack(2, 1, 400, 20, &[0, 2]),
                b_waker,
                timer,
                stack(0, 1, 500, 100, &[0, 1]),
            ],
            ..Default::default()
        };
        (sym, rec)
    }

    /// The events of [`two_threads`]: off-CPU 1, run queue 2, wakeups 3.
    fn events() -> Events {
        Events {
            offcpu: 1,
            runq: Some(2),
            wakeup: Some(3),
        }
    }

    #[test]
    fn every_nanosecond_of_the_thread_is_charged_once() {
        let (mut sym, rec) = two_threads();
        let events = events();
        assert_eq!(
            critical_path(&mut sym, &rec, &events, None, None),
            Some((1, 500))
        );
        let mut got = folded(&sym);
        got.sort();
        assert_eq!(
            got,
            [
                ("a_main;a_read;[run queue]".to_string(), 20),
                (
                    "a_main;a_read;[waits on b 2];b_main;b_wait;[timer]".to_string(),
                    200
                ),
                ("a_main;a_read;[waits on b 2];b_main;b_work".to_string(), 80),
                ("a_main;a_work".to_string(), 200),
            ]
        );
        assert_eq!(sym.stacks.iter().map(|s| s.weight).sum::<u64>(), 500);
    }

    #[test]
    fn a_window_cuts_the_wall_time_waits_that_straddle_it_included() {
        let (mut sym, rec) = two_threads();
        let events = events();
        // 50-100 and 400-450 on the CPU, the wait of 100-400 whole.
        let window = [(50, 450)];
        assert_eq!(
            critical_path(&mut sym, &rec, &events, None, Some(&window)),
            Some((1, 400))
        );
        let mut got = folded(&sym);
        got.sort();
        assert_eq!(
            got,
            [
                ("a_main;a_read;[run queue]".to_string(), 20),
                (
                    "a_main;a_read;[waits on b 2];b_main;b_wait;[timer]".to_string(),
                    200
                ),
                ("a_main;a_read;[waits on b 2];b_main;b_work".to_string(), 80),
                ("a_main;a_work".to_string(), 100),
            ]
        );
        // A window the thread has no time in.
        let (mut sym, rec) = two_threads();
        let after = [(600, 700)];
        assert_eq!(
            critical_path(&mut sym, &rec, &events, None, Some(&after)),
            None
        );
    }

    #[test]
    fn another_thread_or_none() {
        let events = events();
        let (mut sym, rec) = two_threads();
        // b: 0-50 before its first event is not its (its wait began at 50), 50-300 the timer,
        // 300-350-380 on the CPU (its sample at 350; the nearest for the rest).
        assert_eq!(
            critical_path(&mut sym, &rec, &events, Some(2), None),
            Some((2, 300))
        );
        assert_eq!(
            folded(&sym),
            [
                ("b_main;b_wait;[timer]".to_string(), 250),
                ("b_main;b_work".to_string(), 50),
            ]
        );
        let (mut sym, rec) = two_threads();
        assert_eq!(critical_path(&mut sym, &rec, &events, Some(7), None), None);
    }
}
