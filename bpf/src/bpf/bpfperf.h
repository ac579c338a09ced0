/* The one definition of what the BPF programs and the Rust loader share: limits, event kinds
 * and event layouts. The Rust side uses the skeleton's generated `types::*`, never a copy. */
#ifndef BPFPERF_H
#define BPFPERF_H

/* Frames kept per stack (kernel and user each). perf's default max is 127. */
#define MAX_STACK_DEPTH 127
/* Bytes of user stack the kernel unwinder reads at once (a power of 2). */
#define STACK_WINDOW 4096

/* Bytes of user stack a DWARF-mode sample may copy (the --call-graph dwarf,MAXBYTES cap). */
#define MAX_STACK_COPY (32 * 1024)
/* Bytes of user stack kept per blocked thread in DWARF mode (off-CPU stacks). */
#define MAX_OFFCPU_COPY (16 * 1024)
/* User registers a DWARF-mode sample carries (perf's sample_regs_user 0xff0fff). */
#define USER_REGS 20
/* Off-CPU intervals of threads blocked at the same time (entries of the start map). */
#define MAX_BLOCKED 16384
/* Tracked threads woken and not yet running, at the same time (entries of the wakers map,
 * preallocated: 2 KiB each). */
#define MAX_WAKING 2048
/* Block requests in flight at the same time (and, in net.bpf.c, connections being opened). */
#define MAX_INFLIGHT 16384
/* Of those block requests, how many a preallocated map holds (2 KiB each); the rest are
 * allocated as they come. */
#define MAX_IO_PREALLOC 1024

/* Unwinding in the kernel (unwind.bpf.h): rows of all tables together, and entries of their
 * page index (mappable array maps of blocks that user space fills as one flat array each);
 * executable mappings with a table per process; processes with tables at once. */
/* 3 M rows (36 MiB of kernel memory, mapped into record as written): clang's 18 files took
 * 2.08 M of 2 M, and its libz3 and libicuuc went without tables (their stacks copied). */
#define UNWIND_ROWS (3 << 20)
#define UNWIND_PAGES (1 << 20)
#define UNWIND_ROWS_PER_BLOCK 512
#define UNWIND_PAGES_PER_BLOCK 1024
#define UNWIND_MAPPINGS 128
#define UNWIND_PROCS 8192

/* Any event (probes.bpf.c): events record attaches at once; bytes of an event's payload (a
 * tracepoint's record as the kernel lays it out, or a probe's fields) kept per event;
 * instructions and string patterns of an in-kernel filter. */
#define MAX_TRACE_EVENTS 1024
#define MAX_TRACE_RAW 2048
/* Syscall numbers the syscalls: tracepoints' fast path knows (x86-64 has about 460). */
#define SYSCALL_SLOTS 1024
/* Pairs' entries kept at once (threads inside a traced call). */
#define MAX_TRACE_STARTS 8192
#define MAX_DATA_LOC 8
#define FILTER_INSNS 64
#define FILTER_PATTERNS 8
#define FILTER_PATTERN_LEN 64

/* --aggregate (sampling.bpf.c): distinct (thread, kernel stack, user stack) counted at once,
 * and distinct stacks kept at once, per slot (user space drains one slot while the programs
 * fill the other). */
#define AGG_COUNTS 16384
#define AGG_STACKS 16384

/* Python frames read per sample (python.bpf.h), innermost first; processes and threads with
 * an interpreter known at once. */
#define MAX_PY_FRAMES 64
/* At most this many bytes of a Python frame are read (py_offsets.frame_span_len). */
#define PY_FRAME_SPAN 128
#define PY_PROCS 4096
#define PY_THREADS 16384
/* Thread states looked at while looking for the sampled thread's. */
#define PY_MAX_THREADS 64

/* Entries of the drops map: one per event kind (below), and 0. */
#define EVENT_KINDS 15

/* The limits above as BTF-visible constants: macros never reach BTF, enums do, so the skeleton
 * generates `types::bpfperf_limits` and Rust reads the limits from there. */
