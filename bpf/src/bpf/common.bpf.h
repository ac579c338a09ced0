// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What every program shares: the settings user space writes before load, the maps of
 * followed processes, events and drops, and small helpers. Each .bpf.c includes it; its
 * settings and maps are __weak, so the static linker keeps one of each in the linked object
 * (build.rs). */
#ifndef COMMON_BPF_H
#define COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpfperf.h"

/* A kernel pointer computed as a number, readable directly (6.2): a load, not a helper call
 * (netsend, netstamp, requests). */
extern void *bpf_rdonly_cast(const void *obj__ign, __u32 btf_id) __ksym __weak;

/* Set before load: record every process, not only the tracked ones. */
const volatile bool system_wide __weak = false;
/* record's own process: never recorded, whatever else is (its writes to the output file
 * would feed back into it). */
const volatile __u32 self_tgid __weak = 0;

/* include/linux/sched.h: a kernel thread (macros do not reach BTF). */
#define PF_KTHREAD 0x00200000
/* DWARF mode: copy up to this many bytes of user stack per sample (0: frame pointers). */
const volatile __u32 stack_copy_bytes __weak = 0;
/* Wake the reader only when this many bytes wait in the ring buffer (the reader also polls
 * with a timeout): waking it per record would preempt the workload (see design.md). */
const volatile __u64 wakeup_bytes __weak = 256 * 1024;

/* Tracked thread groups (tgid -> 1). Seeded from user space, grown by fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized from the sampling rate before load */
} events SEC(".maps") __weak;

/* Events lost, per CPU, indexed by event kind: they did not fit in the ring buffer (or, for
 * off-CPU and block I/O starts, in their map). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EVENT_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps") __weak;

/* Socket waits under way, by tid (struct sock_wait): offcpu.bpf.c adds the intervals, the
 * socket call's return in net.bpf.c sends and removes them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_BLOCKED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct sock_wait);
} sock_waits SEC(".maps") __weak;
/* Whether off-CPU intervals fill sock_waits (net and off-CPU both on): else a socket call's
 * return has none to look up. */
const volatile bool socket_waits __weak = false;

/* Tests (the *_unseen_every settings): whether the event at `now` is taken as one the kernel
 * ran no program for, about one in `every` (0: none). */
static __always_inline bool unseen_by_construction(__u32 every, __u64 now)
{
	return every && (__u32)(now >> 10) * 2654435761u % every == 0;
}

/* Tests: about one block request's completion in N is not seen (blockio.bpf.c and
 * requests.bpf.c), as in an interrupt that runs no program. Each chosen at random: by the
 * time, the requests one interrupt completes (microseconds apart) went unseen together. */
const volatile __u32 io_unseen_every __weak = 0;

static __always_inline bool completion_unseen_by_construction(void)
{
	return io_unseen_every && bpf_get_prandom_u32() % io_unseen_every == 0;
}

/* offcpu.bpf.c: ends the interval under way of thread `tid`, seen running at `now` though no
 * sched_switch brought it back (`back`: it returns from the socket call it blocked in). */
int offcpu_ended_unseen(__u32 tgid, __u32 tid, __u64 now, __u32 back);

/* A cache of `pids` that costs an array index, not a hash lookup (which was a fifth of a
 * filtered-out event's cost): slot tgid % TRACKED_SLOTS holds tgid once it was found
 * tracked. A slot never names a process that is not tracked: the exit of a group clears
 * its slot after removing it from `pids`, and a slot filled looks at `pids` again. */
#define TRACKED_SLOTS 65536
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRACKED_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} tracked_slots SEC(".maps") __weak;

static __always_inline bool tracked(__u32 tgid)
{
	if (tgid == self_tgid)
		return false;
	if (system_wide)
		return true;
	__u32 key = tgid & (TRACKED_SLOTS - 1);
	__u32 *slot = bpf_map_lookup_elem(&tracked_slots, &key);
	if (slot && tgid && *slot == tgid)
		return true;
	if (!bpf_map_lookup_elem(&pids, &tgid))
		return false;
	if (slot && tgid) {
		*slot = tgid;
		/* The group's exit may have come between the lookup and the fill. */
		if (!bpf_map_lookup_elem(&pids, &tgid)) {
			if (*slot == tgid)
				*slot = 0;
			return false;
		}
	}
	return true;
}

/* The exit of tracked group `tgid` (already out of `pids`): its slot freed. */
static __always_inline void untrack_slot(__u32 tgid)
{
	__u32 key = tgid & (TRACKED_SLOTS - 1);
	__u32 *slot = bpf_map_lookup_elem(&tracked_slots, &key);
	/* (A slot another group took meanwhile may be cleared too: a miss, not a mistake.) */
	if (slot && *slot == tgid)
		*slot = 0;
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

/* tp_btf stacks start with the program and the tracing glue that ran it: taken whole, and
 * record leaves those frames out by name (kernel.rs; how many there are depends on how the
 * program was compiled and JIT-ed). */
#define TP_BTF_SKIP 0

#endif
