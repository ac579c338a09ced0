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

/* Events that did not fit in the ring buffer, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* Forces the event structs into BTF so the skeleton generates their Rust types. */
struct sample_event _sample_event = {};
struct exit_event _exit_event = {};

static __always_inline bool tracked(__u32 tgid)
{
	return system_wide || bpf_map_lookup_elem(&pids, &tgid);
}

static __always_inline void count_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&drops, &zero);
	if (n)
		*n += 1;
}

static __always_inline __u64 submit_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									      : BPF_RB_NO_WAKEUP;
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (tgid == 0 || !tracked(tgid))
		return 0;

	struct sample_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop();
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
		count_drop();
		return 0;
	}
	e->kind = EVENT_EXIT;
	e->pid = tgid;
	e->time_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}