enum bpfperf_limits {
	BPFPERF_STACK_DEPTH = MAX_STACK_DEPTH,
	BPFPERF_STACK_COPY = MAX_STACK_COPY,
	BPFPERF_OFFCPU_COPY = MAX_OFFCPU_COPY,
	BPFPERF_USER_REGS = USER_REGS,
	BPFPERF_EVENT_KINDS = EVENT_KINDS,
	BPFPERF_UNWIND_ROWS = UNWIND_ROWS,
	BPFPERF_UNWIND_PAGES = UNWIND_PAGES,
	BPFPERF_UNWIND_MAPPINGS = UNWIND_MAPPINGS,
	BPFPERF_UNWIND_PROCS = UNWIND_PROCS,
	BPFPERF_MAX_TRACE_EVENTS = MAX_TRACE_EVENTS,
	BPFPERF_MAX_TRACE_RAW = MAX_TRACE_RAW,
	BPFPERF_MAX_TRACE_STARTS = MAX_TRACE_STARTS,
	BPFPERF_SYSCALL_SLOTS = SYSCALL_SLOTS,
	BPFPERF_MAX_DATA_LOC = MAX_DATA_LOC,
	BPFPERF_FILTER_INSNS = FILTER_INSNS,
	BPFPERF_FILTER_PATTERNS = FILTER_PATTERNS,
	BPFPERF_FILTER_PATTERN_LEN = FILTER_PATTERN_LEN,
	BPFPERF_AGG_COUNTS = AGG_COUNTS,
	BPFPERF_AGG_STACKS = AGG_STACKS,
	BPFPERF_MAX_PY_FRAMES = MAX_PY_FRAMES,
	BPFPERF_PY_FRAME_SPAN = PY_FRAME_SPAN,
};

/* The first field of every ring buffer record (Rust: `types::event_kind`). */
enum event_kind {
	EVENT_ON_CPU = 1,  /* a cpu-clock sample */
	EVENT_EXIT = 2,    /* a tracked process exited (its whole thread group) */
	EVENT_OFF_CPU = 3, /* a tracked thread ran again after blocking */
	EVENT_BLOCK_IO = 4, /* a block request completed */
	EVENT_OFF_CPU_COPY = 5, /* an off-CPU interval with a user stack copy (DWARF mode) */
	EVENT_WAKEUP = 6, /* who woke a thread whose off-CPU interval was just sent */
	EVENT_DIRTY = 7, /* a tracked thread began dirtying pages: offcpu_event's layout */
	EVENT_DIRTY_COPY = 8, /* the same with registers and a stack copy: offcpu_copy_event's */
	EVENT_TRACE = 9, /* any event record attached (trace_record): a tracepoint, probe, USDT */
	EVENT_NET = 10, /* a TCP connection closed, or a retransmit, reset or drop (net_event) */
	EVENT_NET_CALL = 11, /* a tracked thread's send call began (net_call_event, variable) */
	EVENT_NET_SKB = 12, /* an skb of a send call reached the device (net_skb_event) */
	EVENT_FAULT = 13, /* a major page fault ended: sample_event's layout, period = its ns */
	EVENT_REQUEST = 14 /* a sampled request passed a layer (request_event) */
};

/* One on-CPU sample. Stacks hold instruction pointers, innermost first; lengths in bytes as
 * bpf_get_stack returns them (negative: the error it returned).
 * Size in the ring buffer: frame-pointer mode reserves the whole struct (2.2 KiB: at 999 Hz
 * on 2 CPUs, 4.4 MB/s, which the ring buffer is sized for; a reserve needs a constant size,
 * and a variable size would cost a copy through a scratch buffer). Only the frames that
 * bpf_get_stack filled reach perf.data, so the file does not pay for it. DWARF mode sends
 * the struct plus only the stack bytes copied. */
struct sample_event {
	__u32 kind;
	__u32 cpu;
	__u32 pid; /* tgid */
	__u32 tid;
	__u64 time_ns; /* CLOCK_MONOTONIC, as bpf_ktime_get_ns */
	__u64 period;  /* cpu-clock period of this sample, ns */
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
	/* DWARF mode: user registers in perf's x86 order and mask 0xff0fff (AX BX CX DX SI DI
	 * BP SP IP FLAGS CS SS R8..R15), and how many bytes of user stack (from SP up) follow
	 * this struct in the ring buffer record. */
	__u64 user_regs[USER_REGS];
	__u32 stack_bytes;
	/* Python frames of the sampled thread (python.bpf.h), innermost first: py_code is the
	 * frame's code object (PyCodeObject *) with bit 0 set where the frame is the first one
	 * its _PyEval_EvalFrameDefault call ran (is_entry: the boundary between two calls of
	 * it), bit 1 where it is such a call's own frame, owned by the C stack (3.12 on: no
	 * Python function's; it follows the first frame the call ran); py_lasti its last
	 * instruction's byte offset into the code's bytecode. */
	__u32 py_frames;
	__u64 py_code[MAX_PY_FRAMES];
	__u32 py_lasti[MAX_PY_FRAMES];
};

