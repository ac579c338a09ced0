//! Writing what a recording saw: BPF events and side-band facts, merged by time into rounds.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use format::{callchain, misc, Mmap2File, PerfFileWriter, Sample, SampleId, SideBand};

use crate::capture::attrs::{Events, CPU_CLOCK_ID};
use crate::sideband::known::Known;
use crate::sideband::{Fact, TimedFact};

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
            bpf::Event::Wakeup(w) => Some(Item::Wakeup(w)),
            bpf::Event::Trace(t) => Some(Item::Trace(t)),
            bpf::Event::Exit { .. } => None,
        }
    }
}

/// Kernel and user stacks as a perf callchain: context markers, innermost first.
///
/// A frame-pointer walk through code built without frame pointers reads whatever the stack
/// holds: the user stack ends at its first word that cannot be a user address (top bit set).
/// Past it is garbage, and a word in the context markers' range (-1, say) makes perf drop
/// the whole callchain as invalid, leaf included.
fn build_callchain(out: &mut Vec<u64>, kernel: &[u64], user: &[u64]) {
    out.clear();
    if !kernel.is_empty() {
        out.push(callchain::KERNEL);
        out.extend_from_slice(kernel);
    }
    let user = match user.iter().position(|&a| a >> 63 != 0) {
        Some(end) => &user[..end],
        None => user,
    };
    if !user.is_empty() {
        out.push(callchain::USER);
        out.extend_from_slice(user);
    }
}

/// DWARF mode: the samples taken after the first one of their process the kernel unwound, and
/// of those the copied ones. Early samples are copied while a process's tables are built (how
/// long that takes depends on the machine); these say whether the tables work once they are in.
#[derive(Debug, Default)]
pub struct LateUnwinding {
    unwound_pids: HashSet<u32>,
    pub samples: u64,
    pub copied: u64,
}

impl LateUnwinding {
    fn count(&mut self, s: &bpf::OnCpuSample) {
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
    /// Recent write bursts of tracked threads by (tid, time), for the writeback requests
    /// that name them; the oldest go first past [`DIRTY_BURSTS`].
    pub dirty_bursts: BTreeMap<(u64, u32), bpf::OffCpuInterval>,
    /// Python processes: their frames merged into user stacks.
    pub python: crate::runtimes::python::Python,
    /// A user stack with Python frames merged in, reused.
    pub merged: Vec<u64>,
}

/// Write bursts kept for their writeback (dirty data waits up to 30 s by default; a burst is
/// at least 100 ms of a thread's writes; with DWARF copies of up to 16 KiB, 16 MiB at most).
const DIRTY_BURSTS: usize = 1024;

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
            dirty_bursts: BTreeMap::new(),
            faults: 0,
            fault_waits: 0,
            io: 0,
            net: 0,
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

    pub fn write_fact(&mut self, f: &TimedFact) -> anyhow::Result<()> {
        if let Fact::Fork { pid, ppid, .. } = f.fact {
            if self.tracked.contains(&ppid) {
                self.tracked.insert(pid);
            }
        }
        if !self.system_wide && f.fact.pid().is_some_and(|p| !self.tracked.contains(&p)) {
            return Ok(());
        }
        if let Some(known) = &mut self.known {
            known.observe(&f.fact, f.time);
        }
        if let Fact::Mmap2 { pid, filename, .. } = &f.fact {
            if crate::runtimes::jvm::is_libjvm(filename) {
                self.jvms.insert(*pid);
            }
        }
        match f.fact.pid() {
            Some(pid) if self.thin => {
                if !self.described.contains(&pid) {
                    return Ok(());
                }
                self.emit_fact(f)?;
                if matches!(f.fact, Fact::Exit { .. })
                    && !self.known.as_ref().is_some_and(|k| k.is_alive(pid))
                {
                    // Its last thread: a process that reuses the pid is described anew.
                    self.described.remove(&pid);
                }
                Ok(())
            }
            _ => self.emit_fact(f),
        }
    }

