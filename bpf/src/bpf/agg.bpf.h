/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* --aggregate's stack ids, shared by the programs that count in the kernel (on-CPU samples,
 * traced events): a stack is kept once per map, keyed by its frames, and named by an id. */
#pragma once

#include "common.bpf.h"

/* Stacks by their frames -> id (1 KiB keys: allocated as they come); entries resized before
 * load (1 when not aggregating; BPFPERF_AGG_ENTRIES in tests). */
#define AGG_STACKS_MAP(name)                                                                   \
	struct {                                                                               \
		__uint(type, BPF_MAP_TYPE_HASH);                                               \
		__uint(max_entries, AGG_STACKS);                                               \
		__uint(map_flags, BPF_F_NO_PREALLOC);                                          \
		__type(key, struct agg_frames);                                                \
		__type(value, __u64);                                                          \
	} name SEC(".maps")

/* A stack's id: 0 when empty; AGG_FULL when its map had no room. */
#define AGG_FULL (~0ULL)

/* The id of the stack `f` (`bytes` of frames, zero after them; its len set here) in `stacks`, given it one
 * from the per-CPU counter `ids` if it is new: (that count + 1) << 16 | the CPU, unique
 * without atomics (clang 14's BPF target has no fetch-and-add whose result can be used).
 * `*made` (where given) is set when this call added it. */
static __always_inline __u64 agg_stack_id(void *stacks, void *ids, struct agg_frames *f,
					  __s32 bytes, bool *made)
{
	if (bytes <= 0)
		return 0;
	f->len = bytes;
	__u64 *id = bpf_map_lookup_elem(stacks, f);
	if (id)
		return *id;
	__u32 zero = 0;
	__u64 *given = bpf_map_lookup_elem(ids, &zero);
	if (!given)
		return AGG_FULL;
	*given += 1;
	__u64 fresh = *given << 16 | (bpf_get_smp_processor_id() & 0xffff);
	if (!bpf_map_update_elem(stacks, f, &fresh, BPF_NOEXIST)) {
		if (made)
			*made = true;
		return fresh;
	}
	/* Another CPU added it meanwhile, or the map is full. */
	id = bpf_map_lookup_elem(stacks, f);
	return id ? *id : AGG_FULL;
}