/* A sample with its user stack copy, assembled in a per-CPU buffer (too big for the BPF
 * stack), then sent with only the bytes copied. */
struct sample_buf {
	struct sample_event e;
	__u8 stack[MAX_STACK_COPY];
};

/* --aggregate: on-CPU samples counted in the kernel, as bcc's profile does. A stack is kept
 * once per slot in agg_stacks, keyed by its frames (innermost first, zero after the last:
 * bpf_get_stack's frame-pointer walk or the in-kernel DWARF unwinding alike) and named by an
 * id; the counts are keyed by thread and the stacks' ids (0: an empty stack), a Python
 * thread's frames counting as a third stack. */
struct agg_frames {
	__u64 ips[MAX_STACK_DEPTH];
	/* Bytes of ips filled: a walk's last frames may be 0 (a frame-pointer walk through code
	 * without them), and they are part of the stack. */
	__u64 len;
};

struct agg_key {
	__u32 pid; /* tgid */
	__u32 tid;
	__u64 kstack;
	__u64 ustack;
	/* The thread's Python frames (0: none), kept in agg_stacks as the other two: ips[i] is
	 * frame i's py_code (as in sample_event), the u32s from &ips[MAX_PY_FRAMES] on their
	 * py_lasti; len is 8 bytes a frame. */
	__u64 pystack;
};

/* A Python stack's frames fit in agg_frames: codes, then lasti two a word. */
_Static_assert(MAX_PY_FRAMES + MAX_PY_FRAMES / 2 <= MAX_STACK_DEPTH, "Python frames in agg_frames");

/* The stacks of one sample, assembled per CPU before they are looked up. */
struct agg_scratch {
	struct agg_frames k;
	struct agg_frames u;
};

/* A thread was off the CPU for duration_ns: time_ns is when it ran again; the stacks are
 * where it blocked. state: the task state at switch-out (0 preempted or yielded, still
 * runnable; 1 S, 2 D). */
struct offcpu_event {
	__u32 kind;
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u64 time_ns;
	__u64 duration_ns;
	/* The part of the interval spent runnable, waiting for a CPU: from the preemption, or
	 * from the wakeup (sched_waking) of a thread that blocked (0: no wakeup seen). */
	__u64 runq_ns;
	__u32 state;
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	/* 1: it blocked inside a page fault (handle_mm_fault is on its kernel stack). */
	__u32 in_fault;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
	/* Python frames where it blocked, as in sample_event (0 in dirty events). */
	__u32 py_frames;
	__u32 _py_pad;
	__u64 py_code[MAX_PY_FRAMES];
	__u32 py_lasti[MAX_PY_FRAMES];
};

/* A block request from issue to completion. pid/tid/comm: the task that issued it; the
 * stacks are the issuing ones. time_ns: completion. */
struct block_io_event {
	__u32 kind;
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u64 time_ns;
	__u64 issue_ns;
	__u64 sector;
	__u32 dev; /* major << 20 | minor */
	__u32 bytes;
	char rwbs[8];
	char comm[16];
	__u8 tracked;
	__u8 _pad[3];
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	/* Who dirtied the request's first page, when a tracked thread did (0: not known): its
	 * pid and tid, and the time of its dirty_event (the start of that write burst). */
	__u32 dirtier_pid;
	__u32 dirtier_tid;
	__u32 _pad2;
	__u64 dirty_ns;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
};

/* DWARF mode: an off-CPU interval with the blocked thread's user registers; `stack_bytes` of
 * user stack follow this struct in the ring buffer record. */
struct offcpu_copy_event {
	__u32 kind; /* EVENT_OFF_CPU_COPY */
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u64 time_ns;
	__u64 duration_ns;
	__u64 runq_ns; /* as in offcpu_event */
	__u64 wake_ns; /* while blocked: when sched_waking woke it (0: not yet) */
	__u32 state;
	__s32 kstack_bytes;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 user_regs[USER_REGS];
	__u32 stack_bytes;
	__u32 in_fault; /* as in offcpu_event */
	__u32 in_sock;	/* 1: blocked inside a socket call (see struct sock_wait) */
	/* Python frames where it blocked, as in offcpu_event (off-CPU events; dirty events
	 * leave them out). */
	__u32 py_frames;
	__u64 py_code[MAX_PY_FRAMES];
	__u32 py_lasti[MAX_PY_FRAMES];
};

