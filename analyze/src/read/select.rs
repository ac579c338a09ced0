//! Which samples a view is about, and what each weighs (`--event`, `--weight`, `--pid`,
//! `--tid`, `--comm`, `--time`); and identical stacks merged into one before the costly
//! stages.

use std::hash::{Hash, Hasher};

use hashbrown::HashTable;
use rayon::prelude::*;
use rustc_hash::FxHasher;

use super::fields::Quantity;
use super::recording::{same_words, RawSample, Recording};
use super::time_range::{self, TimeRanges};
use crate::Error;

/// Levels of wakers a chain goes through unless told (`--depth`).
pub const CHAIN_DEPTH: u32 = 4;
/// The most levels `--depth` takes.
pub const MAX_CHAIN_DEPTH: u32 = 16;

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
    /// `fault-time` samples: major page faults; weight = nanoseconds the fault took (its
    /// work on the CPU and any wait), at the stack that faulted. (`Wall` has that time
    /// already: on-CPU samples and off-CPU intervals.) The waits alone: `fault-wait`.
    Fault,
    /// bpfperf block I/O samples; weight = I/O latency in nanoseconds.
    Io,
    /// On-CPU samples weighted by their period (ns) plus off-CPU ns: where wall time went.
    Wall,
    /// `offcpu-time` samples joined with their wakers' stacks (see `aggregate::wakeups`).
    Wakeup,
    /// `offcpu-time` samples joined with their wakers' stacks, the wakers' own waits and
    /// their wakers, this many wakers deep (see `aggregate::chains`).
    Chain(u32),
    /// On-CPU, off-CPU, run-queue and wakeup samples of every thread, for the critical path
    /// of one (see `aggregate::critical`); weight: ns.
    Critical,
    /// Samples of the event of that name (`task-clock`, `sched:sched_switch`); weight 1
    /// (bpfperf's own timed events: their ns).
    Named(String),
    /// `bpfperf:net_send` samples (record -e net): skbs of send calls timed to the device;
    /// weight = nanoseconds from the send call's start to net_dev_xmit, times the skbs the
    /// sample stands for (its period), at the call's stack.
    NetSend,
    /// Every sample of every event, weight 1 (what an archive must cover).
    All,
    /// Every sample of every traced event (those whose payloads have a format: tracepoints,
    /// probes), weight 1: what `trace` and `count` show unless told an event.
    Traced,
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
            "chain" => EventSel::Chain(CHAIN_DEPTH),
            "all" => EventSel::All,
            // The network events by short names (`record -e net`).
            "tcp" => EventSel::Named(format::events::TCP_CONN_EVENT.into()),
            "retransmit" => EventSel::Named(format::events::TCP_RETRANSMIT_EVENT.into()),
            "reset" => EventSel::Named(format::events::TCP_RESET_EVENT.into()),
            "drop" => EventSel::Named(format::events::SKB_DROP_EVENT.into()),
            "net-send" => EventSel::NetSend,
            "sock-wait" => EventSel::Named(format::events::SOCK_WAIT_EVENT.into()),
            other => EventSel::Named(other.to_string()),
        }
    }

    /// What the weights measure, as exports name their sample types and tracks: `samples`
    /// for counted events, else the time's kind.
    pub fn measure(&self) -> &'static str {
        match self {
            EventSel::Cpu | EventSel::Named(_) | EventSel::All | EventSel::Traced => "samples",
            EventSel::OffCpu | EventSel::Wakeup | EventSel::Chain(_) => "offcpu",
            EventSel::Critical => "wall",
            EventSel::Runq => "runq",
            EventSel::Fault => "fault",
            EventSel::Io => "io",
            EventSel::NetSend => "net-send",
            EventSel::Wall => "wall",
        }
    }

    /// What the weights count.
    pub fn unit(&self) -> &'static str {
        match self {
            EventSel::Cpu | EventSel::Named(_) | EventSel::All | EventSel::Traced => "samples",
            _ => "ns",
        }
    }
}

/// What a sample of one named event weighs instead of its count (`--weight`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Weight {
    /// The value of a numeric field of its payload. A negative value weighs nothing: the
    /// sample is left out (as one whose payload is too short for the field).
    Field(String),
    /// Its latency: the period of a latency event, in ns.
    Latency,
}

