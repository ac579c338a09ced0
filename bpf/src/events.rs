//! Events from the BPF ring buffer, decoded from the skeleton's generated types.

use std::sync::Arc;

use crate::skel::types;

// SAFETY: generated plain-old-data structs (integers and arrays only).
unsafe impl plain::Plain for types::sample_event {}
unsafe impl plain::Plain for types::exit_event {}
unsafe impl plain::Plain for types::py_proc {}
unsafe impl plain::Plain for types::offcpu_event {}
unsafe impl plain::Plain for types::block_io_event {}
unsafe impl plain::Plain for types::offcpu_copy_event {}
unsafe impl plain::Plain for types::wakeup_event {}
unsafe impl plain::Plain for types::cache_counts {}
unsafe impl plain::Plain for types::trace_record {}
unsafe impl plain::Plain for types::agg_key {}
unsafe impl plain::Plain for types::trace_agg_key {}
unsafe impl plain::Plain for types::trace_agg_value {}
unsafe impl plain::Plain for types::net_event {}
unsafe impl plain::Plain for types::request_event {}
unsafe impl plain::Plain for types::io_start {}
unsafe impl plain::Plain for types::request_marks {}

// Event kinds as bpfperf.h defines them (through the skeleton's generated enum).
pub(crate) const EVENT_ON_CPU: u32 = types::event_kind::EVENT_ON_CPU.0;
pub(crate) const EVENT_EXIT: u32 = types::event_kind::EVENT_EXIT.0;
pub(crate) const EVENT_OFF_CPU: u32 = types::event_kind::EVENT_OFF_CPU.0;
pub(crate) const EVENT_BLOCK_IO: u32 = types::event_kind::EVENT_BLOCK_IO.0;
pub(crate) const EVENT_OFF_CPU_COPY: u32 = types::event_kind::EVENT_OFF_CPU_COPY.0;
pub(crate) const EVENT_WAKEUP: u32 = types::event_kind::EVENT_WAKEUP.0;
pub(crate) const EVENT_DIRTY: u32 = types::event_kind::EVENT_DIRTY.0;
pub(crate) const EVENT_DIRTY_COPY: u32 = types::event_kind::EVENT_DIRTY_COPY.0;
pub(crate) const EVENT_TRACE: u32 = types::event_kind::EVENT_TRACE.0;
pub(crate) const EVENT_NET: u32 = types::event_kind::EVENT_NET.0;
pub(crate) const EVENT_FAULT: u32 = types::event_kind::EVENT_FAULT.0;
pub(crate) const EVENT_REQUEST: u32 = types::event_kind::EVENT_REQUEST.0;

/// User registers a stack-copy sample carries (bpfperf.h's USER_REGS).
pub const USER_REGS: usize = types::bpfperf_limits::BPFPERF_USER_REGS.0 as usize;

/// A stack sample of a thread that was running on a CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnCpuSample {
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub time: u64,
    /// cpu-clock period of this sample, in nanoseconds.
    pub period: u64,
    /// Kernel stack, innermost first (empty when the sample hit user mode).
    pub kernel_stack: Vec<u64>,
    /// User stack by frame pointers, innermost first (frame-pointer mode).
    pub user_stack: Vec<u64>,
    /// DWARF mode: the user registers (ip, sp, bp) and the stack bytes from sp upwards.
    pub user_regs: Option<UserRegs>,
    pub stack_copy: Vec<u8>,
    /// The thread's Python frames, innermost first (empty: not a Python thread).
    pub python: Vec<PyFrame>,
}

/// One CPython interpreter frame of a sample ([`crate::Profiler::watch_python`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyFrame {
    /// Its code object's address (`PyCodeObject *`) in the process.
    pub code: u64,
    /// Byte offset of its last instruction into the code's bytecode (`co_code_adaptive`).
    pub lasti: u32,
    /// The first frame its `_PyEval_EvalFrameDefault` call ran: the frames from here
    /// inwards (to the previous entry frame) belong to one native eval frame.
    pub entry: bool,
}