/* What a DWARF-mode switch-out keeps until switch-in: the event to send, and the stack. */
struct offcpu_copy_buf {
	struct offcpu_copy_event e;
	__u8 stack[MAX_OFFCPU_COPY];
};

/* The waker of an off-CPU interval: sent right after the interval's own event, with the same
 * time_ns and wakee tid. pid/tid/comm and the stacks are the waker's, at sched_waking: kernel
 * stack and frame-pointer user stack (the waker is often a thread of another program, or an
 * interrupt, whose stack is not worth a copy). */
struct wakeup_event {
	__u32 kind; /* EVENT_WAKEUP */
	__u32 cpu;
	__u32 wakee_pid;
	__u32 wakee_tid;
	__u64 time_ns; /* when the wakee ran again, as its off-CPU event */
	__u64 blocked_ns;
	__u64 wake_ns; /* when the waker woke it */
	__u32 pid; /* the waker */
	__u32 tid;
	char comm[16];
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
	/* The waker's Python frames, as in sample_event: a followed Python thread's (0 for
	 * others: their records end before py_frames). */
	__u32 py_frames;
	__u32 _py_pad;
	__u64 py_code[MAX_PY_FRAMES];
	__u32 py_lasti[MAX_PY_FRAMES];
};

/* Page-cache use of one tracked process since its counters were last taken (cachestat's
 * counts: misses = added - dirtied, hits = accesses - misses). Values of the cache_counts map, read by record. */
struct cache_counts {
	__u64 accesses; /* pages looked up: by read() and by page faults */
	__u64 added;	/* pages added to the cache (read in, or new pages written) */
	__u64 dirtied;	/* pages dirtied */
};

/* ---- Unwinding user stacks in the kernel (unwind.bpf.h), with tables record builds from
 * each file's .eh_frame or .debug_frame. ---- */

/* How a row finds the canonical frame address (CFA): the caller's stack pointer. */
enum unwind_cfa {
	CFA_UNKNOWN = 0,   /* no rule this unwinder follows: the stack ends here */
	CFA_RSP = 1,       /* rsp + cfa_off */
	CFA_RBP = 2,       /* rbp + cfa_off */
	CFA_PLT = 3,       /* a PLT entry: rsp + 8, + 8 more from the 11th byte of its 16 */
	CFA_OUTERMOST = 4, /* the return address is undefined: the outermost frame (_start) */
};

/* From `pc` (the file's address, SVMA) until the next row: where the CFA is; the return
 * address is at CFA - 8; the caller's rbp is at CFA + rbp_off when rbp_saved, else rbp is
 * unchanged. */
struct unwind_row {
	__u32 pc;
	__u8 cfa;
	__u8 rbp_saved;
	__s16 rbp_off;
	__s32 cfa_off;
};

/* The arrays' elements: blocks whose size is a multiple of 8, so that the map's mapping
 * holds them back to back (an array map pads each element to 8 bytes). */
struct unwind_row_block {
	struct unwind_row rows[UNWIND_ROWS_PER_BLOCK];
};

struct unwind_page_block {
	__u32 pages[UNWIND_PAGES_PER_BLOCK];
};

/* A mapping of a file with a table: [start, end) in the process, bias = AVMA - SVMA; its
 * rows and page index in the arrays. pages[first_page + p] (p = (svma >> 12) - base_page)
 * is the row in effect at the start of page p, relative to first_row; n_pages + 1 entries.
 * No rows: the file has no CFI, and its frames follow the frame-pointer rule (Go). */
struct unwind_mapping {
	__u64 start;
	__u64 end;
	__u64 bias;
	__u32 first_row;
	__u32 n_rows;
	__u32 first_page;
	__u32 n_pages;
	__u32 base_page;
	__u32 _pad;
};

/* The mappings of one process, sorted by start. */
struct unwind_proc {
	__u32 n;
	__u32 _pad;
	struct unwind_mapping maps[UNWIND_MAPPINGS];
};

/* ---- Any event (probes.bpf.c): tracepoints, uprobes, USDT probes, kprobes. ---- */