    /// With `thin`: describes process `pid` (thread names and mappings as the facts up to
    /// `time` left them) before the first record of it in the file.
    fn describe(&mut self, pid: u32, time: u64) -> anyhow::Result<()> {
        if !self.thin || !self.described.insert(pid) {
            return Ok(());
        }
        let facts = self
            .known
            .as_ref()
            .map(|k| k.process_facts(pid))
            .unwrap_or_default();
        for fact in facts {
            self.emit_fact(&TimedFact { time, cpu: 0, fact })?;
        }
        Ok(())
    }

    /// Writes a fact's record.
    fn emit_fact(&mut self, f: &TimedFact) -> anyhow::Result<()> {
        let sid = |pid: u32, tid: u32| SampleId {
            pid,
            tid,
            time: f.time,
            cpu: f.cpu,
        };
        match &f.fact {
            Fact::Mmap2 {
                pid,
                tid,
                start,
                len,
                pgoff,
                maj,
                min,
                ino,
                ino_generation,
                prot,
                flags,
                filename,
            } => {
                // (`//anon`: no file; Python frames' synthetic mapping.)
                if prot & 4 != 0 && filename.starts_with('/') && !filename.starts_with("//") {
                    if !self.mapped_files.contains_key(filename) {
                        let id = crate::sideband::foreign::is_foreign(filename, *maj, *min, *ino)
                            .then(|| {
                                crate::sideband::foreign::cache(*pid, *start, start + len, filename)
                            })
                            .flatten();
                        self.mapped_files.insert(filename.clone(), id);
                    }
                    if !self.output_files.contains(filename) {
                        self.output_files.insert(filename.clone());
                    }
                }
                let record = SideBand::Mmap2 {
                    misc: misc::USER,
                    pid: *pid,
                    tid: *tid,
                    start: *start,
                    len: *len,
                    pgoff: *pgoff,
                    file: Mmap2File::Inode {
                        maj: *maj,
                        min: *min,
                        ino: *ino,
                        ino_generation: *ino_generation,
                    },
                    prot: *prot,
                    flags: *flags,
                    filename,
                };
                self.writer.write_side_band(0, &record, &sid(*pid, *tid))?;
            }
            Fact::Comm {
                pid,
                tid,
                comm,
                exec,
            } => {
                self.writer.write_side_band(
                    0,
                    &SideBand::Comm {
                        pid: *pid,
                        tid: *tid,
                        comm,
                        exec: *exec,
                    },
                    &sid(*pid, *tid),
                )?;
            }
            Fact::Fork {
                pid,
                ppid,
                tid,
                ptid,
            } => {
                self.writer.write_side_band(
                    0,
                    &SideBand::Fork {
                        pid: *pid,
                        ppid: *ppid,
                        tid: *tid,
                        ptid: *ptid,
                        time: f.time,
                    },
                    &sid(*pid, *tid),
                )?;
            }
            Fact::Exit {
                pid,
                ppid,
                tid,
                ptid,
            } => {
                self.writer.write_side_band(
                    0,
                    &SideBand::Exit {
                        pid: *pid,
                        ppid: *ppid,
                        tid: *tid,
                        ptid: *ptid,
                        time: f.time,
                    },
                    &sid(*pid, *tid),
                )?;
            }
            Fact::Lost { lost } => self.write_lost(CPU_CLOCK_ID, *lost, f.time)?,
            Fact::Ksymbol {
                addr,
                len,
                ksym_type,
                flags,
                name,
            } => {
                let record = SideBand::Ksymbol {
                    addr: *addr,
                    len: *len,
                    ksym_type: *ksym_type,
                    flags: *flags,
                    name,
                };
                self.writer.write_side_band(0, &record, &sid(0, 0))?;
            }
            Fact::BpfEvent {
                kind,
                flags,
                id,
                tag,
            } => {
                let record = SideBand::BpfEvent {
                    kind: *kind,
                    flags: *flags,
                    id: *id,
                    tag: *tag,
                };
                self.writer.write_side_band(0, &record, &sid(0, 0))?;
            }
        }
        Ok(())
    }

