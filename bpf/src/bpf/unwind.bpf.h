// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* User stacks unwound in the kernel, for programs without frame pointers: record builds, per
 * file, rows from its .eh_frame or .debug_frame (where the caller's stack pointer, return
 * address and rbp are, from each instruction on) into the arrays below, and gives each
 * followed process the list of its mappings that have a table. A walk takes one frame per
 * bpf_loop step: find the mapping of the address, the row in effect there (a per-CPU cache of
 * recent rows, else a page index, then a binary search), compute the CFA, load the return
 * address and rbp from a window of the stack read a few KiB at a time. Code with no
 * CFI (Go) follows the frame-pointer rule. What the walk gives is what bpf_get_stack gives
 * for frame pointers: return addresses, innermost first, the sampled IP first. */
#ifndef UNWIND_BPF_H
#define UNWIND_BPF_H

#include "common.bpf.h"

/* DWARF mode: unwind where tables are, copy stacks where not (else: always copy). */
const volatile bool unwind_enabled __weak = false;

/* The tables, written by user space through the maps' mappings. Maps, not arrays in .bss:
 * libbpf copies a section's 29 MiB initial image into the kernel on every start (50 ms), and
 * a map's size can follow the mode (one block when nothing unwinds). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, UNWIND_ROWS / UNWIND_ROWS_PER_BLOCK);
	__type(key, __u32);
	__type(value, struct unwind_row_block);
} unwind_rows SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, UNWIND_PAGES / UNWIND_PAGES_PER_BLOCK);
	__type(key, __u32);
	__type(value, struct unwind_page_block);
} unwind_pages SEC(".maps") __weak;

/* Row `idx` of the tables, or NULL past them. */
static __always_inline struct unwind_row *unwind_row(__u64 idx)
{
	if (idx >= UNWIND_ROWS)
		return NULL;
	__u32 block = idx / UNWIND_ROWS_PER_BLOCK;
	struct unwind_row_block *b = bpf_map_lookup_elem(&unwind_rows, &block);
	if (!b)
		return NULL;
	return &b->rows[idx & (UNWIND_ROWS_PER_BLOCK - 1)];
}

/* Entry `idx` of the page indexes, or NULL past them. */
static __always_inline __u32 *unwind_page(__u64 idx)
{
	if (idx >= UNWIND_PAGES)
		return NULL;
	__u32 block = idx / UNWIND_PAGES_PER_BLOCK;
	struct unwind_page_block *b = bpf_map_lookup_elem(&unwind_pages, &block);
	if (!b)
		return NULL;
	return &b->pages[idx & (UNWIND_PAGES_PER_BLOCK - 1)];
}

/* tgid -> the mappings of the process that have tables. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, UNWIND_PROCS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct unwind_proc);
} unwind_procs SEC(".maps") __weak;

/* Why a walk ended. */
enum uwalk_end {
	UNWIND_GOING = 0,
	UNWIND_DONE = 1,     /* the outermost frame, or a rule this unwinder cannot follow */
	UNWIND_NO_TABLE = 2, /* a frame lies in a file's code without a table (yet): copy instead */
};

struct uwalk {
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u32 tgid;
	__u32 n;
	__u32 end;
	/* The last frame followed the frame-pointer rule (JIT code, a file without CFI). */
	__u32 fp;
	/* A walk is using this slot (from its start until its frames are copied out). */
	__u32 busy;
	/* The mapping the last frame was in (the next one is mostly in the same file): an index
	 * into the process's mappings + 1, 0: none yet. Here, not in the steps' context on the
	 * stack: a value the verifier tracks from step to step (its range narrows with each
	 * search) keeps a bpf_loop callback's states from converging, and the kernel verifies the
	 * callback until they do (6.18.44: ~20k instructions per program that unwinds). */
	__u32 last;
	/* Pending return probes: their trampoline's address, and the next of the thread's
	 * return instances (newest first) whose return address a trampoline stands for. */
	__u64 tramp;
	__u64 ri;
	/* A saved rbp and return address read where the window does not hold them. */
	__u64 read_bp;
	__u64 read_ra;
	__u64 ips[MAX_STACK_DEPTH];
	/* A window of the user stack read at once: frames' return addresses and saved rbp are
	 * read from it, not each by a helper call (two a frame; 3.8-3.10's Python runs 100 native
	 * frames deep). win_len 0: none. */
	__u64 win_lo;
	__u32 win_len;
	__u8 win[STACK_WINDOW];
};

/* A walk's state, per CPU: slot WALK_SAMPLE for the perf_event programs (samples, major
 * faults: the kernel never runs two of those at once on a CPU), WALK_EVENT for the others. The
 * sampling program runs from a timer interrupt, which may come while a tracepoint program on
 * the same CPU is in the middle of a walk (a block request's: those run with interrupts on);
 * in one slot, the sample's walk would overwrite the event's. (The sched_switch program runs
 * with interrupts off.) Two of the others can nest too (a softirq's net event during a block
 * request's walk): a walk that finds its slot busy takes WALK_NESTED, and one that finds that
 * busy as well gives up (no user stack) rather than overwrite a walk under way. */
