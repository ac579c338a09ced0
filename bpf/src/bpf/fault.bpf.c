// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Major page faults, every one, whether or not the thread slept in it: the exception's entry
 * (exceptions:page_fault_user, page_fault_kernel) notes when the current fault of a followed
 * thread began; the software event major-faults, which the kernel raises where it counts the
 * fault in the thread's maj_flt (getrusage's ru_majflt), at the fault's end, sends one sample
 * with the thread's stacks and the fault's whole duration (its work on the CPU and any
 * wait). A fault that read its page before the thread would have slept has no off-CPU
 * interval: counted here all the same. */
#include "common.bpf.h"
#include "sample.bpf.h"

/* When the current fault of a thread began (ns; 0: none under way). Task storage: one per
 * thread that faulted, freed with it, so that system-wide recordings never fill a map. */
struct fault_start {
	__u64 time_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fault_start);
} fault_starts SEC(".maps");

static __always_inline void fault_began(void)
{
	if (!tracked(bpf_get_current_pid_tgid() >> 32))
		return;
	struct fault_start *s = bpf_task_storage_get(&fault_starts, bpf_get_current_task_btf(), 0,
						     BPF_LOCAL_STORAGE_GET_F_CREATE);
	/* No storage (the allocator had none at hand): the fault is still sent, with no
	 * duration. */
	if (s)
		s->time_ns = bpf_ktime_get_ns();
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(on_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error)
{
	fault_began();
	return 0;
}

SEC("tp_btf/page_fault_kernel")
int BPF_PROG(on_fault_kernel, unsigned long address, struct pt_regs *regs, unsigned long error)
{
	fault_began();
	return 0;
}

/* major-faults (one event per CPU, period 1): the fault just ended, and was major. */
SEC("perf_event")
int on_major_fault(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (tgid == 0 || !tracked(tgid))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	/* 1 ns where the fault's start was not seen (it began before the programs attached). */
	__u64 duration = 1;
	struct fault_start *s =
		bpf_task_storage_get(&fault_starts, bpf_get_current_task_btf(), 0, 0);
	if (s && s->time_ns && s->time_ns < now) {
		duration = now - s->time_ns;
		s->time_ns = 0;
	}
	return send_stack_sample(ctx, EVENT_FAULT, duration, tgid, (__u32)id);
}
