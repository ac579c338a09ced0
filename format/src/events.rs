//! The events bpfperf adds to perf.data beyond perf's own, defined once for the recorder and
//! the analyzer.
//!
//! - **offcpu-time**: perf's own name and attr for off-CPU samples (SOFTWARE / BPF_OUTPUT).
//!   One sample per off-CPU interval: time = when the thread ran again, period = nanoseconds
//!   off the CPU, callchain = where it blocked. perf 6.1 shows these samples by name.
//! - **runq-time**: the run-queue part of an off-CPU interval, the same attr under its own
//!   name: one sample per interval that waited for a CPU, sent with its offcpu-time sample
//!   (same time, thread and stack), period = nanoseconds from the preemption, or from the
//!   wakeup of a thread that blocked, to running again (runqlat's latency). In DWARF mode
//!   it carries the registers and an empty stack copy: readers unwind it with the bytes of
//!   the offcpu-time sample of the same thread and time (perf unwinds the leaf).
//! - **fault-time**: a wait inside a page fault (for the page's read: a major fault; or for a
//!   page that readahead is still reading), the same attr again: one sample per off-CPU
//!   interval whose kernel stack holds handle_mm_fault, sent with its offcpu-time sample
//!   (same time, thread and stack, the stack copy shared as runq-time's), period =
//!   nanoseconds blocked (to the wakeup).
//! - **bpfperf:block_io**: a made-up tracepoint (own system, own id) whose format travels in
//!   TRACING_DATA, so `perf script` prints its fields by name. One sample per completed
//!   request: time = completion, pid/tid = issuer, period = latency in ns, callchain = the
//!   issuing stack, RAW = [`BlockIo`].
//! - **bpfperf:cachestat**: tracepoint-style too: one sample per process per second of its
//!   page-cache use, counted in the kernel: pid = the process, time = the second's end,
//!   RAW = [`CacheStat`] (pages accessed, added to the cache, dirtied).
//! - **bpfperf:wakeup**: likewise, one sample per off-CPU interval whose waker was seen:
//!   time = when the woken thread ran again (the time of its offcpu-time sample), pid/tid =
//!   the waker (pid 0: an interrupt), period = nanoseconds the wakee was blocked, callchain =
//!   where the waker woke it, RAW = [`Wakeup`] (who was woken).

use crate::constants::{attr_flag, event_type, sample_type as st, sw_event};
use crate::{EventAttr, EventFormat};

/// Name perf gives off-CPU samples.
pub const OFFCPU_EVENT: &str = "offcpu-time";
/// Name of the block I/O event.
pub const BLOCK_IO_EVENT: &str = "bpfperf:block_io";
/// Tracepoint id of `bpfperf:block_io`: above the ids the kernel hands out, below u16::MAX
/// (the id is also written in the 16-bit `common_type` field).
pub const BLOCK_IO_TRACEPOINT_ID: u64 = 60001;

/// Name of run-queue samples.
pub const RUNQ_EVENT: &str = "runq-time";
/// Name of page-fault samples.
pub const FAULT_EVENT: &str = "fault-time";

/// The attr of off-CPU samples; `sample_type` matches the on-CPU event's id layout.
pub fn offcpu_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    time_event_attr(OFFCPU_EVENT, sample_type, ids)
}

/// The attr of run-queue samples (as [`offcpu_attr`]).
pub fn runq_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    time_event_attr(RUNQ_EVENT, sample_type, ids)
}

/// The attr of page-fault samples (as [`offcpu_attr`]).
pub fn fault_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    time_event_attr(FAULT_EVENT, sample_type, ids)
}

/// Samples whose period is nanoseconds of something, as perf writes offcpu-time.
fn time_event_attr(name: &str, sample_type: u64, ids: Vec<u64>) -> EventAttr {
    EventAttr {
        name: name.into(),
        type_: event_type::SOFTWARE,
        config: sw_event::BPF_OUTPUT,
        sample_period_or_freq: 1,
        sample_type: sample_type | st::PERIOD,
        flags: attr_flag::SAMPLE_ID_ALL | attr_flag::USE_CLOCKID,
        clockid: libc_clock_monotonic(),
        ids,
        ..Default::default()
    }
}

