//! Which samples a view is about, and what each weighs (`--event`, `--pid`, `--tid`,
//! `--comm`, `--time`); and identical stacks merged into one before the costly stages.

use rustc_hash::FxHashMap;

use super::recording::{RawSample, Recording, UserFrame};
use super::time_range::{self, TimeRanges};
use crate::Error;

/// Which samples make the profile, and what a sample weighs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSel {
    /// The sampling event (the first on-CPU event of the file that has samples); weight 1.
    Cpu,
    /// `offcpu-time` samples; weight = nanoseconds off the CPU.
    OffCpu,
    /// `runq-time` samples: the part of off-CPU intervals spent waiting for a CPU; weight =
    /// nanoseconds, charged to where the thread was preempted or blocked.
    Runq,
    /// `fault-time` samples: page faults that had to read; weight = nanoseconds the fault
    /// took, at the stack that faulted. (`Wall` has that time already: a thread waiting in
    /// a fault is off the CPU.)
    Fault,
    /// bpfperf block I/O samples; weight = I/O latency in nanoseconds.
    Io,
    /// On-CPU samples weighted by their period (ns) plus off-CPU ns: where wall time went.
    Wall,
    /// `offcpu-time` samples joined with their wakers' stacks (see `aggregate::wakeups`).
    Wakeup,
    /// Samples of the event of that name (`task-clock`, `sched:sched_switch`); weight 1.
    Named(String),
    /// Every sample of every event, weight 1 (what an archive must cover).
    All,
}

impl EventSel {
    pub fn parse(s: &str) -> EventSel {
        match s {
            "cpu" => EventSel::Cpu,
            "offcpu" => EventSel::OffCpu,
            "runq" => EventSel::Runq,
            "fault" => EventSel::Fault,
            "io" => EventSel::Io,
            "wall" => EventSel::Wall,
            "wakeup" => EventSel::Wakeup,
            "all" => EventSel::All,
            other => EventSel::Named(other.to_string()),
        }
    }

    /// What the weights measure, as exports name their sample types and tracks: `samples`
    /// for counted events, else the time's kind.
    pub fn measure(&self) -> &'static str {
        match self {
            EventSel::Cpu | EventSel::Named(_) | EventSel::All => "samples",
            EventSel::OffCpu | EventSel::Wakeup => "offcpu",
            EventSel::Runq => "runq",
            EventSel::Fault => "fault",
            EventSel::Io => "io",
            EventSel::Wall => "wall",
        }
    }

    /// What the weights count.
    pub fn unit(&self) -> &'static str {
        match self {
            EventSel::Cpu | EventSel::Named(_) | EventSel::All => "samples",
            _ => "ns",
        }
    }
}

/// The samples a view asks for: of which event, which threads, when.
#[derive(Debug, Clone, Copy)]
pub struct Selection<'o> {
    pub event: &'o EventSel,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub comm: Option<&'o str>,
    /// Only samples in these stretches of time.
    pub time: Option<&'o TimeRanges>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sampling,
    OffCpu,
    Runq,
    Fault,
    Io,
    Wakeup,
}

fn kind_of(name: &str) -> Kind {
    match name {
        format::events::OFFCPU_EVENT => Kind::OffCpu,
        format::events::RUNQ_EVENT => Kind::Runq,
        format::events::FAULT_EVENT => Kind::Fault,
        format::events::BLOCK_IO_EVENT => Kind::Io,
        format::events::WAKEUP_EVENT => Kind::Wakeup,
        _ => Kind::Sampling,
    }
}

/// A selected sample and its weight.
pub type Weighed<'a> = (&'a RawSample, u64);
/// The weight of a sample of an event (index), or `None` if it is not selected.
type Weigh<'a> = dyn Fn(usize, &RawSample) -> Option<u64> + Sync + 'a;

