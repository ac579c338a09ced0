// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The unwind tables' types (see unwind.bpf.h, where the maps are), and the two functions of
 * the unwinder every program that unwinds links to rather than inlines: unwind_frame and
 * unwind_caller. */
#include "common.bpf.h"
#include "unwind.bpf.h"

/* See unwind.bpf.h. Global: checked once per program, from any walk state. */
int unwind_frame(struct uwalk *st, struct unwind_proc *p, struct row_cache *cache)
{
	if (!st || !p || !cache)
		return 1;
	struct unwind_mapping *m = NULL;
	if (st->last) {
		struct unwind_mapping *l = &p->maps[(st->last - 1) & (UNWIND_MAPPINGS - 1)];
		if (l->start <= st->ip && st->ip < l->end)
			m = l;
	}
	if (!m) {
		m = unwind_mapping_of(p, st->ip);
		if (m)
			st->last = (m - p->maps) + 1;
	}
	if (!m) {
		st->end = st->n == 0 || maybe_untabled_file(st->ip) ? UNWIND_NO_TABLE : UNWIND_DONE;
		return 1;
	}
	__u32 n = st->n;
	if (n >= MAX_STACK_DEPTH) {
		st->end = UNWIND_DONE;
		return 1;
	}
	st->ips[n] = st->ip;
	st->n = n + 1;
	/* A return address's row is the call's: one byte back. */
	__u64 svma = st->ip - m->bias - (n > 0);
	__u64 rule = 0;
	bool found = m->n_rows && unwind_rule_at(cache, m, svma, &rule);
	/* Code without CFI in a file that has some (V8's builtins in node) called from a
	 * frame-pointer chain (JIT code) stays on that chain. */
	bool fp_rule = m->n_rows == 0 || (st->fp && (!found || (rule & 0xff) == CFA_UNKNOWN));
	st->fp = fp_rule;
	if (fp_rule) {
		/* No CFI: the frame-pointer rule (push rbp; mov rbp, rsp): CFA rbp+16, rbp at -16. */
		struct unwind_row fp = { .cfa = CFA_RBP, .cfa_off = 16, .rbp_saved = 1, .rbp_off = -16 };
		rule = rule_word(&fp);
	} else if (!found) {
		st->end = UNWIND_DONE;
		return 1;
	}
	return unwind_caller(st, rule);
}

/* Forces the enum and structs user space writes into BTF, so the skeleton generates their
 * Rust types. */
enum unwind_cfa _unwind_cfa = 0;

/* See unwind.bpf.h. Global: the verifier checks it once per program, its arguments as any
 * walk state and any rule. */
int unwind_caller(struct uwalk *st, __u64 rule)
{
	if (!st)
		return 1;
	__u64 cfa;
	__s64 cfa_off = (__s32)(rule >> 32);
	switch (rule & 0xff) {
	case CFA_RSP:
		cfa = st->sp + cfa_off;
		break;
	case CFA_RBP:
		cfa = st->bp + cfa_off;
		break;
	case CFA_PLT:
		cfa = st->sp + 8 + (((st->ip & 15) >= 11) ? 8 : 0);
		break;
	default:
		st->end = UNWIND_DONE;
		return 1;
	}
	bool rbp_saved = (rule >> 8) & 1;
	__s64 rbp_off = (__s16)(rule >> 16);
	/* The saved rbp and the return address, from the stack's window (one read a few frames). */
	__u64 bp = st->bp;
	__u64 ra = 0;
	if (window_holds(st, rbp_saved ? cfa + rbp_off : cfa - 8, cfa)) {
		if (rbp_saved)
			bp = window_word(st, cfa + rbp_off);
		ra = window_word(st, cfa - 8);
	} else {
		/* Read into the walk's state, not the stack: both ways then leave the verifier
		 * the same unknown values, and one state to go on with. */
		if (rbp_saved && bpf_probe_read_user(&st->read_bp, 8, (void *)(cfa + rbp_off)))
			st->read_bp = 0;
		if (bpf_probe_read_user(&st->read_ra, 8, (void *)(cfa - 8)))
			st->read_ra = 0;
		if (rbp_saved)
			bp = st->read_bp;
		ra = st->read_ra;
	}
	if (ra == 0) {
		st->end = UNWIND_DONE;
		return 1;
	}
	/* A function with a return probe pending returns to the uprobes trampoline: its real
	 * return address is kept in the thread's return instances, innermost first. */
	if (ra == st->tramp && st->ri) {
		struct return_instance *ri = (struct return_instance *)st->ri;
		ra = BPF_CORE_READ(ri, orig_ret_vaddr);
		st->ri = (__u64)BPF_CORE_READ(ri, next);
	}
	st->bp = bp;
	/* The stack grows down: a caller's frame lies above. */
	if (cfa <= st->sp) {
		st->end = UNWIND_DONE;
		return 1;
	}
	st->sp = cfa;
	st->ip = ra;
	return 0;
}
