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

/* ---- --aggregate: samples counted here per (thread, kernel stack, user stack, Python
 * frames), as bcc's profile does; record drains the counts every --interval and at the end.
 * A sample whose user stack could not be unwound here (DWARF mode, no tables yet) is sent
 * as before; so is the first sample of each Python stack in a slot, so that record reads
 * its code objects while the process lives (the counts are drained later, at the end). ---- */

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

/* A Python thread's frames, assembled per CPU (struct agg_key's pystack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg_frames);
} agg_py_scratch SEC(".maps");

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

/* What agg_count did with a sample. */
enum agg_result {
	AGG_COUNTED,
	AGG_NO_ROOM,   /* a map had no room: sent alone, counted in agg_missed */
	AGG_NEW_PYTHON /* its Python stack is new in this slot: sent alone */
};

/* Counts one sample of (tgid, tid) with the stacks in `s` and the Python frames in `py`. */
static __always_inline enum agg_result agg_count(void *counts, void *stacks,
						 struct agg_scratch *s, struct agg_frames *py,
						 __s32 kbytes, __s32 ubytes, __s32 pybytes,
						 __u32 tgid, __u32 tid)
{
	struct agg_key key = { .pid = tgid, .tid = tid };
	bool made = false;
	key.pystack = agg_stack_id(stacks, &agg_ids, py, pybytes, &made);
	if (made)
		return AGG_NEW_PYTHON;
	key.kstack = agg_stack_id(stacks, &agg_ids, &s->k, kbytes, NULL);
	key.ustack = agg_stack_id(stacks, &agg_ids, &s->u, ubytes, NULL);
	if (key.kstack == AGG_FULL || key.ustack == AGG_FULL || key.pystack == AGG_FULL)
		return AGG_NO_ROOM;
	__u64 *n = bpf_map_lookup_elem(counts, &key);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return AGG_COUNTED;
	}
	__u64 one = 1;
	if (!bpf_map_update_elem(counts, &key, &one, BPF_NOEXIST))
		return AGG_COUNTED;
	/* Another CPU added it meanwhile, or the map is full. */
	n = bpf_map_lookup_elem(counts, &key);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return AGG_COUNTED;
	}
	return AGG_NO_ROOM;
}

/* Counts the sample in the maps; returns 0 when it must be sent instead: DWARF mode and a
 * user stack not unwound here, the first of its Python stack, or no room in the maps
 * (counted in agg_missed; a new stack needs memory, which the kernel's allocator may not
 * have at hand in this context). */
static __always_inline int sample_aggregated(struct bpf_perf_event_data *ctx, __u32 tgid,
					     __u32 tid)
{
	__u32 zero = 0;
	struct agg_scratch *s = bpf_map_lookup_elem(&agg_scratch, &zero);
	struct agg_frames *py = bpf_map_lookup_elem(&agg_py_scratch, &zero);
	if (!s || !py)
		return 0;
	__s32 ubytes;
	if (stack_copy_bytes) {
		/* The frames past the unwound ones are part of the key: zeroed. */
		__builtin_memset(s->u.ips, 0, sizeof(s->u.ips));
		ubytes = unwind_user_stack_in(tgid, s->u.ips, WALK_SAMPLE);
		if (ubytes < 0)
			return 0;
	} else {
		/* bpf_get_stack zeroes what it does not fill. */
		ubytes = bpf_get_stack(ctx, s->u.ips, sizeof(s->u.ips), BPF_F_USER_STACK);
	}
	__s32 kbytes = bpf_get_stack(ctx, s->k.ips, sizeof(s->k.ips), 0);
	/* Python frames (a process record installed in py_procs): codes, then lasti (see
	 * struct agg_key), the words past them zero; the words after those are never written. */
	__s32 pybytes = 0;
	struct py_proc *p = bpf_map_lookup_elem(&py_procs, &tgid);
	if (p) {
		__builtin_memset(py->ips, 0, 8 * (MAX_PY_FRAMES + MAX_PY_FRAMES / 2));
		pybytes = 8 * py_read_frames(p, py->ips, (__u32 *)&py->ips[MAX_PY_FRAMES], tid);
	}
	__u32 *slot = bpf_map_lookup_elem(&agg_slot, &zero);
	enum agg_result r;
	if (slot && *slot)
		r = agg_count(&agg_counts1, &agg_stacks1, s, py, kbytes, ubytes, pybytes, tgid, tid);
	else
		r = agg_count(&agg_counts0, &agg_stacks0, s, py, kbytes, ubytes, pybytes, tgid, tid);
	if (r == AGG_NO_ROOM)
		count(&agg_missed, 0);
	return r == AGG_COUNTED;
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
