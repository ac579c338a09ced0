//! One recording: start the probes, run the workload, merge BPF events and side-band facts by
//! time into rounds of the perf.data file, finish with features and build ids.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use format::{attr_flag, callchain, event_type, misc, sample_type as st, sw_event};
use format::{
    BuildIdEntry, EventAttr, Features, Mmap2File, PerfFileWriter, Sample, SampleId, SideBand,
};

use crate::phases::Phases;
use crate::sideband::{Fact, TimedFact};
use crate::{buildid, kernel, procfs, workload};

/// What to record.
#[derive(Debug, Clone)]
pub struct Config {
    pub output: PathBuf,
    pub frequency: u64,
    pub target: Target,
    /// The workload to run (may be empty with -p or -a).
    pub command: Vec<String>,
    /// record's own command line, for the CMDLINE feature.
    pub cmdline: Vec<String>,
    /// Record off-CPU intervals at least this long (None: no off-CPU).
    pub off_cpu_min_ns: Option<u64>,
    /// With off-CPU: record who woke each interval.
    pub wakeups: bool,
    /// Record block I/O.
    pub block_io: bool,
    /// DWARF mode: bytes of user stack copied per sample (0: frame pointers).
    pub stack_copy_bytes: u32,
    /// Size of the BPF ring buffer in 4 KiB pages (None: sized from the rate).
    pub ring_pages: Option<u64>,
    /// Print phase timings.
    pub verbose: bool,
    /// zstd level of `-z` (None: records written as they are).
    pub compression_level: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Only the workload and its descendants.
    Workload,
    /// These running processes (and their descendants).
    Pids(Vec<u32>),
    /// Every process.
    SystemWide,
}

/// What a recording produced.
#[derive(Debug, Clone)]
pub struct Summary {
    pub samples: u64,
    pub off_cpu: u64,
    pub io: u64,
    pub wakeups: u64,
    /// Off-CPU intervals recorded without their waker (it could not be kept).
    pub missed_wakers: u64,
    pub lost: u64,
    pub duration: Duration,
    pub bytes: u64,
    pub path: PathBuf,
    /// The workload's exit status (code, or 128 + signal).
    pub exit_status: Option<i32>,
}

/// Signal number received (SIGINT/SIGTERM), 0 if none.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// How far behind "now" a round ends, so that events still being written on other CPUs
/// land in the next round instead of arriving older than a finished round.
const ROUND_SLACK_NS: u64 = 20_000_000;
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Ids of the events' records.
const CPU_CLOCK_ID: u64 = 1;
const OFFCPU_ID: u64 = 2;
const BLOCK_IO_ID: u64 = 3;
const WAKEUP_ID: u64 = 4;
/// Fields of every sample (the same for all events, so that ids sit at the same place).
const SAMPLE_TYPE: u64 =
    st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::PERIOD | st::CALLCHAIN;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// REGS_USER registers written in DWARF mode: the 20 that perf writes, so that its own
/// unwinders (libdw wants them all) read our samples.
const USER_REGS_MASK: u64 = bpf::UserRegs::PERF_MASK;

fn cpu_clock_attr(frequency: u64, stack_copy_bytes: u32) -> EventAttr {
    let dwarf = stack_copy_bytes > 0;
    EventAttr {
        sample_regs_user: if dwarf { USER_REGS_MASK } else { 0 },
        sample_stack_user: stack_copy_bytes,
        name: "cpu-clock".into(),
        type_: event_type::SOFTWARE,
        config: sw_event::CPU_CLOCK,
        sample_period_or_freq: frequency,
        sample_type: if dwarf {
            SAMPLE_TYPE | st::REGS_USER | st::STACK_USER
        } else {
            SAMPLE_TYPE
        },
        flags: if dwarf {
            attr_flag::EXCLUDE_CALLCHAIN_USER
        } else {
            0
        } | attr_flag::FREQ
            | attr_flag::SAMPLE_ID_ALL
            | attr_flag::USE_CLOCKID
            | attr_flag::MMAP
            | attr_flag::COMM
            | attr_flag::TASK
            | attr_flag::MMAP2
            | attr_flag::COMM_EXEC,
        clockid: libc::CLOCK_MONOTONIC,
        ids: vec![CPU_CLOCK_ID],
        ..Default::default()
    }
}

/// Something to write, ordered by time.
enum Item {
    Sample(bpf::OnCpuSample),
    OffCpu(bpf::OffCpuInterval),
    BlockIo(bpf::BlockIoRequest),
    Wakeup(bpf::Wakeup),
    Fact(TimedFact),
}

