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

/* A string operand and the pattern it is matched against, copied here to be compared (s
 * has room past its 64 bytes: words are read from any offset below 64). */
struct filter_strings {
	char s[2 * FILTER_PATTERN_LEN];
	__u64 p[FILTER_PATTERN_LEN / 8];
	char comm[16];
	__u32 slen;
	__u32 plen;
	__u32 found;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct filter_strings);
} filter_strings SEC(".maps");

/* A filter's run: which program, over which payload (its address: read with
 * bpf_probe_read_kernel), and its stack of truths. Kept in a map, not on the BPF stack: the
 * verifier tracks a stack's exact values, and a depth that changes at every step would have
 * it walk the step once per depth. */
struct filter_run {
	__u32 prog;
	__u32 raw_bytes;
	__u64 raw;
	__u64 bits;
	__u32 depth;
	__u32 bad; /* the program is malformed: the event passes (nothing is lost silently) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct filter_run);
} filter_runs SEC(".maps");

/* Whether the pattern equals s[at..at + plen), compared a word at a time. */
static __always_inline bool equal_at(struct filter_strings *fs, __u32 at)
{
	for (int w = 0; w < FILTER_PATTERN_LEN / 8; w++) {
		__u32 done = w * 8;
		if (done >= fs->plen)
			break;
		__u64 a = 0;
		bpf_probe_read_kernel(&a, 8, fs->s + ((at + done) & PATTERN_MASK));
		__u64 b = fs->p[w];
		__u32 rest = fs->plen - done;
		if (rest < 8) {
			__u64 mask = (1ULL << (rest * 8)) - 1;
			a &= mask;
			b &= mask;
		}
		if (a != b)
			return false;
	}
	return true;
}

/* "*x*": tries the pattern at position i of s (a bpf_loop callback over this CPU's
 * filter_strings). */
static long match_from(__u64 i, void *ctx)
{
	__u32 zero = 0;
	struct filter_strings *fs = bpf_map_lookup_elem(&filter_strings, &zero);
	if (!fs || i + fs->plen > fs->slen)
		return 1;
	if (equal_at(fs, i)) {
		fs->found = 1;
		return 1;
	}
	return 0;
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
	if (comm) {
		bpf_get_current_comm(fs->comm, sizeof(fs->comm));
		src = fs->comm;
		len = sizeof(fs->comm);
	}
	if (len > FILTER_PATTERN_LEN)
		len = FILTER_PATTERN_LEN;
	/* Copies up to the first NUL (or len bytes), NUL-terminated: returns the bytes with it.
	 * (The mask after the barrier keeps the bound where the verifier can see it.) */
	__u32 room = len + 1;
	barrier_var(room);
	room &= 2 * FILTER_PATTERN_LEN - 1;
	long copied = src && room ? bpf_probe_read_kernel_str(fs->s, room, src) : 0;
	__u32 slen = copied > 0 ? copied - 1 : 0;
	__u32 plen = pat->len;
	if (plen > FILTER_PATTERN_LEN)
		return false;
	bpf_probe_read_kernel(fs->p, sizeof(fs->p), pat->text);
	fs->slen = slen;
	fs->plen = plen;
	switch (pat->match) {
	case FM_FULL:
		return slen == plen && equal_at(fs, 0);
	case FM_FRONT:
		return slen >= plen && equal_at(fs, 0);
	case FM_END:
		return slen >= plen && equal_at(fs, slen - plen);
	}
	if (slen < plen)
		return false;
	fs->found = 0;
	bpf_loop(slen - plen + 1, match_from, &zero, 0);
	return fs->found;
}

/* The low `size` bytes of v, sign-extended if the operand is signed. */
static __always_inline __s64 filter_extend(__u64 v, __u32 size, __u8 flags)
{
	__u32 shift = 64 - 8 * size;
	if (flags & FF_SIGNED && shift < 64)
		return ((__s64)(v << shift)) >> shift;
	return (__s64)v;
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
	__u32 size = in->size;
	if (size > 8 || off + size > r->raw_bytes)
		return 0;
	__u64 v = 0;
	bpf_probe_read_kernel(&v, size & 15, (const __u8 *)r->raw + (off & RAW_MASK));
	return filter_extend(v, size, in->flags);
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
	__u32 zero = 0;
	struct filter_run *r = bpf_map_lookup_elem(&filter_runs, &zero);
	if (!r)
		return 1;
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
				src = (const __u8 *)r->raw + (in->off & RAW_MASK);
				len = in->size;
			}
		} else if (in->src == FS_DATA_LOC) {
			__u32 loc = 0;
			if (in->off + 4 <= r->raw_bytes)
				bpf_probe_read_kernel(&loc, 4, (const __u8 *)r->raw + (in->off & RAW_MASK));
			__u32 start = loc & 0xffff, n = loc >> 16;
			if (start + n <= r->raw_bytes) {
				src = (const __u8 *)r->raw + (start & RAW_MASK);
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
	__u32 zero = 0;
	struct filter_run *r = bpf_map_lookup_elem(&filter_runs, &zero);
	if (!r)
		return true;
	r->raw = (__u64)raw;
	r->raw_bytes = raw_bytes;
	/* The most common filter, one comparison of a number ("count != 512", "ret < 0"), run
	 * here: the loop's call and its lookups at each step cost more than the comparison. */
	struct filter_prog *f = bpf_map_lookup_elem(&filters, &prog);
	if (f && f->n == 1 && f->insns[0].op == F_CMP) {
		struct filter_insn *in = &f->insns[0];
		__u32 off = in->off, size = in->size;
		/* A field of the payload, read in place (raw is this CPU's buffer). */
		if (in->src == FS_RAW && size && size <= 8 && off + size <= raw_bytes &&
		    off <= MAX_TRACE_RAW - 8) {
			__u64 v = *(const __u64 *)(raw + off);
			if (size < 8)
				v &= (1ULL << (8 * size)) - 1;
			return filter_compare(in, filter_extend(v, size, in->flags));
		}
		return filter_compare(in, filter_number(r, in));
	}
	r->prog = prog;
	r->raw = (__u64)raw;
	r->raw_bytes = raw_bytes;
	r->bits = 0;
	r->depth = 0;
	r->bad = 0;
	bpf_loop(FILTER_INSNS, filter_step, &zero, 0);
	if (r->bad || r->depth == 0)
		return true;
	return r->bits & 1;
}

#endif