/// On-CPU samples of one thread with the same stacks, counted in the kernel
/// ([`crate::Options::aggregate`], [`crate::Profiler::take_aggregated`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregatedSamples {
    pub pid: u32,
    pub tid: u32,
    /// How many samples had these stacks since the last take.
    pub count: u64,
    /// Kernel stack, innermost first (empty when the samples hit user mode).
    pub kernel_stack: Vec<u64>,
    /// User stack, innermost first: frame pointers, or unwound in the kernel (DWARF mode).
    pub user_stack: Vec<u64>,
    /// The thread's Python frames, innermost first (empty: not a Python thread). Part of
    /// what was counted: the last instructions too, so that each frame keeps its line.
    pub python: Vec<PyFrame>,
}

/// Traced events of one thread with the same stacks (and histogram bucket), counted in the
/// kernel ([`crate::Options::trace_aggregate`], [`crate::Profiler::take_aggregated_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregatedEvents {
    /// The event's index among [`crate::Options::trace`].
    pub event: u32,
    pub pid: u32,
    pub tid: u32,
    /// With a histogram ([`crate::TraceHist`]): the bucket of the values, 0 negative, 1 zero,
    /// i >= 2 `[2^(i-2), 2^(i-1))`; else 0.
    pub bucket: u32,
    /// How many events since the last take.
    pub count: u64,
    /// Their latencies (ns) summed, for a pair's exit.
    pub latency_ns: u64,
    /// The thread's name at its first event.
    pub comm: [u8; 16],
    pub kernel_stack: Vec<u64>,
    pub user_stack: Vec<u64>,
}

/// User registers at the sample, in perf's x86 order for sample_regs_user 0xff0fff:
/// AX BX CX DX SI DI BP SP IP FLAGS CS SS R8..R15.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs(pub [u64; USER_REGS]);

impl UserRegs {
    /// perf's sample_regs_user mask for these registers.
    pub const PERF_MASK: u64 = 0xff0fff;
    pub fn bp(&self) -> u64 {
        self.0[6]
    }
    pub fn sp(&self) -> u64 {
        self.0[7]
    }
    pub fn ip(&self) -> u64 {
        self.0[8]
    }
}

/// A thread that ran again after being off the CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffCpuInterval {
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// When the thread ran again (CLOCK_MONOTONIC ns).
    pub time: u64,
    pub duration_ns: u64,
    /// The part of the interval it waited for a CPU: from its preemption, or from its
    /// wakeup if it blocked (0: no wakeup seen).
    pub runq_ns: u64,
    /// Task state when it left: 0 preempted (runnable), 1 sleeping (S), 2 uninterruptible (D).
    pub state: u32,
    /// It blocked inside a page fault (waiting for a read, or for a page being read).
    pub in_fault: bool,
    /// Where it blocked.
    pub kernel_stack: Vec<u64>,
    pub user_stack: Vec<u64>,
    /// DWARF mode: the user registers and stack bytes when it blocked.
    pub user_regs: Option<UserRegs>,
    pub stack_copy: Vec<u8>,
    /// Its Python frames where it blocked, innermost first (off-CPU intervals whose user
    /// stack was unwound in the kernel; empty otherwise).
    pub python: Vec<PyFrame>,
}

/// A tracked process's page-cache use since its counters were last taken, counted in the
/// kernel ([`crate::Profiler::take_cache_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheCounts {
    pub pid: u32,
    /// Pages looked up: by read() and by page faults on file mappings.
    pub accesses: u64,
    /// Pages added to the page cache: read from the file, or new pages written.
    pub added: u64,
    pub dirtied: u64,
}

/// Who woke a thread, for the off-CPU interval that just ended (sent right after it, with
/// the same `time` and `wakee_tid`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wakeup {
    pub wakee_pid: u32,
    pub wakee_tid: u32,
    pub cpu: u32,
    /// When the wakee ran again: the time of its off-CPU interval.
    pub time: u64,
    pub blocked_ns: u64,
    /// When the waker woke it.
    pub wake_time: u64,
    /// The waker: pid 0 and comm "[interrupt]" when an interrupt woke it.
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; 16],
    /// The waker's kernel stack and user stack (frame pointers, or unwound in the kernel
    /// where its process has tables), innermost first.
    pub kernel_stack: Vec<u64>,
    pub user_stack: Vec<u64>,
    /// The waker's Python frames, innermost first (empty: not a followed Python thread).
    pub python: Vec<PyFrame>,
}

