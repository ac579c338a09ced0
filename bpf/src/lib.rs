//! BPF programs that capture what bpfperf records, and a safe API over them.
//!
//! The programs live in `src/bpf/*.bpf.c` and share their event layouts through
//! `src/bpf/bpfperf.h`; build.rs compiles them into libbpf-rs skeletons (CO-RE, against the
//! checked-in `vmlinux.h`). BPF only captures ids, times and stacks; nothing here knows
//! perf.data.
//!
//! Order of use: [`Profiler::start`] (open, configure, load, attach), [`Profiler::track`] the
//! processes to follow, [`Profiler::poll`] until done, [`Profiler::drops`] for what was lost.
//!
//! ```no_run
//! use std::time::Duration;
//! # fn main() -> Result<(), bpf::Error> {
//! let profiler = bpf::Profiler::start(&bpf::Options::default())?; // needs root and BTF
//! profiler.track(1234)?; // a tgid: its threads, and the children it forks from now on
//! loop {
//!     profiler.poll(Duration::from_millis(50), |event| match event {
//!         bpf::Event::OnCpu(s) => println!("{} {}: {} user frames", s.time, s.tid, s.user_stack.len()),
//!         bpf::Event::Exit { pid, .. } if pid == 1234 => std::process::exit(0),
//!         _ => {}
//!     })?;
//! }
//! # }
//! ```
//!
//! Records are submitted without waking the reader until a quarter of the ring buffer is
//! full, so events arrive in batches: poll with a timeout (tens of milliseconds), and after
//! the workload ends poll once more to drain the rest.

mod error;
mod events;
pub mod perf_event;

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd};
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};

pub use error::Error;
pub use events::{
    BlockIoRequest, CacheCounts, Event, OffCpuInterval, OnCpuSample, UserRegs, Wakeup, USER_REGS,
};

/// Most bytes of user stack a sample can copy (bpfperf.h's MAX_STACK_COPY).
pub const MAX_STACK_COPY: u32 = skel::types::bpfperf_limits::BPFPERF_STACK_COPY.0;
/// Most bytes of user stack kept per blocked thread (bpfperf.h's MAX_OFFCPU_COPY).
pub const MAX_OFFCPU_COPY: u32 = skel::types::bpfperf_limits::BPFPERF_OFFCPU_COPY.0;
/// Most frames of a kernel or user stack (bpfperf.h's MAX_STACK_DEPTH).
pub const MAX_STACK_DEPTH: u32 = skel::types::bpfperf_limits::BPFPERF_STACK_DEPTH.0;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/profile.skel.rs"));
}
use skel::{ProfileSkel, ProfileSkelBuilder};

/// What to capture.
#[derive(Debug, Clone)]
pub struct Options {
    /// Sample on-CPU stacks with cpu-clock.
    pub sampling: bool,
    /// cpu-clock samples per second per CPU.
    pub frequency: u64,
    /// Sample on these CPUs only (None: every online CPU).
    pub cpus: Option<Vec<u32>>,
    /// Sample every process, not only the tracked ones.
    pub system_wide: bool,
    /// Report off-CPU intervals of the tracked threads longer than this (None: off).
    pub off_cpu_min_ns: Option<u64>,
    /// With off-CPU intervals: who woke each thread (sched_waking), and from where.
    pub wakeups: bool,
    /// Report every block I/O request.
    pub block_io: bool,
    /// Count each tracked process's page-cache use (cachestat).
    pub cache: bool,
    /// DWARF mode: copy up to this many bytes of user stack per sample (0: frame pointers).
    pub stack_copy_bytes: u32,
    /// Ring buffer size in bytes, rounded up to a power of two pages (None: about half a
    /// second of samples from every CPU, 1 to 64 MiB).
    pub ring_bytes: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sampling: true,
            frequency: 999,
            cpus: None,
            system_wide: false,
            off_cpu_min_ns: Some(1000),
            wakeups: true,
            block_io: true,
            cache: true,
            stack_copy_bytes: 0,
            ring_bytes: None,
        }
    }
}

/// The most events [`Profiler::poll`] takes from the ring at once: about 14 MB of DWARF
/// samples (3.5 KB each), a few ms of a storm.
pub const POLL_BATCH: usize = 4096;

