// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* On-CPU sampling: a perf_event program on cpu-clock events captures the kernel stack and
 * the user stack of the followed processes (frame pointers walked by bpf_get_stack, or, in
 * DWARF mode, registers and a copy of the stack for user space to unwind). */
#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"
#include "python.bpf.h"
#include "agg.bpf.h"
#include "sample.bpf.h"

/* On-CPU samples taken of tracked tasks, per CPU: each one is either in the ring buffer,
 * counted in the aggregation maps (--aggregate), or counted in drops[EVENT_ON_CPU]. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} taken SEC(".maps");

/* Forces the event struct into BTF so the skeleton generates its Rust type. */
struct sample_event _sample_event = {};

/* ---- --aggregate: samples counted here per (thread, kernel stack, user stack), as bcc's
 * profile does; record drains the counts every --interval and at the end. A sample whose
 * user stack could not be unwound here (DWARF mode, no tables yet) is sent as before. ---- */

/* Set before load: count samples in the maps below instead of sending them. */
const volatile bool aggregate = false;

/* Which pair of maps (0 or 1) the programs fill; user space flips it, waits for the
 * programs that still use the other pair, then reads and empties that one. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} agg_slot SEC(".maps");

/* Samples per (thread, stack ids); entries resized to 1 before load when not aggregating. */
#define AGG_COUNTS_MAP(name)                                                                   \
	struct {                                                                               \
		__uint(type, BPF_MAP_TYPE_HASH);                                               \
		__uint(max_entries, AGG_COUNTS);                                               \
		__type(key, struct agg_key);                                                   \
		__type(value, __u64);                                                          \
	} name SEC(".maps")
AGG_COUNTS_MAP(agg_counts0);
AGG_COUNTS_MAP(agg_counts1);
AGG_STACKS_MAP(agg_stacks0);
AGG_STACKS_MAP(agg_stacks1);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg_scratch);
} agg_scratch SEC(".maps");

/* Samples that did not fit in the maps above, per CPU: sent one by one instead. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} agg_missed SEC(".maps");

/* Stack ids given out, per CPU (agg_stack_id). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} agg_ids SEC(".maps");

/* Counts one sample of (tgid, tid) with the stacks in `s`; false when a map had no room. */
static __always_inline bool agg_count(void *counts, void *stacks, struct agg_scratch *s,
				      __s32 kbytes, __s32 ubytes, __u32 tgid, __u32 tid)
{
	struct agg_key key = { .pid = tgid, .tid = tid };
	key.kstack = agg_stack_id(stacks, &agg_ids, &s->k, kbytes);
	key.ustack = agg_stack_id(stacks, &agg_ids, &s->u, ubytes);
	if (key.kstack == AGG_FULL || key.ustack == AGG_FULL)
		return false;
	__u64 *n = bpf_map_lookup_elem(counts, &key);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return true;
	}
	__u64 one = 1;
	if (!bpf_map_update_elem(counts, &key, &one, BPF_NOEXIST))
		return true;
	/* Another CPU added it meanwhile, or the map is full. */
	n = bpf_map_lookup_elem(counts, &key);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return true;
	}
	return false;
}

/* Counts the sample in the maps; returns 0 when it must be sent instead: DWARF mode and a
 * user stack not unwound here, or no room in the maps (counted in agg_missed; a new stack
 * needs memory, which the kernel's allocator may not have at hand in this context). */
static __always_inline int sample_aggregated(struct bpf_perf_event_data *ctx, __u32 tgid,
					     __u32 tid)
{
	__u32 zero = 0;
	struct agg_scratch *s = bpf_map_lookup_elem(&agg_scratch, &zero);
	if (!s)
		return 0;
	__s32 ubytes;
	if (stack_copy_bytes) {
		/* The frames past the unwound ones are part of the key: zeroed. */
		__builtin_memset(s->u.ips, 0, sizeof(s->u.ips));
		ubytes = unwind_user_stack(tgid, s->u.ips);
		if (ubytes < 0)
			return 0;
	} else {
		/* bpf_get_stack zeroes what it does not fill. */
		ubytes = bpf_get_stack(ctx, s->u.ips, sizeof(s->u.ips), BPF_F_USER_STACK);
	}
	__s32 kbytes = bpf_get_stack(ctx, s->k.ips, sizeof(s->k.ips), 0);
	__u32 *slot = bpf_map_lookup_elem(&agg_slot, &zero);
	bool counted;
	if (slot && *slot)
		counted = agg_count(&agg_counts1, &agg_stacks1, s, kbytes, ubytes, tgid, tid);
	else
		counted = agg_count(&agg_counts0, &agg_stacks0, s, kbytes, ubytes, tgid, tid);
	if (!counted)
		count(&agg_missed, 0);
	return counted;
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (tgid == 0 || !tracked(tgid))
		return 0;
	count(&taken, 0);
	if (aggregate && sample_aggregated(ctx, tgid, (__u32)id))
		return 0;
	return send_stack_sample(ctx, EVENT_ON_CPU, ctx->sample_period, tgid, (__u32)id);
}