/// A completed block I/O request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockIoRequest {
    /// The task that issued it.
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; 16],
    /// Whether the issuer was one of the recorded processes.
    pub tracked: bool,
    pub cpu: u32,
    /// Completion time (CLOCK_MONOTONIC ns).
    pub time: u64,
    pub issue_time: u64,
    /// major << 20 | minor.
    pub dev: u32,
    pub sector: u64,
    pub bytes: u32,
    pub rwbs: [u8; 8],
    /// The issuing stacks.
    pub kernel_stack: Vec<u64>,
    pub user_stack: Vec<u64>,
    /// Who dirtied its first page, if a tracked thread did: (pid, tid, time of its
    /// [`Event::Dirty`]).
    pub dirtier: Option<(u32, u32, u64)>,
}

/// A sampled request passed a layer (`record --follow`): bpfperf.h's `request_event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestStep {
    /// The thread current where it passed the layer (a flusher's kworker for writeback).
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; 16],
    pub cpu: u32,
    /// When it passed the layer (CLOCK_MONOTONIC ns).
    pub time: u64,
    /// The sampled call's id (from 1), its entry time and thread.
    pub id: u64,
    pub call_time: u64,
    pub call_pid: u32,
    pub call_tid: u32,
    /// bpfperf.h's `enum request_kind` and `enum request_layer`.
    pub kind: u32,
    pub layer: u32,
    /// The call's bytes (layer call, tcp); the block request's or skb's in later layers.
    pub bytes: u64,
    /// Block layers: the disk (major << 20 | minor).
    pub dev: u32,
    /// bpfperf.h's `REQ_FLAG_*` (1: a request the call made itself, O_DIRECT).
    pub flags: u32,
}

/// What a [`NetEvent`] reports (bpfperf.h's `enum net_what`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetWhat {
    /// A TCP connection closed: its whole life.
    Conn,
    /// A segment was retransmitted (`reason`: what sending it returned, 0 when sent).
    Retransmit,
    /// A reset was sent (`reason`: the kernel's `sk_rst_reason`).
    SendReset,
    /// A reset was received.
    ReceiveReset,
    /// An skb of the socket was freed as dropped (`reason`: `skb_drop_reason`).
    Drop,
    /// A socket call of `tid` returned after blocking: `tx_bytes` ns off the CPU in
    /// `rx_bytes` intervals, the first ending at `start_time`; the socket's peer is the one
    /// waited on (`reason`: 0 a receive, 1 a send). The stacks are the call's.
    Wait,
    /// An skb of a send call of `tid` reached the device: `start_time` the call's start,
    /// `tx_bytes` the skb's length, `rx_bytes` ns from the call to net_dev_queue, `reason`
    /// ns in the qdisc; the event's time is net_dev_xmit's. The stacks are the call's.
    /// `active`: timed by the kernel's TX timestamping instead ([`crate::Options::net_send_calls`]):
    /// the event stands for send calls (`skbs` of them, `tx_bytes` theirs), `start_time` is
    /// the call's last byte written, `reason` ns from the qdisc to the driver, whose taking
    /// the skb is the event's time.
    Send,
}

impl NetWhat {
    fn from_raw(what: u32) -> Option<NetWhat> {
        use types::net_what as w;
        Some(match what {
            x if x == w::NET_CONN.0 => NetWhat::Conn,
            x if x == w::NET_RETRANSMIT.0 => NetWhat::Retransmit,
            x if x == w::NET_SEND_RESET.0 => NetWhat::SendReset,
            x if x == w::NET_RECV_RESET.0 => NetWhat::ReceiveReset,
            x if x == w::NET_DROP.0 => NetWhat::Drop,
            x if x == w::NET_WAIT.0 => NetWhat::Wait,
            x if x == w::NET_SEND.0 => NetWhat::Send,
            _ => return None,
        })
    }
}

