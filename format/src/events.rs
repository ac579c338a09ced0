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
//! - **fault-time**: a major page fault, the same attr again: one sample per fault the kernel
//!   counted major (getrusage's ru_majflt, perf's major-faults), slept in or not: time = its
//!   end, period = nanoseconds from the exception's entry to its end (its work on the CPU
//!   and any wait; 1 where the entry came before the recording), callchain = where it
//!   faulted, with its own registers and stack copy in DWARF mode.
//! - **fault-wait**: a wait inside a page fault (for the page's read: a major fault; or for a
//!   page that readahead is still reading), the same attr again: one sample per off-CPU
//!   interval whose kernel stack holds handle_mm_fault, sent with its offcpu-time sample
//!   (same time, thread and stack, the stack copy shared as runq-time's), period =
//!   nanoseconds blocked (to the wakeup). (Files of 2026-11-28 and before: named
//!   fault-time, and the only page-fault samples.)
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
//! - **bpfperf:request**: tracepoint-style, one sample per layer a sampled request
//!   (`record --follow`) passes: pid/tid = the thread current there, time = when, RAW =
//!   [`Request`] (the call's id, entry time and thread, the layer, bytes).
//! - **bpfperf:tcp_conn**, **bpfperf:tcp_retransmit**, **bpfperf:tcp_reset**,
//!   **bpfperf:skb_drop**: tracepoint-style, one RAW layout ([`Net`]) under four names:
//!   a TCP connection at its close (pid/tid = its owner, period = its duration in ns,
//!   callchain = the connect() that opened it), and a retransmit, a reset sent or received,
//!   or a dropped skb of a socket (pid = the socket's owner, period 1, callchain = where it
//!   happened: a user stack only where a thread of the owner was current).

use crate::constants::{attr_flag, event_type, sample_type as st, sw_event};
use crate::{EventAttr, EventFormat};

mod request;
pub use request::*;

/// Name perf gives off-CPU samples.
pub const OFFCPU_EVENT: &str = "offcpu-time";
/// Name of the block I/O event.
pub const BLOCK_IO_EVENT: &str = "bpfperf:block_io";
/// Tracepoint id of `bpfperf:block_io`: above the ids the kernel hands out, below u16::MAX
/// (the id is also written in the 16-bit `common_type` field).
pub const BLOCK_IO_TRACEPOINT_ID: u64 = 60001;

/// Name of run-queue samples.
pub const RUNQ_EVENT: &str = "runq-time";
/// Name of major page-fault samples.
pub const FAULT_EVENT: &str = "fault-time";
/// Name of the samples of waits inside page faults.
pub const FAULT_WAIT_EVENT: &str = "fault-wait";

/// The attr of off-CPU samples; `sample_type` matches the on-CPU event's id layout.
pub fn offcpu_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    time_event_attr(OFFCPU_EVENT, sample_type, ids)
}

/// The attr of run-queue samples (as [`offcpu_attr`]).
pub fn runq_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    time_event_attr(RUNQ_EVENT, sample_type, ids)
}

/// The attr of major page-fault samples (as [`offcpu_attr`]).
pub fn fault_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    time_event_attr(FAULT_EVENT, sample_type, ids)
}

/// The attr of the samples of waits inside page faults (as [`offcpu_attr`]).
pub fn fault_wait_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    time_event_attr(FAULT_WAIT_EVENT, sample_type, ids)
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

/// The field `record --aggregate` appends to a traced event's format: how many events the
/// sample stands for (counted in the kernel; 1 for an event written alone). perf script
/// prints it with the other fields; analyze weighs the sample by it.
pub const COUNT_FIELD: &str = "bpfperf_count";

/// The field after [`COUNT_FIELD`]: 0 for a sample counted in the kernel, else why its event
/// was written alone: 1 its user stack was copied (DWARF mode, no unwind tables in the
/// kernel yet), 2 the kernel's maps had no room for it.
pub const ALONE_FIELD: &str = "bpfperf_alone";

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