impl Item {
    fn time(&self) -> u64 {
        match self {
            Item::Sample(s) => s.time,
            Item::OffCpu(o) => o.time,
            Item::BlockIo(b) => b.time,
            Item::Wakeup(w) => w.time,
            Item::Fact(f) => f.time,
        }
    }

    fn from_event(e: bpf::Event) -> Option<Item> {
        match e {
            bpf::Event::OnCpu(s) => Some(Item::Sample(s)),
            bpf::Event::OffCpu(o) => Some(Item::OffCpu(o)),
            bpf::Event::BlockIo(b) => Some(Item::BlockIo(b)),
            bpf::Event::Wakeup(w) => Some(Item::Wakeup(w)),
            bpf::Event::Exit { .. } => None,
        }
    }
}

/// Kernel and user stacks as a perf callchain: context markers, innermost first.
fn build_callchain(out: &mut Vec<u64>, kernel: &[u64], user: &[u64]) {
    out.clear();
    if !kernel.is_empty() {
        out.push(callchain::KERNEL);
        out.extend_from_slice(kernel);
    }
    if !user.is_empty() {
        out.push(callchain::USER);
        out.extend_from_slice(user);
    }
}

struct Recorder {
    writer: PerfFileWriter,
    system_wide: bool,
    /// Thread groups whose facts are written.
    tracked: HashSet<u32>,
    pending: Vec<Item>,
    samples: u64,
    off_cpu: u64,
    io: u64,
    wakeups: u64,
    lost: u64,
    /// Attr index of offcpu-time, block_io and wakeup events, when recorded.
    offcpu_attr: Option<usize>,
    io_attr: Option<usize>,
    wakeup_attr: Option<usize>,
    /// Processes whose name the file already has (for block I/O issued by untracked ones).
    named: HashSet<u32>,
    /// Files of executable mappings written, for BUILD_ID.
    mapped_files: BTreeSet<String>,
    callchain: Vec<u64>,
}

impl Recorder {
    fn write_fact(&mut self, f: &TimedFact) -> anyhow::Result<()> {
        if let Fact::Fork { pid, ppid, .. } = f.fact {
            if self.tracked.contains(&ppid) {
                self.tracked.insert(pid);
            }
        }
        if !self.system_wide && f.fact.pid().is_some_and(|p| !self.tracked.contains(&p)) {
            return Ok(());
        }
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
                if prot & 4 != 0 && filename.starts_with('/') {
                    self.mapped_files.insert(filename.clone());
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
            Fact::Lost { lost } => self.write_lost(*lost, f.time)?,
        }
        Ok(())
    }

