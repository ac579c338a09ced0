//! What a recording produced: the counts the summary line prints, the file, the workload's
//! exit status.

use std::path::PathBuf;
use std::time::Duration;

/// What a recording produced.
#[derive(Debug, Clone)]
pub struct Summary {
    pub samples: u64,
    /// With --aggregate: the records the counted samples became.
    pub aggregated: u64,
    pub off_cpu: u64,
    /// Run-queue samples (off-CPU intervals that waited for a CPU).
    pub runq: u64,
    pub io: u64,
    /// Network events (connections, retransmits, resets, drops).
    pub net: u64,
    /// Major page faults (fault-time samples).
    pub faults: u64,
    pub wakeups: u64,
    /// Any events' samples (tracepoints, probes).
    pub traced: u64,
    /// Off-CPU intervals recorded without their waker (it could not be kept).
    pub missed_wakers: u64,
    /// Off-CPU intervals not recorded: the kernel ran no sched_switch program when their
    /// thread came back on a CPU, nor showed its wakeup.
    pub unseen_off_cpu_ends: u64,
    /// Block requests issued and not seen completing, and their bytes: not recorded.
    pub unseen_io: (u64, u64),
    /// Followed calls whose block request was issued and not seen completing.
    pub unseen_followed: u64,
    /// With --aggregate: samples that did not fit in the kernel's maps, written one by one.
    pub missed_aggregations: u64,
    /// With --aggregate of traced events: the records they became.
    pub traced_records: Option<u64>,
    /// With --aggregate: traced events that did not fit in the kernel's maps, written one
    /// by one.
    pub missed_event_aggregations: u64,
    pub lost: u64,
    /// Of `lost`, the events the kernel dropped, by what they were (the rest: side-band
    /// records, mappings and names, that perf's buffers lost).
    pub drops: bpf::Drops,
    /// Of `lost`, the samples that did not fit in the file (its filesystem full).
    pub unwritten: u64,
    pub duration: Duration,
    /// Bytes written, in all files.
    pub bytes: u64,
    /// The file written (the last of a rotated recording).
    pub path: PathBuf,
    /// With --switch-output: the files written, and how many of them are kept.
    pub files: u64,
    pub kept: u64,
    /// The workload's exit status (code, or 128 + signal).
    pub exit_status: Option<i32>,
    /// Why recording stopped early: the filesystem filled (the file holds every record that
    /// fit; the workload was left running).
    pub stopped: Option<String>,
}
