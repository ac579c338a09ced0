// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Which processes are followed: user space seeds the `pids` map with the workload (or the
 * processes of -p), fork adds children, the exit of a whole thread group removes it and
 * tells user space. */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Forces the event struct and the enums the Rust side reads (event kinds, limits) into BTF,
 * so the skeleton generates their Rust types. */
struct exit_event _exit_event = {};
enum event_kind _event_kind = 0;
enum bpfperf_limits _limits = 0;

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
	/* The thread runs its exit: an off-CPU interval of its own still under way came back
	 * unseen, and no switch of this thread will end it now. */
	if (tgid && tracked(tgid))
		offcpu_ended_unseen(tgid, task->pid, bpf_ktime_get_ns(), 0);
	if (!group_dead || system_wide || !bpf_map_lookup_elem(&pids, &tgid))
		return 0;
	bpf_map_delete_elem(&pids, &tgid);
	untrack_slot(tgid);
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
