// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* On-CPU sampling: a perf_event program on cpu-clock events captures the kernel stack and
 * the user stack of the followed processes (frame pointers walked by bpf_get_stack, or, in
 * DWARF mode, registers and a copy of the stack for user space to unwind). */
#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"

/* On-CPU samples taken of tracked tasks, per CPU: each one is either in the ring buffer or
 * counted in drops[EVENT_ON_CPU]. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} taken SEC(".maps");

/* One buffer per CPU, indexed by CPU number: per-CPU maps cap values at 32 KiB, and perf_event
 * programs cannot be preempted. Resized to the number of CPUs before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_buf);
} sample_scratch SEC(".maps");

/* Forces the event struct into BTF so the skeleton generates its Rust type. */
struct sample_event _sample_event = {};

/* DWARF mode: the stack unwound with the tables, or registers and a stack copy. */
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
	__u64 size = sizeof(struct sample_event);
	/* Unwound here where the process has tables: frames, no registers or bytes to send. */
	__s32 unwound = unwind_user_stack(tgid, e->ustack);
	if (unwound >= 0) {
		e->ustack_bytes = unwound;
		e->user_regs[7] = 0;
		e->stack_bytes = 0;
	} else {
		e->ustack_bytes = 0;
		struct task_struct *task = bpf_get_current_task_btf();
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
		fill_user_regs(e->user_regs, regs);
		__u64 sp = regs->sp;
		e->stack_bytes =
			copy_sample_stack(buf->stack, sp, stack_copy_len(task, sp, stack_copy_bytes));
		size += e->stack_bytes;
	}
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