/// Names and tracepoint ids of the network events, all with the [`Net`] payload.
pub const TCP_CONN_EVENT: &str = "bpfperf:tcp_conn";
pub const TCP_CONN_TRACEPOINT_ID: u64 = 60004;
pub const TCP_RETRANSMIT_EVENT: &str = "bpfperf:tcp_retransmit";
pub const TCP_RETRANSMIT_TRACEPOINT_ID: u64 = 60005;
pub const TCP_RESET_EVENT: &str = "bpfperf:tcp_reset";
pub const TCP_RESET_TRACEPOINT_ID: u64 = 60006;
pub const SKB_DROP_EVENT: &str = "bpfperf:skb_drop";
pub const SKB_DROP_TRACEPOINT_ID: u64 = 60007;
/// A socket call that blocked: the thread's off-CPU time in it (tx_bytes, ns; rx_bytes:
/// intervals; the period too) and the peer it waited on; its off-CPU samples from start_ns
/// to the sample's time are the call's.
pub const SOCK_WAIT_EVENT: &str = "bpfperf:sock_wait";
pub const SOCK_WAIT_TRACEPOINT_ID: u64 = 60008;
/// An skb of a send call reached the device (net_dev_xmit): tx_bytes its length, start_ns
/// the send call's start, duration_ns from it to net_dev_xmit (the period too), rx_bytes
/// ns from the call to net_dev_queue, reason ns in the qdisc; the rest is the driver's.
/// With `active` 1, a send call timed by the kernel's TX timestamping (record's default where
/// the kernel has it): the sample stands for send calls (bpfperf_count), tx_bytes theirs,
/// start_ns the call's last byte written, rx_bytes ns from it into the qdisc, reason ns from
/// there to the driver (the sample's time): no driver time of its own.
pub const NET_SEND_EVENT: &str = "bpfperf:net_send";
pub const NET_SEND_TRACEPOINT_ID: u64 = 60009;

/// The kernel's events whose reason enums the network events carry (system, name):
/// skb_drop's `skb_drop_reason` and tcp_reset's `sk_rst_reason`, named in their formats'
/// `__print_symbolic` tables, which record copies into TRACING_DATA.
pub const NET_REASON_EVENTS: [(&str, &str); 2] = [("skb", "kfree_skb"), ("tcp", "tcp_send_reset")];

/// The network events: (name, tracepoint id).
pub const NET_EVENTS: [(&str, u64); 6] = [
    (TCP_CONN_EVENT, TCP_CONN_TRACEPOINT_ID),
    (TCP_RETRANSMIT_EVENT, TCP_RETRANSMIT_TRACEPOINT_ID),
    (TCP_RESET_EVENT, TCP_RESET_TRACEPOINT_ID),
    (SKB_DROP_EVENT, SKB_DROP_TRACEPOINT_ID),
    (SOCK_WAIT_EVENT, SOCK_WAIT_TRACEPOINT_ID),
    (NET_SEND_EVENT, NET_SEND_TRACEPOINT_ID),
];

/// The attr of one of the [`NET_EVENTS`] (by tracepoint id).
pub fn net_attr(tracepoint_id: u64, sample_type: u64, ids: Vec<u64>) -> EventAttr {
    let name = NET_EVENTS
        .iter()
        .find(|(_, id)| *id == tracepoint_id)
        .map_or("bpfperf:net", |(n, _)| n);
    EventAttr {
        name: name.into(),
        config: tracepoint_id,
        ..block_io_attr(sample_type, ids)
    }
}

