/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* --aggregate of traced events (included by probes.bpf.c only): an event that passed its
 * filter is counted per (event, thread, kernel stack, user stack, histogram bucket) in a
 * pair of hash maps instead of being sent, as bcc's stackcount and bpftrace's count() and
 * hist() keep their maps; record drains one pair every --interval and at the end
 * (Profiler::take_aggregated) while the programs fill the other. An event with a stack
 * copy (DWARF mode, tables not built yet), or one that finds no room, is sent as before:
 * nothing is lost, and those that did not fit are counted in trace_agg_missed. */
#pragma once

#include "agg.bpf.h"

/* Set before load: count traced events here instead of sending them. */
const volatile bool trace_aggregate = false;

/* Which pair of maps (0 or 1) the programs fill (as agg_slot for on-CPU samples). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} trace_agg_slot SEC(".maps");

/* Entries resized before load (1 when not aggregating; BPFPERF_AGG_ENTRIES in tests). */
#define TRACE_AGG_COUNTS_MAP(name)                                                             \
	struct {                                                                               \
		__uint(type, BPF_MAP_TYPE_HASH);                                               \
		__uint(max_entries, AGG_COUNTS);                                               \
		__type(key, struct trace_agg_key);                                             \
		__type(value, struct trace_agg_value);                                         \
	} name SEC(".maps")
TRACE_AGG_COUNTS_MAP(trace_agg_counts0);
TRACE_AGG_COUNTS_MAP(trace_agg_counts1);
AGG_STACKS_MAP(trace_agg_stacks0);
AGG_STACKS_MAP(trace_agg_stacks1);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg_scratch);
} trace_agg_scratch SEC(".maps");

/* Stack ids given out, per CPU (agg_stack_id). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} trace_agg_ids SEC(".maps");

/* Events that did not fit in the maps, per CPU: sent one by one instead. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} trace_agg_missed SEC(".maps");

/* The power-of-two bucket of v (see struct trace_agg_key). */
static __always_inline __u32 log2_bucket(__s64 v, bool is_signed)
{
	if (is_signed && v < 0)
		return 0;
	__u64 u = v;
	if (!u)
		return 1;
	__u32 r = 0;
	if (u >> 32) {
		u >>= 32;
		r += 32;
	}
	if (u >> 16) {
		u >>= 16;
		r += 16;
	}
	if (u >> 8) {
		u >>= 8;
		r += 8;
	}
	if (u >> 4) {
		u >>= 4;
		r += 4;
	}
	if (u >> 2) {
		u >>= 2;
		r += 2;
	}
	if (u >> 1)
		r += 1;
	return r + 2;
}

/* The bucket of the event `e` (payload `raw`) under its config's histogram; 0 without one. */
static __always_inline __u32 trace_bucket(struct trace_config *c, struct trace_record *e,
					  __u8 *raw)
{
	if (c->hist == HIST_LATENCY)
		return log2_bucket(e->latency_ns, false);
	if (c->hist != HIST_FIELD)
		return 0;
	__u32 off = c->hist_off, size = c->hist_size;
	if (size > 8 || off + size > e->raw_bytes)
		return 0;
	__u64 v = 0;
	bpf_probe_read_kernel(&v, size & 15, raw + (off & (MAX_TRACE_RAW - 1)));
	return log2_bucket(filter_extend(v, size, c->hist_signed ? FF_SIGNED : 0),
			   c->hist_signed);
}

/* Copies `bytes` of frames into `f` (zeroed first: the frames past them are part of the key). */
static __always_inline __s32 agg_frames_of(struct agg_frames *f, __u64 *ips, __s32 bytes)
{
	__builtin_memset(f->ips, 0, sizeof(f->ips));
	__u32 n = bytes > 0 ? bytes : 0;
	if (n > sizeof(f->ips))
		n = sizeof(f->ips);
	barrier_var(n);
	n &= 1023;
	if (n && n <= sizeof(f->ips))
		bpf_probe_read_kernel(f->ips, n, ips);
	return n;
}

/* Counts this thread's event of `b` in the maps; 0 when it must be sent instead. */
static __always_inline int trace_agg_count(struct trace_buf *b)
{
	if (!trace_aggregate || b->e.stack_bytes || b->e.user_regs[7])
		return 0;
	if (b->e.tid != (__u32)bpf_get_current_pid_tgid())
		return 0;
	__u32 event = b->e.event;
	struct trace_config *c = bpf_map_lookup_elem(&trace_configs, &event);
	__u32 zero = 0;
	struct agg_scratch *s = bpf_map_lookup_elem(&trace_agg_scratch, &zero);
	if (!c || !s)
		return 0;
	__s32 kb = agg_frames_of(&s->k, b->e.kstack, b->e.kstack_bytes);
	__s32 ub = agg_frames_of(&s->u, b->e.ustack, b->e.ustack_bytes);
	struct trace_agg_key key = {
		.event = event,
		.pid = b->e.pid,
		.tid = b->e.tid,
		.bucket = trace_bucket(c, &b->e, b->raw),
	};
	__u32 *slot = bpf_map_lookup_elem(&trace_agg_slot, &zero);
	void *counts = &trace_agg_counts0, *stacks = &trace_agg_stacks0;
	if (slot && *slot) {
		counts = &trace_agg_counts1;
		stacks = &trace_agg_stacks1;
	}
	key.kstack = agg_stack_id(stacks, &trace_agg_ids, &s->k, kb, NULL);
	key.ustack = agg_stack_id(stacks, &trace_agg_ids, &s->u, ub, NULL);
	if (key.kstack == AGG_FULL || key.ustack == AGG_FULL)
		goto missed;
	struct trace_agg_value *v = bpf_map_lookup_elem(counts, &key);
	if (!v) {
		struct trace_agg_value fresh = { .count = 1, .latency_ns = b->e.latency_ns };
		bpf_get_current_comm(fresh.comm, sizeof(fresh.comm));
		if (!bpf_map_update_elem(counts, &key, &fresh, BPF_NOEXIST))
			return 1;
		/* Another CPU added it meanwhile, or the map is full. */
		v = bpf_map_lookup_elem(counts, &key);
		if (!v)
			goto missed;
	}
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->latency_ns, b->e.latency_ns);
	return 1;
missed:
	count(&trace_agg_missed, 0);
	return 0;
}