    /// Writes a LOST record for each kind of event the kernel dropped since the last call,
    /// naming the event they would have been.
    pub fn write_drops(&mut self, now: bpf::Drops, time: u64) -> anyhow::Result<()> {
        let was = std::mem::replace(&mut self.drops_written, now);
        let ids = self.lost_ids;
        for (id, now, was) in [
            (ids.on_cpu, now.on_cpu, was.on_cpu),
            (ids.off_cpu, now.off_cpu, was.off_cpu),
            (ids.block_io, now.block_io, was.block_io),
            (ids.traced, now.traced, was.traced),
            (ids.net, now.net, was.net),
            (ids.faults, now.faults, was.faults),
            (CPU_CLOCK_ID, now.exits, was.exits),
        ] {
            if now > was {
                self.write_lost(id, now - was, time)?;
            }
        }
        Ok(())
    }

    /// Takes the samples the writer dropped for want of room (a full filesystem) out of the
    /// counts and into `lost`, as its LOST records in the file count them: the summary says
    /// what the file holds.
    pub fn count_unwritten(&mut self) -> u64 {
        let dropped = self.writer.dropped_samples().to_vec();
        let of = |attr: Option<usize>| attr.and_then(|i| dropped.get(i)).copied().unwrap_or(0);
        let traced: u64 = self.traced_attrs.iter().map(|t| of(t.attr)).sum();
        let net: u64 = self
            .net_attrs
            .map_or(0, |n| n.iter().map(|&i| of(Some(i))).sum());
        for (count, n) in [
            (&mut self.samples, of(Some(0))),
            (&mut self.off_cpu, of(self.offcpu_attr)),
            (&mut self.runq, of(self.runq_attr)),
            (&mut self.faults, of(self.fault_attr)),
            (&mut self.fault_waits, of(self.fault_wait_attr)),
            (&mut self.io, of(self.io_attr)),
            (&mut self.wakeups, of(self.wakeup_attr)),
            (&mut self.traced, traced),
            (&mut self.net, net),
        ] {
            *count = count.saturating_sub(n);
        }
        let unwritten = dropped.iter().sum::<u64>();
        self.lost += unwritten;
        unwritten
    }

    /// Writes a LOST record of `lost` events of the event `id` names.
    pub fn write_lost(&mut self, id: u64, lost: u64, time: u64) -> anyhow::Result<()> {
        self.lost += lost;
        let sid = SampleId {
            pid: u32::MAX,
            tid: u32::MAX,
            time,
            cpu: 0,
        };
        self.writer
            .write_side_band(0, &SideBand::Lost { id, lost }, &sid)?;
        Ok(())
    }

    /// Writes a sample BPF took of a running thread (on-CPU, a major fault) under `attr`, its
    /// Python frames merged into its user stack.
    fn write_sampled(
        &mut self,
        s: &bpf::OnCpuSample,
        attr: usize,
        period: u64,
    ) -> anyhow::Result<()> {
        let copy = s.user_regs.as_ref().map(|r| (r, &s.stack_copy[..]));
        let mut merged = std::mem::take(&mut self.merged);
        let user = if self.python.merge(s, &mut merged) {
            if let Some(fact) = self.python.take_mapping(s.pid) {
                if let Err(e) = self.write_fact(&TimedFact {
                    time: s.time,
                    cpu: s.cpu,
                    fact,
                }) {
                    self.merged = merged;
                    return Err(e);
                }
            }
            &merged[..]
        } else {
            &s.user_stack[..]
        };
        let written = self.write_stack_sample(
            copy,
            attr,
            s.pid,
            s.tid,
            s.cpu,
            s.time,
            period,
            &s.kernel_stack,
            user,
            &[],
        );
        self.merged = merged;
        written
    }

