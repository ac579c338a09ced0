//! BPF programs that capture what bpfperf records, and a safe API over them.
//!
//! The programs live in `src/bpf/`, one file per concern (follow, sampling, offcpu, blockio,
//! cache), sharing their event layouts through `bpfperf.h` and their maps and settings
//! through `common.bpf.h`; build.rs compiles each (CO-RE, against the checked-in
//! `vmlinux.h`), links them into one object and generates its libbpf-rs skeleton. The loader
//! is split the same way ([`programs`]). BPF only captures ids, times and stacks; nothing
//! here knows perf.data.
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
mod jited;
mod loaded;
mod netsend;
pub mod perf_event;
mod programs;
pub mod trace;

use std::cell::RefCell;

use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};

pub use error::Error;
pub use events::{
    AggregatedEvents, AggregatedSamples, BlockIoRequest, CacheCounts, Event, NetEvent, NetWhat,
    OffCpuInterval, OnCpuSample, PyFrame, RequestStep, UserRegs, Wakeup, USER_REGS,
};
pub use jited::{loaded_programs, JitedFunction, LoadedProgram};
pub use programs::net::tx_timestamping;
pub use programs::python::PyOffsets;
pub use programs::unwind::{
    Cfa, Mapping as UnwindMapping, Row as UnwindRow, Table as UnwindTable, Tables as UnwindTables,
    MAPPINGS as UNWIND_MAPPINGS,
};
pub use trace::{TraceEvent, TraceHist, TraceRecord};

/// Most bytes of user stack a sample can copy (bpfperf.h's MAX_STACK_COPY).
pub const MAX_STACK_COPY: u32 = skel::types::bpfperf_limits::BPFPERF_STACK_COPY.0;
/// Most bytes of user stack kept per blocked thread (bpfperf.h's MAX_OFFCPU_COPY).
pub const MAX_OFFCPU_COPY: u32 = skel::types::bpfperf_limits::BPFPERF_OFFCPU_COPY.0;
/// Most frames of a kernel or user stack (bpfperf.h's MAX_STACK_DEPTH).
pub const MAX_STACK_DEPTH: u32 = skel::types::bpfperf_limits::BPFPERF_STACK_DEPTH.0;
/// The most bytes of a Python frame python.bpf.h reads at once (`PY_FRAME_SPAN`).
pub const PY_FRAME_SPAN: u16 = skel::types::bpfperf_limits::BPFPERF_PY_FRAME_SPAN.0 as u16;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/bpfperf.skel.rs"));
}
use loaded::Loaded;
use programs::halves::Half;
use skel::{BpfperfSkelBuilder, OpenBpfperfSkel};