/// A TCP connection's life (at its close), or a retransmit, reset or drop charged to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetEvent {
    pub what: NetWhat,
    /// The socket's owner: the thread that connected, or the one that closed an accepted
    /// connection (0: not seen).
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; 16],
    pub cpu: u32,
    /// When it happened (CLOCK_MONOTONIC ns).
    pub time: u64,
    /// When the connection was first seen (0: before recording began).
    pub start_time: u64,
    /// [`NetWhat::Conn`]: bytes acknowledged by the peer and bytes received (tcp_sock's
    /// bytes_acked and bytes_received), as tcplife counts them. [`NetWhat::Retransmit`]:
    /// tx_bytes is the skb's segments (tcp_skb_pcount), rx_bytes the segments the kernel
    /// added to TcpRetransSegs for it (0 where it gave up before sending, e.g. EBUSY).
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub reason: u32,
    /// The events it stands for: 1, but for a [`NetWhat::Send`] that also stands for the
    /// skbs of its socket not followed before it (the rate, [`crate::Options::net_send_rate`]):
    /// its tx_bytes are theirs too.
    pub skbs: u32,
    /// AF_INET (2) or AF_INET6 (10); 0 when no socket was known.
    pub family: u16,
    /// Local and remote addresses (network order: IPv4 in the first 4 bytes) and ports.
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub lport: u16,
    pub rport: u16,
    /// [`NetWhat::Conn`]: the state it closed from; otherwise the socket's state.
    pub state: u8,
    /// Opened by connect() (else accepted, or opened before recording).
    pub active: bool,
    /// [`NetWhat::Conn`]: the connect() stacks; otherwise the current ones (user stack
    /// only where the current thread is one of the owner's). Shared: the skbs of one send
    /// call, one [`NetWhat::Send`] each, hold its stacks (tens of thousands a second).
    pub kernel_stack: Arc<[u64]>,
    pub user_stack: Arc<[u64]>,
}

/// What the BPF programs report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    OnCpu(OnCpuSample),
    /// A major page fault of a tracked thread ended: its stacks where it faulted, `period`
    /// the nanoseconds from the exception's entry to its end (1 where the entry was not
    /// seen), slept in or not.
    Fault(OnCpuSample),
    OffCpu(OffCpuInterval),
    /// A tracked thread began a burst of dirtying pages (a write): `time` and its stacks
    /// (the interval fields are 0). Writeback requests of those pages name it
    /// ([`BlockIoRequest::dirtier`]).
    Dirty(OffCpuInterval),
    BlockIo(BlockIoRequest),
    Wakeup(Wakeup),
    /// One of [`crate::Options::trace`]'s events happened (and passed its filter).
    Trace(crate::trace::TraceRecord),
    /// A TCP connection closed, or a retransmit, reset or drop ([`crate::Options::net`]).
    Net(NetEvent),
    /// A sampled request passed a layer ([`crate::Options::follow_write_every`]).
    Request(RequestStep),
    /// A tracked process (thread group) exited.
    Exit {
        pid: u32,
        time: u64,
    },
}

/// Python frames as BPF sends them (code | is_entry in bit 0 | bit 1 on an eval call's own
/// frame, 3.12 on, which is dropped and marks the frame before it as its entry, lasti).
pub(crate) fn py_frames(n: u32, code: &[u64], lasti: &[u32]) -> Vec<PyFrame> {
    let mut frames: Vec<PyFrame> = Vec::with_capacity(n as usize);
    for (&c, &lasti) in code.iter().zip(lasti).take(n as usize) {
        if c & 2 != 0 {
            if let Some(last) = frames.last_mut() {
                last.entry = true;
            }
            continue;
        }
        frames.push(PyFrame {
            code: c & !3,
            lasti,
            entry: c & 1 != 0,
        });
    }
    frames
}

/// An interval with frame-pointer stacks (`offcpu_event`'s layout); `python`: its Python
/// frames were filled (off-CPU events; dirty events leave them out).
fn interval(data: &[u8], python: bool) -> Option<OffCpuInterval> {
    let mut e = types::offcpu_event::default();
    plain::copy_from_bytes(&mut e, data).ok()?;
    Some(OffCpuInterval {
        pid: e.pid,
        tid: e.tid,
        cpu: e.cpu,
        time: e.time_ns,
        duration_ns: e.duration_ns,
        runq_ns: e.runq_ns,
        state: e.state,
        in_fault: e.in_fault != 0,
        kernel_stack: stack(&e.kstack, e.kstack_bytes),
        user_stack: stack(&e.ustack, e.ustack_bytes),
        user_regs: None,
        stack_copy: Vec::new(),
        python: if python {
            py_frames(e.py_frames, &e.py_code, &e.py_lasti)
        } else {
            Vec::new()
        },
    })
}

