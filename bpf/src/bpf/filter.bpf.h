// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The in-kernel filter of an event: a small postfix program (bpfperf.h's filter_prog,
 * compiled by record from perf's filter language) run over the event's payload before
 * anything else is taken. One bpf_loop step per instruction; string patterns are matched
 * in a per-CPU buffer, one bpf_loop step per starting position for "*x*". */
#ifndef FILTER_BPF_H
#define FILTER_BPF_H

#include "common.bpf.h"

/* The events' filters (trace_config.filter - 1), written by record before attaching. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TRACE_EVENTS);
	__type(key, __u32);
	__type(value, struct filter_prog);
} filters SEC(".maps");

#define PATTERN_MASK (FILTER_PATTERN_LEN - 1)
#define RAW_MASK (MAX_TRACE_RAW - 1)

/* A string operand and the pattern it is matched against, copied here to be compared. */
struct filter_strings {
	char s[FILTER_PATTERN_LEN];
	char p[FILTER_PATTERN_LEN];
	__u32 slen;
	__u32 plen;
	__u32 at; /* where in s the pattern is tried */
	__u32 found;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct filter_strings);
} filter_strings SEC(".maps");

/* A filter's run: which program, over which payload (a per-CPU buffer's), and its stack. */
struct filter_run {
	__u32 prog;
	__u32 raw_bytes;
	const __u8 *raw;
	__u64 bits;
	__u32 depth;
	__u32 bad; /* the program is malformed: the event passes (nothing is lost silently) */
};

/* Whether p[0..plen) equals s[at + i..): `found` set if so (a bpf_loop callback: one step
 * per position tried, from `at` on; the strings are this CPU's filter_strings). */
static long match_from(__u64 i, void *ctx)
{
	__u32 zero = 0;
	struct filter_strings *fs = bpf_map_lookup_elem(&filter_strings, &zero);
	if (!fs)
		return 1;
	__u32 at = fs->at + i;
	if (at + fs->plen > fs->slen)
		return 1;
	for (int j = 0; j < FILTER_PATTERN_LEN; j++) {
		if (j >= fs->plen) {
			fs->found = 1;
			return 1;
		}
		if (fs->s[(at + j) & PATTERN_MASK] != fs->p[j & PATTERN_MASK])
			return 0;
	}
	fs->found = 1;
	return 1;
}

/* Matches the string at `src` (up to its first NUL, at most `len` bytes; the current task's
 * name if `comm`) against `pat`. */
static __always_inline bool match_string(const void *src, __u32 len, bool comm,
					 struct filter_pattern *pat)
{
	__u32 zero = 0;
	struct filter_strings *fs = bpf_map_lookup_elem(&filter_strings, &zero);
	if (!fs)
		return false;
	for (int i = 0; i < FILTER_PATTERN_LEN / 8; i++)
		((__u64 *)fs->s)[i] = 0;
	if (comm)
		bpf_get_current_comm(fs->s, 16);
	else if (len)
		bpf_probe_read_kernel(fs->s, len & (2 * FILTER_PATTERN_LEN - 1), src);
	__u32 slen = FILTER_PATTERN_LEN;
	for (int i = 0; i < FILTER_PATTERN_LEN; i++) {
		if (i >= len || !fs->s[i]) {
			slen = i;
			break;
		}
	}
	__u32 plen = pat->len;
	if (plen > FILTER_PATTERN_LEN)
		return false;
	bpf_probe_read_kernel(fs->p, FILTER_PATTERN_LEN, pat->text);
	fs->slen = slen;
	fs->plen = plen;
	fs->found = 0;
	fs->at = 0;
	__u32 tries = 1;
	switch (pat->match) {
	case FM_FULL:
		if (slen != plen)
			return false;
		break;
	case FM_FRONT:
		break;
	case FM_END:
		if (slen < plen)
			return false;
		fs->at = slen - plen;
		break;
	default:
		tries = FILTER_PATTERN_LEN;
	}
	bpf_loop(tries, match_from, &zero, 0);
	return fs->found;
}

