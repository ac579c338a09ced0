// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Off-CPU time: sched_switch keeps, per thread that leaves the CPU, when and where (its
 * stacks, or registers and a stack copy); when the thread runs again, one event with the
 * interval, its run-queue part (from the preemption, or from the wakeup) and whether it
 * blocked inside a page fault. sched_waking notes the wakeup and who woke it. */
#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"
#include "python.bpf.h"

/* Off-CPU intervals shorter than this are not reported (ns). */
const volatile __u64 offcpu_min_ns = 1000;
const volatile bool offcpu_enabled = true;
/* With off-CPU: also who woke each blocked thread (sched_waking). */
const volatile bool wakeup_enabled = true;
/* Tests: about one switch back onto a CPU in this many runs no program (0: none), as where
 * the kernel hides it (see offcpu_ended_unseen). */
const volatile __u32 offcpu_unseen_every = 0;

struct offcpu_start {
	/* The event to send when the thread runs again, filled as it leaves (time_ns: then),
	 * so that it goes to the ring from here in one copy (bpf_ringbuf_output): copied field
	 * by field, its 2-3 KiB of stacks were ~1,000 instructions for the verifier to check on
	 * each path through the program. */
	struct offcpu_event e;
	__u64 wake_ns; /* when sched_waking woke it (0: not yet) */
	__u32 in_sock;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_BLOCKED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32); /* tid */
	__type(value, struct offcpu_start);
} offcpu_starts SEC(".maps");

/* Scratch space: values too big for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_start);
} offcpu_scratch SEC(".maps");

/* DWARF mode: what each blocked thread left behind, stack copy included. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_BLOCKED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32); /* tid */
	__type(value, struct offcpu_copy_buf);
} offcpu_copies SEC(".maps");

/* One per CPU, indexed by CPU number (values over 32 KiB do not fit per-CPU maps). Resized
 * to the number of CPUs before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_copy_buf);
} offcpu_copy_scratch SEC(".maps");

/* The waker of each blocked tracked thread, from sched_waking until the thread runs (an
 * entry lives for the wakeup latency). Preallocated: an update from an interrupt would
 * otherwise find the allocator's per-CPU cache empty now and then (ENOMEM). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WAKING);
	__type(key, __u32); /* wakee tid */
	__type(value, struct wakeup_event);
} wakers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wakeup_event);
} wakeup_scratch SEC(".maps");

/* Forces the event structs into BTF so the skeleton generates their Rust types. */
struct wakeup_event _wakeup_event = {};
struct offcpu_event _offcpu_event = {};
struct offcpu_copy_event _offcpu_copy_event = {};

/* Where handle_mm_fault lies in the kernel's text (from kallsyms, set by record once read;
 * 0: do not look). A thread that blocks with it on its kernel stack waits inside a page fault: for a
 * read from disk, or for a page that readahead is still reading. (Tracepoints are what this
 * program can attach to everywhere; fentry and kprobes need function tracing, which some
 * kernels, this CI's among them, refuse.) */
__u64 fault_fn_start = 0;
__u64 fault_fn_end = 0;

/* A look through a kernel stack for a function, one frame a bpf_loop step (the verifier
 * checks one step, not each frame's). */
struct kstack_scan {
	const __u64 *kstack;
	__s32 bytes;
	__u32 found;
};

static long fault_scan_step(__u32 i, struct kstack_scan *f)
{
	if (i >= MAX_STACK_DEPTH || i * 8 >= f->bytes)
		return 1;
	__u64 ip = f->kstack[i];
	f->found = ip >= fault_fn_start && ip < fault_fn_end;
	return f->found;
}

static __always_inline __u32 in_page_fault(const __u64 *kstack, __s32 bytes)
{
	if (!fault_fn_start)
		return 0;
	struct kstack_scan f = { .kstack = kstack, .bytes = bytes };
	bpf_loop(MAX_STACK_DEPTH, fault_scan_step, &f, 0);
	return f.found;
}

/* Where the functions a socket call blocks in lie (sk_wait_data, sk_stream_wait_memory,
 * __skb_wait_for_more_packets; from kallsyms, set by record with -e net; start 0: none). */