/* How an attached event's program finds its payload. */
enum trace_source {
	TRACE_TRACEPOINT = 1, /* the tracepoint's record, as the kernel lays it out (ctx) */
	TRACE_UPROBE = 2,     /* arg1..arg6 from the registers (System V ABI) */
	TRACE_URETPROBE = 3,  /* the return value (after its entry's payload) */
	TRACE_USDT = 4,       /* the probe's arguments as its note's specs say (libbpf) */
	TRACE_KPROBE = 5,
	TRACE_KRETPROBE = 6,
	TRACE_SYSCALL = 7,    /* a syscalls: tracepoint's record, built from tp_btf sys_enter/exit */
};

/* What record tells the generic programs about one attached event, by the attach cookie
 * (its index in trace_configs).
 * A tracepoint's payload is its record: fixed_size bytes, then the dynamic data its
 * __data_loc fields point at (each a u32 at data_loc_off: offset | len << 16).
 * A probe's payload is the 8-byte common header, __probe_ip, then one u64 per argument
 * (n_args).
 * A pair's exit (a return probe, the second tracepoint of --latency) names its entry
 * (entry = index + 1): the entry was kept per thread (entry_only), and the exit sends the
 * entry's payload, time and stacks with the time between; a return probe's exit appends
 * its return address and value (16 bytes). The filter runs on what is sent. */
struct trace_config {
	__u32 source;
	__u32 fixed_size;
	__u32 n_data_loc;
	__u16 data_loc_off[MAX_DATA_LOC];
	__u32 n_args;
	__u32 filter; /* index + 1 into the filters map; 0: every event passes */
	__u32 entry;
	__u32 entry_only;
	__u32 stacks; /* 1: take the kernel and user stacks */
	/* The payload's common_type: the tracepoint's id, or the id record gave the probe's
	 * format. (The kernel hands BPF a tracepoint's record with its first 8 bytes, the
	 * common header, overwritten: the header is written again here.) */
	__u32 common_type;
	/* --hist: what the event's histogram counts in the kernel (with --aggregate): HIST_NONE,
	 * HIST_FIELD (the payload's hist_size bytes at hist_off, hist_signed) or HIST_LATENCY. */
	__u32 hist;
	__u32 hist_off;
	__u32 hist_size;
	__u32 hist_signed;
};

enum trace_hist {
	HIST_NONE = 0,
	HIST_FIELD = 1,
	HIST_LATENCY = 2,
};

/* --aggregate of traced events (trace_agg.bpf.h): events counted per event, thread, stacks
 * (agg_stacks' ids, as on-CPU samples) and, with --hist, power-of-two bucket of the value:
 * 0 negative, 1 zero, i >= 2 [2^(i-2), 2^(i-1)) (analyze hist's numbering). */
struct trace_agg_key {
	__u32 event;
	__u32 pid; /* tgid */
	__u32 tid;
	__u32 bucket;
	__u64 kstack;
	__u64 ustack;
};

struct trace_agg_value {
	__u64 count;
	__u64 latency_ns; /* summed, for pairs */
	char comm[16];    /* the thread's at its first event */
};

/* One event that passed its filter: this struct up to kstack, then kstack_bytes of kernel
 * frames, ustack_bytes of user frames, raw_bytes of payload, then (DWARF mode, stack not
 * unwound here) stack_bytes of user stack from user_regs' sp. time_ns: when
 * it happened (for a pair, the exit); latency_ns: the time since its entry (0: no pair). */
struct trace_record {
	__u32 kind; /* EVENT_TRACE */
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u64 time_ns;
	__u64 latency_ns;
	__u32 event; /* the attach cookie: record's index of the event */
	__u32 raw_bytes;
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	char comm[16];
	__u64 user_regs[USER_REGS]; /* user_regs[7] (sp) 0: none */
	__u32 stack_bytes;
	__u32 _pad;
	/* A kept entry whose user stack could not be unwound yet: the word at user_regs' sp
	 * (the return address of a probed function), the stack being copied at its exit. */
	__u64 stack_top;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
};

/* An event assembled (too big for the BPF stack): sent as e, raw[..raw_bytes],
 * stack[..stack_bytes]. */
struct trace_buf {
	struct trace_record e;
	__u8 raw[MAX_TRACE_RAW];
	__u8 stack[MAX_OFFCPU_COPY];
};

/* A pair's entry, kept per thread until its exit (no stack copy: unwound here, or frame
 * pointers). */