    /// Writes a sample of event `attr` with the given stacks.
    #[allow(clippy::too_many_arguments)]
    fn write_stack_sample(
        &mut self,
        copy: Option<(&bpf::UserRegs, &[u8])>,
        attr: usize,
        pid: u32,
        tid: u32,
        cpu: u32,
        time: u64,
        period: u64,
        kernel: &[u64],
        user: &[u64],
        raw: &[u8],
    ) -> anyhow::Result<()> {
        self.describe(pid, time)?;
        let mut chain = std::mem::take(&mut self.callchain);
        build_callchain(&mut chain, kernel, user);
        let ip = kernel
            .first()
            .or(user.first())
            .copied()
            .or(copy.map(|(r, _)| r.ip()))
            .unwrap_or(0);
        let regs = copy.map(|(r, _)| r.0);
        let sample = Sample {
            misc: if kernel.is_empty() {
                misc::USER
            } else {
                misc::KERNEL
            },
            ip,
            pid,
            tid,
            time,
            cpu,
            period,
            callchain: &chain,
            raw,
            user_regs: regs.as_ref().map(|regs| format::UserRegs { abi: 2, regs }),
            user_stack: copy.map_or(&[][..], |(_, s)| s),
            ..Default::default()
        };
        let r = self.writer.write_sample(attr, &sample);
        self.callchain = chain;
        r?;
        Ok(())
    }

