// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* On-CPU sampling: a perf_event program on cpu-clock events captures kernel and user stacks
 * (frame pointers) of the tracked processes; fork/exit tracepoints keep the tracked set. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpfperf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set before load: record every process, not only the tracked ones. */
const volatile bool system_wide = false;
/* DWARF mode: copy up to this many bytes of user stack per sample (0: frame pointers). */
const volatile __u32 stack_copy_bytes = 0;
/* Wake the reader only when this many bytes wait in the ring buffer (the reader also polls
 * with a timeout): waking it per record would preempt the workload (see design.md). */
const volatile __u64 wakeup_bytes = 256 * 1024;

/* Tracked thread groups (tgid -> 1). Seeded from user space, grown by fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized from the sampling rate before load */
} events SEC(".maps");

/* Events lost, per CPU, indexed by event kind: they did not fit in the ring buffer (or, for
 * off-CPU and block I/O starts, in their map). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EVENT_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* On-CPU samples taken of tracked tasks, per CPU: each one is either in the ring buffer or
 * counted in drops[EVENT_ON_CPU]. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} taken SEC(".maps");

/* Forces the event structs into BTF so the skeleton generates their Rust types. */
struct sample_event _sample_event = {};
struct exit_event _exit_event = {};
/* Likewise the enums the Rust side reads (event kinds, limits). */
enum event_kind _event_kind = 0;
enum bpfperf_limits _limits = 0;

static __always_inline bool tracked(__u32 tgid)
{
	return system_wide || bpf_map_lookup_elem(&pids, &tgid);
}

static __always_inline void count(void *map, __u32 key)
{
	__u64 *n = bpf_map_lookup_elem(map, &key);
	if (n)
		*n += 1;
}

static __always_inline void count_drop(__u32 kind)
{
	count(&drops, kind);
}

static __always_inline __u64 submit_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									      : BPF_RB_NO_WAKEUP;
}

/* One buffer per CPU, indexed by CPU number: per-CPU maps cap values at 32 KiB, and perf_event
 * programs cannot be preempted. Resized to the number of CPUs before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_buf);
} sample_scratch SEC(".maps");

/* The end of the useful user stack above sp: nothing above the outermost frame is needed.
 * In a thread, glibc's thread descriptor sits at the thread pointer (fs) above the stack; in
 * the main thread, the initial stack pointer (mm->start_stack) is where _start began.
 * Otherwise the cap applies, and the copy stops at the first unreadable page. (bpf_find_vma
 * would give the stack's mapping end, but from the cpu-clock timer it stalled sampling on
 * one CPU here.) */
static __always_inline __u64 stack_copy_len(struct task_struct *task, __u64 sp, __u64 cap)
{
	__u64 end = sp + cap;
	__u64 fsbase = task->thread.fsbase;
	if (fsbase > sp && fsbase < end)
		end = fsbase;
	struct mm_struct *mm = task->mm;
	if (mm) {
		__u64 start_stack = mm->start_stack + 16;
		if (start_stack > sp && start_stack < end)
			end = start_stack;
	}
	__u64 len = end - sp;
	return len > cap ? cap : len;
}

/* Copies `len` bytes of user stack from sp into `dst` (PAGES pages at most) page by page: an
 * unreadable page ends the copy but keeps what came before. Returns the bytes copied. */
#define DEFINE_COPY_USER_STACK(name, PAGES)                                                    \
	static __always_inline __u32 name(__u8 *dst, __u64 sp, __u64 len)                     \
	{                                                                                      \
		__u32 copied = 0;                                                              \
		_Pragma("unroll") for (int i = 0; i < (PAGES); i++)                            \
		{                                                                              \
			__u32 off = i * 4096;                                                  \
			if (off >= len)                                                        \
				break;                                                         \
			__u64 rem = len - off;                                                 \
			if (rem >= 4096) {                                                     \
				if (bpf_probe_read_user(dst + off, 4096, (void *)(sp + off)))  \
					break;                                                 \
				copied = off + 4096;                                           \
			} else {                                                               \
				__u32 n = rem & 4095;                                          \
				if (n && !bpf_probe_read_user(dst + off, n, (void *)(sp + off))) \
					copied = off + n;                                      \
				break;                                                         \
			}                                                                      \
		}                                                                              \
		return copied;                                                                 \
	}