struct trace_start {
	struct trace_record e;
	__u8 raw[MAX_TRACE_RAW];
};

/* An in-kernel filter (perf's tracepoint filter language, compiled by record): a postfix
 * program. F_CMP and F_STR push a truth onto a stack of bits; F_AND and F_OR pop two and
 * push one; F_NOT flips the top. The event passes if the bit left on top is set. */
enum filter_op {
	F_END = 0,
	F_CMP = 1, /* a number <cmp> imm */
	F_STR = 2, /* a string ==/!= patterns[str] */
	F_AND = 3,
	F_OR = 4,
	F_NOT = 5,
};

enum filter_cmp {
	FC_EQ = 0,
	FC_NE = 1,
	FC_LT = 2,
	FC_LE = 3,
	FC_GT = 4,
	FC_GE = 5,
	FC_AND = 6, /* field & imm != 0 (perf's '&') */
};

/* Where an operand comes from. */
enum filter_src {
	FS_RAW = 0,	 /* the payload at off, size bytes (FF_SIGNED: sign-extended) */
	FS_COMM = 1,	 /* the current task's comm (strings) */
	FS_PID = 2,	 /* tgid */
	FS_TID = 3,
	FS_CPU = 4,
	FS_DATA_LOC = 5, /* a string the u32 at off locates (offset | len << 16) */
};

enum filter_flags {
	FF_SIGNED = 1,
	FF_UNSIGNED_CMP = 2, /* compare as unsigned (an unsigned field) */
};

/* How a pattern matches (perf's simple globs). */
enum filter_match {
	FM_FULL = 0,   /* "x" */
	FM_FRONT = 1,  /* "x*" */
	FM_END = 2,    /* "*x" */
	FM_MIDDLE = 3, /* "*x*" */
};

struct filter_insn {
	__u8 op;
	__u8 cmp; /* F_CMP: enum filter_cmp; F_STR: FC_EQ or FC_NE */
	__u8 src;
	__u8 size; /* FS_RAW: 1, 2, 4, 8; a char array: its length */
	__u8 flags;
	__u8 str; /* F_STR: the pattern's index */
	__u16 off;
	__s64 imm;
};

struct filter_pattern {
	__u8 match;
	__u8 len;
	char text[FILTER_PATTERN_LEN];
};

struct filter_prog {
	__u32 n;
	__u32 _pad;
	struct filter_insn insns[FILTER_INSNS];
	struct filter_pattern patterns[FILTER_PATTERNS];
};

/* What a net_event reports (net.bpf.c). */
enum net_what {
	NET_CONN = 1,	    /* a TCP connection closed: its whole life */
	NET_RETRANSMIT = 2, /* tcp:tcp_retransmit_skb */
	NET_SEND_RESET = 3, /* tcp:tcp_send_reset */
	NET_RECV_RESET = 4, /* tcp:tcp_receive_reset */
	NET_DROP = 5,	    /* skb:kfree_skb of a socket's skb */
	NET_WAIT = 6,	    /* a socket call returned after blocking: the peer it waited on */
	NET_SEND = 7,	    /* an skb of a send call reached the device (netsend.bpf.c) */
};

/* Socket waits (net.bpf.c, offcpu.bpf.c): the off-CPU intervals of one thread blocked
 * inside a socket call (sk_wait_data, sk_stream_wait_memory... on its kernel stack), from
 * the end of the first until the call returns (sock_recv_length, sock_send_length), which
 * names the socket and sends them as one NET_WAIT. */
struct sock_wait {
	__u64 first_ns;	  /* the first interval's end (its off-CPU sample's time) */
	__u64 blocked_ns; /* the intervals' total */
	__u64 intervals;
};
/* Kernel functions a socket call blocks in (their address ranges, from kallsyms). */
#define SOCK_WAIT_FNS 4

/* A TCP connection's life, or something that happened to it. pid/tid/comm: the owner (the
 * thread current at connect, or for an accepted one at its first send or receive, else its
 * close; 0 if not seen); the stacks are the opener's at connect (NET_CONN; an accepted one's:
 * that first send or receive, or close()), else the current thread's where it belongs to the
 * owner (kernel stack only otherwise). Addresses in network order, ports in host order. */