    fn write_item(&mut self, item: &Item) -> anyhow::Result<()> {
        match item {
            Item::Sample(s) => {
                let period = if self.aggregate { 1 } else { s.period };
                self.write_sampled(s, 0, period)?;
                self.samples += 1;
                self.copied_stacks += !s.stack_copy.is_empty() as u64;
                self.late.count(s);
            }
            Item::Fault(s) => {
                let Some(attr) = self.fault_attr else {
                    return Ok(());
                };
                self.write_sampled(s, attr, s.period)?;
                self.faults += 1;
            }
            Item::Aggregated { samples: a, time } => {
                // The thread's CPU is not counted: CPU 0.
                self.write_stack_sample(
                    None,
                    0,
                    a.pid,
                    a.tid,
                    0,
                    *time,
                    a.count,
                    &a.kernel_stack,
                    &a.user_stack,
                    &[],
                )?;
                self.samples += a.count;
                self.aggregated += 1;
                self.last_take = *time;
            }
            Item::OffCpu(o) => {
                let Some(attr) = self.offcpu_attr else {
                    return Ok(());
                };
                let copy = o.user_regs.as_ref().map(|r| (r, &o.stack_copy[..]));
                let mut merged = std::mem::take(&mut self.merged);
                let python = self
                    .python
                    .merge_stack(o.pid, &o.user_stack, &o.python, &mut merged);
                if python {
                    if let Some(fact) = self.python.take_mapping(o.pid) {
                        self.write_fact(&TimedFact {
                            time: o.time,
                            cpu: o.cpu,
                            fact,
                        })?;
                    }
                }
                let user = if python {
                    &merged[..]
                } else {
                    &o.user_stack[..]
                };
                let written = self.write_stack_sample(
                    copy,
                    attr,
                    o.pid,
                    o.tid,
                    o.cpu,
                    o.time,
                    o.duration_ns,
                    &o.kernel_stack,
                    user,
                    &[],
                );
                if let Err(e) = written {
                    self.merged = merged;
                    return Err(e);
                }
                self.off_cpu += 1;
                // The samples below share the off-CPU sample's stack: in DWARF mode they carry
                // its registers and no bytes of their own (the stack copies are the bulk of the
                // file); analyze borrows the off-CPU sample's, perf unwinds the leaf.
                let shared = copy.map(|(regs, _)| (regs, &[][..]));
                // Waiting for a CPU; blocked inside a page fault (until its wakeup).
                let runq = self.runq_attr.filter(|_| o.runq_ns > 0);
                let fault = self.fault_wait_attr.filter(|_| o.in_fault);
                let waited = o.duration_ns - o.runq_ns.min(o.duration_ns);
                for (attr, period) in [(runq, o.runq_ns), (fault, waited)] {
                    let Some(attr) = attr else {
                        continue;
                    };
                    let user = if python {
                        &merged[..]
                    } else {
                        &o.user_stack[..]
                    };
                    let written = self.write_stack_sample(
                        shared,
                        attr,
                        o.pid,
                        o.tid,
                        o.cpu,
                        o.time,
                        period,
                        &o.kernel_stack,
                        user,
                        &[],
                    );
                    if let Err(e) = written {
                        self.merged = merged;
                        return Err(e);
                    }
                }
                self.merged = merged;
                self.runq += runq.is_some() as u64;
                self.fault_waits += fault.is_some() as u64;
            }
            Item::Cache {
                counts,
                time,
                interval_ns,
            } => {
                let Some(attr) = self.cache_attr else {
                    return Ok(());
                };
                let stat = format::events::CacheStat {
                    accesses: counts.accesses,
                    added: counts.added,
                    dirtied: counts.dirtied,
                    interval_ns: *interval_ns,
                };
                let raw = stat.to_raw(counts.pid as i32);
                self.write_stack_sample(
                    None,
                    attr,
                    counts.pid,
                    counts.pid,
                    0,
                    *time,
                    counts.accesses.max(1),
                    &[],
                    &[],
                    &raw,
                )?;
            }
            Item::Dirty(d) => {
                if self.io_attr.is_some() {
                    self.dirty_bursts.insert((d.time, d.tid), d.clone());
                    while self.dirty_bursts.len() > DIRTY_BURSTS {
                        self.dirty_bursts.pop_first();
                    }
                }
            }
            Item::BlockIo(b) => {
                let Some(attr) = self.io_attr else {
                    return Ok(());
                };
                self.name_task(b.pid, b.tid, &b.comm, b.time, b.cpu)?;
                // Writeback of pages a tracked thread dirtied is charged to it, at its write.
                let dirtier = b
                    .dirtier
                    .and_then(|(_, tid, time)| self.dirty_bursts.get(&(time, tid)).cloned());
                let io = format::events::BlockIo {
                    dev: b.dev,
                    sector: b.sector,
                    bytes: b.bytes,
                    rwbs: b.rwbs,
                    latency_ns: b.time.saturating_sub(b.issue_time),
                    issue_ns: b.issue_time,
                    comm: b.comm,
                    tracked: b.tracked as u8,
                    issuer_pid: b.pid as i32,
                    issuer_tid: b.tid as i32,
                    dirtied: dirtier.is_some() as u8,
                };
                let raw = io.to_raw();
                match &dirtier {
                    Some(d) => {
                        let copy = d.user_regs.as_ref().map(|r| (r, &d.stack_copy[..]));
                        self.write_stack_sample(
                            copy,
                            attr,
                            d.pid,
                            d.tid,
                            b.cpu,
                            b.time,
                            io.latency_ns,
                            &d.kernel_stack,
                            &d.user_stack,
                            &raw,
                        )?;
                    }
                    None => self.write_stack_sample(
                        None,
                        attr,
                        b.pid,
                        b.tid,
                        b.cpu,
                        b.time,
                        io.latency_ns,
                        &b.kernel_stack,
                        &b.user_stack,
                        &raw,
                    )?,
                }
                self.io += 1;
            }
            Item::Net(n) => {
                let Some(attrs) = self.net_attrs else {
                    return Ok(());
                };
                let (slot, reason) = match n.what {
                    bpf::NetWhat::Conn => (0, 0),
                    bpf::NetWhat::Retransmit => (1, n.reason),
                    bpf::NetWhat::SendReset => (2, n.reason + 1),
                    bpf::NetWhat::ReceiveReset => (2, 0),
                    bpf::NetWhat::Drop => (3, n.reason),
                    bpf::NetWhat::Wait => (4, n.reason),
                    bpf::NetWhat::Send => (5, n.reason),
                };
                if n.pid != 0 {
                    self.name_task(n.pid, n.tid, &n.comm, n.time, n.cpu)?;
                }
                let conn = n.what == bpf::NetWhat::Conn;
                let retransmit = n.what == bpf::NetWhat::Retransmit;
                let spans = matches!(n.what, bpf::NetWhat::Wait | bpf::NetWhat::Send);
                let duration_ns = if (conn || spans) && n.start_time != 0 {
                    n.time.saturating_sub(n.start_time)
                } else {
                    0
                };
                let raw = format::events::Net {
                    event: format::events::NET_EVENTS[slot].1,
                    family: n.family,
                    lport: n.lport,
                    rport: n.rport,
                    state: n.state,
                    active: n.active as u8,
                    saddr: n.saddr,
                    daddr: n.daddr,
                    tx_bytes: n.tx_bytes,
                    // A retransmit's rx_bytes are the segments TcpRetransSegs counted.
                    rx_bytes: if retransmit { 0 } else { n.rx_bytes },
                    duration_ns,
                    reason,
                    owner_tid: n.tid as i32,
                    comm: n.comm,
                    start_ns: n.start_time,
                    count: n.skbs,
                    segments: Some(if retransmit { n.rx_bytes as u32 } else { 0 }),
                }
                .to_raw(n.pid as i32);
                self.write_stack_sample(
                    None,
                    attrs[slot],
                    n.pid,
                    n.tid,
                    n.cpu,
                    n.time,
                    // A connection weighs its life; a socket wait, the time blocked.
                    match n.what {
                        bpf::NetWhat::Conn => duration_ns.max(1),
                        bpf::NetWhat::Wait => n.tx_bytes.max(1),
                        // A send's latency to the device, for each skb it stands for.
                        bpf::NetWhat::Send => duration_ns.max(1) * u64::from(n.skbs.max(1)),
                        _ => 1,
                    },
                    &n.kernel_stack,
                    &n.user_stack,
                    &raw,
                )?;
                self.net += 1;
            }
            Item::Wakeup(w) => {
                let Some(attr) = self.wakeup_attr else {
                    return Ok(());
                };
                self.name_task(w.pid, w.tid, &w.comm, w.time, w.cpu)?;
                let raw = format::events::Wakeup {
                    wakee_pid: w.wakee_pid,
                    wakee_tid: w.wakee_tid,
                    blocked_ns: w.blocked_ns,
                    wake_ns: w.wake_time,
                }
                .to_raw(w.pid as i32);
                self.write_stack_sample(
                    None,
                    attr,
                    w.pid,
                    w.tid,
                    w.cpu,
                    w.time,
                    w.blocked_ns,
                    &w.kernel_stack,
                    &w.user_stack,
                    &raw,
                )?;
                self.wakeups += 1;
            }
            Item::Trace(t) => {
                let Some(how) = self.traced_attrs.get(t.event as usize).copied() else {
                    return Ok(());
                };
                let Some(attr) = how.attr else {
                    return Ok(());
                };
                self.name_task(t.pid, t.tid, &t.comm, t.time, t.cpu)?;
                let copy = t.user_regs.as_ref().map(|r| (r, &t.stack_copy[..]));
                // --aggregate: an event written alone says so in its payload.
                let alone = self
                    .counted
                    .get(t.event as usize)
                    .and_then(Option::as_ref)
                    .map(|c| {
                        use crate::tracing::aggregate::Alone;
                        c.alone(
                            &t.raw,
                            if copy.is_some() {
                                Alone::StackCopy
                            } else {
                                Alone::NoRoom
                            },
                        )
                    });
                let kernel = if how.kernel_stack {
                    &t.kernel_stack[..]
                } else {
                    &[]
                };
                self.write_stack_sample(
                    copy,
                    attr,
                    t.pid,
                    t.tid,
                    t.cpu,
                    t.time,
                    if how.latency { t.latency_ns } else { 1 },
                    kernel,
                    &t.user_stack,
                    alone.as_deref().unwrap_or(&t.raw),
                )?;
                self.traced += 1;
                self.traced_records += 1;
            }
            Item::AggregatedEvents { events: a, time } => {
                self.last_take = *time;
                let Some(how) = self.traced_attrs.get(a.event as usize).copied() else {
                    return Ok(());
                };
                let (Some(attr), Some(Some(counted))) =
                    (how.attr, self.counted.get(a.event as usize))
                else {
                    return Ok(());
                };
                let raw = counted.payload(a.tid, a.count, a.bucket);
                // The thread's CPU is not counted: CPU 0.
                self.name_task(a.pid, a.tid, &a.comm, *time, 0)?;
                let kernel = if how.kernel_stack {
                    &a.kernel_stack[..]
                } else {
                    &[]
                };
                self.write_stack_sample(
                    None,
                    attr,
                    a.pid,
                    a.tid,
                    0,
                    *time,
                    if how.latency { a.latency_ns } else { a.count },
                    kernel,
                    &a.user_stack,
                    &raw,
                )?;
                self.traced += a.count;
                self.traced_records += 1;
            }
            Item::Fact(f) => self.write_fact(f)?,
        }
        Ok(())
    }