/// A TCP connection's life, or a retransmit, reset or drop of one of its segments, as the
/// RAW payload of the [`NET_EVENTS`]. The sample's pid is the socket's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Net {
    /// Which of the [`NET_EVENTS`] (its tracepoint id, the RAW's common_type).
    pub event: u64,
    /// AF_INET (2) or AF_INET6 (10); 0 when the drop had no socket.
    pub family: u16,
    pub lport: u16,
    pub rport: u16,
    /// tcp_conn: the state it closed from; else the socket's state (TCP_ESTABLISHED 1...).
    pub state: u8,
    /// 1: opened by connect(); 0: accepted (or opened before the recording).
    pub active: u8,
    /// Local and remote addresses, network order (IPv4: the first 4 bytes). An IPv4-mapped
    /// IPv6 address reads as IPv4.
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    /// tcp_conn: bytes the peer acknowledged, and bytes received (tcplife's TX and RX:
    /// the SYN and FIN count one each). tcp_retransmit: tx_bytes = the skb's segments
    /// (tcp_skb_pcount), rx_bytes 0; what the kernel counted is [`Net::segments`].
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    /// tcp_conn: first seen to close (0: opened before the recording); sock_wait: from the
    /// end of the first blocked interval to the call's return.
    pub duration_ns: u64,
    /// skb_drop: the kernel's skb_drop_reason; tcp_reset: 0 received, else 1 + the
    /// sk_rst_reason of a reset sent; tcp_retransmit: what sending returned (0: sent);
    /// sock_wait: 0 a receive, 1 a send.
    pub reason: u32,
    /// The owner's thread (connect or close) and name.
    pub owner_tid: i32,
    pub comm: [u8; 16],
    /// When the connection was first seen (0: before the recording).
    pub start_ns: u64,
    /// The events the sample stands for ([`COUNT_FIELD`]; 0, or a payload written before
    /// the field, means 1): net_send, the skbs of its socket not followed since the last one
    /// that was (record's rate) and itself; its tx_bytes are all of theirs, its period its
    /// duration times this. See [`Net::events`].
    pub count: u32,
    /// tcp_retransmit: the segments the kernel added to TcpRetransSegs for it (0: it gave
    /// up before sending, e.g. EBUSY); `None` in a payload written before the field
    /// ([`Net::retrans_segments`] then counts 1). 0 for the other events.
    pub segments: Option<u32>,
}

/// Size of the network events' RAW payload (112 before [`Net::count`], 116 before
/// [`Net::segments`]).
pub const NET_RAW_SIZE: usize = 120;
/// Size of the payload before [`Net::segments`].
const NET_RAW_COUNTED: usize = 116;
/// Size of the payload that every network event has.
const NET_RAW_MIN: usize = 112;

impl Net {
    /// The RAW payload, at the offsets of [`net_format`] (common_pid: the owner).
    pub fn to_raw(&self, owner_pid: i32) -> [u8; NET_RAW_SIZE] {
        let mut b = [0u8; NET_RAW_SIZE];
        b[0..2].copy_from_slice(&(self.event as u16).to_le_bytes());
        b[4..8].copy_from_slice(&owner_pid.to_le_bytes());
        b[8..10].copy_from_slice(&self.family.to_le_bytes());
        b[10..12].copy_from_slice(&self.lport.to_le_bytes());
        b[12..14].copy_from_slice(&self.rport.to_le_bytes());
        b[14] = self.state;
        b[15] = self.active;
        b[16..20].copy_from_slice(&self.saddr[..4]);
        b[20..24].copy_from_slice(&self.daddr[..4]);
        b[24..40].copy_from_slice(&self.saddr);
        b[40..56].copy_from_slice(&self.daddr);
        b[56..64].copy_from_slice(&self.tx_bytes.to_le_bytes());
        b[64..72].copy_from_slice(&self.rx_bytes.to_le_bytes());
        b[72..80].copy_from_slice(&self.duration_ns.to_le_bytes());
        b[80..84].copy_from_slice(&self.reason.to_le_bytes());
        b[84..88].copy_from_slice(&self.owner_tid.to_le_bytes());
        b[88..104].copy_from_slice(&self.comm);
        b[104..112].copy_from_slice(&self.start_ns.to_le_bytes());
        b[112..116].copy_from_slice(&self.count.to_le_bytes());
        b[116..120].copy_from_slice(&self.segments.unwrap_or(0).to_le_bytes());
        b
    }