DEFINE_COPY_USER_STACK(copy_sample_stack, MAX_STACK_COPY / 4096)
DEFINE_COPY_USER_STACK(copy_offcpu_stack, MAX_OFFCPU_COPY / 4096)

/* The 20 user registers perf records, in its order (AX BX CX DX SI DI BP SP IP FLAGS CS SS
 * R8..R15). */
static __always_inline void fill_user_regs(__u64 *r, struct pt_regs *regs)
{
	r[0] = regs->ax;
	r[1] = regs->bx;
	r[2] = regs->cx;
	r[3] = regs->dx;
	r[4] = regs->si;
	r[5] = regs->di;
	r[6] = regs->bp;
	r[7] = regs->sp;
	r[8] = regs->ip;
	r[9] = regs->flags;
	r[10] = regs->cs;
	r[11] = regs->ss;
	r[12] = regs->r8;
	r[13] = regs->r9;
	r[14] = regs->r10;
	r[15] = regs->r11;
	r[16] = regs->r12;
	r[17] = regs->r13;
	r[18] = regs->r14;
	r[19] = regs->r15;
}

/* DWARF mode: registers and a stack copy instead of a frame-pointer walk. */
static __always_inline int sample_with_stack_copy(struct bpf_perf_event_data *ctx, __u32 tgid,
						  __u32 tid)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct sample_buf *buf = bpf_map_lookup_elem(&sample_scratch, &cpu);
	if (!buf) {
		count_drop(EVENT_ON_CPU);
		return 0;
	}
	struct sample_event *e = &buf->e;
	e->kind = EVENT_ON_CPU;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = tgid;
	e->tid = tid;
	e->time_ns = bpf_ktime_get_ns();
	e->period = ctx->sample_period;
	e->kstack_bytes = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->ustack_bytes = 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	fill_user_regs(e->user_regs, regs);
	__u64 sp = regs->sp;
	e->stack_bytes = copy_sample_stack(buf->stack, sp, stack_copy_len(task, sp, stack_copy_bytes));
	__u64 size = sizeof(struct sample_event) + e->stack_bytes;
	if (size > sizeof(*buf))
		size = sizeof(*buf);
	if (bpf_ringbuf_output(&events, buf, size, submit_flags()))
		count_drop(EVENT_ON_CPU);
	return 0;
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (tgid == 0 || !tracked(tgid))
		return 0;
	count(&taken, 0);
	if (stack_copy_bytes)
		return sample_with_stack_copy(ctx, tgid, (__u32)id);

	struct sample_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_ON_CPU);
		return 0;
	}
	e->kind = EVENT_ON_CPU;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = tgid;
	e->tid = (__u32)id;
	e->time_ns = bpf_ktime_get_ns();
	e->period = ctx->sample_period;
	e->kstack_bytes = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->ustack_bytes = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
	e->stack_bytes = 0;
	bpf_ringbuf_submit(e, submit_flags());
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;
	if (!system_wide && ptgid != ctgid && bpf_map_lookup_elem(&pids, &ptgid))
		bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task, bool group_dead)
{
	__u32 tgid = task->tgid;
	if (!group_dead || system_wide || !bpf_map_lookup_elem(&pids, &tgid))
		return 0;
	bpf_map_delete_elem(&pids, &tgid);
	struct exit_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_EXIT);
		return 0;
	}
	e->kind = EVENT_EXIT;
	e->pid = tgid;
	e->time_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/* ---- Off-CPU: switch-out keeps the stack, switch-in emits the interval. ---- */

/* Off-CPU intervals shorter than this are not reported (ns). */
const volatile __u64 offcpu_min_ns = 1000;
const volatile bool offcpu_enabled = true;
/* With off-CPU: also who woke each blocked thread (sched_waking). */
const volatile bool wakeup_enabled = true;
const volatile bool io_enabled = true;