/// The attr of block I/O samples.
pub fn block_io_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    EventAttr {
        name: BLOCK_IO_EVENT.into(),
        type_: event_type::TRACEPOINT,
        config: BLOCK_IO_TRACEPOINT_ID,
        sample_period_or_freq: 1,
        sample_type: sample_type | st::PERIOD | st::RAW,
        flags: attr_flag::SAMPLE_ID_ALL | attr_flag::USE_CLOCKID,
        clockid: libc_clock_monotonic(),
        ids,
        ..Default::default()
    }
}

/// Name of the wakeup event.
pub const WAKEUP_EVENT: &str = "bpfperf:wakeup";
/// Tracepoint id of `bpfperf:wakeup`.
pub const WAKEUP_TRACEPOINT_ID: u64 = 60002;

/// The attr of wakeup samples.
pub fn wakeup_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    EventAttr {
        name: WAKEUP_EVENT.into(),
        config: WAKEUP_TRACEPOINT_ID,
        ..block_io_attr(sample_type, ids)
    }
}

/// Who was woken, as the RAW payload of a `bpfperf:wakeup` sample (the sample itself is the
/// waker's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wakeup {
    pub wakee_pid: u32,
    pub wakee_tid: u32,
    /// How long the wakee was off the CPU (its offcpu-time period).
    pub blocked_ns: u64,
    /// When the waker woke it (CLOCK_MONOTONIC ns); the sample's time is when it ran.
    pub wake_ns: u64,
}

/// Size of the wakeup RAW payload.
pub const WAKEUP_RAW_SIZE: usize = 32;

impl Wakeup {
    /// The RAW payload, at the offsets of [`wakeup_format`].
    pub fn to_raw(&self, waker_pid: i32) -> [u8; WAKEUP_RAW_SIZE] {
        let mut b = [0u8; WAKEUP_RAW_SIZE];
        b[0..2].copy_from_slice(&(WAKEUP_TRACEPOINT_ID as u16).to_le_bytes());
        b[4..8].copy_from_slice(&waker_pid.to_le_bytes());
        b[8..12].copy_from_slice(&self.wakee_pid.to_le_bytes());
        b[12..16].copy_from_slice(&self.wakee_tid.to_le_bytes());
        b[16..24].copy_from_slice(&self.blocked_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.wake_ns.to_le_bytes());
        b
    }