impl Weight {
    /// `latency`, or a field's name.
    pub fn parse(s: &str) -> Weight {
        match s {
            super::fields::LATENCY => Weight::Latency,
            field => Weight::Field(field.to_string()),
        }
    }

    /// The weight's name, as `--weight` takes it.
    pub fn name(&self) -> &str {
        match self {
            Weight::Field(f) => f,
            Weight::Latency => super::fields::LATENCY,
        }
    }

    /// What the weights count: `ns` for latencies, else the field's name (`count`, `bytes`).
    pub fn unit(&self) -> &str {
        match self {
            Weight::Field(f) => f,
            Weight::Latency => "ns",
        }
    }
}

/// The samples a view asks for: of which event, which threads, when.
#[derive(Debug, Clone, Copy)]
pub struct Selection<'o> {
    pub event: &'o EventSel,
    /// What each sample weighs instead of its event's own measure (with `event` naming one
    /// event).
    pub weight: Option<&'o Weight>,
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
    /// Waits inside page faults (a timed event, not a sampling one).
    FaultWait,
    Io,
    Wakeup,
}

fn kind_of(name: &str) -> Kind {
    match name {
        format::events::OFFCPU_EVENT => Kind::OffCpu,
        format::events::RUNQ_EVENT => Kind::Runq,
        format::events::FAULT_EVENT => Kind::Fault,
        format::events::FAULT_WAIT_EVENT => Kind::FaultWait,
        format::events::BLOCK_IO_EVENT => Kind::Io,
        format::events::WAKEUP_EVENT => Kind::Wakeup,
        _ => Kind::Sampling,
    }
}

/// The event `--event NAME` names: the one of that name, else the first of that system
/// (`sched` for `sched:sched_switch`).
pub fn event_named(rec: &Recording, want: &str) -> Result<usize, Error> {
    let base = |n: &str| n.split(':').next().unwrap_or("").to_string();
    rec.events
        .iter()
        .position(|n| n == want)
        .or_else(|| rec.events.iter().position(|n| base(n) == want))
        .ok_or_else(|| Error::NoSuchEvent {
            name: want.to_string(),
            available: rec.events.join(", "),
        })
}

/// The events whose samples a view of traced events covers: the one `sel` names, or (for
/// [`EventSel::Traced`]) every traced event; an error if the recording has none.
pub fn traced_events(rec: &Recording, sel: &EventSel) -> Result<Vec<usize>, Error> {
    let events: Vec<usize> = match sel {
        EventSel::Named(n) => vec![event_named(rec, n)?],
        _ => (0..rec.events.len())
            .filter(|&e| rec.format(e).is_some())
            .collect(),
    };
    if events.is_empty() {
        return Err(Error::NoTracedEvents {
            available: rec.events.join(", "),
        });
    }
    Ok(events)
}

/// The sampling event (`kinds`: each event's): the first on-CPU event that has samples.
/// Several events are never merged (as perf and stackcollapse-perf.pl keep them apart).
fn sampling_event(rec: &Recording, kinds: &[Kind]) -> Option<usize> {
    let mut sampled = vec![false; rec.events.len()];
    for s in &rec.samples {
        if let Some(c) = sampled.get_mut(s.event) {
            *c = true;
        }
    }
    (0..rec.events.len()).find(|&i| kinds[i] == Kind::Sampling && sampled[i])
}

/// The label of `--event all`'s samples.
pub const EVERY_EVENT: &str = "every event";

/// A selected sample and its weight.
pub type Weighed<'a> = (&'a RawSample, u64);
/// The weight of a sample of an event (index), or `None` if it is not selected.
type Weigh<'a> = dyn Fn(usize, &RawSample) -> Option<u64> + Sync + 'a;

/// What [`select`] picked: the samples with their weights, the name of what was selected,
/// and what the weights count.
pub struct Selected<'a> {
    pub samples: Vec<Weighed<'a>>,
    pub label: String,
    /// `samples`, `ns`, the field `--weight` names, or the event whose periods the samples
    /// weigh (`cycles` for `cycles:u`, see [`Recording::by_period`]).
    pub unit: String,
}