/// An interval with registers and a user stack copy (`offcpu_copy_event`'s layout, then the
/// bytes copied); `python` as in [`interval`].
fn interval_with_copy(data: &[u8], python: bool) -> Option<OffCpuInterval> {
    let mut e = types::offcpu_copy_event::default();
    let fixed = std::mem::size_of::<types::offcpu_copy_event>();
    plain::copy_from_bytes(&mut e, data.get(..fixed)?).ok()?;
    let copied = data.get(fixed..).unwrap_or(&[]);
    let copied = &copied[..(e.stack_bytes as usize).min(copied.len())];
    Some(OffCpuInterval {
        pid: e.pid,
        tid: e.tid,
        cpu: e.cpu,
        time: e.time_ns,
        duration_ns: e.duration_ns,
        runq_ns: e.runq_ns,
        state: e.state,
        in_fault: e.in_fault != 0,
        kernel_stack: stack(&e.kstack, e.kstack_bytes),
        user_stack: Vec::new(),
        user_regs: (e.user_regs[7] != 0).then_some(UserRegs(e.user_regs)),
        stack_copy: copied.to_vec(),
        python: if python {
            py_frames(e.py_frames, &e.py_code, &e.py_lasti)
        } else {
            Vec::new()
        },
    })
}

/// A stack sample (`sample_event`'s layout, then the bytes copied in DWARF mode).
fn stack_sample(data: &[u8]) -> Option<OnCpuSample> {
    let mut e = types::sample_event::default();
    let fixed = std::mem::size_of::<types::sample_event>();
    plain::copy_from_bytes(&mut e, data.get(..fixed)?).ok()?;
    let copied = data.get(fixed..).unwrap_or(&[]);
    let copied = &copied[..(e.stack_bytes as usize).min(copied.len())];
    Some(OnCpuSample {
        pid: e.pid,
        tid: e.tid,
        cpu: e.cpu,
        time: e.time_ns,
        period: e.period,
        kernel_stack: stack(&e.kstack, e.kstack_bytes),
        user_stack: stack(&e.ustack, e.ustack_bytes),
        user_regs: (e.user_regs[7] != 0).then_some(UserRegs(e.user_regs)),
        stack_copy: copied.to_vec(),
        python: py_frames(e.py_frames, &e.py_code, &e.py_lasti),
    })
}

fn stack(frames: &[u64], bytes: i32) -> Vec<u64> {
    let n = (bytes.max(0) as usize / 8).min(frames.len());
    frames[..n].to_vec()
}

impl Event {
    /// The CPU it happened on, for events that are about one CPU (a dirtying only names
    /// the writer of pages that a request issued elsewhere writes; an exit is bookkeeping).
    pub fn cpu(&self) -> Option<u32> {
        match self {
            Event::OnCpu(s) | Event::Fault(s) => Some(s.cpu),
            Event::OffCpu(o) => Some(o.cpu),
            Event::BlockIo(b) => Some(b.cpu),
            Event::Wakeup(w) => Some(w.cpu),
            Event::Trace(t) => Some(t.cpu),
            Event::Net(n) => Some(n.cpu),
            Event::Request(r) => Some(r.cpu),
            Event::Dirty(_) | Event::Exit { .. } => None,
        }
    }