/// Loaded and attached BPF programs; dropping it detaches and frees them.
pub struct Profiler {
    // Fields drop in this order: the ring buffer and links before the skeleton.
    /// Built once: mapping the ring buffer costs a page-table entry per page.
    ring: libbpf_rs::RingBuffer<'static>,
    /// Decoded events the ring buffer callback queued for [`Profiler::poll`].
    queue: Rc<RefCell<Vec<Event>>>,
    _links: Vec<libbpf_rs::Link>,
    loaded: Loaded,
    ring_bytes: u64,
    /// Held while programs' run time is counted (see [`Profiler::count_run_time`]).
    run_stats: Option<std::os::fd::OwnedFd>,
}

/// How often a program ran and for how long, in total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramRunTime {
    pub name: &'static str,
    pub runs: u64,
    pub run_time_ns: u64,
}

/// The skeleton and the object storage it borrows, on the heap so that neither moves; freed
/// skeleton first. (A skeleton borrows its `OpenObject` for its whole life: owning both in
/// one struct needs these raw pointers.)
struct Loaded {
    /// Null until the programs are loaded.
    skel: *mut ProfileSkel<'static>,
    object: *mut MaybeUninit<libbpf_rs::OpenObject>,
}

impl Loaded {
    fn new() -> Loaded {
        Loaded {
            skel: std::ptr::null_mut(),
            object: Box::into_raw(Box::new(MaybeUninit::uninit())),
        }
    }

    /// The storage for the skeleton to open into.
    ///
    /// # Safety
    /// Call once; whatever borrows it must be dropped before `self` or moved into
    /// `self.skel`.
    unsafe fn storage(&mut self) -> &'static mut MaybeUninit<libbpf_rs::OpenObject> {
        // SAFETY: allocated in new(), freed only in drop(), borrowed once (caller's duty).
        unsafe { &mut *self.object }
    }

    fn skel(&self) -> &ProfileSkel<'static> {
        assert!(!self.skel.is_null(), "programs not loaded");
        // SAFETY: set from Box::into_raw once loaded, freed only in drop().
        unsafe { &*self.skel }
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // SAFETY: both pointers come from Box::into_raw and are freed once, here; the
        // skeleton borrows the object, so it goes first.
        unsafe {
            if !self.skel.is_null() {
                drop(Box::from_raw(self.skel));
            }
            drop(Box::from_raw(self.object));
        }
    }
}

/// Ring buffer size for a sampling rate: about half a second of samples from every CPU (stack
/// copies counted at half their cap), as a power of two between 8 and 64 MiB. At least 8 MiB
/// for the other events' bursts: off-CPU, waker and block I/O events reserve 2 KB each, and
/// a program faulting in a file page by page sends ~30 MB/s of them (4 MiB lost some).
fn ring_bytes(frequency: u64, cpus: u64, stack_copy_bytes: u32) -> u64 {
    let per_sample =
        std::mem::size_of::<skel::types::sample_event>() as u64 + stack_copy_bytes as u64 / 2;
    let per_second = frequency * cpus * per_sample;
    (per_second / 2)
        .clamp(8 << 20, 64 << 20)
        .next_power_of_two()
}

/// libbpf's own log stays quiet, so that a failure is the one line of [`Error`]; with
/// `BPFPERF_DEBUG` set in the environment it goes to stderr (verifier logs included).
fn route_libbpf_log() {
    fn to_stderr(_: libbpf_rs::PrintLevel, msg: String) {
        eprint!("libbpf: {msg}");
    }
    if std::env::var_os("BPFPERF_DEBUG").is_some() {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, to_stderr)));
    } else {
        libbpf_rs::set_print(None);
    }
}