    /// Names a task the file may know nothing of (a kworker that issued I/O, the waker of a
    /// tracked thread) once, from the comm the probe saw. pid 0 is perf's "swapper".
    fn name_task(
        &mut self,
        pid: u32,
        tid: u32,
        comm: &[u8; 16],
        time: u64,
        cpu: u32,
    ) -> anyhow::Result<()> {
        if pid == 0 || self.tracked.contains(&pid) || !self.named.insert(pid) {
            return Ok(());
        }
        let comm = String::from_utf8_lossy(comm)
            .trim_end_matches('\0')
            .to_string();
        if let Some(known) = &mut self.known {
            known.observe(
                &Fact::Comm {
                    pid,
                    tid,
                    comm: comm.clone(),
                    exec: false,
                },
                time,
            );
        }
        let sid = SampleId {
            pid,
            tid,
            time,
            cpu,
        };
        let record = SideBand::Comm {
            pid,
            tid,
            comm: &comm,
            exec: false,
        };
        self.writer.write_side_band(0, &record, &sid)?;
        Ok(())
    }

    /// Writes the kernel's MMAP record ([kernel.kallsyms]_text from `_text` to `_etext`), as
    /// each file needs it, and keeps it for the files to come.
    pub fn write_kernel_map(&mut self, text: Option<(u64, u64)>) -> anyhow::Result<()> {
        self.kernel_text = text;
        let Some((start, end)) = text else {
            return Ok(());
        };
        let kmap = SideBand::Mmap {
            misc: misc::KERNEL,
            pid: u32::MAX,
            tid: 0,
            start,
            len: end - start,
            pgoff: start,
            filename: "[kernel.kallsyms]_text",
        };
        let sid = SampleId {
            pid: u32::MAX,
            tid: u32::MAX,
            time: 0,
            cpu: 0,
        };
        self.writer.write_side_band(0, &kmap, &sid)?;
        Ok(())
    }