/// What to capture.
#[derive(Debug, Clone)]
pub struct Options {
    /// Sample on-CPU stacks with cpu-clock.
    pub sampling: bool,
    /// cpu-clock samples per second per CPU.
    pub frequency: u64,
    /// Sample on these CPUs only (None: every online CPU).
    pub cpus: Option<Vec<u32>>,
    /// Sample every process, not only the tracked ones (the process that loads the programs
    /// is never recorded, system-wide or not).
    pub system_wide: bool,
    /// Report off-CPU intervals of the tracked threads longer than this (None: off).
    pub off_cpu_min_ns: Option<u64>,
    /// With off-CPU intervals: who woke each thread (sched_waking), and from where.
    pub wakeups: bool,
    /// Report every major page fault of the tracked threads with its stacks and duration
    /// ([`Event::Fault`]), whether or not it slept.
    pub faults: bool,
    /// Report every block I/O request.
    pub block_io: bool,
    /// Count each tracked process's page-cache use (cachestat).
    pub cache: bool,
    /// Report TCP connections (at close), retransmits, resets and drops ([`Event::Net`]).
    pub net: bool,
    /// With [`Options::net`]: skbs of each socket followed to the device a second, each
    /// standing for those skipped before it ([`NetEvent::skbs`]); 0: every one.
    pub net_send_rate: u64,
    /// With a [`Options::net_send_rate`]: skbs followed a second on the whole machine at
    /// most (each CPU its share), past which they are skipped as the rate's are; 0: no cap.
    pub net_send_cap: u64,
    /// With [`Options::net`]: time send calls with the kernel's TX timestamping (one skb per
    /// followed call, the one holding its last byte, into the qdisc and to the driver; the
    /// rate and cap count calls) instead of following every skb through four tracepoints.
    /// Only connections set up while recording; needs [`tx_timestamping`].
    pub net_send_calls: bool,
    /// DWARF mode: copy up to this many bytes of user stack per sample (0: frame pointers).
    pub stack_copy_bytes: u32,
    /// DWARF mode: unwind user stacks in the kernel where [`Profiler::unwind_tables`] has
    /// tables for the process; copy them where not.
    pub unwind_in_kernel: bool,
    /// Count on-CPU samples in the kernel per thread and stacks instead of sending each
    /// ([`Profiler::take_aggregated`]); DWARF mode sends those it could not unwind.
    pub aggregate: bool,
    /// Count traced events ([`Options::trace`]) in the kernel per event, thread, stacks and
    /// histogram bucket instead of sending each ([`Profiler::take_aggregated_events`]).
    pub trace_aggregate: bool,
    /// Entries of each aggregation map (None: bpfperf.h's AGG_COUNTS and AGG_STACKS); tests
    /// make them tiny to see what does not fit.
    pub aggregate_entries: Option<u32>,
    /// Block requests in flight that the preallocated map holds (None: bpfperf.h's
    /// MAX_IO_PREALLOC); tests make it tiny to see the rest go to the map allocated as they
    /// come.
    pub io_prealloc: Option<u32>,
    /// With [`Options::net`] following skbs: about one skb of new data in this many passes
    /// the driver as if the kernel ran none of the programs, never two in a row (0: none
    /// does); tests check that such skbs are counted lost.
    pub net_unseen_every: u32,
    /// With off-CPU time: about one switch back onto a CPU in this many runs no program, as
    /// on hosts that hide some switches from tracing (0: none); tests check that the
    /// intervals they end are still recorded.
    pub offcpu_unseen_every: u32,
    /// With block I/O or followed writes: about one request's completion in this many runs
    /// no program, as interrupts on some hosts do (0: none); tests check that such requests
    /// are counted.
    pub io_unseen_every: u32,
    /// Ring buffer size in bytes, rounded up to a power of two pages (None: about half a
    /// second of samples from every CPU, 1 to 64 MiB).
    pub ring_bytes: Option<u64>,
    /// Which write calls (write, pwrite, writev on a file) of the tracked processes are
    /// followed through the page cache and the block layer ([`Event::Request`]).
    pub follow_write: FollowRate,
    /// Which send calls (sendto, sendmsg; write on a socket) are followed through TCP, the
    /// qdisc, the driver and the device.
    pub follow_send: FollowRate,
    /// Any events to attach (tracepoints, probes): their records come as [`Event::Trace`],
    /// naming the event by its index here.
    pub trace: Vec<TraceEvent>,
}

/// How many calls of a kind `--follow` chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FollowRate {
    /// None.
    #[default]
    Off,
    /// 1 in N, at random.
    OneIn(u32),
    /// The first call at least 1/R s after the last one chosen: R a second at most.
    PerSecond(u32),
}

impl FollowRate {
    /// Whether any calls are chosen.
    pub fn on(self) -> bool {
        !matches!(
            self,
            FollowRate::Off | FollowRate::OneIn(0) | FollowRate::PerSecond(0)
        )
    }
}

/// Events lost so far by what they were (see [`Profiler::drops_by_event`]); their
/// [`Drops::total`] is [`Profiler::drops`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Drops {
    pub on_cpu: u64,
    /// Off-CPU intervals (with their run-queue and page-fault parts).
    pub off_cpu: u64,
    /// Block requests, and write bursts: the write() stacks that writeback is charged to.
    pub block_io: u64,
    /// Any events' records ([`Options::trace`]).
    pub traced: u64,
    pub net: u64,
    /// Process exits (record learns of them from the side-band too).
    pub exits: u64,
    /// Major page faults.
    pub faults: u64,
    /// Records of sampled requests ([`Event::Request`]).
    pub requests: u64,
}