/// The samples `o` selects, with their weights, and the name of what was selected.
pub fn select<'a>(rec: &'a Recording, o: &Selection) -> Result<(Vec<Weighed<'a>>, String), Error> {
    let kinds: Vec<Kind> = rec.events.iter().map(|n| kind_of(n)).collect();
    let kinds = &kinds;
    let mut counts = vec![0u64; rec.events.len()];
    for s in &rec.samples {
        if let Some(c) = counts.get_mut(s.event) {
            *c += 1;
        }
    }
    // The sampling event: the first on-CPU event that has samples. Several events are never
    // merged (as perf and stackcollapse-perf.pl keep them apart): name the others.
    let sampling = (0..rec.events.len()).find(|&i| kinds[i] == Kind::Sampling && counts[i] > 0);
    let named = |want: &str| -> Result<usize, Error> {
        let base = |n: &str| n.split(':').next().unwrap_or("").to_string();
        rec.events
            .iter()
            .position(|n| n == want)
            .or_else(|| rec.events.iter().position(|n| base(n) == want))
            .ok_or_else(|| Error::NoSuchEvent {
                name: want.to_string(),
                available: rec.events.join(", "),
            })
    };
    // Samples of one of bpfperf's own events, weighed by their period (nanoseconds).
    let of_kind = |kind: Kind| -> Box<Weigh> {
        Box::new(move |e, s| (kinds.get(e) == Some(&kind)).then_some(s.period))
    };
    let (weigh, label): (Box<Weigh>, String) = match o.event {
        EventSel::Cpu => {
            let i = sampling;
            (
                Box::new(move |e, s| (Some(e) == i).then_some(s.count)),
                i.map_or("cpu".into(), |i| rec.events[i].clone()),
            )
        }
        EventSel::Named(n) => {
            let i = named(n)?;
            let off = kinds[i] != Kind::Sampling;
            (
                Box::new(move |e, s| (e == i).then_some(if off { s.period } else { s.count })),
                rec.events[i].clone(),
            )
        }
        EventSel::All => (Box::new(|_, s| Some(s.count)), "every event".into()),
        EventSel::OffCpu => (of_kind(Kind::OffCpu), "off-CPU".into()),
        EventSel::Runq => (of_kind(Kind::Runq), "run-queue".into()),
        EventSel::Fault => (of_kind(Kind::Fault), "page faults".into()),
        EventSel::Io => (of_kind(Kind::Io), "block I/O".into()),
        EventSel::Wakeup => (
            Box::new(|e, s| {
                matches!(kinds.get(e), Some(Kind::OffCpu | Kind::Wakeup)).then_some(s.period)
            }),
            "off-CPU with wakers".into(),
        ),
        EventSel::Wall => {
            let i = sampling;
            (
                Box::new(move |e, s| {
                    (Some(e) == i || kinds.get(e) == Some(&Kind::OffCpu)).then_some(s.period)
                }),
                "wall clock".into(),
            )
        }
    };
    // Filters pick threads; a waker is whoever woke them, so its samples pass.
    let waker = |s: &RawSample| kinds.get(s.event) == Some(&Kind::Wakeup);
    let ranges = o.time.map(|t| {
        let (first, last) = rec.time_span().unwrap_or((0, 0));
        t.resolve(first, last)
    });
    let samples = rec
        .samples
        .iter()
        .filter(|s| {
            ranges
                .as_ref()
                .is_none_or(|r| time_range::contains(r, s.time))
        })
        .filter(|s| {
            waker(s) || o.pid.is_none_or(|p| p == s.pid) && o.tid.is_none_or(|t| t == s.tid)
        })
        .filter(|s| waker(s) || o.comm.is_none_or(|c| c == rec.comms[s.comm as usize]))
        .filter_map(|s| Some((s, weigh(s.event, s)?)))
        .collect();
    Ok((samples, label))
}

/// Samples of one thread, event and command whose stacks are the same frame for frame (and
/// that carry no stack copy to unwind) become one, weighing their sum: a profile's samples
/// are mostly repeats (100k samples, a few thousand stacks), and everything after this works
/// per stack. Returns the kept samples, in order of first appearance, and how many each
/// stands for.
pub fn group_identical(samples: Vec<Weighed<'_>>) -> (Vec<Weighed<'_>>, Vec<u64>) {
    let (kept, counts, _) = group_identical_members(&samples);
    (kept, counts)
}

/// [`group_identical`], and for each of `samples` the index of the kept sample it went into.
pub fn group_identical_members<'a>(
    samples: &[Weighed<'a>],
) -> (Vec<Weighed<'a>>, Vec<u64>, Vec<u32>) {
    type Key<'a> = (usize, i32, i32, u32, &'a [u64], &'a [UserFrame]);
    let mut index: FxHashMap<Key<'a>, usize> = FxHashMap::default();
    let mut kept: Vec<Weighed<'a>> = Vec::new();
    let mut counts: Vec<u64> = Vec::new();
    let mut members = Vec::with_capacity(samples.len());
    for &(s, weight) in samples {
        if s.stack_copy.is_some() {
            members.push(kept.len() as u32);
            kept.push((s, weight));
            counts.push(s.count);
            continue;
        }
        let key = (s.event, s.pid, s.tid, s.comm, &s.kernel[..], &s.user[..]);
        match index.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let i = *e.get();
                kept[i].1 += weight;
                counts[i] += s.count;
                members.push(i as u32);
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(kept.len());
                members.push(kept.len() as u32);
                kept.push((s, weight));
                counts.push(s.count);
            }
        }
    }
    (kept, counts, members)
}