#define WALK_EVENT 0
#define WALK_SAMPLE 1
#define WALK_NESTED 2
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct uwalk);
} unwind_scratch SEC(".maps") __weak;

/* Whether the walk's window holds the user stack's bytes [lo, hi) (8-byte aligned), read
 * again from `lo` on where it does not: a window that would run past the stack's mapping (its
 * top frames) is read to the end of `lo`'s page instead. */
static __always_inline bool window_holds(struct uwalk *st, __u64 lo, __u64 hi)
{
	if ((lo | hi) & 7 || hi <= lo || hi - lo > 512)
		return false;
	if (lo >= st->win_lo && hi <= st->win_lo + st->win_len)
		return true;
	/* Most stacks are shallow: a walk's first window is a quarter of the rest. */
	__u32 len = st->win_lo ? STACK_WINDOW : STACK_WINDOW / 4;
	if (bpf_probe_read_user(st->win, len, (void *)lo)) {
		len = 4096 - (lo & 4095);
		if (len > STACK_WINDOW || len < 8 || bpf_probe_read_user(st->win, len, (void *)lo)) {
			st->win_len = 0;
			return false;
		}
	}
	st->win_lo = lo;
	st->win_len = len;
	return hi <= lo + len;
}

/* The 8-byte word at `addr`, which the window holds (window_holds). */
static __always_inline __u64 window_word(struct uwalk *st, __u64 addr)
{
	return *(__u64 *)(st->win + ((addr - st->win_lo) & (STACK_WINDOW - 8)));
}

/* Binary search steps: enough for 2^32 entries. */
#define SEARCH_STEPS 32

/* A binary search for the last entry <= key in [lo, hi): each step halves the range. Run by
 * bpf_loop, so that the verifier checks one step, not every path through 32 of them. */
struct search {
	__u64 key;
	__u32 lo;
	__u32 hi;
	struct unwind_proc *proc; /* mappings: by start */
	__u32 first_row;          /* rows: by pc */
};

static long mapping_search_step(__u64 i, void *ctx)
{
	struct search *s = ctx;
	if (s->lo >= s->hi)
		return 1;
	__u32 mid = (s->lo + s->hi) / 2;
	if (s->proc->maps[mid & (UNWIND_MAPPINGS - 1)].start <= s->key)
		s->lo = mid + 1;
	else
		s->hi = mid;
	return 0;
}

static long row_search_step(__u64 i, void *ctx)
{
	struct search *s = ctx;
	if (s->lo >= s->hi)
		return 1;
	__u32 mid = (s->lo + s->hi) / 2;
	__u64 idx = (__u64)s->first_row + mid;
	barrier_var(idx);
	struct unwind_row *r = unwind_row(idx);
	if (!r)
		return 1;
	if (r->pc <= (__u32)s->key)
		s->lo = mid + 1;
	else
		s->hi = mid;
	return 0;
}

/* The mapping of `p` that holds `ip`, or NULL. */
static __always_inline struct unwind_mapping *unwind_mapping_of(struct unwind_proc *p, __u64 ip)
{
	struct search s = { .key = ip, .lo = 0, .hi = p->n, .proc = p };
	if (s.hi > UNWIND_MAPPINGS)
		s.hi = UNWIND_MAPPINGS;
	/* The first mapping that starts after ip; the one before may hold it. */
	bpf_loop(8, mapping_search_step, &s, 0);
	if (s.lo == 0)
		return NULL;
	struct unwind_mapping *m = &p->maps[(s.lo - 1) & (UNWIND_MAPPINGS - 1)];
	return ip < m->end ? m : NULL;
}

/* The row of `m` in effect at `svma`, or NULL (before its first row, or out of the arrays). */
static __always_inline struct unwind_row *unwind_row_at(struct unwind_mapping *m, __u64 svma)
{
	__u64 page = svma >> 12;
	if (page < m->base_page || page - m->base_page >= m->n_pages)
		return NULL;
	/* Each index is checked as the register that indexes (barrier_var keeps the compiler
	 * from reusing a check made on another copy of the value, which the verifier would not
	 * see). */
	__u64 at = m->first_page + (page - m->base_page);
	__u32 *lo = unwind_page(at), *hi = unwind_page(at + 1);
	if (!lo || !hi)
		return NULL;
	/* The answer lies between the rows in effect at this page's start and the next's. */
	struct search s = {
		.key = svma,
		.lo = *lo,
		.hi = *hi + 1,
		.first_row = m->first_row,
	};
	if (s.hi > m->n_rows)
		s.hi = m->n_rows;
	/* The first row with pc > svma; the one before it is in effect. */
	bpf_loop(SEARCH_STEPS, row_search_step, &s, 0);
	if (s.lo == 0)
		return NULL;
	struct unwind_row *r = unwind_row((__u64)m->first_row + s.lo - 1);
	return r && r->pc <= (__u32)svma ? r : NULL;
}