    /// The time of the oldest record still to be written.
    pub fn oldest_pending(&self) -> Option<u64> {
        self.pending.iter().map(Item::time).min()
    }

    /// Starts the writer's file, a new file of a rotated recording, with what its reader
    /// needs of the kernel and of the processes as the records so far left them, at `time`
    /// (older than the records to come).
    pub fn begin_file(&mut self, time: u64) -> anyhow::Result<()> {
        self.output_files.clear();
        self.write_kernel_map(self.kernel_text)?;
        self.described.clear();
        let facts = match &self.known {
            Some(known) if self.thin => known.kernel_facts(),
            Some(known) => known.facts(),
            None => Vec::new(),
        };
        for fact in facts {
            self.emit_fact(&TimedFact { time, cpu: 0, fact })?;
        }
        self.writer.finish_round()?;
        Ok(())
    }

    /// Writes every pending item older than `cut` in time order, then ends the round.
    pub fn flush_until(&mut self, cut: u64) -> anyhow::Result<()> {
        // Written in place, then dropped: items are a few hundred bytes, and moving each
        // into a vector of its own was a tenth of record's CPU at 70k events a second.
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_by_key(Item::time);
        let n = pending.partition_point(|i| i.time() < cut);
        let written = pending[..n]
            .iter()
            .try_for_each(|item| self.write_item(item));
        pending.drain(..n);
        self.pending = pending;
        written?;
        if self.thin {
            // Their last counts are written: what exited before holds no more.
            if let Some(known) = &mut self.known {
                known.forget_gone_before(self.last_take);
            }
        }
        self.writer.finish_round()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_stacks_end_before_words_that_are_no_user_address() {
        let mut chain = Vec::new();
        build_callchain(
            &mut chain,
            &[0xffff_ffff_8100_0000],
            &[0x401000, 0x20, u64::MAX, 0x402000],
        );
        assert_eq!(
            chain,
            [
                callchain::KERNEL,
                0xffff_ffff_8100_0000,
                callchain::USER,
                0x401000,
                0x20
            ]
        );
        build_callchain(&mut chain, &[], &[u64::MAX]);
        assert!(chain.is_empty(), "{chain:x?}");
    }
}