__u64 sock_fn_start[SOCK_WAIT_FNS] = {};
__u64 sock_fn_end[SOCK_WAIT_FNS] = {};
/* Frames of a blocked kernel stack looked at for them (they lie a few frames under
 * schedule()). */
#define SOCK_WAIT_DEPTH 12

static long sock_scan_step(__u32 i, struct kstack_scan *s)
{
	if (i >= SOCK_WAIT_DEPTH || i * 8 >= s->bytes)
		return 1;
	__u64 ip = s->kstack[i];
	for (int f = 0; f < SOCK_WAIT_FNS; f++) {
		if (ip >= sock_fn_start[f] && ip < sock_fn_end[f]) {
			s->found = 1;
			return 1;
		}
	}
	return 0;
}

/* Unrolled, the scan was 1,800 of on_switch's 10,600 instructions for the verifier. */
static __always_inline __u32 in_socket_wait(const __u64 *kstack, __s32 bytes)
{
	if (!sock_fn_start[0])
		return 0;
	struct kstack_scan s = { .kstack = kstack, .bytes = bytes };
	bpf_loop(SOCK_WAIT_DEPTH, sock_scan_step, &s, 0);
	return s.found;
}

/* A tracked thread blocked (state not 0): outside a socket call, a socket wait it had under
 * way is over (the call returned some way sock_recv_length does not see: accept, splice):
 * forgotten, so that it never labels another call. */
static __always_inline void sock_wait_forget(__u32 tid, __u32 state, __u32 in_sock)
{
	if (sock_fn_start[0] && state && !in_sock)
		bpf_map_delete_elem(&sock_waits, &tid);
}

/* An interval inside a socket call ended `now` after `duration`: added to the thread's socket
 * wait (the call's return sends it). */
static __always_inline void sock_wait_add(__u32 tid, __u64 now, __u64 duration)
{
	struct sock_wait *w = bpf_map_lookup_elem(&sock_waits, &tid);
	if (w) {
		w->blocked_ns += duration;
		w->intervals += 1;
		return;
	}
	struct sock_wait n = { .first_ns = now, .blocked_ns = duration, .intervals = 1 };
	bpf_map_update_elem(&sock_waits, &tid, &n, BPF_ANY);
}

/* Keeps the stacks of the thread that blocks: its user stack by frame pointers, or (DWARF
 * mode, `unwind`) unwound with the tables. false when there is no table for it: the caller
 * takes a stack copy, with what was read here (offcpu_scratch: the kernel stack, what it
 * shows, the Python frames). */
static __always_inline bool offcpu_keep_stacks(void *ctx, __u32 tgid, __u32 tid, __u64 now,
					       __u32 state, bool unwind)
{
	__u32 zero = 0;
	struct offcpu_start *s = bpf_map_lookup_elem(&offcpu_scratch, &zero);
	if (!s)
		return true;
	struct offcpu_event *e = &s->e;
	e->time_ns = now;
	s->wake_ns = 0;
	e->state = state & 3;
	e->kstack_bytes = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), TP_BTF_SKIP);
	e->in_fault = e->state ? in_page_fault(e->kstack, e->kstack_bytes) : 0;
	s->in_sock = e->state ? in_socket_wait(e->kstack, e->kstack_bytes) : 0;
	sock_wait_forget(tid, e->state, s->in_sock);
	read_python_frames(&e->py_frames, e->py_code, e->py_lasti, tgid, tid);
	if (unwind) {
		__s32 bytes = unwind_user_stack(tgid, e->ustack);
		if (bytes < 0)
			return false;
		e->ustack_bytes = bytes;
	} else {
		e->ustack_bytes = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
	}
	if (bpf_map_update_elem(&offcpu_starts, &tid, s, BPF_ANY))
		count_drop(EVENT_OFF_CPU);
	return true;
}

/* The run-queue part of an off-CPU interval that started at `start` and ends `now`: all of
 * it for a thread that left the CPU runnable (preempted, yielded), from its wakeup for one
 * that blocked. */
static __always_inline __u64 runq_time(__u32 state, __u64 start, __u64 wake, __u64 now)
{
	if (state == 0)
		return now - start;
	if (wake >= start && wake <= now)
		return now - wake;
	return 0;
}

/* A wakeup record without Python frames ends before them. */
#define WAKEUP_NO_PY offsetof(struct wakeup_event, py_frames)