    /// A retransmit's segments as TcpRetransSegs counts them: [`Net::segments`], or 1 for a
    /// payload written before the field (segments unknown: one per event).
    pub fn retrans_segments(&self) -> u64 {
        self.segments.map_or(1, u64::from)
    }

    /// How many events it stands for: [`Net::count`], at least 1.
    pub fn events(&self) -> u64 {
        u64::from(self.count.max(1))
    }

    /// Reads a payload written by [`Net::to_raw`]; `None` if it is not one.
    pub fn from_raw(raw: &[u8]) -> Option<Net> {
        let count = raw
            .get(NET_RAW_MIN..NET_RAW_COUNTED)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()));
        let segments = raw
            .get(NET_RAW_COUNTED..NET_RAW_SIZE)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
        let raw = raw.get(..NET_RAW_MIN)?;
        let event = u16::from_le_bytes([raw[0], raw[1]]) as u64;
        if !NET_EVENTS.iter().any(|(_, id)| *id == event) {
            return None;
        }
        let u16_at = |o: usize| u16::from_le_bytes(raw[o..o + 2].try_into().unwrap());
        let u32_at = |o: usize| u32::from_le_bytes(raw[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(raw[o..o + 8].try_into().unwrap());
        Some(Net {
            event,
            family: u16_at(8),
            lport: u16_at(10),
            rport: u16_at(12),
            state: raw[14],
            active: raw[15],
            saddr: raw[24..40].try_into().unwrap(),
            daddr: raw[40..56].try_into().unwrap(),
            tx_bytes: u64_at(56),
            rx_bytes: u64_at(64),
            duration_ns: u64_at(72),
            reason: u32_at(80),
            owner_tid: u32_at(84) as i32,
            comm: raw[88..104].try_into().unwrap(),
            start_ns: u64_at(104),
            count,
            segments,
        })
    }

    /// An address as text (IPv4 dotted, IPv6 as Rust prints it; "-" with no socket).
    fn addr(&self, a: &[u8; 16]) -> String {
        match self.family {
            2 => std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string(),
            10 => {
                let v6 = std::net::Ipv6Addr::from(*a);
                v6.to_ipv4_mapped()
                    .map_or(v6.to_string(), |v4| v4.to_string())
            }
            _ => "-".into(),
        }
    }

    /// The local address as text.
    pub fn local_addr(&self) -> String {
        self.addr(&self.saddr)
    }

    /// The remote address as text.
    pub fn remote_addr(&self) -> String {
        self.addr(&self.daddr)
    }

    /// `comm` as text.
    pub fn comm_str(&self) -> String {
        let end = self.comm.iter().position(|&c| c == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }
}

/// The tracefs-style format of one of the [`NET_EVENTS`], for TRACING_DATA. perf prints
/// IPv4 addresses dotted (IPv6 ones are in the saddr/daddr arrays).
pub fn net_format(tracepoint_id: u64) -> EventFormat {
    let name = NET_EVENTS
        .iter()
        .find(|(_, id)| *id == tracepoint_id)
        .map_or("net", |(n, _)| n.trim_start_matches("bpfperf:"));
    let quad = |f: &str| {
        format!(
            "REC->{f} & 255, (REC->{f} >> 8) & 255, (REC->{f} >> 16) & 255, (REC->{f} >> 24) & 255"
        )
    };
    let (s, d) = (quad("saddr4"), quad("daddr4"));
    let text = format!(
        "name: {name}\nID: {tracepoint_id}\nformat:\n{COMMON_FIELDS}\
\tfield:unsigned short family;\toffset:8;\tsize:2;\tsigned:0;\n\
\tfield:unsigned short lport;\toffset:10;\tsize:2;\tsigned:0;\n\
\tfield:unsigned short rport;\toffset:12;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char state;\toffset:14;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char active;\toffset:15;\tsize:1;\tsigned:0;\n\
\tfield:unsigned int saddr4;\toffset:16;\tsize:4;\tsigned:0;\n\
\tfield:unsigned int daddr4;\toffset:20;\tsize:4;\tsigned:0;\n\
\tfield:__u8 saddr[16];\toffset:24;\tsize:16;\tsigned:0;\n\
\tfield:__u8 daddr[16];\toffset:40;\tsize:16;\tsigned:0;\n\
\tfield:u64 tx_bytes;\toffset:56;\tsize:8;\tsigned:0;\n\
\tfield:u64 rx_bytes;\toffset:64;\tsize:8;\tsigned:0;\n\
\tfield:u64 duration_ns;\toffset:72;\tsize:8;\tsigned:0;\n\
\tfield:unsigned int reason;\toffset:80;\tsize:4;\tsigned:0;\n\
\tfield:int owner_tid;\toffset:84;\tsize:4;\tsigned:1;\n\
\tfield:char comm[16];\toffset:88;\tsize:16;\tsigned:0;\n\
\tfield:u64 start_ns;\toffset:104;\tsize:8;\tsigned:0;\n\
\tfield:unsigned int {COUNT_FIELD};\toffset:112;\tsize:4;\tsigned:0;\n\
\tfield:unsigned int segs;\toffset:116;\tsize:4;\tsigned:0;\n\n\
print fmt: \"%u.%u.%u.%u:%u > %u.%u.%u.%u:%u tx=%llu rx=%llu duration=%llu ns reason=%u state=%u comm=%s count=%u segs=%u\", \
{s}, REC->lport, {d}, REC->rport, REC->tx_bytes, REC->rx_bytes, REC->duration_ns, \
REC->reason, REC->state, REC->comm, REC->{COUNT_FIELD}, REC->segs\n"
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

    #[test]
    fn net_round_trips_and_fits_its_format() {
        let mut n = Net {
            event: TCP_CONN_TRACEPOINT_ID,
            family: 2,
            lport: 40000,
            rport: 5201,
            state: 4,
            active: 1,
            tx_bytes: 1 << 33,
            rx_bytes: 7,
            duration_ns: 12345,
            reason: 3,
            owner_tid: 9,
            start_ns: 100,
            count: 3,
            segments: Some(0),
            ..Default::default()
        };
        n.saddr[..4].copy_from_slice(&[10, 0, 0, 1]);
        n.daddr[..4].copy_from_slice(&[10, 0, 0, 2]);
        n.comm[..4].copy_from_slice(b"curl");
        let raw = n.to_raw(8);
        assert_eq!(Net::from_raw(&raw), Some(n));
        assert_eq!(
            (n.local_addr().as_str(), n.remote_addr().as_str()),
            ("10.0.0.1", "10.0.0.2")
        );
        assert_eq!(Net::from_raw(&BlockIo::default().to_raw()), None);
        // A payload written before the count: one event each.
        let old = Net::from_raw(&raw[..112]).unwrap();
        assert_eq!((old.count, old.events(), n.events()), (0, 1, 3));
        // One written before the segments: unknown, one per retransmit.
        let old = Net::from_raw(&raw[..116]).unwrap();
        assert_eq!(
            (old.count, old.segments, old.retrans_segments()),
            (3, None, 1)
        );
        let r = Net {
            event: TCP_RETRANSMIT_TRACEPOINT_ID,
            tx_bytes: 21,
            segments: Some(21),
            ..n
        };
        assert_eq!(Net::from_raw(&r.to_raw(8)).unwrap().retrans_segments(), 21);
        for (_, id) in NET_EVENTS {
            fields_fit(net_format(id), NET_RAW_SIZE);
        }
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