struct offcpu_start {
	__u64 time_ns;
	__u64 wake_ns; /* when sched_waking woke it (0: not yet) */
	__u32 state;
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u32 in_fault;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
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

struct wakeup_event _wakeup_event = {};
struct offcpu_event _offcpu_event = {};
struct offcpu_copy_event _offcpu_copy_event = {};
struct block_io_event _block_io_event = {};

/* tp_btf stacks start in the BPF trampoline and the tracepoint: skip those frames. */
#define TP_BTF_SKIP 2

/* Where handle_mm_fault lies in the kernel's text (from kallsyms, set by record once read;
 * 0: do not look). A thread that blocks with it on its kernel stack waits inside a page fault: for a
 * read from disk, or for a page that readahead is still reading. (Tracepoints are what this
 * program can attach to everywhere; fentry and kprobes need function tracing, which some
 * kernels, this CI's among them, refuse.) */
__u64 fault_fn_start = 0;
__u64 fault_fn_end = 0;

static __always_inline __u32 in_page_fault(const __u64 *kstack, __s32 bytes)
{
	if (!fault_fn_start)
		return 0;
	for (int i = 0; i < MAX_STACK_DEPTH; i++) {
		if (i * 8 >= bytes)
			break;
		if (kstack[i] >= fault_fn_start && kstack[i] < fault_fn_end)
			return 1;
	}
	return 0;
}

static __always_inline void offcpu_keep_stacks(void *ctx, __u32 tid, __u64 now, __u32 state)
{
	__u32 zero = 0;
	struct offcpu_start *s = bpf_map_lookup_elem(&offcpu_scratch, &zero);
	if (!s)
		return;
	s->time_ns = now;
	s->wake_ns = 0;
	s->state = state & 3;
	s->kstack_bytes = bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), TP_BTF_SKIP);
	s->ustack_bytes = bpf_get_stack(ctx, s->ustack, sizeof(s->ustack), BPF_F_USER_STACK);
	s->in_fault = s->state ? in_page_fault(s->kstack, s->kstack_bytes) : 0;
	if (bpf_map_update_elem(&offcpu_starts, &tid, s, BPF_ANY))
		count_drop(EVENT_OFF_CPU);
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

/* Sends the waker of the interval that just ended (if one was seen), and forgets it. */
static __always_inline void wakeup_emit(__u32 wakee_pid, __u32 tid, __u64 now, __u64 duration)
{
	struct wakeup_event *w = bpf_map_lookup_elem(&wakers, &tid);
	if (!w)
		return;
	struct wakeup_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		/* Too big for an inlined copy; map values are kernel memory. */
		bpf_probe_read_kernel(e, sizeof(*e), w);
		e->kind = EVENT_WAKEUP;
		e->cpu = bpf_get_smp_processor_id();
		e->wakee_pid = wakee_pid;
		e->wakee_tid = tid;
		e->time_ns = now;
		e->blocked_ns = duration;
		bpf_ringbuf_submit(e, submit_flags());
	} else {
		count_drop(EVENT_WAKEUP);
	}
}

static __always_inline void offcpu_emit_stacks(struct task_struct *next, __u32 tid, __u64 now)
{
	struct offcpu_start *s = bpf_map_lookup_elem(&offcpu_starts, &tid);
	if (!s)
		return;
	__u64 duration = now - s->time_ns;
	if (duration >= offcpu_min_ns) {
		struct offcpu_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (e) {
			e->kind = EVENT_OFF_CPU;
			e->cpu = bpf_get_smp_processor_id();
			e->pid = next->tgid;
			e->tid = tid;
			e->time_ns = now;
			e->duration_ns = duration;
			e->runq_ns = runq_time(s->state, s->time_ns, s->wake_ns, now);
			e->state = s->state;
			e->in_fault = s->in_fault;
			e->kstack_bytes = s->kstack_bytes;
			e->ustack_bytes = s->ustack_bytes;
			__builtin_memcpy(e->kstack, s->kstack, sizeof(e->kstack));
			__builtin_memcpy(e->ustack, s->ustack, sizeof(e->ustack));
			bpf_ringbuf_submit(e, submit_flags());
			if (wakeup_enabled)
				wakeup_emit(next->tgid, tid, now, duration);
		} else {
			count_drop(EVENT_OFF_CPU);
		}
	}
	bpf_map_delete_elem(&offcpu_starts, &tid);
	if (wakeup_enabled)
		bpf_map_delete_elem(&wakers, &tid);
}

/* DWARF mode: `task`'s user registers and a copy of its user stack (off-CPU and dirty
 * events, capped at MAX_OFFCPU_COPY). */