/* Sends the waker of the interval that just ended (if one was seen), and forgets it. */
static __always_inline void wakeup_emit(__u32 wakee_pid, __u32 tid, __u64 now, __u64 duration)
{
	struct wakeup_event *w = bpf_map_lookup_elem(&wakers, &tid);
	if (!w)
		return;
	/* Sent from the map's value (the entry is deleted next), only as far as it holds
	 * frames. */
	w->kind = EVENT_WAKEUP;
	w->cpu = bpf_get_smp_processor_id();
	w->wakee_pid = wakee_pid;
	w->wakee_tid = tid;
	w->time_ns = now;
	w->blocked_ns = duration;
	__u64 size = w->py_frames ? sizeof(*w) : WAKEUP_NO_PY;
	if (bpf_ringbuf_output(&events, w, size, submit_flags()))
		count_drop(EVENT_WAKEUP);
}

/* Sends the interval of thread `tid` (of process `tgid`) kept in `s`, ended at `end`. */
static __always_inline void offcpu_emit_stacks(struct offcpu_start *s, __u32 tgid, __u32 tid,
					       __u64 end)
{
	struct offcpu_event *e = &s->e;
	__u64 duration = end - e->time_ns;
	if (duration >= offcpu_min_ns) {
		e->kind = EVENT_OFF_CPU;
		e->cpu = bpf_get_smp_processor_id();
		e->pid = tgid;
		e->tid = tid;
		e->runq_ns = runq_time(e->state, e->time_ns, s->wake_ns, end);
		e->time_ns = end;
		e->duration_ns = duration;
		if (bpf_ringbuf_output(&events, e, sizeof(*e), submit_flags()))
			count_drop(EVENT_OFF_CPU);
		else if (wakeup_enabled)
			wakeup_emit(tgid, tid, end, duration);
	}
	if (s->in_sock)
		sock_wait_add(tid, end, duration);
	bpf_map_delete_elem(&offcpu_starts, &tid);
	if (wakeup_enabled)
		bpf_map_delete_elem(&wakers, &tid);
}

/* DWARF mode: keep registers and a copy of the user stack of the thread that blocks, with
 * what offcpu_keep_stacks read before it found no table. */
static __always_inline void offcpu_keep_copy(struct task_struct *prev, __u32 tid)
{
	__u32 cpu = bpf_get_smp_processor_id(), zero = 0;
	struct offcpu_copy_buf *b = bpf_map_lookup_elem(&offcpu_copy_scratch, &cpu);
	struct offcpu_start *s = bpf_map_lookup_elem(&offcpu_scratch, &zero);
	if (!b || !s)
		return;
	struct offcpu_copy_event *e = &b->e;
	struct offcpu_event *from = &s->e;
	e->kind = EVENT_OFF_CPU_COPY;
	e->time_ns = from->time_ns;
	e->wake_ns = 0;
	e->state = from->state;
	e->kstack_bytes = from->kstack_bytes;
	/* Copies by the kernel (a helper call where a copy in BPF is an instruction for the
	 * verifier per word): only while a process's tables are not in. */
	bpf_probe_read_kernel(e->kstack, sizeof(e->kstack), from->kstack);
	e->in_fault = from->in_fault;
	e->in_sock = s->in_sock;
	keep_user_copy(prev, b);
	e->py_frames = from->py_frames;
	if (from->py_frames) {
		bpf_probe_read_kernel(e->py_code, sizeof(e->py_code), from->py_code);
		bpf_probe_read_kernel(e->py_lasti, sizeof(e->py_lasti), from->py_lasti);
	}
	if (bpf_map_update_elem(&offcpu_copies, &tid, b, BPF_ANY))
		count_drop(EVENT_OFF_CPU_COPY);
}