struct net_event {
	__u32 kind; /* EVENT_NET */
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u64 time_ns;
	__u64 start_ns; /* when the connection was first seen (0: before recording began);
			 * NET_WAIT: the end of the call's first blocked interval; NET_SEND: the
			 * send call's start */
	__u64 tx_bytes; /* NET_CONN: tcp_sock bytes_acked at close; NET_RETRANSMIT: the skb's
			 * segments; NET_WAIT: ns blocked; NET_SEND: the skb's length */
	__u64 rx_bytes; /* NET_CONN: tcp_sock bytes_received at close; NET_RETRANSMIT: the
			 * segments TcpRetransSegs counted for it (0: given up before sending);
			 * NET_WAIT: intervals; NET_SEND: ns from the send call to net_dev_queue */
	__u32 what;	/* enum net_what */
	__u32 reason;	/* NET_DROP: enum skb_drop_reason; NET_SEND_RESET: sk_rst_reason;
			 * NET_WAIT: 0 a receive, 1 a send; NET_SEND: ns in the qdisc
			 * (net_dev_queue to net_dev_start_xmit) */
	__u16 family;	/* AF_INET or AF_INET6 */
	__u16 lport;
	__u16 rport;
	__u8 oldstate; /* NET_CONN: the state it closed from; else the current state */
	__u8 active;   /* 1: opened by connect(); 0: accepted or not seen opening */
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[16];
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
};

/* Sends followed to the device (netsend.bpf.c) come in two records, so that the stacks of a
 * send call cross the ring buffer once, not once per skb it produced: a net_call_event when
 * the call begins (the struct up to kstack, then the frames each stack holds, as
 * trace_record), and a net_skb_event (64 bytes) per skb that reaches the device, naming its
 * call by (sk, send_ns). record joins them into one NET_SEND net_event per skb (bpf crate,
 * netsend.rs). */
struct net_call_event {
	__u32 kind; /* EVENT_NET_CALL */
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u64 time_ns; /* the call's start: its skbs' send_ns */
	__u64 sk;      /* struct sock * */
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u8 state;
	__u8 same_stacks; /* 1: no frames; the stacks of the thread's last call that had them */
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[16];
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
	__u64 _room; /* a verifier-visible bound on a copy of ustack may reach 7 bytes past it */
};

struct net_skb_event {
	__u32 kind; /* EVENT_NET_SKB */
	__u32 cpu;
	__u64 time_ns;	/* net_dev_xmit */
	__u64 send_ns;	/* its call's start (net_call_event.time_ns); 0: a socket's tail */
	__u64 sk;	/* its call's socket */
	__u32 len;	/* the skb's length */
	__u32 qdisc_ns; /* net_dev_queue to net_dev_start_xmit */
	__u64 queue_ns; /* the call's start to net_dev_queue */
	/* The skbs it stands for: itself and those of its socket not followed since the last
	 * one that was (netsend.bpf.c's rate); a tail (send_ns 0), sent when the socket
	 * closes or the recording ends, stands for those not followed after its last. */
	__u32 skbs;
	__u32 _pad;
	__u64 skipped_bytes; /* the lengths of the skbs it stands for but itself */
};

/* ---- Sampled requests followed through the layers (requests.bpf.c, --follow). ---- */

/* Block requests and skbs followed per sampled call at most: a call writes at most
 * 2 + 3 * REQ_MAX_REQUESTS records (call, page cache, then writeback, issue and completion
 * of each request), or 2 + 3 * REQ_MAX_REQUESTS for a send (call, tcp, then qdisc, driver
 * and device of each skb). */
#define REQ_MAX_REQUESTS 4
/* Sampled calls one block request carries at most (the rest are not followed into it):
 * 1 MiB of 64 KiB writes. */
#define REQ_MARKS 16
/* Pages (and vector entries) looked at per block request for pages of sampled writes:
 * 16 MiB of 4 KiB pages. */
#define REQ_MAX_PAGES 4096

/* What a sampled call is (request_event.req_kind). */
enum request_kind {
	REQ_KIND_WRITE = 1, /* write(), pwrite(), writev() on a file */
	REQ_KIND_SEND = 2   /* sendto(), sendmsg(), write(), writev() on a socket */
};

