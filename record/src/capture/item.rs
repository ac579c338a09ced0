//! What a recording writes, one item at a time in time order: a BPF event or a side-band fact.

use crate::sideband::TimedFact;

/// Something to write, ordered by time.
pub enum Item {
    Sample(bpf::OnCpuSample),
    /// A major page fault (period: its nanoseconds).
    Fault(bpf::OnCpuSample),
    /// On-CPU samples counted in the kernel over the interval that ends at `time`.
    Aggregated {
        samples: bpf::AggregatedSamples,
        time: u64,
    },
    OffCpu(bpf::OffCpuInterval),
    /// A tracked thread began dirtying pages (its stacks, for the writeback to come).
    Dirty(bpf::OffCpuInterval),
    BlockIo(bpf::BlockIoRequest),
    Net(bpf::NetEvent),
    /// A sampled request passed a layer.
    Request(bpf::RequestStep),
    Wakeup(bpf::Wakeup),
    /// Any event (a tracepoint, a probe).
    Trace(bpf::TraceRecord),
    /// Traced events counted in the kernel over the interval that ends at `time`.
    AggregatedEvents {
        events: bpf::AggregatedEvents,
        time: u64,
    },
    /// A process's page-cache counts over the interval that ends at `time`.
    Cache {
        counts: bpf::CacheCounts,
        time: u64,
        interval_ns: u64,
    },
    Fact(TimedFact),
}

impl Item {
    /// When it happened (CLOCK_MONOTONIC ns): what orders the rounds.
    pub fn time(&self) -> u64 {
        match self {
            Item::Sample(s) | Item::Fault(s) => s.time,
            Item::Aggregated { time, .. } => *time,
            Item::OffCpu(o) | Item::Dirty(o) => o.time,
            Item::BlockIo(b) => b.time,
            Item::Net(n) => n.time,
            Item::Request(r) => r.time,
            Item::Wakeup(w) => w.time,
            Item::Trace(t) => t.time,
            Item::AggregatedEvents { time, .. } => *time,
            Item::Cache { time, .. } => *time,
            Item::Fact(f) => f.time,
        }
    }

    pub fn from_event(e: bpf::Event) -> Option<Item> {
        match e {
            bpf::Event::OnCpu(s) => Some(Item::Sample(s)),
            bpf::Event::Fault(s) => Some(Item::Fault(s)),
            bpf::Event::OffCpu(o) => Some(Item::OffCpu(o)),
            bpf::Event::Dirty(d) => Some(Item::Dirty(d)),
            bpf::Event::BlockIo(b) => Some(Item::BlockIo(b)),
            bpf::Event::Net(n) => Some(Item::Net(n)),
            bpf::Event::Request(r) => Some(Item::Request(r)),
            bpf::Event::Wakeup(w) => Some(Item::Wakeup(w)),
            bpf::Event::Trace(t) => Some(Item::Trace(t)),
            bpf::Event::Exit { .. } => None,
        }
    }
}