/* Rows found lately, per CPU, by table and address: a deep stack passes the same few
 * return addresses sample after sample (3.8-3.10's Python: 80-110 native frames, a
 * handful of call sites), and a hit costs a hash and a compare where a search costs its
 * page index and 4-8 steps. Rows are only ever appended (a table's rows never change once
 * a mapping names them), so an entry never goes stale. `sum` binds an entry's words
 * together: a program that interrupts another's store (a sample during a block request's
 * walk) leaves a mixed entry that fails it, a miss. */
#define ROW_CACHE 512
struct row_cache_entry {
	__u64 svma;
	__u64 table; /* first_row + 1; 0: empty */
	__u64 row;   /* the row's rule: struct unwind_row less its pc */
	__u64 sum;
};

struct row_cache {
	struct row_cache_entry e[ROW_CACHE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct row_cache);
} unwind_row_cache SEC(".maps") __weak;

static __always_inline __u64 row_cache_sum(__u64 svma, __u64 table, __u64 row)
{
	return (svma * 0x9e3779b97f4a7c15ULL) ^ (table * 0xc2b2ae3d27d4eb4fULL) ^
	       (row * 0x165667b19e3779f9ULL) ^ 1;
}

/* A row's rule as one word: struct unwind_row less its pc (cfa, rbp_saved, rbp_off, cfa_off).
 * Both ways to a rule (cache, search) end in this one word, so that the verifier finds the
 * same state after either and checks the rest of a step once. */
static __always_inline __u64 rule_word(struct unwind_row *r)
{
	return (__u64)r->cfa | (__u64)r->rbp_saved << 8 | (__u64)(__u16)r->rbp_off << 16 |
	       (__u64)(__u32)r->cfa_off << 32;
}

/* The rule of `m`'s row in effect at `svma` (rule_word's), from the cache, or found and
 * kept there. False where no row is (before the first, or out of the arrays). */
static __always_inline bool unwind_rule_at(struct row_cache *cache, struct unwind_mapping *m,
					   __u64 svma, __u64 *rule)
{
	__u64 table = (__u64)m->first_row + 1;
	__u32 slot = ((svma ^ (table << 20)) * 0x9e3779b97f4a7c15ULL) >> (64 - 9);
	_Static_assert(ROW_CACHE == 1 << 9, "ROW_CACHE's bits");
	struct row_cache_entry *e = &cache->e[slot & (ROW_CACHE - 1)];
	if (e->svma == svma && e->table == table) {
		__u64 row = e->row;
		if (e->sum == row_cache_sum(svma, table, row)) {
			*rule = row;
			return true;
		}
	}
	struct unwind_row *r = unwind_row_at(m, svma);
	if (!r)
		return false;
	__u64 row = rule_word(r);
	e->table = 0;
	e->svma = svma;
	e->row = row;
	e->sum = row_cache_sum(svma, table, row);
	e->table = table;
	*rule = row;
	return true;
}

/* What a walk's steps share: its state, the process's mappings (looked up once) and the
 * row cache. */
struct unwind_ctx {
	struct uwalk *st;
	struct unwind_proc *proc;
	struct row_cache *cache;
};

/* include/linux/mm.h */
#define VM_EXEC 0x00000004

/* bpf_find_vma's callback: whether the mapping is a file's code (1), else 2. */
static long file_code_vma(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	*(__u32 *)ctx = (vma->vm_flags & VM_EXEC) && vma->vm_file ? 1 : 2;
	return 0;
}

/* Whether `ip` may lie in a file's code whose table record has not installed yet (its
 * mapping came after the process's others: a library ld.so mapped, a dlopen): then the
 * stack is copied rather than cut there. Anonymous code (a JIT's), or no mapping at all (a
 * garbage return address), ends the walk. A mapping that cannot be looked up now (its lock
 * held) counts as a file's. */
static __always_inline bool maybe_untabled_file(__u64 ip)
{
	__u32 found = 0;
	long err = bpf_find_vma(bpf_get_current_task_btf(), ip, file_code_vma, &found, 0);
	if (err)
		return err != -2; /* -ENOENT: no mapping holds ip */
	return found == 1;
}

/* The rest of a step, from the rule in effect at st->ip (rule_word's): computes the CFA, reads
 * the saved rbp and the return address, and moves st to the caller. Returns 1 to stop. A
 * global function (unwind.bpf.c): the verifier checks it once, from any state, where inline
 * it checked it again for each way a step reaches its rule (cache or search, each CFA rule,
 * each way through the window: on 6.18.44, 11-20k instructions in each program that
 * unwinds). */
