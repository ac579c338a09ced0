// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A stack sample of the current thread, sent from a perf_event program: cpu-clock's on-CPU
 * samples (sampling.bpf.c) and major-faults' (fault.bpf.c) alike. */
#ifndef SAMPLE_BPF_H
#define SAMPLE_BPF_H

#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"
#include "python.bpf.h"

/* One buffer per CPU, indexed by CPU number: per-CPU maps cap values at 32 KiB. perf_event
 * programs cannot be preempted, and one never runs inside another on the same CPU (the
 * kernel's bpf_prog_active), so the programs that send samples share it. Resized to the
 * number of CPUs before load (DWARF mode). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_buf);
} sample_scratch SEC(".maps") __weak;

/* DWARF mode: the stack unwound with the tables, or registers and a stack copy. */
static __always_inline int sample_with_stack_copy(struct bpf_perf_event_data *ctx, __u32 kind,
						  __u64 period, __u32 tgid, __u32 tid)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct sample_buf *buf = bpf_map_lookup_elem(&sample_scratch, &cpu);
	if (!buf) {
		count_drop(kind);
		return 0;
	}
	struct sample_event *e = &buf->e;
	e->kind = kind;
	e->cpu = cpu;
	e->pid = tgid;
	e->tid = tid;
	e->time_ns = bpf_ktime_get_ns();
	e->period = period;
	e->kstack_bytes = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	read_python_frames(&e->py_frames, e->py_code, e->py_lasti, tgid, tid);
	__u64 size = sizeof(struct sample_event);
	/* Unwound here where the process has tables: frames, no registers or bytes to send. */
	__s32 unwound = unwind_user_stack_in(tgid, e->ustack, WALK_SAMPLE);
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
		count_drop(kind);
	return 0;
}

/* Sends a sample of `kind` (EVENT_ON_CPU, EVENT_FAULT) of the current thread weighing
 * `period`, with its kernel and user stacks (frame pointers, or DWARF mode's) and Python
 * frames; a sample that does not fit is counted in drops[kind]. */
static __always_inline int send_stack_sample(struct bpf_perf_event_data *ctx, __u32 kind,
					     __u64 period, __u32 tgid, __u32 tid)
{
	if (stack_copy_bytes)
		return sample_with_stack_copy(ctx, kind, period, tgid, tid);
	struct sample_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(kind);
		return 0;
	}
	e->kind = kind;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = tgid;
	e->tid = tid;
	e->time_ns = bpf_ktime_get_ns();
	e->period = period;
	e->kstack_bytes = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->ustack_bytes = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
	e->stack_bytes = 0;
	read_python_frames(&e->py_frames, e->py_code, e->py_lasti, tgid, tid);
	bpf_ringbuf_submit(e, submit_flags());
	return 0;
}

#endif