impl Profiler {
    /// Opens, configures, loads and attaches the programs; sampling starts at once.
    pub fn start(options: &Options) -> Result<Profiler, Error> {
        route_libbpf_log();
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return Err(Error::NoBtf);
        }
        let cpus = perf_event::online_cpus()?;
        let ring = match options.ring_bytes {
            Some(bytes) => bytes.clamp(4096, 1 << 30).next_power_of_two(),
            None => ring_bytes(
                options.frequency,
                cpus.len() as u64,
                options.stack_copy_bytes,
            ),
        };
        let mut loaded = Loaded::new();
        // SAFETY: called once; `open` is consumed by load() below, whose skeleton moves into
        // `loaded`, and on an early return `open` drops before `loaded` (declared later).
        let storage = unsafe { loaded.storage() };
        let mut open = ProfileSkelBuilder::default()
            .open(storage)
            .map_err(Error::bpf("open BPF object"))?;
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .expect("rodata is mapped");
        rodata.system_wide = options.system_wide;
        rodata.wakeup_bytes = ring / 4;
        rodata.offcpu_enabled = options.off_cpu_min_ns.is_some();
        rodata.offcpu_min_ns = options.off_cpu_min_ns.unwrap_or(0);
        rodata.io_enabled = options.block_io;
        rodata.cache_enabled = options.cache;
        let wakeups = options.off_cpu_min_ns.is_some() && options.wakeups;
        rodata.wakeup_enabled = wakeups;
        rodata.stack_copy_bytes = options.stack_copy_bytes.min(MAX_STACK_COPY);
        open.progs
            .on_switch
            .set_autoload(options.off_cpu_min_ns.is_some());
        // sched_waking also starts the run-queue part of an off-CPU interval.
        open.progs
            .on_waking
            .set_autoload(options.off_cpu_min_ns.is_some());
        for prog in [
            &mut open.progs.on_cache_read,
            &mut open.progs.on_cache_fault,
            &mut open.progs.on_cache_add,
        ] {
            prog.set_autoload(options.cache);
        }
        // Dirtied pages count for cachestat and name the dirtier of their writeback.
        let dirty = options.cache || options.block_io;
        open.progs.on_cache_dirty.set_autoload(dirty);
        open.progs.on_block_issue.set_autoload(options.block_io);
        open.progs.on_block_complete.set_autoload(options.block_io);
        let cpu_slots = cpus.iter().max().map_or(1, |m| m + 1);
        open.maps
            .sample_scratch
            .set_max_entries(if options.stack_copy_bytes > 0 {
                cpu_slots
            } else {
                1
            })
            .map_err(Error::bpf("size stack copy buffers"))?;
        open.maps
            .offcpu_copy_scratch
            .set_max_entries(if options.stack_copy_bytes > 0 {
                cpu_slots
            } else {
                1
            })
            .map_err(Error::bpf("size off-CPU stack copy buffers"))?;
        open.maps
            .events
            .set_max_entries(ring as u32)
            .map_err(Error::bpf("size ring buffer"))?;
        // profiler's whole life, and a process runs one profiler.
        let skel = open.load().map_err(Error::bpf("load BPF programs"))?;
        loaded.skel = Box::into_raw(Box::new(skel));
        let skel = loaded.skel();
        let mut links = Vec::new();
        links.push(
            skel.progs
                .on_fork
                .attach()
                .map_err(Error::bpf("attach sched_process_fork"))?,
        );
        links.push(
            skel.progs
                .on_exit
                .attach()
                .map_err(Error::bpf("attach sched_process_exit"))?,
        );
        if options.off_cpu_min_ns.is_some() {
            let link = skel.progs.on_switch.attach();
            links.push(link.map_err(Error::bpf("attach sched_switch"))?);
        }
        if options.off_cpu_min_ns.is_some() {
            let link = skel.progs.on_waking.attach();
            links.push(link.map_err(Error::bpf("attach sched_waking"))?);
        }
        if options.block_io {
            let issue = skel.progs.on_block_issue.attach();
            links.push(issue.map_err(Error::bpf("attach block_rq_issue"))?);
            let complete = skel.progs.on_block_complete.attach();
            links.push(complete.map_err(Error::bpf("attach block_rq_complete"))?);
        }
        if options.cache {
            let progs = &skel.progs;
            for (what, prog) in [
                ("attach mm_filemap_get_pages", &progs.on_cache_read),
                ("attach mm_filemap_fault", &progs.on_cache_fault),
                ("attach mm_filemap_add_to_page_cache", &progs.on_cache_add),
            ] {
                links.push(prog.attach().map_err(Error::bpf(what))?);
            }
        }
        if dirty {
            let link = skel.progs.on_cache_dirty.attach();
            links.push(link.map_err(Error::bpf("attach writeback_dirty_folio"))?);
        }
        let sampled = cpus
            .into_iter()
            .filter(|c| options.sampling && options.cpus.as_ref().is_none_or(|l| l.contains(c)));
        for cpu in sampled {
            let fd = perf_event::open_cpu_clock(cpu, options.frequency)?;
            links.push(
                skel.progs
                    .on_cpu_sample
                    .attach_perf_event(fd.as_raw_fd())
                    .map_err(Error::bpf("attach to cpu-clock"))?,
            );
            // The link owns the event now and closes it when detached.
            let _ = fd.into_raw_fd();
        }
        let queue = Rc::new(RefCell::new(Vec::new()));
        let sink = queue.clone();
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&skel.maps.events, move |data: &[u8]| {
                if let Some(e) = Event::decode(data) {
                    sink.borrow_mut().push(e);
                }
                0
            })
            .map_err(Error::bpf("ring buffer"))?;
        let ring_buffer = builder.build().map_err(Error::bpf("ring buffer"))?;
        Ok(Profiler {
            ring: ring_buffer,
            queue,
            _links: links,
            loaded,
            ring_bytes: ring,
            run_stats: None,
        })
    }

    /// Off-CPU intervals from now on tell whether the thread blocked inside a page fault:
    /// whether `start..end` (`handle_mm_fault`, from kallsyms) is on its kernel stack.
    pub fn look_for_faults(&self, start: u64, end: u64) {
        if let Some(bss) = self.loaded.skel().maps.bss_data.as_deref() {
            // The programs read these as they run: end first, so that they never see a
            // start without its end.
            let bss = bss as *const skel::types::bss as *mut skel::types::bss;
            // SAFETY: the .bss map is mapped writable for the skeleton's life; single
            // aligned u64 stores, read by the programs only.
            unsafe {
                std::ptr::write_volatile(&mut (*bss).fault_fn_end, end);
                std::ptr::write_volatile(&mut (*bss).fault_fn_start, start);
            }
        }
    }

    /// Each process's page-cache counts since the last call (and the counters restart):
    /// (tgid, accesses, added, dirtied), processes with nothing counted left out.
    pub fn take_cache_counts(&self) -> Vec<CacheCounts> {
        let map = &self.loaded.skel().maps.cache_counts;
        let keys: Vec<Vec<u8>> = map.keys().collect();
        let mut out = Vec::new();
        for key in keys {
            // Taken and deleted at once: counts added meanwhile go to a fresh entry.
            let Ok(Some(value)) = map.lookup_and_delete(&key) else {
                continue;
            };
            let mut c = skel::types::cache_counts::default();
            if plain::copy_from_bytes(&mut c, &value).is_err() {
                continue;
            }
            let Ok(pid) = key[..].try_into().map(u32::from_ne_bytes) else {
                continue;
            };
            if c.accesses + c.added + c.dirtied > 0 {
                out.push(CacheCounts {
                    pid,
                    accesses: c.accesses,
                    added: c.added,
                    dirtied: c.dirtied,
                });
            }
        }
        out.sort_by_key(|c| c.pid);
        out
    }

    /// Follows process `pid` (its threads, and the children it forks from now on).
    pub fn track(&self, pid: u32) -> Result<(), Error> {
        self.loaded
            .skel()
            .maps
            .pids
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(Error::bpf("track pid"))
    }

    /// Waits up to `timeout` for events and hands each to `handle`, at most [`POLL_BATCH`] of
    /// them; returns how many. A signal that interrupts the wait (Ctrl-C) ends it early,
    /// without an error.
    ///
    /// The wait does not consume (libbpf's poll drains the ring for as long as it keeps
    /// filling, which under a storm, with the reader short of CPU, held hundreds of MB of
    /// events at once): the caller writes each batch before it takes the next.
    pub fn poll(&self, timeout: Duration, mut handle: impl FnMut(Event)) -> Result<usize, Error> {
        let mut ready = libc::epoll_event { events: 0, u64: 0 };
        let timeout_ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one event's room, as the count says; an error (EINTR) only ends the wait.
        unsafe { libc::epoll_wait(self.ring.epoll_fd(), &mut ready, 1, timeout_ms) };
        let consumed = self.ring.consume_raw_n(POLL_BATCH);
        if consumed < 0 {
            let e = std::io::Error::from_raw_os_error(-consumed);
            return Err(Error::bpf("consume ring buffer")(e.into()));
        }
        let events = std::mem::take(&mut *self.queue.borrow_mut());
        let n = events.len();
        events.into_iter().for_each(&mut handle);
        Ok(n)
    }

    /// Events lost so far, of every kind that makes a record of the file: the ring buffer was
    /// full (or, for off-CPU and block I/O, the map that keeps their start). Wakers, which only
    /// annotate off-CPU intervals, are counted apart ([`Profiler::missed_wakers`]).
    pub fn drops(&self) -> u64 {
        (0..events::EVENT_KINDS)
            .filter(|&kind| kind != events::EVENT_WAKEUP)
            .map(|kind| self.sum_per_cpu(&self.loaded.skel().maps.drops, kind))
            .sum()
    }

    /// Off-CPU intervals whose waker was seen but could not be kept or sent: the interval is
    /// recorded, without its waker.
    pub fn missed_wakers(&self) -> u64 {
        self.sum_per_cpu(&self.loaded.skel().maps.drops, events::EVENT_WAKEUP)
    }

    /// Drops so far by event kind (on-CPU, off-CPU, block I/O, dirtiers, wakers), for
    /// diagnostics.
    pub fn drops_by_kind(&self) -> [(&'static str, u64); 5] {
        let of = |kind| self.sum_per_cpu(&self.loaded.skel().maps.drops, kind);
        [
            ("on-CPU samples", of(events::EVENT_ON_CPU)),
            (
                "off-CPU intervals",
                of(events::EVENT_OFF_CPU) + of(events::EVENT_OFF_CPU_COPY),
            ),
            ("block I/O requests", of(events::EVENT_BLOCK_IO)),
            (
                "write bursts (dirtiers)",
                of(events::EVENT_DIRTY) + of(events::EVENT_DIRTY_COPY),
            ),
            ("wakers", of(events::EVENT_WAKEUP)),
        ]
    }

    /// On-CPU samples lost so far (part of [`Profiler::drops`]).
    pub fn dropped_samples(&self) -> u64 {
        self.sum_per_cpu(&self.loaded.skel().maps.drops, events::EVENT_ON_CPU)
    }

    /// On-CPU samples taken of the followed tasks so far: each one is either delivered by
    /// [`Profiler::poll`] or counted in [`Profiler::dropped_samples`].
    pub fn samples_taken(&self) -> u64 {
        self.sum_per_cpu(&self.loaded.skel().maps.taken, 0)
    }

    /// The sum over CPUs of a per-CPU array's u64 at `key` (0 if it cannot be read).
    fn sum_per_cpu(&self, map: &impl MapCore, key: u32) -> u64 {
        let Ok(Some(per_cpu)) = map.lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY) else {
            return 0;
        };
        per_cpu
            .iter()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap_or([0; 8])))
            .sum()
    }

    /// Starts counting how often each program runs and for how long (the kernel's
    /// BPF_STATS_RUN_TIME, for as long as the profiler lives): the cost of recording, measured
    /// where it is paid. Costs two clock reads per run while on.
    pub fn count_run_time(&mut self) -> Result<(), Error> {
        // SAFETY: plain syscall wrapper; a non-negative result is a descriptor we now own.
        let fd = unsafe {
            libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
        };
        if fd < 0 {
            return Err(Error::Bpf {
                step: "enable BPF run-time statistics",
                source: libbpf_rs::Error::from(std::io::Error::from_raw_os_error(-fd)),
            });
        }
        // SAFETY: fd is a fresh descriptor returned to us.
        self.run_stats = Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
        Ok(())
    }

    /// Each loaded program's runs and total run time (ns) since [`Profiler::count_run_time`].
    pub fn run_time(&self) -> Vec<ProgramRunTime> {
        let progs = &self.loaded.skel().progs;
        let all = [
            ("on_cpu_sample", &progs.on_cpu_sample),
            ("on_switch", &progs.on_switch),
            ("on_waking", &progs.on_waking),
            ("on_block_issue", &progs.on_block_issue),
            ("on_block_complete", &progs.on_block_complete),
            ("on_cache_read", &progs.on_cache_read),
            ("on_cache_fault", &progs.on_cache_fault),
            ("on_cache_add", &progs.on_cache_add),
            ("on_cache_dirty", &progs.on_cache_dirty),
            ("on_fork", &progs.on_fork),
            ("on_exit", &progs.on_exit),
        ];
        all.into_iter()
            // A program left unloaded has no descriptor to ask.
            .filter(|(_, prog)| prog.autoload())
            .map(|(name, prog)| (name, prog.as_fd()))
            .filter_map(|(name, fd)| {
                let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
                let mut len = std::mem::size_of_val(&info) as u32;
                // SAFETY: info is a valid out buffer of `len` bytes.
                let r = unsafe {
                    libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                        fd.as_raw_fd(),
                        &mut info,
                        &mut len,
                    )
                };
                (r == 0).then_some(ProgramRunTime {
                    name,
                    runs: info.run_cnt,
                    run_time_ns: info.run_time_ns,
                })
            })
            .collect()
    }

    /// Size of the ring buffer in bytes.
    pub fn ring_bytes(&self) -> u64 {
        self.ring_bytes
    }
}