int unwind_caller(struct uwalk *st, __u64 rule);

/* One frame: records st->ip, then moves st to the caller (unwind_caller). Returns 1 to stop.
 * Global (unwind.bpf.c), as unwind_caller: inlined in the bpf_loop step, it was checked again
 * for each way a walk reached it, 800-1,000 instructions in each program that unwinds (two
 * frames a call, to halve the calls' cost, ~2.6 ns each here, took 2.7 times the work). */
int unwind_frame(struct uwalk *st, struct unwind_proc *p, struct row_cache *cache);

static long unwind_step(__u64 i, void *ctx)
{
	struct unwind_ctx *c = ctx;
	if (!c->st || !c->proc || !c->cache)
		return 1;
	return unwind_frame(c->st, c->proc, c->cache) ? 1 : 0;
}

/* Unwinds the current task's user stack from `regs` into `st`, st->end telling why it ended
 * (UNWIND_NO_TABLE: nothing known of the first frame, take a stack copy). */
static __always_inline void unwind_user(struct uwalk *st, __u32 tgid, struct pt_regs *regs)
{
	__u32 zero = 0;
	st->tgid = tgid;
	st->ip = regs->ip;
	st->sp = regs->sp;
	st->bp = regs->bp;
	st->n = 0;
	st->end = UNWIND_GOING;
	st->fp = 0;
	st->tramp = 0;
	st->ri = 0;
	st->win_len = 0;
	st->win_lo = 0;
	st->last = 0;
	if (bpf_core_field_exists(struct task_struct, utask)) {
		struct task_struct *task = bpf_get_current_task_btf();
		struct uprobe_task *ut = BPF_CORE_READ(task, utask);
		struct xol_area *xol = BPF_CORE_READ(task, mm, uprobes_state.xol_area);
		if (ut && xol) {
			st->tramp = BPF_CORE_READ(xol, vaddr);
			st->ri = (__u64)BPF_CORE_READ(ut, return_instances);
		}
	}
	struct unwind_ctx c = {
		.st = st,
		.proc = bpf_map_lookup_elem(&unwind_procs, &tgid),
		.cache = bpf_map_lookup_elem(&unwind_row_cache, &zero),
	};
	if (!c.proc || !c.cache) {
		st->end = UNWIND_NO_TABLE;
		return;
	}
	bpf_loop(MAX_STACK_DEPTH, unwind_step, &c, 0);
	if (st->end == UNWIND_GOING)
		st->end = UNWIND_DONE;
}

/* The walk state of `slot` for this CPU, marked busy; WALK_NESTED's where that one is in use
 * by the walk this program interrupted; NULL where both are. */
static __always_inline struct uwalk *walk_slot(__u32 slot)
{
	struct uwalk *st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	if (st && st->busy) {
		__u32 nested = WALK_NESTED;
		st = bpf_map_lookup_elem(&unwind_scratch, &nested);
	}
	if (!st || st->busy)
		return NULL;
	st->busy = 1;
	return st;
}

/* Copies the frames of `st` into `dst` (room for MAX_STACK_DEPTH); returns their bytes as
 * bpf_get_stack would. */
static __always_inline __s32 unwind_copy_out(struct uwalk *st, __u64 *dst)
{
	__u32 n = st->n;
	if (n > MAX_STACK_DEPTH)
		n = MAX_STACK_DEPTH;
	if (n == 0)
		return 0;
	__u32 bytes = n * 8;
	if (bytes > MAX_STACK_DEPTH * 8)
		return 0;
	bpf_probe_read_kernel(dst, bytes, st->ips);
	return bytes;
}

/* The current task's user stack unwound with the tables into `dst` (room for
 * MAX_STACK_DEPTH), as bpf_get_stack's bytes; -1 when the process has no table for its first
 * frame (the caller takes a stack copy, or walks frame pointers). `slot`: the walk's state's
 * (WALK_SAMPLE from perf_event programs, WALK_EVENT from the others). */
static __always_inline __s32 unwind_user_stack_in(__u32 tgid, __u64 *dst, __u32 slot)
{
	if (!unwind_enabled)
		return -1;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	struct uwalk *st = walk_slot(slot);
	if (!st)
		return -1;
	unwind_user(st, tgid, regs);
	__s32 bytes = st->end == UNWIND_NO_TABLE ? -1 : unwind_copy_out(st, dst);
	st->busy = 0;
	return bytes;
}

/* unwind_user_stack_in from any program but a perf_event one. */
static __always_inline __s32 unwind_user_stack(__u32 tgid, __u64 *dst)
{
	return unwind_user_stack_in(tgid, dst, WALK_EVENT);
}

#endif