/// The samples `o` selects, with their weights, the name of what was selected and the unit.
pub fn select<'a>(rec: &'a Recording, o: &Selection) -> Result<Selected<'a>, Error> {
    let kinds: Vec<Kind> = rec.events.iter().map(|n| kind_of(n)).collect();
    let kinds = &kinds;
    let sampling = sampling_event(rec, kinds);
    let by_period = |e: usize| rec.by_period.get(e) == Some(&true);
    // A sample of a sampling event weighs one, or its period (see `Recording::by_period`).
    let sampled = move |e: usize, s: &RawSample| if by_period(e) { s.period } else { s.count };
    // The event whose periods the selected samples weigh, if they weigh a sampling event's
    // periods: it names the unit.
    let mut periods_of = None;
    let named = |want: &str| event_named(rec, want);
    // Samples of one of bpfperf's own events, weighed by their period (nanoseconds).
    let of_kind = |kind: Kind| -> Box<Weigh> {
        Box::new(move |e, s| (kinds.get(e) == Some(&kind)).then_some(s.period))
    };
    let (weigh, label): (Box<Weigh>, String) = match o.event {
        EventSel::Cpu => {
            let i = sampling;
            periods_of = i.filter(|&i| by_period(i));
            (
                Box::new(move |e, s| (Some(e) == i).then_some(sampled(e, s))),
                i.map_or("cpu".into(), |i| rec.events[i].clone()),
            )
        }
        EventSel::Named(n) => {
            let i = named(n)?;
            periods_of = Some(i).filter(|&i| by_period(i));
            let off = kinds[i] != Kind::Sampling;
            (
                Box::new(move |e, s| {
                    (e == i).then_some(if off { s.period } else { sampled(e, s) })
                }),
                rec.events[i].clone(),
            )
        }
        // (Events of other units together: one a sample.)
        EventSel::All => (Box::new(|_, s| Some(s.count)), EVERY_EVENT.into()),
        EventSel::Traced => {
            if !rec.formats.iter().any(Option::is_some) {
                return Err(Error::NoTracedEvents {
                    available: rec.events.join(", "),
                });
            }
            (
                Box::new(|e, s| rec.format(e).is_some().then_some(s.count)),
                "traced events".into(),
            )
        }
        EventSel::OffCpu => (of_kind(Kind::OffCpu), "off-CPU".into()),
        EventSel::Runq => (of_kind(Kind::Runq), "run-queue".into()),
        EventSel::Fault => (of_kind(Kind::Fault), "page faults".into()),
        EventSel::Io => (of_kind(Kind::Io), "block I/O".into()),
        EventSel::NetSend => {
            let i = named(format::events::NET_SEND_EVENT)?;
            (
                Box::new(move |e, s| (e == i).then_some(s.period)),
                "sends to the device (ns)".into(),
            )
        }
        EventSel::Wakeup => (
            Box::new(|e, s| {
                matches!(kinds.get(e), Some(Kind::OffCpu | Kind::Wakeup)).then_some(s.period)
            }),
            "off-CPU with wakers".into(),
        ),
        EventSel::Chain(_) => (
            Box::new(|e, s| {
                matches!(kinds.get(e), Some(Kind::OffCpu | Kind::Wakeup)).then_some(s.period)
            }),
            "off-CPU with chains of wakers".into(),
        ),
        EventSel::Critical => {
            let i = sampling;
            (
                Box::new(move |e, s| {
                    let kind = kinds.get(e);
                    (Some(e) == i || matches!(kind, Some(Kind::OffCpu | Kind::Runq | Kind::Wakeup)))
                        .then_some(s.period)
                }),
                "critical path (ns)".into(),
            )
        }
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
    let unit = match (o.weight, periods_of) {
        (Some(w), _) => w.unit().to_string(),
        (None, Some(i)) => rec.events[i]
            .split(':')
            .next()
            .unwrap_or("events")
            .to_string(),
        // One of bpfperf's own timed events by its name (`fault-wait`): weighed by their
        // periods, nanoseconds.
        (None, None) => match &o.event {
            EventSel::Named(n) if event_named(rec, n).is_ok_and(|i| kinds[i] != Kind::Sampling) => {
                "ns".to_string()
            }
            event => event.unit().to_string(),
        },
    };
    let (weigh, label) = match o.weight {
        None => (weigh, label),
        Some(w) => weighed(rec, o.event, w, &named)?,
    };
    // Filters pick threads; a waker is whoever woke them, so its samples pass; so do, for
    // chains, the waits of every thread (a waker's own), whose roots the chains pick.
    // The critical path's every thread's.
    let chains = matches!(o.event, EventSel::Chain(_));
    let critical = o.event == &EventSel::Critical;
    let waker = |s: &RawSample| {
        let kind = kinds.get(s.event);
        critical || kind == Some(&Kind::Wakeup) || chains && kind == Some(&Kind::OffCpu)
    };
    // (The critical path keeps every sample: its window is cut from the thread's wall time,
    // waits that straddle it included.)
    let ranges = o.time.filter(|_| !critical).map(|t| {
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
    Ok(Selected {
        samples,
        label,
        unit,
    })
}

/// The weights of `--weight w`: of the one event `event` names.
fn weighed<'a>(
    rec: &'a Recording,
    event: &EventSel,
    w: &Weight,
    named: &dyn Fn(&str) -> Result<usize, Error>,
) -> Result<(Box<Weigh<'a>>, String), Error> {
    let EventSel::Named(n) = event else {
        return Err(Error::WeightNeedsEvent {
            weight: w.name().to_string(),
            traced: rec.traced_names().join(", "),
        });
    };
    let i = named(n)?;
    let q = match w {
        Weight::Field(f) => Quantity::number(rec, i, f)?,
        Weight::Latency => Quantity::of(rec, i, super::fields::LATENCY)?,
    };
    let weigh = move |e: usize, s: &RawSample| -> Option<u64> {
        if e != i {
            return None;
        }
        match q {
            // Merged samples' periods are summed already.
            Quantity::Latency => Some(s.period),
            // Counts stand for identical samples (payload included): each weighs the same.
            Quantity::Field(_) => {
                let v = u64::try_from(q.number_in(s)?).ok()?;
                Some(v.saturating_mul(s.count))
            }
        }
    };
    Ok((Box::new(weigh), format!("{} ({})", rec.events[i], w.name())))
}

/// Samples of one thread, event and command whose stacks are the same frame for frame (and
/// that carry no stack copy to unwind, and the same payload if they are traced events')
/// become one, weighing their sum: a profile's samples are mostly repeats (100k samples, a
/// few thousand stacks), and everything after this works per stack. Returns the kept
/// samples, in order of first appearance, and how many each stands for.
pub fn group_identical(samples: Vec<Weighed<'_>>) -> (Vec<Weighed<'_>>, Vec<u64>) {
    let (kept, counts, _) = group_identical_members(&samples);
    (kept, counts)
}

/// [`group_identical`], and for each of `samples` the index of the kept sample it went into.
/// Each sample's key is hashed in parallel first (a deep recursion's stacks are hundreds of
/// bytes each), then the samples are grouped in order.
pub fn group_identical_members<'a>(
    samples: &[Weighed<'a>],
) -> (Vec<Weighed<'a>>, Vec<u64>, Vec<u32>) {
    // Samples with a stack copy stand alone: theirs is never looked at.
    let hashes: Vec<u64> = samples
        .par_iter()
        .map(|(s, _)| {
            if s.stack_copy.is_some() {
                return 0;
            }
            let mut h = FxHasher::default();
            s.hash_origin(&mut h);
            s.user.hash(&mut h);
            h.finish()
        })
        .collect();
    let mut index: HashTable<u32> = HashTable::with_capacity(samples.len());
    let mut kept: Vec<Weighed<'a>> = Vec::new();
    let mut kept_hashes: Vec<u64> = Vec::new();
    let mut counts: Vec<u64> = Vec::new();
    let mut members = Vec::with_capacity(samples.len());
    for (&(s, weight), &hash) in samples.iter().zip(&hashes) {
        if s.stack_copy.is_none() {
            let found = index.find(hash, |&i| {
                let k = kept[i as usize].0;
                kept_hashes[i as usize] == hash && k.same_origin(s) && same_words(&k.user, &s.user)
            });
            if let Some(&i) = found {
                let i = i as usize;
                kept[i].1 += weight;
                counts[i] += s.count;
                members.push(i as u32);
                continue;
            }
            index.insert_unique(hash, kept.len() as u32, |&i| kept_hashes[i as usize]);
        }
        members.push(kept.len() as u32);
        kept.push((s, weight));
        kept_hashes.push(hash);
        counts.push(s.count);
    }
    (kept, counts, members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::testing::{recording, return_payload, sample, write_payload};

    /// Two writes of dd (100 and 31 bytes), a cpu-clock sample, two getaddrinfo returns of
    /// curl (5 µs returning 0, 7 µs returning -2).
    fn traced() -> Recording {
        let mut rec = recording();
        rec.samples = vec![
            sample(1, 7, 10, 1, &[0xffff_1000], Some(write_payload(7, 1, 100))),
            sample(1, 7, 11, 1, &[0xffff_1000], Some(write_payload(7, 2, 31))),
            sample(0, 7, 12, 1_000_000, &[0xffff_1000], None),
            sample(2, 300, 13, 5_000, &[], Some(return_payload(300, "a", 0))),
            sample(2, 300, 14, 7_000, &[], Some(return_payload(300, "b", -2))),
        ];
        rec
    }

    fn weights(rec: &Recording, event: &str, weight: Option<&str>) -> Result<Vec<u64>, Error> {
        let event = EventSel::parse(event);
        let weight = weight.map(Weight::parse);
        let o = Selection {
            event: &event,
            weight: weight.as_ref(),
            pid: None,
            tid: None,
            comm: None,
            time: None,
        };
        Ok(select(rec, &o)?.samples.iter().map(|(_, w)| *w).collect())
    }

    #[test]
    fn traced_events_weigh_one_each_or_what_weight_names() {
        let rec = traced();
        let write = "syscalls:sys_enter_write";
        let ret = "probe_libc:getaddrinfo__return";
        assert_eq!(weights(&rec, write, None).unwrap(), [1, 1]);
        // A latency event counts calls unless weighed by its latency.
        assert_eq!(weights(&rec, ret, None).unwrap(), [1, 1]);
        assert_eq!(weights(&rec, write, Some("count")).unwrap(), [100, 31]);
        assert_eq!(weights(&rec, ret, Some("latency")).unwrap(), [5_000, 7_000]);
        // A negative value weighs nothing: the sample is left out.
        assert_eq!(weights(&rec, ret, Some("ret")).unwrap(), [0]);
        let err = weights(&rec, write, Some("latency"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has no field latency (its fields: __syscall_nr, fd, buf, count)"),
            "{err}"
        );
        let err = weights(&rec, ret, Some("host")).unwrap_err().to_string();
        assert!(err.contains("not a number"), "{err}");
        let err = weights(&rec, "cpu", Some("count")).unwrap_err().to_string();
        assert!(err.contains("--event") && err.contains(write), "{err}");
        // Without a weight, bpfperf's own and perf's events keep theirs.
        assert_eq!(weights(&rec, "cpu", None).unwrap(), [1]);
        let traced = Selection {
            event: &EventSel::Traced,
            weight: None,
            pid: None,
            tid: None,
            comm: None,
            time: None,
        };
        let samples = select(&rec, &traced).unwrap().samples;
        assert_eq!(
            samples.iter().map(|(s, _)| s.event).collect::<Vec<_>>(),
            [1, 1, 2, 2]
        );
    }

    #[test]
    fn identical_stacks_with_other_payloads_stay_apart() {
        let mut rec = traced();
        rec.samples.push(sample(
            1,
            7,
            15,
            1,
            &[0xffff_1000],
            Some(write_payload(7, 1, 100)),
        ));
        let samples = select(
            &rec,
            &Selection {
                event: &EventSel::parse("syscalls:sys_enter_write"),
                weight: None,
                pid: None,
                tid: None,
                comm: None,
                time: None,
            },
        )
        .unwrap()
        .samples;
        let (kept, counts) = group_identical(samples);
        assert_eq!(kept.len(), 2);
        assert_eq!(counts, [2, 1]);
    }
}