static __always_inline void keep_user_copy(struct task_struct *task, struct offcpu_copy_buf *b)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	fill_user_regs(b->e.user_regs, regs);
	__u64 sp = regs->sp;
	__u64 cap = stack_copy_bytes < MAX_OFFCPU_COPY ? stack_copy_bytes : MAX_OFFCPU_COPY;
	b->e.stack_bytes = copy_offcpu_stack(b->stack, sp, stack_copy_len(task, sp, cap));
}

/* DWARF mode: keep registers and a copy of the user stack of the thread that blocks. */
static __always_inline void offcpu_keep_copy(void *ctx, struct task_struct *prev, __u32 tid,
					     __u64 now, __u32 state)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct offcpu_copy_buf *b = bpf_map_lookup_elem(&offcpu_copy_scratch, &cpu);
	if (!b)
		return;
	struct offcpu_copy_event *e = &b->e;
	e->kind = EVENT_OFF_CPU_COPY;
	e->time_ns = now;
	e->wake_ns = 0;
	e->state = state & 3;
	e->kstack_bytes = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), TP_BTF_SKIP);
	e->in_fault = e->state ? in_page_fault(e->kstack, e->kstack_bytes) : 0;
	keep_user_copy(prev, b);
	if (bpf_map_update_elem(&offcpu_copies, &tid, b, BPF_ANY))
		count_drop(EVENT_OFF_CPU_COPY);
}

static __always_inline void offcpu_emit_copy(struct task_struct *next, __u32 tid, __u64 now)
{
	struct offcpu_copy_buf *b = bpf_map_lookup_elem(&offcpu_copies, &tid);
	if (!b)
		return;
	struct offcpu_copy_event *e = &b->e;
	__u64 duration = now - e->time_ns;
	if (duration >= offcpu_min_ns) {
		e->cpu = bpf_get_smp_processor_id();
		e->pid = next->tgid;
		e->tid = tid;
		e->duration_ns = duration;
		e->runq_ns = runq_time(e->state, e->time_ns, e->wake_ns, now);
		e->time_ns = now;
		__u64 size = sizeof(struct offcpu_copy_event) + e->stack_bytes;
		if (size > sizeof(*b))
			size = sizeof(*b);
		if (bpf_ringbuf_output(&events, b, size, submit_flags()))
			count_drop(EVENT_OFF_CPU_COPY);
		else if (wakeup_enabled)
			wakeup_emit(next->tgid, tid, now, duration);
	}
	bpf_map_delete_elem(&offcpu_copies, &tid);
	if (wakeup_enabled)
		bpf_map_delete_elem(&wakers, &tid);
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
	if (ptgid && tracked(ptgid)) {
		if (stack_copy_bytes)
			offcpu_keep_copy(ctx, prev, ptid, now, prev_state);
		else
			offcpu_keep_stacks(ctx, ptid, now, prev_state);
	}

	/* next comes back: report how long it was away. */
	__u32 ntid = next->pid;
	if (stack_copy_bytes)
		offcpu_emit_copy(next, ntid, now);
	else
		offcpu_emit_stacks(next, ntid, now);
	return 0;
}

/* x86-64 task stacks are THREAD_SIZE bytes (16 KiB; 32 KiB with KASAN, a debug kernel). */
#define TASK_STACK_SIZE (16 * 1024)

/* Whether we run in an interrupt (hard or soft) rather than on behalf of `current`: x86-64
 * runs interrupts on a per-CPU stack, so this program's own stack frame lies outside the
 * task's stack. (The preempt count would say it directly, but per-CPU variables are not
 * kernel symbols without CONFIG_KALLSYMS_ALL.) */
