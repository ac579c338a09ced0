//! What to record: the command line's choices as the session, the events' attrs and the
//! capture take them.

use std::path::PathBuf;
use std::time::Duration;

/// What to record.
#[derive(Debug, Clone)]
pub struct Config {
    pub output: PathBuf,
    /// Sample on-CPU stacks (cpu-clock).
    pub sampling: bool,
    pub frequency: u64,
    /// Only what happens on these CPUs (None: every CPU).
    pub cpus: Option<Vec<u32>>,
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
    /// Count page-cache use per process each second (cachestat).
    pub cache: bool,
    /// Record TCP connections, retransmits, resets and drops.
    pub net: bool,
    /// With `net`: skbs of each socket followed to the device a second (0: all).
    pub net_send_rate: u64,
    /// Skbs followed a second on the whole machine at most (see bpf::Options::net_send_cap).
    pub net_send_cap: u64,
    /// Time send calls by the kernel's TX timestamping (bpf::Options::net_send_calls).
    pub net_send_calls: bool,
    /// `--follow write:1/N` or `write:R/s`.
    pub follow_write: bpf::FollowRate,
    /// `--follow send:1/N` or `send:R/s`.
    pub follow_send: bpf::FollowRate,
    /// Record major page faults, timed.
    pub faults: bool,
    /// DWARF mode: bytes of user stack copied per sample (0: frame pointers).
    pub stack_copy_bytes: u32,
    /// DWARF mode: unwind in the kernel where the tables are built (record/src/unwinding).
    pub unwind_in_kernel: bool,
    /// Read the Python frames of CPython processes.
    pub python: bool,
    /// Count on-CPU samples in the kernel and write them per stack, with their count as the
    /// period.
    pub aggregate: bool,
    /// With `aggregate`: the power-of-two histogram of this field of the traced events (or
    /// `latency`), counted in the kernel per bucket.
    pub hist: Option<String>,
    /// With `aggregate`: write the counts this often (None: at the end only).
    pub interval: Option<Duration>,
    /// Size of the BPF ring buffer in 4 KiB pages (None: sized from the rate).
    pub ring_pages: Option<u64>,
    /// Print phase timings.
    pub verbose: bool,
    /// Show a status line while recording (on a terminal only).
    pub status_line: bool,
    /// Stop recording after this long (the workload, if any, keeps running).
    pub duration: Option<Duration>,
    /// zstd level of `-z` (None: records written as they are).
    pub compression_level: Option<i32>,
    /// Any events: tracepoints, probes, latency pairs.
    pub trace: crate::tracing::Request,
    /// Rotate the output (`--switch-output`): a series of files, each whole.
    pub switch_output: Option<crate::output::rotation::Options>,
    /// Have every JVM recorded write its perf map ([`crate::runtimes::jvm`]).
    pub jvm_perfmap: bool,
}

impl Config {
    /// Whether any calls are followed through the layers (`--follow`).
    pub fn follows_requests(&self) -> bool {
        self.follow_write.on() || self.follow_send.on()
    }
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