/* A number operand. */
static __always_inline __s64 filter_number(struct filter_run *r, struct filter_insn *in)
{
	switch (in->src) {
	case FS_PID:
		return bpf_get_current_pid_tgid() >> 32;
	case FS_TID:
		return (__u32)bpf_get_current_pid_tgid();
	case FS_CPU:
		return bpf_get_smp_processor_id();
	}
	__u32 off = in->off;
	__u64 v = 0;
	__u32 size = in->size;
	if (off + size > r->raw_bytes)
		return 0;
	switch (size) {
	case 1: {
		__u8 x = 0;
		bpf_probe_read_kernel(&x, 1, r->raw + (off & RAW_MASK));
		v = in->flags & FF_SIGNED ? (__u64)(__s64)(__s8)x : x;
		break;
	}
	case 2: {
		__u16 x = 0;
		bpf_probe_read_kernel(&x, 2, r->raw + (off & RAW_MASK));
		v = in->flags & FF_SIGNED ? (__u64)(__s64)(__s16)x : x;
		break;
	}
	case 4: {
		__u32 x = 0;
		bpf_probe_read_kernel(&x, 4, r->raw + (off & RAW_MASK));
		v = in->flags & FF_SIGNED ? (__u64)(__s64)(__s32)x : x;
		break;
	}
	default:
		bpf_probe_read_kernel(&v, 8, r->raw + (off & RAW_MASK));
	}
	return (__s64)v;
}

static __always_inline bool filter_compare(struct filter_insn *in, __s64 v)
{
	__s64 imm = in->imm;
	bool u = in->flags & FF_UNSIGNED_CMP;
	switch (in->cmp) {
	case FC_EQ:
		return v == imm;
	case FC_NE:
		return v != imm;
	case FC_LT:
		return u ? (__u64)v < (__u64)imm : v < imm;
	case FC_LE:
		return u ? (__u64)v <= (__u64)imm : v <= imm;
	case FC_GT:
		return u ? (__u64)v > (__u64)imm : v > imm;
	case FC_GE:
		return u ? (__u64)v >= (__u64)imm : v >= imm;
	default:
		return (v & imm) != 0;
	}
}

/* One instruction. */
static long filter_step(__u64 i, void *ctx)
{
	struct filter_run *r = ctx;
	__u32 key = r->prog;
	struct filter_prog *f = bpf_map_lookup_elem(&filters, &key);
	if (!f || i >= f->n) {
		return 1;
	}
	struct filter_insn *in = &f->insns[i & (FILTER_INSNS - 1)];
	bool truth;
	switch (in->op) {
	case F_CMP:
		truth = filter_compare(in, filter_number(r, in));
		break;
	case F_STR: {
		struct filter_pattern *pat = &f->patterns[in->str & (FILTER_PATTERNS - 1)];
		const __u8 *src = NULL;
		__u32 len = 0;
		if (in->src == FS_RAW) {
			if (in->off + in->size <= r->raw_bytes) {
				src = r->raw + (in->off & RAW_MASK);
				len = in->size;
			}
		} else if (in->src == FS_DATA_LOC) {
			__u32 loc = 0;
			if (in->off + 4 <= r->raw_bytes)
				bpf_probe_read_kernel(&loc, 4, r->raw + (in->off & RAW_MASK));
			__u32 start = loc & 0xffff, n = loc >> 16;
			if (start + n <= r->raw_bytes) {
				src = r->raw + (start & RAW_MASK);
				len = n;
			}
		}
		if (in->src == FS_COMM)
			len = 16;
		if (len > FILTER_PATTERN_LEN)
			len = FILTER_PATTERN_LEN;
		truth = match_string(src, len, in->src == FS_COMM, pat);
		if (in->cmp == FC_NE)
			truth = !truth;
		break;
	}
	case F_AND:
	case F_OR: {
		if (r->depth < 2) {
			r->bad = 1;
			return 1;
		}
		bool a = r->bits & 1, b = (r->bits >> 1) & 1;
		r->bits >>= 2;
		r->depth -= 2;
		truth = in->op == F_AND ? a && b : a || b;
		break;
	}
	case F_NOT:
		if (!r->depth) {
			r->bad = 1;
			return 1;
		}
		r->bits ^= 1;
		return 0;
	default:
		return 1;
	}
	if (r->depth >= 63) {
		r->bad = 1;
		return 1;
	}
	r->bits = r->bits << 1 | truth;
	r->depth++;
	return 0;
}

/* Whether the payload raw[0..raw_bytes) (a per-CPU buffer's) passes filter `prog`. */
static __always_inline bool filter_pass(__u32 prog, const __u8 *raw, __u32 raw_bytes)
{
	struct filter_run r = { .prog = prog, .raw = raw, .raw_bytes = raw_bytes };
	bpf_loop(FILTER_INSNS, filter_step, &r, 0);
	if (r.bad || r.depth == 0)
		return true;
	return r.bits & 1;
}

#endif