    /// Reads a payload written by [`Wakeup::to_raw`]; `None` if it is not one.
    pub fn from_raw(raw: &[u8]) -> Option<Wakeup> {
        let raw = raw.get(..WAKEUP_RAW_SIZE)?;
        if u16::from_le_bytes([raw[0], raw[1]]) as u64 != WAKEUP_TRACEPOINT_ID {
            return None;
        }
        let u32_at = |o: usize| u32::from_le_bytes(raw[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(raw[o..o + 8].try_into().unwrap());
        Some(Wakeup {
            wakee_pid: u32_at(8),
            wakee_tid: u32_at(12),
            blocked_ns: u64_at(16),
            wake_ns: u64_at(24),
        })
    }
}

/// The tracefs-style format of `bpfperf:wakeup`, for TRACING_DATA.
pub fn wakeup_format() -> EventFormat {
    let text = format!(
        "name: wakeup\nID: {WAKEUP_TRACEPOINT_ID}\nformat:\n{COMMON_FIELDS}\
\tfield:int wakee_pid;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:int wakee_tid;\toffset:12;\tsize:4;\tsigned:1;\n\
\tfield:u64 blocked_ns;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:u64 wake_ns;\toffset:24;\tsize:8;\tsigned:0;\n\n\
print fmt: \"wakee=%d/%d blocked=%llu ns\", REC->wakee_pid, REC->wakee_tid, REC->blocked_ns\n"
    );
    EventFormat {
        system: "bpfperf".into(),
        text: text.into_bytes(),
    }
}

/// The fields every tracepoint record starts with.
const COMMON_FIELDS: &str = "\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n";

const fn libc_clock_monotonic() -> i32 {
    1
}

/// One completed block I/O request, as the RAW payload of a `bpfperf:block_io` sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockIo {
    /// Device number as the kernel's `dev_t` (major << 20 | minor).
    pub dev: u32,
    pub sector: u64,
    pub bytes: u32,
    /// Read/write/sync flags as blktrace spells them ("R", "WS", "FWFS", ...), NUL-padded.
    pub rwbs: [u8; 8],
    /// Issue to completion, in nanoseconds.
    pub latency_ns: u64,
    /// When the request was issued (CLOCK_MONOTONIC ns).
    pub issue_ns: u64,
    /// Name of the issuing task.
    pub comm: [u8; 16],
    /// 1 when the issuer was one of the recorded processes.
    pub tracked: u8,
    /// The issuing task (the RAW's common_pid, and its thread).
    pub issuer_pid: i32,
    pub issuer_tid: i32,
    /// 1 when the request is charged to the thread that dirtied its pages: the sample's
    /// pid, tid and stacks are then the dirtier's (at its write), not the issuer's (often a
    /// kernel writeback thread).
    pub dirtied: u8,
}

/// Size of the RAW payload.
pub const BLOCK_IO_RAW_SIZE: usize = 76;

impl BlockIo {
    /// The RAW payload: the 8-byte common header (common_pid: the issuer), then the fields
    /// at the offsets of [`block_io_format`].
    pub fn to_raw(&self) -> [u8; BLOCK_IO_RAW_SIZE] {
        let mut b = [0u8; BLOCK_IO_RAW_SIZE];
        b[0..2].copy_from_slice(&(BLOCK_IO_TRACEPOINT_ID as u16).to_le_bytes());
        b[4..8].copy_from_slice(&self.issuer_pid.to_le_bytes());
        b[8..12].copy_from_slice(&self.dev.to_le_bytes());
        b[12..16].copy_from_slice(&self.bytes.to_le_bytes());
        b[16..24].copy_from_slice(&self.sector.to_le_bytes());
        b[24..32].copy_from_slice(&self.latency_ns.to_le_bytes());
        b[32..40].copy_from_slice(&self.issue_ns.to_le_bytes());
        b[40..48].copy_from_slice(&self.rwbs);
        b[48..64].copy_from_slice(&self.comm);
        b[64] = self.tracked;
        b[68..72].copy_from_slice(&self.issuer_tid.to_le_bytes());
        b[72] = self.dirtied;
        b
    }