    /// Decodes one ring buffer record; `None` for a record of unknown kind or size (and for
    /// sends followed to the device: see `netsend::Joiner::decode`).
    pub fn decode(data: &[u8]) -> Option<Event> {
        let kind = u32::from_ne_bytes(data.get(..4)?.try_into().ok()?);
        match kind {
            EVENT_ON_CPU => stack_sample(data).map(Event::OnCpu),
            EVENT_FAULT => stack_sample(data).map(Event::Fault),
            EVENT_OFF_CPU => interval(data, true).map(Event::OffCpu),
            EVENT_OFF_CPU_COPY => interval_with_copy(data, true).map(Event::OffCpu),
            EVENT_DIRTY => interval(data, false).map(Event::Dirty),
            EVENT_DIRTY_COPY => interval_with_copy(data, false).map(Event::Dirty),
            EVENT_REQUEST => {
                let mut e = types::request_event::default();
                plain::copy_from_bytes(&mut e, data).ok()?;
                Some(Event::Request(RequestStep {
                    pid: e.pid,
                    tid: e.tid,
                    comm: e.comm.map(|c| c as u8),
                    cpu: e.cpu,
                    time: e.time_ns,
                    id: e.id,
                    call_time: e.call_ns,
                    call_pid: e.call_pid,
                    call_tid: e.call_tid,
                    kind: e.req_kind,
                    layer: e.layer,
                    bytes: e.bytes,
                    dev: e.dev,
                    flags: e.flags,
                }))
            }
            EVENT_BLOCK_IO => {
                let mut e = types::block_io_event::default();
                plain::copy_from_bytes(&mut e, data).ok()?;
                Some(Event::BlockIo(BlockIoRequest {
                    pid: e.pid,
                    tid: e.tid,
                    comm: e.comm.map(|c| c as u8),
                    tracked: e.tracked != 0,
                    cpu: e.cpu,
                    time: e.time_ns,
                    issue_time: e.issue_ns,
                    dev: e.dev,
                    sector: e.sector,
                    bytes: e.bytes,
                    rwbs: e.rwbs.map(|c| c as u8),
                    kernel_stack: stack(&e.kstack, e.kstack_bytes),
                    user_stack: stack(&e.ustack, e.ustack_bytes),
                    dirtier: (e.dirty_ns != 0).then_some((
                        e.dirtier_pid,
                        e.dirtier_tid,
                        e.dirty_ns,
                    )),
                }))
            }
            EVENT_WAKEUP => {
                // Without Python frames the record ends before them.
                let mut e = types::wakeup_event::default();
                let head = std::mem::offset_of!(types::wakeup_event, py_frames);
                // SAFETY: wakeup_event is plain data (integers and arrays of them).
                let bytes = unsafe { plain::as_mut_bytes(&mut e) };
                let n = data.len().min(bytes.len());
                if n < head {
                    return None;
                }
                bytes[..n].copy_from_slice(&data[..n]);
                Some(Event::Wakeup(Wakeup {
                    wakee_pid: e.wakee_pid,
                    wakee_tid: e.wakee_tid,
                    cpu: e.cpu,
                    time: e.time_ns,
                    blocked_ns: e.blocked_ns,
                    wake_time: e.wake_ns,
                    pid: e.pid,
                    tid: e.tid,
                    comm: e.comm.map(|c| c as u8),
                    kernel_stack: stack(&e.kstack, e.kstack_bytes),
                    user_stack: stack(&e.ustack, e.ustack_bytes),
                    python: py_frames(e.py_frames, &e.py_code, &e.py_lasti),
                }))
            }
            EVENT_TRACE => {
                // The struct up to its stacks, then the frames each holds (see bpfperf.h).
                let mut e = types::trace_record::default();
                let head = std::mem::offset_of!(types::trace_record, kstack);
                // SAFETY: trace_record is plain data (u32s, u64s, arrays of them).
                let bytes = unsafe { plain::as_mut_bytes(&mut e) };
                bytes[..head].copy_from_slice(data.get(..head)?);
                let mut rest = data.get(head..)?;
                let mut frames = |bytes: i32, into: &mut [u64]| -> Option<()> {
                    let n = (bytes.max(0) as usize).min(8 * into.len()) / 8;
                    for (i, f) in into[..n].iter_mut().enumerate() {
                        *f = u64::from_ne_bytes(rest.get(8 * i..8 * i + 8)?.try_into().ok()?);
                    }
                    rest = rest.get(bytes.max(0) as usize..)?;
                    Some(())
                };
                frames(e.kstack_bytes, &mut e.kstack)?;
                frames(e.ustack_bytes, &mut e.ustack)?;
                let raw = rest.get(..e.raw_bytes as usize)?;
                let copy = rest.get(raw.len()..).unwrap_or(&[]);
                let copy = &copy[..(e.stack_bytes as usize).min(copy.len())];
                Some(Event::Trace(crate::trace::TraceRecord {
                    event: e.event,
                    pid: e.pid,
                    tid: e.tid,
                    cpu: e.cpu,
                    comm: e.comm.map(|c| c as u8),
                    time: e.time_ns,
                    latency_ns: e.latency_ns,
                    raw: raw.to_vec(),
                    kernel_stack: stack(&e.kstack, e.kstack_bytes),
                    user_stack: stack(&e.ustack, e.ustack_bytes),
                    user_regs: (e.user_regs[7] != 0).then_some(UserRegs(e.user_regs)),
                    stack_copy: copy.to_vec(),
                }))
            }
            EVENT_NET => {
                let mut e = types::net_event::default();
                plain::copy_from_bytes(&mut e, data).ok()?;
                Some(Event::Net(NetEvent {
                    what: NetWhat::from_raw(e.what)?,
                    pid: e.pid,
                    tid: e.tid,
                    comm: e.comm.map(|c| c as u8),
                    cpu: e.cpu,
                    time: e.time_ns,
                    start_time: e.start_ns,
                    tx_bytes: e.tx_bytes,
                    rx_bytes: e.rx_bytes,
                    reason: e.reason,
                    skbs: 1,
                    family: e.family,
                    saddr: e.saddr,
                    daddr: e.daddr,
                    lport: e.lport,
                    rport: e.rport,
                    state: e.oldstate,
                    active: e.active != 0,
                    kernel_stack: stack(&e.kstack, e.kstack_bytes).into(),
                    user_stack: stack(&e.ustack, e.ustack_bytes).into(),
                }))
            }
            EVENT_EXIT => {
                let mut e = types::exit_event::default();
                plain::copy_from_bytes(&mut e, data).ok()?;
                Some(Event::Exit {
                    pid: e.pid,
                    time: e.time_ns,
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 3.12 on: an eval call's own frame (bit 1) is dropped and marks the frame before it
    /// (the first its call ran) as the entry, as 3.11's is_entry (bit 0) does.
    #[test]
    fn python_frames_of_eval_calls_own_frames() {
        let code = [0x1000, 0x2000, 0x9002, 0x3000, 0x9002, 0x4001];
        let lasti = [1, 2, 0, 3, 0, 4];
        let f = py_frames(6, &code, &lasti);
        let got: Vec<(u64, u32, bool)> = f.iter().map(|f| (f.code, f.lasti, f.entry)).collect();
        assert_eq!(
            got,
            [
                (0x1000, 1, false),
                (0x2000, 2, true),
                (0x3000, 3, true),
                (0x4000, 4, true)
            ]
        );
        assert_eq!(py_frames(2, &code, &lasti).len(), 2);
    }

    /// A waker without Python frames is sent without them (the record ends before
    /// py_frames); one with them is sent whole.
    #[test]
    fn wakeups_with_and_without_python_frames() {
        let mut e = types::wakeup_event {
            kind: EVENT_WAKEUP,
            pid: 7,
            tid: 8,
            ustack_bytes: 8,
            ..Default::default()
        };
        e.ustack[0] = 0x401000;
        e.py_frames = 2;
        e.py_code[0] = 0x7000_1000;
        e.py_code[1] = 0x7000_2001;
        e.py_lasti[..2].copy_from_slice(&[4, 6]);
        // SAFETY: plain data.
        let whole = unsafe { plain::as_bytes(&e) }.to_vec();
        let Some(Event::Wakeup(w)) = Event::decode(&whole) else {
            panic!("not a wakeup");
        };
        assert_eq!((w.pid, w.tid, &w.user_stack[..]), (7, 8, &[0x401000][..]));
        let frames: Vec<(u64, u32, bool)> = w
            .python
            .iter()
            .map(|f| (f.code, f.lasti, f.entry))
            .collect();
        assert_eq!(frames, [(0x7000_1000, 4, false), (0x7000_2000, 6, true)]);
        let head = std::mem::offset_of!(types::wakeup_event, py_frames);
        let Some(Event::Wakeup(w)) = Event::decode(&whole[..head]) else {
            panic!("a wakeup without Python frames not decoded");
        };
        assert!(w.python.is_empty());
        assert_eq!(w.user_stack, [0x401000]);
        assert!(Event::decode(&whole[..head - 8]).is_none());
    }
}