static __always_inline bool in_interrupt_context(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 base = (__u64)task->stack;
	void *frame = &base;
	__u64 here = 0;
	/* The frame's address as a number (the verifier keeps stack pointers opaque). */
	bpf_probe_read_kernel(&here, sizeof(here), &frame);
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
	if (stack_copy_bytes) {
		struct offcpu_copy_buf *b = bpf_map_lookup_elem(&offcpu_copies, &tid);
		if (!b)
			return 0;
		b->e.wake_ns = now;
	} else {
		struct offcpu_start *s = bpf_map_lookup_elem(&offcpu_starts, &tid);
		if (!s)
			return 0;
		s->wake_ns = now;
	}
	if (!wakeup_enabled)
		return 0;
	__u32 zero = 0;
	struct wakeup_event *w = bpf_map_lookup_elem(&wakeup_scratch, &zero);
	if (!w)
		return 0;
	w->wake_ns = now;
	w->kstack_bytes = bpf_get_stack(ctx, w->kstack, sizeof(w->kstack), TP_BTF_SKIP);
	if (in_interrupt_context()) {
		/* An interrupt (a completed disk request, a timer): the task it interrupted has
		 * nothing to do with it. The kernel stack says which interrupt. */
		w->pid = 0;
		w->tid = 0;
		__builtin_memcpy(w->comm, "[interrupt]", 12);
		w->ustack_bytes = 0;
	} else {
		__u64 id = bpf_get_current_pid_tgid();
		w->pid = id >> 32;
		w->tid = (__u32)id;
		bpf_get_current_comm(w->comm, sizeof(w->comm));
		w->ustack_bytes =
			w->pid ? bpf_get_stack(ctx, w->ustack, sizeof(w->ustack), BPF_F_USER_STACK) : 0;
	}
	if (bpf_map_update_elem(&wakers, &tid, w, BPF_ANY))
		count_drop(EVENT_WAKEUP);
	return 0;
}

/* ---- Block I/O: issue keeps who and where, completion emits the latency. ---- */

struct io_start {
	__u64 issue_ns;
	__u32 pid;
	__u32 tid;
	char comm[16];
	__u8 tracked;
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u32 dirtier_pid;
	__u32 dirtier_tid;
	__u64 dirty_ns;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64); /* struct request * */
	__type(value, struct io_start);
} io_starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct io_start);
} io_scratch SEC(".maps");

/* blktrace's rwbs letters for a request's flags. */
static __always_inline void fill_rwbs(char *rwbs, __u32 flags)
{
	int i = 0;
	__u32 op = flags & 0xff;
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH)))
		rwbs[i++] = 'F';
	if (op == REQ_OP_WRITE)
		rwbs[i++] = 'W';
	else if (op == REQ_OP_DISCARD)
		rwbs[i++] = 'D';
	else if (op == REQ_OP_FLUSH)
		rwbs[i++] = 'F';
	else if (op == REQ_OP_READ)
		rwbs[i++] = 'R';
	else
		rwbs[i++] = 'N';
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA)))
		rwbs[i++] = 'F';
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD)))
		rwbs[i++] = 'A';
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC)))
		rwbs[i++] = 'S';
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_META)))
		rwbs[i++] = 'M';
}

/* ---- Writeback charged to the dirtier: pages remember who dirtied them. ---- */

/* A thread's writes from one place (the same user instruction and stack pointer: the same
 * call) closer together than this are one burst: one dirty_event (with its stacks) stands
 * for all the pages of the burst. Another place starts a new burst (open() dirtying the
 * inode's block, then write() the data, are two). */
#define DIRTY_BURST_NS (100 * 1000 * 1000ull)

/* A page of a file, as writeback finds it again. */
struct page_key {
	__u64 mapping;
	__u64 index;
};

struct dirtier {
	__u32 pid;
	__u32 tid;
	__u64 dirty_ns; /* the burst's dirty_event */
};

/* Dirty pages (folios) of tracked threads, for their writeback: the least recently used go
 * first when it is full; dirtied again by a tracked thread, a page takes its new dirtier. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct page_key);
	__type(value, struct dirtier);
} dirtiers SEC(".maps");

struct dirty_burst {
	__u64 start_ns;
	__u64 last_ns;
	__u64 ip;
	__u64 sp;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct dirty_burst);
} dirty_bursts SEC(".maps");

/* What a dirty event's two layouts (offcpu_event, offcpu_copy_event) name alike: the
 * current thread, the time, its kernel stack, and no interval. */
#define DIRTY_HEAD(e, event_kind, ctx, now)                                                     \
	do {                                                                                   \
		__u64 id = bpf_get_current_pid_tgid();                                         \
		(e)->kind = (event_kind);                                                      \
		(e)->cpu = bpf_get_smp_processor_id();                                         \
		(e)->pid = id >> 32;                                                           \
		(e)->tid = (__u32)id;                                                          \
		(e)->time_ns = (now);                                                          \
		(e)->duration_ns = 0;                                                          \
		(e)->runq_ns = 0;                                                              \
		(e)->state = 0;                                                                \
		(e)->in_fault = 0;                                                             \
		(e)->kstack_bytes =                                                            \
			bpf_get_stack((ctx), (e)->kstack, sizeof((e)->kstack), TP_BTF_SKIP);    \
	} while (0)