    /// Reads a RAW payload written by [`BlockIo::to_raw`]; `None` if it is too short.
    /// (Payloads of earlier versions end after `tracked`: issuer_tid and dirtied read 0.)
    pub fn from_raw(raw: &[u8]) -> Option<BlockIo> {
        let short = raw.get(..65)?;
        let tail = raw.get(65..BLOCK_IO_RAW_SIZE);
        let raw = short;
        let u32_at = |o: usize| u32::from_le_bytes(raw[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(raw[o..o + 8].try_into().unwrap());
        Some(BlockIo {
            dev: u32_at(8),
            bytes: u32_at(12),
            sector: u64_at(16),
            latency_ns: u64_at(24),
            issue_ns: u64_at(32),
            rwbs: raw[40..48].try_into().unwrap(),
            comm: raw[48..64].try_into().unwrap(),
            tracked: raw[64],
            issuer_pid: u32_at(4) as i32,
            issuer_tid: tail.map_or(0, |t| i32::from_le_bytes(t[3..7].try_into().unwrap())),
            dirtied: tail.map_or(0, |t| t[7]),
        })
    }

    /// Major and minor device numbers.
    pub fn major_minor(&self) -> (u32, u32) {
        (self.dev >> 20, self.dev & 0xfffff)
    }

    /// `rwbs` as text.
    pub fn rwbs_str(&self) -> String {
        let end = self.rwbs.iter().position(|&c| c == 0).unwrap_or(8);
        String::from_utf8_lossy(&self.rwbs[..end]).into_owned()
    }

    /// `comm` as text.
    pub fn comm_str(&self) -> String {
        let end = self.comm.iter().position(|&c| c == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }
}

/// The tracefs-style format of `bpfperf:block_io`, for TRACING_DATA.
pub fn block_io_format() -> EventFormat {
    let text = format!(
        "name: block_io\nID: {BLOCK_IO_TRACEPOINT_ID}\nformat:\n{COMMON_FIELDS}\
\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:unsigned int bytes;\toffset:12;\tsize:4;\tsigned:0;\n\
\tfield:u64 sector;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:u64 latency_ns;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:u64 issue_ns;\toffset:32;\tsize:8;\tsigned:0;\n\
\tfield:char rwbs[8];\toffset:40;\tsize:8;\tsigned:0;\n\
\tfield:char comm[16];\toffset:48;\tsize:16;\tsigned:0;\n\
\tfield:unsigned char tracked;\toffset:64;\tsize:1;\tsigned:0;\n\
\tfield:int issuer_tid;\toffset:68;\tsize:4;\tsigned:1;\n\
\tfield:unsigned char dirtied;\toffset:72;\tsize:1;\tsigned:0;\n\n\
print fmt: \"%d,%d %s %llu + %u bytes latency=%llu ns comm=%s tracked=%u dirtied=%u\", \
((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), \
REC->rwbs, REC->sector, REC->bytes, REC->latency_ns, REC->comm, REC->tracked, REC->dirtied\n"
    );
    EventFormat {
        system: "bpfperf".into(),
        text: text.into_bytes(),
    }
}

/// Name of the page-cache statistics event.
pub const CACHESTAT_EVENT: &str = "bpfperf:cachestat";
/// Tracepoint id of `bpfperf:cachestat`.
pub const CACHESTAT_TRACEPOINT_ID: u64 = 60003;

/// The first tracepoint id given to probes' formats (`probe_libc:getaddrinfo`,
/// `sdt_python:function__entry`): record numbers them from here, in the order attached.
pub const PROBE_TRACEPOINT_ID_BASE: u64 = 60100;

/// The attr of page-cache statistics samples.
pub fn cachestat_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    EventAttr {
        name: CACHESTAT_EVENT.into(),
        config: CACHESTAT_TRACEPOINT_ID,
        ..block_io_attr(sample_type, ids)
    }
}

/// A process's page-cache use over an interval, counted in the kernel (cachestat's counts),
/// as the RAW payload of a `bpfperf:cachestat` sample. The sample's pid is the process, its
/// time the interval's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStat {
    /// Pages looked up in the page cache: by read() and by page faults.
    pub accesses: u64,
    /// Pages added to the page cache: read from the file, or new pages written (cachestat
    /// counts misses as added - dirtied).
    pub added: u64,
    /// Pages the process dirtied.
    pub dirtied: u64,
    /// Length of the interval (ns).
    pub interval_ns: u64,
}

/// Size of the cachestat RAW payload.
pub const CACHESTAT_RAW_SIZE: usize = 40;

impl CacheStat {
    /// The RAW payload, at the offsets of [`cachestat_format`].
    pub fn to_raw(&self, pid: i32) -> [u8; CACHESTAT_RAW_SIZE] {
        let mut b = [0u8; CACHESTAT_RAW_SIZE];
        b[0..2].copy_from_slice(&(CACHESTAT_TRACEPOINT_ID as u16).to_le_bytes());
        b[4..8].copy_from_slice(&pid.to_le_bytes());
        b[8..16].copy_from_slice(&self.accesses.to_le_bytes());
        b[16..24].copy_from_slice(&self.added.to_le_bytes());
        b[24..32].copy_from_slice(&self.dirtied.to_le_bytes());
        b[32..40].copy_from_slice(&self.interval_ns.to_le_bytes());
        b
    }