impl Drops {
    pub fn total(&self) -> u64 {
        self.on_cpu
            + self.off_cpu
            + self.block_io
            + self.traced
            + self.net
            + self.exits
            + self.faults
            + self.requests
    }
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
            faults: false,
            block_io: true,
            cache: true,
            net: false,
            net_send_rate: 1000,
            net_send_cap: 10_000,
            net_send_calls: false,
            stack_copy_bytes: 0,
            unwind_in_kernel: true,
            aggregate: false,
            trace_aggregate: false,
            aggregate_entries: None,
            io_prealloc: None,
            net_unseen_every: 0,
            offcpu_unseen_every: 0,
            io_unseen_every: 0,
            ring_bytes: None,
            follow_write: FollowRate::Off,
            follow_send: FollowRate::Off,
            trace: Vec::new(),
        }
    }
}

/// The most events [`Profiler::poll`] takes from the ring at once: about 14 MB of DWARF
/// samples (3.5 KB each), a few ms of a storm.
pub const POLL_BATCH: usize = 4096;

/// An open skeleton handed to the thread that loads it (loading is its only use there, and
/// nothing else touches it meanwhile).
struct Unshared<T>(T);
// SAFETY: the open object is libbpf's alone to use during load, and only that thread does.
unsafe impl<T> Send for Unshared<T> {}

/// Loaded and attached BPF programs; dropping it detaches and frees them.
pub struct Profiler {
    // Links are detached first (Drop), then the fields drop in this order: the ring buffer
    // before the skeleton.
    /// Built once: mapping the ring buffer costs a page-table entry per page.
    ring: libbpf_rs::RingBuffer<'static>,
    /// Decoded events the ring buffer callback queued for [`Profiler::poll`].
    queue: Rc<RefCell<Vec<Event>>>,
    /// Detached side by side when the profiler drops ([`programs::detach`]).
    links: Vec<libbpf_rs::Link>,
    /// The programs of the first half and every map ([`programs::halves`]).
    loaded: Loaded,
    /// The programs of the second half, where any loads.
    second: Loaded,
    ring_bytes: u64,
    /// Held while programs' run time is counted (see [`Profiler::count_run_time`]).
    run_stats: Option<std::os::fd::OwnedFd>,
    /// The page-cache counts of the last take (see [`Profiler::take_cache_counts`]).
    cache_taken: RefCell<programs::cache::Taken>,
    /// The pair of aggregation maps the programs fill (see [`Profiler::take_aggregated`]).
    agg_slot: std::cell::Cell<u32>,
    /// The same for traced events (see [`Profiler::take_aggregated_events`]).
    trace_agg_slot: std::cell::Cell<u32>,
}

/// How often a program ran and for how long, in total (counted while the kernel's BPF
/// statistics are on), and how often the kernel skipped it (always counted): a program
/// already running on that CPU, interrupted by what fires it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramRunTime {
    pub name: &'static str,
    pub runs: u64,
    pub run_time_ns: u64,
    pub missed: u64,
}