    fn write_lost(&mut self, lost: u64, time: u64) -> anyhow::Result<()> {
        self.lost += lost;
        let sid = SampleId {
            pid: u32::MAX,
            tid: u32::MAX,
            time,
            cpu: 0,
        };
        self.writer.write_side_band(
            0,
            &SideBand::Lost {
                id: CPU_CLOCK_ID,
                lost,
            },
            &sid,
        )?;
        Ok(())
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
                let copy = s.user_regs.as_ref().map(|r| (r, &s.stack_copy[..]));
                self.write_stack_sample(
                    copy,
                    0,
                    s.pid,
                    s.tid,
                    s.cpu,
                    s.time,
                    s.period,
                    &s.kernel_stack,
                    &s.user_stack,
                    &[],
                )?;
                self.samples += 1;
            }
            Item::OffCpu(o) => {
                let Some(attr) = self.offcpu_attr else {
                    return Ok(());
                };
                let copy = o.user_regs.as_ref().map(|r| (r, &o.stack_copy[..]));
                self.write_stack_sample(
                    copy,
                    attr,
                    o.pid,
                    o.tid,
                    o.cpu,
                    o.time,
                    o.duration_ns,
                    &o.kernel_stack,
                    &o.user_stack,
                    &[],
                )?;
                self.off_cpu += 1;
            }
            Item::BlockIo(b) => {
                let Some(attr) = self.io_attr else {
                    return Ok(());
                };
                self.name_task(b.pid, b.tid, &b.comm, b.time, b.cpu)?;
                let io = format::events::BlockIo {
                    dev: b.dev,
                    sector: b.sector,
                    bytes: b.bytes,
                    rwbs: b.rwbs,
                    latency_ns: b.time.saturating_sub(b.issue_time),
                    issue_ns: b.issue_time,
                    comm: b.comm,
                    tracked: b.tracked as u8,
                };
                let raw = io.to_raw(b.pid as i32);
                self.write_stack_sample(
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
                )?;
                self.io += 1;
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

    /// Writes every pending item older than `cut` in time order, then ends the round.
    fn flush_until(&mut self, cut: u64) -> anyhow::Result<()> {
        self.pending.sort_by_key(Item::time);
        let n = self.pending.partition_point(|i| i.time() < cut);
        let ready: Vec<Item> = self.pending.drain(..n).collect();
        for item in &ready {
            self.write_item(item)?;
        }
        self.writer.finish_round()?;
        Ok(())
    }
}

fn mount_tracefs() {
    let events = Path::new("/sys/kernel/tracing/events");
    // SAFETY: geteuid has no preconditions.
    if events.exists() || unsafe { libc::geteuid() } != 0 {
        return;
    }
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    // SAFETY: valid NUL-terminated strings.
    unsafe {
        libc::mount(
            c("nodev").as_ptr(),
            c("/sys/kernel/tracing").as_ptr(),
            c("tracefs").as_ptr(),
            0,
            std::ptr::null(),
        )
    };
}

/// Moves an existing output file to FILE.old, as perf does.
fn rotate_old(path: &Path) -> anyhow::Result<()> {
    if path.exists() {
        let mut old = path.as_os_str().to_owned();
        old.push(".old");
        std::fs::rename(path, &old).with_context(|| {
            format!(
                "cannot rename {} to {}",
                path.display(),
                PathBuf::from(&old).display()
            )
        })?;
    }
    Ok(())
}

/// Gives the file to the user who ran sudo, so that recordings are theirs (and stay 0600).
fn chown_to_invoking_user(path: &Path) {
    let (Ok(uid), Ok(gid)) = (std::env::var("SUDO_UID"), std::env::var("SUDO_GID")) else {
        return;
    };
    let (Ok(uid), Ok(gid)) = (uid.parse::<u32>(), gid.parse::<u32>()) else {
        return;
    };
    let _ = std::os::unix::fs::chown(path, Some(uid), Some(gid));
}

fn uname() -> (String, String) {
    // SAFETY: zeroed utsname is a valid out buffer.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    unsafe { libc::uname(&mut u) };
    let s = |f: &[libc::c_char]| {
        f.iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8 as char)
            .collect::<String>()
    };
    (s(&u.nodename), s(&u.release))
}