    /// Reads a payload written by [`CacheStat::to_raw`]; `None` if it is not one.
    pub fn from_raw(raw: &[u8]) -> Option<CacheStat> {
        let raw = raw.get(..CACHESTAT_RAW_SIZE)?;
        if u16::from_le_bytes([raw[0], raw[1]]) as u64 != CACHESTAT_TRACEPOINT_ID {
            return None;
        }
        let u64_at = |o: usize| u64::from_le_bytes(raw[o..o + 8].try_into().unwrap());
        Some(CacheStat {
            accesses: u64_at(8),
            added: u64_at(16),
            dirtied: u64_at(24),
            interval_ns: u64_at(32),
        })
    }
}

/// The tracefs-style format of `bpfperf:cachestat`, for TRACING_DATA.
pub fn cachestat_format() -> EventFormat {
    let text = format!(
        "name: cachestat\nID: {CACHESTAT_TRACEPOINT_ID}\nformat:\n{COMMON_FIELDS}\
\tfield:u64 accesses;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:u64 added;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:u64 dirtied;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:u64 interval_ns;\toffset:32;\tsize:8;\tsigned:0;\n\n\
print fmt: \"accesses=%llu added=%llu dirtied=%llu interval=%llu ns\", \
REC->accesses, REC->added, REC->dirtied, REC->interval_ns\n"
    );
    EventFormat {
        system: "bpfperf".into(),
        text: text.into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cachestat_round_trips() {
        let c = CacheStat {
            accesses: 100,
            added: 7,
            dirtied: 3,
            interval_ns: 1_000_000_000,
        };
        let raw = c.to_raw(42);
        assert_eq!(CacheStat::from_raw(&raw), Some(c));
        assert_eq!(i32::from_le_bytes(raw[4..8].try_into().unwrap()), 42);
        let f = String::from_utf8(cachestat_format().text).unwrap();
        assert!(
            f.contains("ID: 60003") && f.contains("offset:32;\tsize:8;"),
            "{f}"
        );
    }

    #[test]
    fn block_io_round_trips_and_fits_its_format() {
        let mut io = BlockIo {
            dev: (8 << 20) | 16,
            sector: 42,
            bytes: 4096,
            latency_ns: 1234,
            issue_ns: 99,
            tracked: 1,
            issuer_pid: 7,
            issuer_tid: 8,
            dirtied: 1,
            ..Default::default()
        };
        io.rwbs[..2].copy_from_slice(b"WS");
        io.comm[..3].copy_from_slice(b"tar");
        let raw = io.to_raw();
        assert_eq!(BlockIo::from_raw(&raw), Some(io));
        assert_eq!(io.major_minor(), (8, 16));
        assert_eq!(
            (io.rwbs_str().as_str(), io.comm_str().as_str()),
            ("WS", "tar")
        );
        fields_fit(block_io_format(), BLOCK_IO_RAW_SIZE);
    }

    #[test]
    fn wakeup_round_trips_and_fits_its_format() {
        let w = Wakeup {
            wakee_pid: 10,
            wakee_tid: 11,
            blocked_ns: 5_000_000,
            wake_ns: 77,
        };
        let raw = w.to_raw(3);
        assert_eq!(Wakeup::from_raw(&raw), Some(w));
        assert_eq!(Wakeup::from_raw(&BlockIo::default().to_raw()), None);
        fields_fit(wakeup_format(), WAKEUP_RAW_SIZE);
    }

    /// Every field of the format lies inside the payload, and the common fields come first.
    fn fields_fit(format: EventFormat, size: usize) {
        let text = String::from_utf8(format.text).unwrap();
        assert!(text.contains("format:\n\tfield:unsigned short common_type;\toffset:0;"));
        for l in text.lines().filter(|l| l.contains("offset:")) {
            let num = |k: &str| -> usize {
                l.split(k)
                    .nth(1)
                    .unwrap()
                    .split(';')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            assert!(num("offset:") + num("size:") <= size, "{l}");
        }
    }
}