/* Sends where the current thread starts a burst of dirtying (the write() that does it):
 * reserved whole in the ring, as this runs preemptible. */
static __always_inline void dirty_emit(void *ctx, __u64 now)
{
	if (stack_copy_bytes) {
		struct offcpu_copy_buf *b = bpf_ringbuf_reserve(&events, sizeof(*b), 0);
		if (!b) {
			count_drop(EVENT_DIRTY_COPY);
			return;
		}
		DIRTY_HEAD(&b->e, EVENT_DIRTY_COPY, ctx, now);
		b->e.wake_ns = 0;
		keep_user_copy(bpf_get_current_task_btf(), b);
		bpf_ringbuf_submit(b, submit_flags());
		return;
	}
	struct offcpu_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_DIRTY);
		return;
	}
	DIRTY_HEAD(e, EVENT_DIRTY, ctx, now);
	e->ustack_bytes = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
	bpf_ringbuf_submit(e, submit_flags());
}

/* A tracked thread dirtied `folio`: remember it for the folio's writeback. */
static __always_inline void remember_dirtier(void *ctx, struct folio *folio,
					     struct address_space *mapping)
{
	if (!io_enabled)
		return;
	__u64 now = bpf_ktime_get_ns();
	struct dirty_burst *b = bpf_task_storage_get(&dirty_bursts, bpf_get_current_task_btf(), 0,
						     BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!b)
		return;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	__u64 ip = regs->ip, sp = regs->sp;
	if (!b->start_ns || now - b->last_ns > DIRTY_BURST_NS || ip != b->ip || sp != b->sp) {
		b->start_ns = now;
		b->ip = ip;
		b->sp = sp;
		dirty_emit(ctx, now);
	}
	b->last_ns = now;
	__u64 id = bpf_get_current_pid_tgid();
	struct page_key key = {
		.mapping = (__u64)mapping,
		.index = BPF_CORE_READ(folio, index),
	};
	struct dirtier d = { .pid = id >> 32, .tid = (__u32)id, .dirty_ns = b->start_ns };
	bpf_map_update_elem(&dirtiers, &key, &d, BPF_ANY);
}

/* The dirtier of a write request's first page, if a tracked thread dirtied it. */
static __always_inline void find_dirtier(struct request *rq, struct io_start *s)
{
	s->dirtier_pid = 0;
	s->dirtier_tid = 0;
	s->dirty_ns = 0;
	struct bio *bio = BPF_CORE_READ(rq, bio);
	if (!bio)
		return;
	struct bio_vec *bv = BPF_CORE_READ(bio, bi_io_vec);
	if (!bv)
		return;
	struct page *page = BPF_CORE_READ(bv, bv_page);
	if (!page)
		return;
	/* A tail page names its folio's head (low bit set). */
	unsigned long head = BPF_CORE_READ(page, compound_head);
	struct folio *folio = (head & 1) ? (struct folio *)(head - 1) : (struct folio *)page;
	struct page_key key = {
		.mapping = (__u64)BPF_CORE_READ(folio, mapping),
		.index = BPF_CORE_READ(folio, index),
	};
	struct dirtier *d = bpf_map_lookup_elem(&dirtiers, &key);
	if (!d)
		return;
	/* Kept: a large folio's writeback can take several requests. */
	s->dirtier_pid = d->pid;
	s->dirtier_tid = d->tid;
	s->dirty_ns = d->dirty_ns;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_block_issue, struct request *rq)
{
	if (!io_enabled)
		return 0;
	__u32 zero = 0;
	struct io_start *s = bpf_map_lookup_elem(&io_scratch, &zero);
	if (!s)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u64 key = (__u64)rq;
	s->issue_ns = bpf_ktime_get_ns();
	s->pid = id >> 32;
	s->tid = (__u32)id;
	bpf_get_current_comm(s->comm, sizeof(s->comm));
	s->tracked = s->pid && tracked(s->pid);
	s->kstack_bytes = bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), TP_BTF_SKIP);
	s->ustack_bytes = bpf_get_stack(ctx, s->ustack, sizeof(s->ustack), BPF_F_USER_STACK);
	find_dirtier(rq, s);
	if (bpf_map_update_elem(&io_starts, &key, s, BPF_ANY))
		count_drop(EVENT_BLOCK_IO);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_block_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct io_start *s = bpf_map_lookup_elem(&io_starts, &key);
	if (!s)
		return 0;
	struct block_io_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_BLOCK_IO);
		bpf_map_delete_elem(&io_starts, &key);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	e->kind = EVENT_BLOCK_IO;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = s->pid;
	e->tid = s->tid;
	e->time_ns = now;
	e->issue_ns = s->issue_ns;
	e->sector = BPF_CORE_READ(rq, __sector);
	e->bytes = BPF_CORE_READ(rq, __data_len);
	if (!e->bytes)
		e->bytes = nr_bytes;
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
	e->dev = disk ? ((__u32)BPF_CORE_READ(disk, major) << 20) | BPF_CORE_READ(disk, first_minor) : 0;
	__builtin_memset(e->rwbs, 0, sizeof(e->rwbs));
	fill_rwbs(e->rwbs, BPF_CORE_READ(rq, cmd_flags));
	__builtin_memcpy(e->comm, s->comm, sizeof(e->comm));
	e->tracked = s->tracked;
	e->kstack_bytes = s->kstack_bytes;
	e->ustack_bytes = s->ustack_bytes;
	e->dirtier_pid = s->dirtier_pid;
	e->dirtier_tid = s->dirtier_tid;
	e->dirty_ns = s->dirty_ns;
	__builtin_memcpy(e->kstack, s->kstack, sizeof(e->kstack));
	__builtin_memcpy(e->ustack, s->ustack, sizeof(e->ustack));
	bpf_ringbuf_submit(e, submit_flags());
	bpf_map_delete_elem(&io_starts, &key);
	return 0;
}

