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
/// Id of the cpu-clock event's records.
const CPU_CLOCK_ID: u64 = 1;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn cpu_clock_attr(frequency: u64) -> EventAttr {
    EventAttr {
        name: "cpu-clock".into(),
        type_: event_type::SOFTWARE,
        config: sw_event::CPU_CLOCK,
        sample_period_or_freq: frequency,
        sample_type: st::IDENTIFIER
            | st::IP
            | st::TID
            | st::TIME
            | st::CPU
            | st::PERIOD
            | st::CALLCHAIN,
        flags: attr_flag::FREQ
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
    Fact(TimedFact),
}

impl Item {
    fn time(&self) -> u64 {
        match self {
            Item::Sample(s) => s.time,
            Item::Fact(f) => f.time,
        }
    }
}

struct Recorder {
    writer: PerfFileWriter,
    system_wide: bool,
    /// Thread groups whose facts are written.
    tracked: HashSet<u32>,
    pending: Vec<Item>,
    samples: u64,
    lost: u64,
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

    fn write_sample(&mut self, s: &bpf::OnCpuSample) -> anyhow::Result<()> {
        self.callchain.clear();
        if !s.kernel_stack.is_empty() {
            self.callchain.push(callchain::KERNEL);
            self.callchain.extend_from_slice(&s.kernel_stack);
        }
        if !s.user_stack.is_empty() {
            self.callchain.push(callchain::USER);
            self.callchain.extend_from_slice(&s.user_stack);
        }
        let in_kernel = !s.kernel_stack.is_empty();
        let ip = s
            .kernel_stack
            .first()
            .or(s.user_stack.first())
            .copied()
            .unwrap_or(0);
        let chain = std::mem::take(&mut self.callchain);
        let sample = Sample {
            misc: if in_kernel { misc::KERNEL } else { misc::USER },
            ip,
            pid: s.pid,
            tid: s.tid,
            time: s.time,
            cpu: s.cpu,
            period: s.period,
            callchain: &chain,
            ..Default::default()
        };
        let r = self.writer.write_sample(0, &sample);
        self.callchain = chain;
        r?;
        self.samples += 1;
        Ok(())
    }

    /// Writes every pending item older than `cut` in time order, then ends the round.
    fn flush_until(&mut self, cut: u64) -> anyhow::Result<()> {
        self.pending.sort_by_key(Item::time);
        let n = self.pending.partition_point(|i| i.time() < cut);
        let ready: Vec<Item> = self.pending.drain(..n).collect();
        for item in &ready {
            match item {
                Item::Sample(s) => self.write_sample(s)?,
                Item::Fact(f) => self.write_fact(f)?,
            }
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
    install_signal_handlers();
    mount_tracefs();
    let started = Instant::now();
    let child = if cfg.command.is_empty() {
        None
    } else {
        Some(
            workload::spawn_held(&cfg.command)
                .with_context(|| format!("cannot start {}", cfg.command[0]))?,
        )
    };
    let system_wide = cfg.target == Target::SystemWide;
    let kill_child = |c: &Option<workload::HeldChild>| {
        if let Some(c) = c {
            // SAFETY: signalling our own held child.
            unsafe { libc::kill(c.pid, libc::SIGKILL) };
            let _ = workload::try_wait(c.pid);
        }
    };
    let profiler = match bpf::Profiler::start(&bpf::Options {
        frequency: cfg.frequency,
        system_wide,
    }) {
        Ok(p) => p,
        Err(e) => {
            kill_child(&child);
            return Err(e.into());
        }
    };
    let cpus = bpf::perf_event::online_cpus()?;
    let mut sideband = match crate::sideband::SideBand::open(&cpus) {
        Ok(s) => s,
        Err(e) => {
            kill_child(&child);
            return Err(e.into());
        }
    };
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

    rotate_old(&cfg.output)?;
    let writer = PerfFileWriter::create(&cfg.output, vec![cpu_clock_attr(cfg.frequency)])?;
    let mut rec = Recorder {
        writer,
        system_wide,
        tracked,
        pending: Vec::new(),
        samples: 0,
        lost: 0,
        mapped_files: BTreeSet::new(),
        callchain: Vec::new(),
    };
    let text = kernel::text_range();
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
    let now = monotonic_ns();
    for &pid in &initial {
        if child.as_ref().is_some_and(|c| c.pid as u32 == pid) {
            continue;
        }
        for fact in procfs::synthesize(pid) {
            rec.write_fact(&TimedFact {
                time: now,
                cpu: 0,
                fact,
            })?;
        }
    }
    rec.writer.finish_round()?;

    let child_pid = child.as_ref().map(|c| c.pid);
    if let Some(c) = child {
        let name = cfg.command[0].clone();
        c.release().with_context(|| format!("cannot run {name}"))?;
    }

    let mut exit_status = None;
    let mut forwarded = false;
    let mut drops_written = 0;
    let mut facts = Vec::new();
    loop {
        let cut = monotonic_ns().saturating_sub(ROUND_SLACK_NS);
        let pending = &mut rec.pending;
        profiler.poll(POLL_INTERVAL, |e| {
            if let bpf::Event::OnCpu(s) = e {
                pending.push(Item::Sample(s));
            }
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
                exit_status = workload::try_wait(pid);
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
            (Target::Pids(pids), None) => pids
                .iter()
                .all(|&p| !Path::new(&format!("/proc/{p}")).exists()),
            _ => false,
        };
        if done {
            break;
        }
    }
    // Last events: give the kernel a moment to publish them, then write everything.
    std::thread::sleep(Duration::from_millis(30));
    let pending = &mut rec.pending;
    profiler.poll(Duration::ZERO, |e| {
        if let bpf::Event::OnCpu(s) = e {
            pending.push(Item::Sample(s));
        }
    })?;
    sideband.drain(&mut facts);
    rec.pending.extend(facts.drain(..).map(Item::Fact));
    let drops = profiler.drops();
    if drops > drops_written {
        rec.write_lost(drops - drops_written, monotonic_ns())?;
    }
    rec.flush_until(u64::MAX)?;
    drop(profiler);

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
        ..Default::default()
    };
    let (samples, lost) = (rec.samples, rec.lost);
    let bytes = rec.writer.finish(&features)?;
    chown_to_invoking_user(&cfg.output);
    if samples == 0 && child_pid.is_none() && cfg.target != Target::SystemWide && initial.is_empty()
    {
        bail!("nothing was recorded");
    }
    Ok(Summary {
        samples,
        lost,
        duration: started.elapsed(),
        bytes,
        path: cfg.output.clone(),
        exit_status,
    })
}