/* offcpu_emit_stacks for an interval kept with a stack copy (DWARF mode, no tables yet). */
static __always_inline void offcpu_emit_copy(struct offcpu_copy_buf *b, __u32 tgid, __u32 tid,
					     __u64 end)
{
	struct offcpu_copy_event *e = &b->e;
	__u64 duration = end - e->time_ns;
	if (duration >= offcpu_min_ns) {
		e->cpu = bpf_get_smp_processor_id();
		e->pid = tgid;
		e->tid = tid;
		e->duration_ns = duration;
		e->runq_ns = runq_time(e->state, e->time_ns, e->wake_ns, end);
		e->time_ns = end;
		__u64 size = sizeof(struct offcpu_copy_event) + e->stack_bytes;
		if (size > sizeof(*b))
			size = sizeof(*b);
		if (bpf_ringbuf_output(&events, b, size, submit_flags()))
			count_drop(EVENT_OFF_CPU_COPY);
		else if (wakeup_enabled)
			wakeup_emit(tgid, tid, end, duration);
	}
	if (e->in_sock)
		sock_wait_add(tid, end, duration);
	bpf_map_delete_elem(&offcpu_copies, &tid);
	if (wakeup_enabled)
		bpf_map_delete_elem(&wakers, &tid);
}

/* Intervals whose end no sched_switch showed, and that had no wakeup to end them at: not sent
 * (record says how many). */
__u64 offcpu_unseen_ends = 0;

/* include/linux/sched.h: the state of a thread's last switch (macros do not reach BTF). */
#define TASK_DEAD_STATE 0x80

/* Where an interval that started at `start` ended, its thread seen running at `now` without a
 * sched_switch that brought it back: where the caller knows it just came back (`back`), now;
 * else at its wakeup, where one was seen (the run-queue part is not known); else 0. */
static __always_inline __u64 unseen_end(__u64 start, __u64 wake, __u64 now, bool back)
{
	if (back)
		return now;
	if (wake > start && wake <= now)
		return wake;
	return 0;
}

/* Thread `tid` of process `tgid` runs at `now` (it leaves the CPU, or returns from a socket
 * call) with an interval still under way: no sched_switch program ran when it came back. Some
 * hosts hide switches from tracing, ftrace's event included: on the machines this project is
 * built on, every switch away from their agent's threads (about one a second of a thread that
 * blocks often). The interval is sent, ended by unseen_end (`back`: the socket call it blocked
 * in returns), or counted. Global: checked once for both callers. */
int offcpu_ended_unseen(__u32 tgid, __u32 tid, __u64 now, __u32 back)
{
	if (!offcpu_enabled)
		return 0;
	struct offcpu_start *s = bpf_map_lookup_elem(&offcpu_starts, &tid);
	if (s) {
		__u64 end = unseen_end(s->e.time_ns, s->wake_ns, now, back && s->in_sock);
		if (end) {
			offcpu_emit_stacks(s, tgid, tid, end);
		} else {
			__sync_fetch_and_add(&offcpu_unseen_ends, 1);
			bpf_map_delete_elem(&offcpu_starts, &tid);
		}
		return 1;
	}
	struct offcpu_copy_buf *b =
		stack_copy_bytes ? bpf_map_lookup_elem(&offcpu_copies, &tid) : NULL;
	if (!b)
		return 0;
	__u64 end = unseen_end(b->e.time_ns, b->e.wake_ns, now, back && b->e.in_sock);
	if (end) {
		offcpu_emit_copy(b, tgid, tid, end);
	} else {
		__sync_fetch_and_add(&offcpu_unseen_ends, 1);
		bpf_map_delete_elem(&offcpu_copies, &tid);
	}
	return 1;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	if (!offcpu_enabled)
		return 0;
	__u64 now = bpf_ktime_get_ns();

	/* prev leaves the CPU: remember when and where (prev is still current here). A
	 * preempted thread stays runnable whatever its state says (it may have been preempted
	 * on its way to sleep). */
	__u32 ptgid = prev->tgid, ptid = prev->pid;
	if (preempt)
		prev_state = 0;
	/* A thread's last switch starts no interval: none would end it, and its tid's next
	 * thread would find it (one under way ended at its exit: follow.bpf.c). */
	if (ptgid && !(prev_state & TASK_DEAD_STATE) && tracked(ptgid)) {
		offcpu_ended_unseen(ptgid, ptid, now, 0);
		/* DWARF mode: unwound where the tables are, a stack copy where not. */
		bool unwind = stack_copy_bytes != 0;
		if (!offcpu_keep_stacks(ctx, ptgid, ptid, now, prev_state, unwind))
			offcpu_keep_copy(prev, ptid);
	}

	/* next comes back: report how long it was away (its interval is in one map or the
	 * other). */
	__u32 ntid = next->pid;
	if (unseen_by_construction(offcpu_unseen_every, now))
		return 0;
	struct offcpu_start *s = bpf_map_lookup_elem(&offcpu_starts, &ntid);
	if (s)
		offcpu_emit_stacks(s, next->tgid, ntid, now);
	struct offcpu_copy_buf *b =
		stack_copy_bytes ? bpf_map_lookup_elem(&offcpu_copies, &ntid) : NULL;
	if (b)
		offcpu_emit_copy(b, next->tgid, ntid, now);
	return 0;
}