/* The layer a sampled request passed (request_event.layer; analyze's names). */
enum request_layer {
	REQ_LAYER_CALL = 0,	      /* the call returned (bytes: its return value) */
	REQ_LAYER_PAGE_CACHE = 1,     /* its first page dirtied in the page cache */
	REQ_LAYER_WRITEBACK = 2,      /* a block request made of its pages (or, direct, by it) */
	REQ_LAYER_BLOCK_ISSUE = 3,    /* that request issued to the driver */
	REQ_LAYER_BLOCK_COMPLETE = 4, /* that request completed */
	REQ_LAYER_TCP = 5,	      /* the call entered TCP (tcp_sendmsg_locked) */
	REQ_LAYER_QDISC = 6,	      /* an skb with its data queued to the device (net_dev_queue) */
	REQ_LAYER_DRIVER = 7,	      /* the skb handed to the driver (net_dev_start_xmit) */
	REQ_LAYER_DEVICE = 8	      /* the driver took it (net_dev_xmit) */
};

/* request_event.flags */
#define REQ_FLAG_DIRECT 1 /* a block request the call itself made (O_DIRECT) */

/* A sampled request passed a layer. pid/tid/comm: the thread current there (a flusher's
 * kworker for writeback; whoever an interrupt came upon for a completion). */
struct request_event {
	__u32 kind; /* EVENT_REQUEST */
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u64 time_ns;
	__u64 id;      /* the sampled call's, unique in a recording (from 1) */
	__u64 call_ns; /* the call's entry */
	__u64 bytes;   /* the call's (page cache: asked for); a block request's or skb's later */
	__u32 layer;   /* enum request_layer */
	__u32 req_kind; /* enum request_kind */
	__u32 call_pid;
	__u32 call_tid;
	__u32 dev;     /* block layers: the disk (major << 20 | minor) */
	__u32 flags;   /* REQ_FLAG_* */
	char comm[16];
};

/* ---- Python frames (python.bpf.h): where an interpreter keeps them, per process. ---- */

/* Byte offsets into CPython's structures for one version (record's table per version). */
struct py_offsets {
	__u16 runtime_interp_head;     /* _PyRuntimeState.interpreters.head */
	__u16 interp_threads_head;     /* PyInterpreterState.threads.head */
	__u16 tstate_next;	       /* PyThreadState.next */
	__u16 tstate_native_thread_id; /* PyThreadState.native_thread_id */
	__u16 tstate_cframe;	       /* PyThreadState.cframe */
	__u16 cframe_current_frame;    /* _PyCFrame.current_frame */
	__u16 frame_code;	       /* _PyInterpreterFrame.f_code */
	__u16 frame_previous;	       /* _PyInterpreterFrame.previous */
	__u16 frame_prev_instr;	       /* _PyInterpreterFrame.prev_instr */
	__u16 frame_is_entry;	       /* _PyInterpreterFrame.is_entry */
	__u16 code_code_adaptive;      /* PyCodeObject.co_code_adaptive */
	__u16 frame_owner;	       /* _PyInterpreterFrame.owner (3.12 on) */
	__u16 flags;		       /* PY_ENTRY_BY_OWNER, PY_NO_CFRAME, ... below */
	/* The bytes of a frame that hold the fields above (frame_code to frame_owner), read
	 * at once: from frame_span_start, frame_span_len (at most PY_FRAME_SPAN) of them. */
	__u16 frame_span_start;
	__u16 frame_span_len;
	__u16 _pad;
};

/* py_offsets.flags. 3.12 on: no is_entry; each eval call links a frame of its own, owned by
 * the C stack, behind the first frame it runs (sent with bit 1 of its code set). 3.13 on: no
 * _PyCFrame; tstate_cframe is PyThreadState.current_frame. */
#define PY_ENTRY_BY_OWNER 1
#define PY_NO_CFRAME 2
/* 3.8 to 3.10: frame objects (tstate->frame, f_back, f_code), each its own eval call's (all
 * sent as entries); frame_prev_instr is f_lasti, an int sent as it is. */
#define PY_FRAME_OBJECTS 4
/* Before 3.11: no native_thread_id; tstate_native_thread_id is thread_id, the thread's
 * pthread_t, which is its TLS block's address: the task's fs base on x86-64. */
#define PY_THREAD_BY_PTHREAD 8
#define PY_FRAME_OWNED_BY_CSTACK 3

/* A process running CPython: its _PyRuntime's address and the offsets of its version. */
struct py_proc {
	__u64 runtime;
	struct py_offsets off;
};

/* A tracked thread group ended. */
struct exit_event {
	__u32 kind;
	__u32 pid;
	__u64 time_ns;
};

#endif