pub fn record(cfg: &Config) -> anyhow::Result<Summary> {
    let mut phases = Phases::new(cfg.verbose);
    // Reading /proc/kallsyms takes tens of milliseconds: meanwhile, load the probes.
    let kernel_text = std::thread::spawn(kernel::text_range);
    install_signal_handlers();
    mount_tracefs();
    let started = Instant::now();
    let started_ns = monotonic_ns();
    let child = if cfg.command.is_empty() {
        None
    } else {
        Some(
            workload::spawn_held(&cfg.command)
                .with_context(|| format!("cannot start {}", cfg.command[0]))?,
        )
    };
    phases.mark("workload spawned (held)");
    let system_wide = cfg.target == Target::SystemWide;
    // On an early return below, dropping the held child kills it.
    let options = bpf::Options {
        frequency: cfg.frequency,
        system_wide,
        off_cpu_min_ns: cfg.off_cpu_min_ns,
        wakeups: cfg.wakeups,
        block_io: cfg.block_io,
        stack_copy_bytes: cfg.stack_copy_bytes,
        ring_bytes: cfg.ring_pages.map(|pages| pages.saturating_mul(4096)),
    };
    let mut profiler = bpf::Profiler::start(&options)?;
    if cfg.verbose {
        if let Err(e) = profiler.count_run_time() {
            eprintln!("record: BPF run time not measured: {e}");
        }
    }
    phases.mark("BPF programs loaded and attached");
    let cpus = bpf::perf_event::online_cpus()?;
    let mut sideband = crate::sideband::SideBand::open(&cpus, cfg.stack_copy_bytes > 0)?;
    let mut tracked = HashSet::new();
    let mut initial: Vec<u32> = match &cfg.target {
        Target::Pids(p) => p.clone(),
        Target::SystemWide => procfs::all_pids(),
        Target::Workload => vec![],
    };
    if let Some(c) = &child {
        initial.push(c.pid as u32);
    }
    for &pid in &initial {
        if !system_wide {
            profiler.track(pid)?;
        }
        tracked.insert(pid);
    }

    phases.mark("side-band events opened, processes tracked");
    rotate_old(&cfg.output)?;
    let mut attrs = vec![cpu_clock_attr(cfg.frequency, cfg.stack_copy_bytes)];
    let offcpu_attr = cfg.off_cpu_min_ns.map(|_| {
        let mut attr = format::events::offcpu_attr(SAMPLE_TYPE, vec![OFFCPU_ID]);
        if cfg.stack_copy_bytes > 0 {
            // Off-CPU stacks take the DWARF path too: registers and a stack copy.
            attr.sample_type |= st::REGS_USER | st::STACK_USER;
            attr.flags |= attr_flag::EXCLUDE_CALLCHAIN_USER;
            attr.sample_regs_user = USER_REGS_MASK;
            attr.sample_stack_user = cfg.stack_copy_bytes.min(bpf::MAX_OFFCPU_COPY);
        }
        attrs.push(attr);
        attrs.len() - 1
    });
    // Block I/O and wakeup samples are tracepoint-style events: perf needs their formats in
    // TRACING_DATA (the writer keeps them BPF_OUTPUT events until finish() writes that, so a
    // killed recording stays readable).
    let wakeups = cfg.off_cpu_min_ns.is_some() && cfg.wakeups;
    let tracing_data = if cfg.block_io || wakeups {
        match format::TracingData::from_tracefs(Path::new("/sys/kernel/tracing")) {
            Ok(mut td) => {
                if cfg.block_io {
                    td.events.push(format::events::block_io_format());
                }
                if wakeups {
                    td.events.push(format::events::wakeup_format());
                }
                Some(td.to_bytes())
            }
            Err(e) => {
                eprintln!("record: warning: block I/O and wakeups not recorded: cannot read tracefs ({e}); mount it with: mount -t tracefs nodev /sys/kernel/tracing");
                None
            }
        }
    } else {
        None
    };
    phases.mark("tracefs formats read");
    let io_attr = (tracing_data.is_some() && cfg.block_io).then(|| {
        attrs.push(format::events::block_io_attr(
            SAMPLE_TYPE,
            vec![BLOCK_IO_ID],
        ));
        attrs.len() - 1
    });
    let wakeup_attr = (tracing_data.is_some() && wakeups).then(|| {
        attrs.push(format::events::wakeup_attr(SAMPLE_TYPE, vec![WAKEUP_ID]));
        attrs.len() - 1
    });
    let writer = match cfg.compression_level {
        Some(level) => PerfFileWriter::create_compressed(&cfg.output, attrs, level)?,
        None => PerfFileWriter::create(&cfg.output, attrs)?,
    };
    let mut rec = Recorder {
        writer,
        system_wide,
        tracked,
        pending: Vec::new(),
        samples: 0,
        off_cpu: 0,
        io: 0,
        wakeups: 0,
        lost: 0,
        offcpu_attr,
        io_attr,
        wakeup_attr,
        named: HashSet::new(),
        mapped_files: BTreeSet::new(),
        callchain: Vec::new(),
    };
    phases.mark("output created");

    // The probes are on: let the workload go. What is written below is older than anything
    // it does (its events wait in the buffers until the loop).
    let child_pid = child.as_ref().map(|c| c.pid);
    if let Some(c) = child {
        let name = cfg.command[0].clone();
        c.release().with_context(|| format!("cannot run {name}"))?;
    }
    phases.mark("workload released");

    let text = kernel_text.join().unwrap_or(None);
    phases.mark("kernel text range read");
    if let Some((start, end)) = text {
        let kmap = SideBand::Mmap {
            misc: misc::KERNEL,
            pid: u32::MAX,
            tid: 0,
            start,
            len: end - start,
            pgoff: start,
            filename: "[kernel.kallsyms]_text",
        };
        rec.writer.write_side_band(
            0,
            &kmap,
            &SampleId {
                pid: u32::MAX,
                tid: u32::MAX,
                time: 0,
                cpu: 0,
            },
        )?;
    }
    // Synthesized facts carry the start time: older than every event the probes saw.
    let now = started_ns;
    for &pid in &initial {
        if child_pid.is_some_and(|c| c as u32 == pid) {
            continue;
        }
        for fact in procfs::synthesize(pid, cfg.stack_copy_bytes > 0) {
            rec.write_fact(&TimedFact {
                time: now,
                cpu: 0,
                fact,
            })?;
        }
    }
    rec.writer.finish_round()?;
    phases.mark("existing processes described");

    let mut exit_status = None;
    let mut forwarded = false;
    let mut drops_written = 0;
    let mut facts = Vec::new();
    loop {
        let cut = monotonic_ns().saturating_sub(ROUND_SLACK_NS);
        let pending = &mut rec.pending;
        let mut child_exited = false;
        profiler.poll(POLL_INTERVAL, |e| {
            if let bpf::Event::Exit { pid, .. } = e {
                child_exited |= child_pid.is_some_and(|c| c as u32 == pid);
            }
            pending.extend(Item::from_event(e))
        })?;
        sideband.drain(&mut facts);
        rec.pending.extend(facts.drain(..).map(Item::Fact));
        let drops = profiler.drops();
        if drops > drops_written {
            rec.write_lost(drops - drops_written, cut)?;
            drops_written = drops;
        }
        rec.flush_until(cut)?;

        if let Some(pid) = child_pid {
            if exit_status.is_none() {
                // Its exit was seen: reap it now rather than at the next poll.
                exit_status = if child_exited {
                    workload::wait_exiting(pid)
                } else {
                    workload::try_wait(pid)
                };
            }
        }
        let sig = SIGNAL.load(Ordering::SeqCst);
        if sig != 0 && !forwarded {
            forwarded = true;
            match child_pid {
                // SAFETY: forwarding the signal to our workload.
                Some(pid) if exit_status.is_none() => unsafe {
                    libc::kill(pid, sig);
                },
                _ => break,
            }
        }
        let done = match (&cfg.target, child_pid) {
            (_, Some(_)) => exit_status.is_some(),
            (Target::Pids(pids), None) => pids.iter().all(|&p| procfs::has_exited(p)),
            _ => false,
        };
        if done {
            break;
        }
    }
    phases.mark("recording");
    // Last events: the workload's own are published before it can be reaped (the kernel
    // writes them in do_exit); a BPF program still running on another CPU needs microseconds.
    std::thread::sleep(Duration::from_millis(5));
    let pending = &mut rec.pending;
    profiler.poll(Duration::ZERO, |e| pending.extend(Item::from_event(e)))?;
    sideband.drain(&mut facts);
    rec.pending.extend(facts.drain(..).map(Item::Fact));
    let drops = profiler.drops();
    if drops > drops_written {
        rec.write_lost(drops - drops_written, monotonic_ns())?;
    }
    rec.flush_until(u64::MAX)?;
    let missed_wakers = profiler.missed_wakers();
    if cfg.verbose {
        crate::phases::report_costs(&profiler.run_time(), started.elapsed());
        for (what, n) in profiler.drops_by_kind() {
            if n > 0 {
                eprintln!("record: lost {n} {what}");
            }
        }
    }
    drop(profiler);
    phases.mark("last events written, probes detached");

    let mut build_ids = Vec::new();
    if let Some(id) = kernel::build_id() {
        build_ids.push(BuildIdEntry {
            pid: -1,
            kernel: true,
            build_id: id,
            filename: "[kernel.kallsyms]".into(),
        });
    }
    for file in &rec.mapped_files {
        if let Some(id) = buildid::of_file(Path::new(file)) {
            build_ids.push(BuildIdEntry {
                pid: -1,
                kernel: false,
                build_id: id,
                filename: file.clone(),
            });
        }
    }
    phases.mark("build ids read");
    let (hostname, release) = uname();
    let features = Features {
        hostname: Some(hostname),
        os_release: Some(release),
        version: Some(format!("bpfperf {}", env!("CARGO_PKG_VERSION"))),
        arch: Some(std::env::consts::ARCH.into()),
        nr_cpus: Some((cpus.len() as u32, cpus.len() as u32)),
        cmdline: Some(cfg.cmdline.clone()),
        clockid_res_ns: Some(1),
        build_ids,
        tracing_data,
        ..Default::default()
    };
    let (samples, off_cpu, io, wakeups, lost) =
        (rec.samples, rec.off_cpu, rec.io, rec.wakeups, rec.lost);
    let bytes = rec.writer.finish(&features)?;
    phases.mark("features written");
    chown_to_invoking_user(&cfg.output);
    if samples == 0 && child_pid.is_none() && cfg.target != Target::SystemWide && initial.is_empty()
    {
        bail!("nothing was recorded");
    }
    Ok(Summary {
        samples,
        off_cpu,
        io,
        wakeups,
        missed_wakers,
        lost,
        duration: started.elapsed(),
        bytes,
        path: cfg.output.clone(),
        exit_status,
    })
}