/* x86-64 task stacks are THREAD_SIZE bytes (16 KiB; 32 KiB with KASAN, a debug kernel). */
#define TASK_STACK_SIZE (16 * 1024)

/* Whether we run in an interrupt (hard or soft) rather than on behalf of `current`: x86-64
 * runs interrupts on a per-CPU stack, so the tracepoint's arguments (`ctx`: an array the
 * tracing glue keeps on the stack it runs on) lie outside the task's stack. (Not this
 * program's own frame: the JIT may give a program a private per-CPU stack, and then every
 * wakeup looked like an interrupt's. The preempt count would say it directly, but per-CPU
 * variables are not kernel symbols without CONFIG_KALLSYMS_ALL.) */
static __always_inline bool in_interrupt_context(void *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 base = (__u64)task->stack;
	__u64 here = 0;
	/* The arguments' address as a number (the verifier keeps such pointers opaque). */
	bpf_probe_read_kernel(&here, sizeof(here), &ctx);
	return here - base >= TASK_STACK_SIZE;
}

/* A blocked tracked thread is being woken: note when (its wait for a CPU starts), and keep
 * who woke it and from where. Only threads with an off-CPU interval under way are looked at,
 * so running threads' wakeups cost a lookup. */
SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	if (!offcpu_enabled)
		return 0;
	__u32 tgid = p->tgid, tid = p->pid;
	if (!tgid || !tracked(tgid))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	/* The wakeup starts the interval's run-queue part. */
	struct offcpu_start *s = bpf_map_lookup_elem(&offcpu_starts, &tid);
	if (s) {
		s->wake_ns = now;
	} else {
		struct offcpu_copy_buf *b =
			stack_copy_bytes ? bpf_map_lookup_elem(&offcpu_copies, &tid) : NULL;
		if (!b)
			return 0;
		b->e.wake_ns = now;
	}
	if (!wakeup_enabled)
		return 0;
	__u32 zero = 0;
	struct wakeup_event *w = bpf_map_lookup_elem(&wakeup_scratch, &zero);
	if (!w)
		return 0;
	w->wake_ns = now;
	w->kstack_bytes = bpf_get_stack(ctx, w->kstack, sizeof(w->kstack), TP_BTF_SKIP);
	if (in_interrupt_context(ctx)) {
		/* An interrupt (a completed disk request, a timer): the task it interrupted has
		 * nothing to do with it. The kernel stack says which interrupt. */
		w->pid = 0;
		w->tid = 0;
		__builtin_memcpy(w->comm, "[interrupt]", 12);
		w->ustack_bytes = 0;
		w->py_frames = 0;
	} else {
		__u64 id = bpf_get_current_pid_tgid();
		w->pid = id >> 32;
		w->tid = (__u32)id;
		bpf_get_current_comm(w->comm, sizeof(w->comm));
		/* The waker's user stack: unwound where it has tables (a followed thread, in
		 * DWARF mode), else by frame pointers. */
		__s32 unwound = w->pid ? unwind_user_stack(w->pid, w->ustack) : -1;
		if (unwound >= 0)
			w->ustack_bytes = unwound;
		else
			w->ustack_bytes = w->pid ? bpf_get_stack(ctx, w->ustack, sizeof(w->ustack),
								 BPF_F_USER_STACK)
						 : 0;
		/* A followed Python thread's frames (the waker is current). */
		read_python_frames(&w->py_frames, w->py_code, w->py_lasti, w->pid, w->tid);
	}
	if (bpf_map_update_elem(&wakers, &tid, w, BPF_ANY))
		count_drop(EVENT_WAKEUP);
	return 0;
}
