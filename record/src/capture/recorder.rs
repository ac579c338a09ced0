//! The recorder: the file being written, what its records so far counted, and how each event
//! is written (which attr, which stacks). Its methods are spread by kind of record: `facts.rs`
//! (side-band), `stacks.rs` (a sample's stacks), `oncpu.rs`, `offcpu.rs`, `io.rs`, `net.rs`,
//! `traced.rs` (each kind of BPF event), `lost.rs` (LOST records), `rounds.rs` (in time order).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use format::PerfFileWriter;

use super::attrs::Events;
use super::item::Item;
use crate::sideband::known::Known;

/// DWARF mode: the samples taken after the first one of their process the kernel unwound, and
/// of those the copied ones. Early samples are copied while a process's tables are built (how
/// long that takes depends on the machine); these say whether the tables work once they are in.
#[derive(Debug, Default)]
pub struct LateUnwinding {
    /// Counting: the kernel unwinds with tables in this recording (else nothing is counted,
    /// and a sample costs no lookup).
    pub on: bool,
    unwound_pids: HashSet<u32>,
    pub samples: u64,
    pub copied: u64,
}

impl LateUnwinding {
    pub(super) fn count(&mut self, s: &bpf::OnCpuSample) {
        if !self.on {
            return;
        }
        let copied = !s.stack_copy.is_empty();
        if !copied && !s.user_stack.is_empty() {
            self.unwound_pids.insert(s.pid);
        }
        if self.unwound_pids.contains(&s.pid) {
            self.samples += 1;
            self.copied += copied as u64;
        }
    }
}

pub struct Recorder {
    pub writer: PerfFileWriter,
    pub system_wide: bool,
    /// Thread groups whose facts are written.
    pub tracked: HashSet<u32>,
    pub pending: Vec<Item>,
    /// On-CPU samples written (with --aggregate: the samples the records stand for).
    pub samples: u64,
    /// --aggregate: on-CPU samples were counted in the kernel, and every cpu-clock sample's
    /// period is the number of samples it stands for (1 for those sent one by one).
    pub aggregate: bool,
    /// --aggregate: the records the counted samples became.
    pub aggregated: u64,
    /// DWARF mode: samples whose user stack was copied (not unwound in the kernel).
    pub copied_stacks: u64,
    /// DWARF mode: how the kernel did once a process's tables were in.
    pub late: LateUnwinding,
    pub off_cpu: u64,
    /// Run-queue samples (off-CPU intervals that waited for a CPU).
    pub runq: u64,
    /// Major page faults (fault-time samples).
    pub faults: u64,
    /// Waits inside page faults (fault-wait samples).
    pub fault_waits: u64,
    pub io: u64,
    /// Network events written.
    pub net: u64,
    /// Sampled requests' records written (`--follow`).
    pub requests: u64,
    pub wakeups: u64,
    /// Any events' samples written.
    pub traced: u64,
    pub lost: u64,
    /// The event each kind of loss is counted against.
    pub lost_ids: crate::capture::attrs::LostIds,
    /// The kernel's drops when last written as LOST records.
    pub drops_written: bpf::Drops,
    /// Attr index of offcpu-time, block_io and wakeup events, when recorded.
    pub offcpu_attr: Option<usize>,
    pub runq_attr: Option<usize>,
    pub fault_attr: Option<usize>,
    pub fault_wait_attr: Option<usize>,
    pub cache_attr: Option<usize>,
    pub io_attr: Option<usize>,
    pub wakeup_attr: Option<usize>,
    /// Attr index of each network event, in [`format::events::NET_EVENTS`]'s order.
    pub net_attrs: Option<[usize; 6]>,
    /// Attr index of sampled requests' records (`--follow`).
    pub request_attr: Option<usize>,
    /// How each traced event is written, by its index.
    pub traced_attrs: Vec<crate::capture::attrs::TracedAttr>,
    /// --aggregate: each traced event's layout with its count (by its index; empty when
    /// traced events are written one by one).
    pub counted: Vec<Option<crate::tracing::aggregate::Counted>>,
    /// --aggregate: the records the traced events counted in the kernel became.
    pub traced_records: u64,
    /// Processes whose name the file already has (for block I/O issued by untracked ones).
    pub named: HashSet<u32>,
    /// Files of executable mappings written; for files of other mount namespaces, their
    /// build id, read while their process lived (see [`crate::sideband::foreign`]).
    pub mapped_files: BTreeMap<String, Option<Vec<u8>>>,
    /// Those the current file's records map, for its BUILD_ID.
    pub output_files: BTreeSet<String>,
    /// Recorded processes that map libjvm.so (HotSpot JVMs), for their perf maps.
    pub jvms: BTreeSet<u32>,
    /// `_text` and `_etext`, for the kernel's MMAP record.
    pub kernel_text: Option<(u64, u64)>,
    /// What the records so far described, kept when the recording rotates (each new file
    /// starts with it) or when thinning.
    pub known: Option<Known>,
    /// System-wide and counted in the kernel: a process is described (its thread names and
    /// mappings, from `known`) only when the first record of it is written, so that the
    /// file does not carry every process of the machine, most of which have no sample.
    pub thin: bool,
    /// With `thin`: the processes the current file describes.
    pub described: HashSet<u32>,
    /// The time of the last counts taken from the kernel that were written.
    pub last_take: u64,
    pub callchain: Vec<u64>,
    /// Write bursts of tracked threads, for the writeback requests that name them.
    pub dirty_bursts: super::bursts::DirtyBursts,
    /// Python processes: their frames merged into user stacks.
    pub python: crate::runtimes::python::Python,
    /// A user stack with Python frames merged in, reused.
    pub merged: Vec<u64>,
}

impl Recorder {
    /// Writes into `writer` the facts of the `tracked` thread groups (of all, system-wide) and
    /// the samples of `events`.
    pub fn new(
        writer: PerfFileWriter,
        system_wide: bool,
        tracked: HashSet<u32>,
        events: &Events,
    ) -> Recorder {
        Recorder {
            writer,
            system_wide,
            tracked,
            pending: Vec::new(),
            samples: 0,
            aggregate: false,
            aggregated: 0,
            copied_stacks: 0,
            late: LateUnwinding::default(),
            off_cpu: 0,
            runq: 0,
            dirty_bursts: Default::default(),
            faults: 0,
            fault_waits: 0,
            io: 0,
            net: 0,
            requests: 0,
            wakeups: 0,
            traced: 0,
            lost: 0,
            lost_ids: events.lost_ids(),
            drops_written: bpf::Drops::default(),
            offcpu_attr: events.offcpu,
            runq_attr: events.runq,
            fault_attr: events.fault,
            fault_wait_attr: events.fault_wait,
            cache_attr: events.cache,
            io_attr: events.io,
            wakeup_attr: events.wakeup,
            net_attrs: events.net,
            request_attr: events.request,
            traced_attrs: events.traced.clone(),
            counted: Vec::new(),
            traced_records: 0,
            named: HashSet::new(),
            mapped_files: BTreeMap::new(),
            output_files: BTreeSet::new(),
            jvms: BTreeSet::new(),
            kernel_text: None,
            known: None,
            thin: false,
            described: HashSet::new(),
            last_take: 0,
            callchain: Vec::new(),
            python: Default::default(),
            merged: Vec::new(),
        }
    }
}