/* ---- Page cache (cachestat): pages looked up, missed and dirtied, per tracked process. ---- */

const volatile bool cache_enabled = true;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct cache_counts);
} cache_counts SEC(".maps");

struct cache_counts _cache_counts = {};

/* The counters of the current process, if it is tracked. */
static __always_inline struct cache_counts *cache_of_current(void)
{
	if (!cache_enabled)
		return NULL;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid || !tracked(tgid))
		return NULL;
	struct cache_counts *c = bpf_map_lookup_elem(&cache_counts, &tgid);
	if (c)
		return c;
	struct cache_counts zero = {};
	bpf_map_update_elem(&cache_counts, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&cache_counts, &tgid);
}

/* Pages in a folio: 1 unless it is large (PG_head; flags lead both struct page and folio). */
static __always_inline __u64 folio_pages(struct folio *folio)
{
	__u64 flags = 0;
	bpf_probe_read_kernel(&flags, sizeof(flags), folio);
	if (!(flags & (1ull << bpf_core_enum_value(enum pageflags, PG_head))))
		return 1;
	if (!bpf_core_field_exists(folio->_nr_pages))
		return 1;
	__u32 n = BPF_CORE_READ(folio, _nr_pages);
	return n ? n : 1;
}

/* read(): the pages a lookup asked for, first..last. */
SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(on_cache_read, struct address_space *mapping, unsigned long index,
	     unsigned long last_index)
{
	struct cache_counts *c = cache_of_current();
	if (c && last_index >= index)
		__sync_fetch_and_add(&c->accesses, last_index - index + 1);
	return 0;
}

/* A page fault on a file mapping looks up one page. */
SEC("tp_btf/mm_filemap_fault")
int BPF_PROG(on_cache_fault, struct address_space *mapping, unsigned long index)
{
	struct cache_counts *c = cache_of_current();
	if (c)
		__sync_fetch_and_add(&c->accesses, 1);
	return 0;
}

/* A folio added to the page cache: read in for this process, or new pages it writes. */
SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(on_cache_add, struct folio *folio)
{
	struct cache_counts *c = cache_of_current();
	if (c)
		__sync_fetch_and_add(&c->added, folio_pages(folio));
	return 0;
}

/* A folio dirtied by this process (writeback happens later, often by a kernel thread). */
SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(on_cache_dirty, struct folio *folio, struct address_space *mapping)
{
	struct cache_counts *c = cache_of_current();
	if (c)
		__sync_fetch_and_add(&c->dirtied, folio_pages(folio));
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (tgid && tracked(tgid))
		remember_dirtier(ctx, folio, mapping);
	return 0;
}