/// Ring buffer size for a sampling rate: about half a second of samples from every CPU, as a
/// power of two between 8 and 64 MiB. A DWARF-mode sample's stack copy counts at half its cap,
/// or at an eighth where stacks are unwound in the kernel: copies are then taken only until a
/// process's tables are in (its first tens of milliseconds), and the rest of its samples carry
/// frames. At least 8 MiB for the other events' bursts: off-CPU, waker and block I/O events
/// reserve 2 KB each, and a program faulting in a file page by page sends ~30 MB/s of them
/// (4 MiB lost some). The ring's pages are mapped twice into record (a record may wrap), so
/// its size counts twice in record's memory.
fn ring_bytes(frequency: u64, cpus: u64, stack_copy_bytes: u32, unwind_in_kernel: bool) -> u64 {
    let copy_share = if unwind_in_kernel { 8 } else { 2 };
    let per_sample = std::mem::size_of::<skel::types::sample_event>() as u64
        + stack_copy_bytes as u64 / copy_share;
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

impl Drop for Profiler {
    fn drop(&mut self) {
        programs::detach(std::mem::take(&mut self.links));
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
                options.unwind_in_kernel,
            ),
        };
        let cpu_slots = cpus.iter().max().map_or(1, |m| m + 1);
        // Both objects opened alike: the same programs chosen, the same map sizes (a map is
        // reused only where its definition matches), the same read-only settings.
        let configured = |storage| -> Result<OpenBpfperfSkel<'static>, Error> {
            let mut open = BpfperfSkelBuilder::default()
                .open(storage)
                .map_err(Error::bpf("open BPF object"))?;
            programs::configure(&mut open, options, cpu_slots)?;
            programs::set_wakeup_bytes(&mut open, ring / 4);
            open.maps
                .events
                .set_max_entries(ring as u32)
                .map_err(Error::bpf("size ring buffer"))?;
            if std::env::var_os("BPFPERF_DEBUG").is_some_and(|v| v == "verifier") {
                // The verifier's statistics of each program (time, instructions processed).
                use libbpf_rs::skel::OpenSkel;
                for mut prog in open.open_object_mut().progs_mut() {
                    prog.set_log_level(4);
                }
            }
            Ok(open)
        };
        let mut loaded = Loaded::new();
        let mut second = Loaded::new();
        // SAFETY: called once each; each open skeleton is consumed by load() below, whose
        // skeleton moves into its `Loaded`, and on an early return the open skeletons drop
        // before `loaded` and `second` (declared earlier).
        let (storage, second_storage) = unsafe { (loaded.storage(), second.storage()) };
        let mut open = configured(storage)?;
        let second_half = programs::halves::keep(&mut open, Half::First);
        programs::halves::create_maps(&mut open)?;
        let mut open_second = match second_half {
            true => {
                let mut o = configured(second_storage)?;
                programs::halves::keep(&mut o, Half::Second);
                programs::halves::share_maps(&open, &mut o)?;
                Some(o)
            }
            false => None,
        };
        // The second half verifies on another thread while this one verifies the first.
        let (skel, skel_second) = std::thread::scope(|scope| {
            let other = open_second.take().map(|o| {
                let o = Unshared(o);
                scope.spawn(move || {
                    // The whole wrapper moves in (a closure would capture only its field).
                    let o = o;
                    o.0.load()
                })
            });
            let skel = open.load();
            let second = other.map(|t| t.join().expect("loading does not panic"));
            (skel, second)
        });
        let skel = skel.map_err(Error::bpf("load BPF programs"))?;
        loaded.skel = Box::into_raw(Box::new(skel));
        if let Some(s) = skel_second {
            let s = s.map_err(Error::bpf("load BPF programs"))?;
            second.skel = Box::into_raw(Box::new(s));
        }
        let skel = loaded.skel();
        let links = programs::attach(skel, second.get(), options, &cpus)?;
        let queue = Rc::new(RefCell::new(Vec::new()));
        let sink = queue.clone();
        let mut sends = netsend::Joiner::timing_calls(options.net_send_calls);
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&skel.maps.events, move |data: &[u8]| {
                if let Some(e) = sends.decode(data) {
                    sink.borrow_mut().push(e);
                }
                0
            })
            .map_err(Error::bpf("ring buffer"))?;
        let ring_buffer = builder.build().map_err(Error::bpf("ring buffer"))?;
        Ok(Profiler {
            ring: ring_buffer,
            queue,
            links,
            loaded,
            second,
            ring_bytes: ring,
            run_stats: None,
            cache_taken: RefCell::default(),
            agg_slot: std::cell::Cell::new(0),
            trace_agg_slot: std::cell::Cell::new(0),
        })
    }

    /// Off-CPU intervals from now on tell whether the thread blocked inside a page fault:
    /// whether `start..end` (`handle_mm_fault`, from kallsyms) is on its kernel stack.
    pub fn look_for_faults(&self, start: u64, end: u64) {
        programs::offcpu::look_for_faults(self.loaded.skel(), start, end);
    }

    /// Off-CPU intervals from now on tell whether they blocked inside a socket call, and
    /// the call's return names its peer (with `-e net`): `fns` are the kernel functions such
    /// calls block in (start, end).
    pub fn look_for_socket_waits(&self, fns: &[(u64, u64)]) {
        programs::offcpu::look_for_socket_waits(self.loaded.skel(), fns);
    }

    /// With [`Options::net`]: the skbs each open socket's rate skipped since its last
    /// followed one, sent as events (the recording ends: what is skipped after goes
    /// uncounted).
    pub fn send_tails(&self) -> Result<(), Error> {
        programs::net::send_tails(self.loaded.skel())
    }

    /// Each process's page-cache counts since the last call (and the counters restart):
    /// (tgid, accesses, added, dirtied), processes with nothing counted left out.
    pub fn take_cache_counts(&self) -> Vec<CacheCounts> {
        programs::cache::take_counts(self.loaded.skel(), &mut self.cache_taken.borrow_mut())
    }

    /// The on-CPU samples counted in the kernel since the last call ([`Options::aggregate`]),
    /// and the counters restart. The programs move to the other pair of maps first, and
    /// this waits a few milliseconds for those still counting into the old pair.
    pub fn take_aggregated(&self) -> Result<Vec<AggregatedSamples>, Error> {
        let slot = self.agg_slot.get();
        let taken = programs::sampling::take_aggregated(self.loaded.skel(), slot)?;
        self.agg_slot.set(1 - slot);
        Ok(taken)
    }

    /// The traced events counted in the kernel since the last call
    /// ([`Options::trace_aggregate`]), as [`Profiler::take_aggregated`] takes on-CPU samples.
    pub fn take_aggregated_events(&self) -> Result<Vec<AggregatedEvents>, Error> {
        let slot = self.trace_agg_slot.get();
        let taken = programs::probes::take_aggregated(self.loaded.skel(), slot)?;
        self.trace_agg_slot.set(1 - slot);
        Ok(taken)
    }

    /// Traced events that did not fit in the aggregation maps, sent one by one instead (as
    /// [`Event::Trace`]).
    pub fn missed_event_aggregations(&self) -> u64 {
        self.sum_per_cpu(&self.loaded.skel().maps.trace_agg_missed, 0)
    }

    /// On-CPU samples that did not fit in the aggregation maps, sent one by one instead (as
    /// [`Event::OnCpu`]).
    pub fn missed_aggregations(&self) -> u64 {
        self.sum_per_cpu(&self.loaded.skel().maps.agg_missed, 0)
    }

    /// The tables the kernel unwinds user stacks with (DWARF mode), to fill from another
    /// thread. The handle writes into this profiler's mapped memory: drop it (join the thread
    /// that holds it) before the profiler.
    pub fn unwind_tables(&self) -> Result<UnwindTables, Error> {
        UnwindTables::new(self.loaded.skel())
    }

    /// Reads the Python frames of process `tgid`'s samples from now on: its `_PyRuntime` is
    /// at `runtime`, laid out as `offsets` say.
    pub fn watch_python(&self, tgid: u32, runtime: u64, offsets: &PyOffsets) -> Result<(), Error> {
        programs::python::watch(self.loaded.skel(), tgid, runtime, offsets)
    }

    /// Whether process `tgid` has unwind tables installed.
    pub fn has_unwind_tables(&self, tgid: u32) -> bool {
        programs::unwind::has_process(self.loaded.skel(), tgid)
    }

    /// Follows process `pid` (its threads, and the children it forks from now on).
    pub fn track(&self, pid: u32) -> Result<(), Error> {
        programs::follow::track(self.loaded.skel(), pid)
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
        let mut events = std::mem::take(&mut *self.queue.borrow_mut());
        let n = events.len();
        events.drain(..).for_each(&mut handle);
        // Back, empty but with its room, for the next batch: growing it again each time was
        // a tenth of record's CPU under 40k network events a second.
        let mut queue = self.queue.borrow_mut();
        if queue.is_empty() {
            *queue = events;
        }
        Ok(n)
    }

    /// Events lost so far, of every kind that makes a record of the file: the ring buffer was
    /// full (or, for off-CPU and block I/O, the map that keeps their start). Wakers, which only
    /// annotate off-CPU intervals, are counted apart ([`Profiler::missed_wakers`]).
    pub fn drops(&self) -> u64 {
        self.drops_by_event().total()
    }

    /// Off-CPU intervals not recorded because the kernel ran no sched_switch program when
    /// their thread came back on a CPU, nor showed its wakeup (see offcpu.bpf.c).
    pub fn unseen_off_cpu_ends(&self) -> u64 {
        programs::offcpu::unseen_ends(self.loaded.skel())
    }

    /// Block requests issued and not seen completing, and their bytes (see blockio.bpf.c):
    /// not recorded.
    pub fn unseen_io_completions(&self) -> (u64, u64) {
        programs::blockio::unseen_completions(self.loaded.skel())
    }

    /// Followed calls (`--follow write`) whose block request was issued and not seen
    /// completing: their block_complete step is missing.
    pub fn unseen_followed_completions(&self) -> u64 {
        programs::requests::unseen_completions(self.loaded.skel())
    }

    /// Off-CPU intervals whose waker was seen but could not be kept or sent: the interval is
    /// recorded, without its waker.
    pub fn missed_wakers(&self) -> u64 {
        self.sum_per_cpu(&self.loaded.skel().maps.drops, events::EVENT_WAKEUP)
    }

    /// Drops so far by event kind (on-CPU, off-CPU, block I/O, dirtiers, wakers), for
    /// diagnostics.
    pub fn drops_by_kind(&self) -> [(&'static str, u64); 9] {
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
            ("traced events", of(events::EVENT_TRACE)),
            ("network events", of(events::EVENT_NET)),
            ("major faults", of(events::EVENT_FAULT)),
            ("sampled request records", of(events::EVENT_REQUEST)),
        ]
    }

    /// [`Profiler::drops`] by what was lost, so that each loss can be counted against the
    /// event whose record it would have made.
    pub fn drops_by_event(&self) -> Drops {
        let of = |kind| self.sum_per_cpu(&self.loaded.skel().maps.drops, kind);
        Drops {
            on_cpu: of(events::EVENT_ON_CPU),
            off_cpu: of(events::EVENT_OFF_CPU) + of(events::EVENT_OFF_CPU_COPY),
            block_io: of(events::EVENT_BLOCK_IO)
                + of(events::EVENT_DIRTY)
                + of(events::EVENT_DIRTY_COPY),
            traced: of(events::EVENT_TRACE),
            net: of(events::EVENT_NET),
            exits: of(events::EVENT_EXIT),
            faults: of(events::EVENT_FAULT),
            requests: of(events::EVENT_REQUEST),
        }
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
        let mut all = programs::all(self.loaded.skel());
        all.extend(self.second.get().map(programs::all).unwrap_or_default());
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
                    missed: info.recursion_misses,
                })
            })
            .collect()
    }

    /// Size of the ring buffer in bytes.
    pub fn ring_bytes(&self) -> u64 {
        self.ring_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::ring_bytes;

    #[test]
    fn the_ring_counts_stack_copies_at_an_eighth_where_stacks_are_unwound_in_the_kernel() {
        // The defaults on 2 CPUs: 999 Hz, 32 KiB copies.
        assert_eq!(ring_bytes(999, 2, 32 << 10, true), 8 << 20);
        assert_eq!(ring_bytes(999, 2, 32 << 10, false), 32 << 20);
        // Frame pointers: no copies either way.
        assert_eq!(ring_bytes(999, 2, 0, true), ring_bytes(999, 2, 0, false));
        // Many CPUs still reach the cap.
        assert_eq!(ring_bytes(999, 64, 32 << 10, true), 64 << 20);
    }
}
