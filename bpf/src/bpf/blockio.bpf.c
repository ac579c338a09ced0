// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Block I/O: a request's start keeps who made it and from where (the submitter, whoever
 * issues it to the driver later), block_rq_issue times it, block_rq_complete sends it with
 * its latency. Writeback is charged to the dirtier: a page dirtied by a
 * followed thread remembers it (and the stack of its write), and the request that writes
 * the page back, issued by a kernel thread or `sync`, names it. */
#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"

const volatile bool io_enabled = true;

/* Forces the event struct into BTF so the skeleton generates its Rust type. */
struct block_io_event _block_io_event = {};

struct io_start {
	__u64 issue_ns;
	__u64 issue_bytes; /* its size when issued */
	__u32 pid;
	__u32 tid;
	char comm[16];
	__u8 tracked;
	/* In io_scratch: a program is filling this slot (means nothing once kept). */
	__u8 busy;
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u32 dirtier_pid;
	__u32 dirtier_tid;
	__u64 dirty_ns;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
};

/* Requests in flight, by struct request *. Preallocated: in a burst of issues (a flusher's
 * writeback, kblockd dispatching what waited) an update would otherwise find the allocator's
 * per-CPU cache empty now and then (ENOMEM), and the request is lost. More requests than
 * it holds go to io_starts_more, allocated as they come. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_IO_PREALLOC);
	__type(key, __u64);
	__type(value, struct io_start);
} io_starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct io_start);
} io_starts_more SEC(".maps");

/* Where a request's start is put together, per CPU: two slots, as the programs nest. A
 * request started by its submitter (interrupts on) may be interrupted by the issue of another
 * (a queue run from a completion), whose program fills a slot too: in one slot it overwrote
 * the first's pid, comm and tracked mark, and a tracked request (one of dd's 16 direct writes,
 * under a build beside) went as another process's. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct io_start);
} io_scratch SEC(".maps");

/* A free slot of io_scratch, marked busy, or NULL when both are in use. */
static __always_inline struct io_start *scratch_take(void)
{
	__u32 k = 0;
	struct io_start *s = bpf_map_lookup_elem(&io_scratch, &k);
	if (s && s->busy) {
		k = 1;
		s = bpf_map_lookup_elem(&io_scratch, &k);
	}
	if (!s || s->busy)
		return NULL;
	s->busy = 1;
	return s;
}

/* blktrace's rwbs letters for a request's flags. */
static __always_inline void fill_rwbs(char *rwbs, __u32 flags)
{
	int i = 0;
	__u32 op = flags & 0xff;
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH)))
		rwbs[i++] = 'F';
	if (op == REQ_OP_WRITE)
		rwbs[i++] = 'W';
	else if (op == REQ_OP_DISCARD)
		rwbs[i++] = 'D';
	else if (op == REQ_OP_FLUSH)
		rwbs[i++] = 'F';
	else if (op == REQ_OP_READ)
		rwbs[i++] = 'R';
	else
		rwbs[i++] = 'N';
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA)))
		rwbs[i++] = 'F';
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD)))
		rwbs[i++] = 'A';
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC)))
		rwbs[i++] = 'S';
	if (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_META)))
		rwbs[i++] = 'M';
}

/* A thread's writes from one place (the same user instruction and stack pointer: the same
 * call) closer together than this are one burst: one dirty_event (with its stacks) stands
 * for all the pages of the burst. Another place starts a new burst (open() dirtying the
 * inode's block, then write() the data, are two). */
#define DIRTY_BURST_NS (100 * 1000 * 1000ull)

/* A page of a file, as writeback finds it again. */
/* A run of 64 pages of a file: the unit a dirtier is remembered for. One entry a page
 * would let 256 MiB of 4 KiB folios fill the map (the oldest forgotten before their
 * writeback); one a chunk keeps 16 GiB, and the writers of two halves of a file apart. */
#define DIRTY_CHUNK_SHIFT 6

struct page_key {
	__u64 mapping;
	__u64 chunk; /* the page's index >> DIRTY_CHUNK_SHIFT */
};

struct dirtier {
	__u32 pid;
	__u32 tid;
	__u64 dirty_ns; /* the burst's dirty_event */
};

/* Dirty chunks of files of tracked threads, for their writeback: the least recently used go
 * first when it is full; dirtied again by a tracked thread, a chunk takes its new dirtier. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct page_key);
	__type(value, struct dirtier);
} dirtiers SEC(".maps");

struct dirty_burst {
	__u64 start_ns;
	__u64 last_ns;
	__u64 ip;
	__u64 sp;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct dirty_burst);
} dirty_bursts SEC(".maps");

/* What a dirty event's two layouts (offcpu_event, offcpu_copy_event) name alike: the
 * current thread, the time, its kernel stack, and no interval. */
#define DIRTY_HEAD(e, event_kind, ctx, now)                                                     \
	do {                                                                                   \
		__u64 id = bpf_get_current_pid_tgid();                                         \
		(e)->kind = (event_kind);                                                      \
		(e)->cpu = bpf_get_smp_processor_id();                                         \
		(e)->pid = id >> 32;                                                           \
		(e)->tid = (__u32)id;                                                          \
		(e)->time_ns = (now);                                                          \
		(e)->duration_ns = 0;                                                          \
		(e)->runq_ns = 0;                                                              \
		(e)->state = 0;                                                                \
		(e)->in_fault = 0;                                                             \
		(e)->kstack_bytes =                                                            \
			bpf_get_stack((ctx), (e)->kstack, sizeof((e)->kstack), TP_BTF_SKIP);    \
	} while (0)

/* Sends where the current thread starts a burst of dirtying (the write() that does it):
 * reserved whole in the ring, as this runs preemptible. */
static __always_inline void dirty_emit(void *ctx, __u64 now)
{
	if (stack_copy_bytes) {
		/* Unwound with the tables where the process has them. */
		struct offcpu_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (e) {
			__s32 unwound = unwind_user_stack(bpf_get_current_pid_tgid() >> 32, e->ustack);
			if (unwound >= 0) {
				DIRTY_HEAD(e, EVENT_DIRTY, ctx, now);
				e->ustack_bytes = unwound;
				bpf_ringbuf_submit(e, submit_flags());
				return;
			}
			bpf_ringbuf_discard(e, 0);
		}
		struct offcpu_copy_buf *b = bpf_ringbuf_reserve(&events, sizeof(*b), 0);
		if (!b) {
			count_drop(EVENT_DIRTY_COPY);
			return;
		}
		DIRTY_HEAD(&b->e, EVENT_DIRTY_COPY, ctx, now);
		b->e.wake_ns = 0;
		keep_user_copy(bpf_get_current_task_btf(), b);
		bpf_ringbuf_submit(b, submit_flags());
		return;
	}
	struct offcpu_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_DIRTY);
		return;
	}
	DIRTY_HEAD(e, EVENT_DIRTY, ctx, now);
	e->ustack_bytes = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
	bpf_ringbuf_submit(e, submit_flags());
}

/* A tracked thread dirtied `folio`: remember it for the folio's writeback. */
static __always_inline void remember_dirtier(void *ctx, struct folio *folio,
					     struct address_space *mapping)
{
	if (!io_enabled)
		return;
	__u64 now = bpf_ktime_get_ns();
	struct dirty_burst *b = bpf_task_storage_get(&dirty_bursts, bpf_get_current_task_btf(), 0,
						     BPF_LOCAL_STORAGE_GET_F_CREATE);
	/* Without its burst (no storage: the allocator's cache was empty) the page still names
	 * its dirtier, so that its writeback is kept; no burst, no write() stack for it. */
	__u64 burst_ns = 0;
	if (b) {
		struct pt_regs *regs =
			(struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		__u64 ip = regs->ip, sp = regs->sp;
		if (!b->start_ns || now - b->last_ns > DIRTY_BURST_NS || ip != b->ip ||
		    sp != b->sp) {
			b->start_ns = now;
			b->ip = ip;
			b->sp = sp;
			dirty_emit(ctx, now);
		}
		b->last_ns = now;
		burst_ns = b->start_ns;
	}
	__u64 id = bpf_get_current_pid_tgid();
	struct page_key key = {
		.mapping = (__u64)mapping,
		.chunk = BPF_CORE_READ(folio, index) >> DIRTY_CHUNK_SHIFT,
	};
	struct dirtier d = { .pid = id >> 32, .tid = (__u32)id, .dirty_ns = burst_ns };
	/* The chunk's other pages, dirtied in the same burst, leave its entry as it is (an
	 * update of an LRU map takes a new element each time). */
	struct dirtier *known = bpf_map_lookup_elem(&dirtiers, &key);
	if (known && known->tid == d.tid && known->dirty_ns == d.dirty_ns)
		return;
	bpf_map_update_elem(&dirtiers, &key, &d, BPF_ANY);
}

/* x86-64's pages. */
#define PAGE_SHIFT 12

/* The dirtier of a write request's first page, if a tracked thread dirtied it. That page is
 * where the request's first bio starts now: a bio split to the device's limits (an 8 MiB
 * writeback bio in 4 MiB requests) shares its vector with the other parts, each from its
 * own index and offset; the vector's first page is the first part's. */
static __always_inline void find_dirtier(struct request *rq, struct io_start *s)
{
	s->dirtier_pid = 0;
	s->dirtier_tid = 0;
	s->dirty_ns = 0;
	struct bio *bio = BPF_CORE_READ(rq, bio);
	if (!bio)
		return;
	struct bio_vec *vec = BPF_CORE_READ(bio, bi_io_vec);
	if (!vec)
		return;
	__u32 idx = BPF_CORE_READ(bio, bi_iter.bi_idx);
	__u32 done = BPF_CORE_READ(bio, bi_iter.bi_bvec_done);
	struct bio_vec *bv = (void *)vec + (__u64)idx * bpf_core_type_size(struct bio_vec);
	struct page *page = BPF_CORE_READ(bv, bv_page);
	if (!page)
		return;
	/* A vector entry may span pages (and folios): the page the offset falls in. */
	__u64 at = BPF_CORE_READ(bv, bv_offset) + (__u64)done;
	page = (void *)page + (at >> PAGE_SHIFT) * bpf_core_type_size(struct page);
	/* A tail page names its folio's head (low bit set). */
	unsigned long head = BPF_CORE_READ(page, compound_head);
	struct folio *folio = (head & 1) ? (struct folio *)(head - 1) : (struct folio *)page;
	struct page_key key = {
		.mapping = (__u64)BPF_CORE_READ(folio, mapping),
		.chunk = BPF_CORE_READ(folio, index) >> DIRTY_CHUNK_SHIFT,
	};
	struct dirtier *d = bpf_map_lookup_elem(&dirtiers, &key);
	if (!d)
		return;
	/* Kept: a large folio's writeback can take several requests. */
	s->dirtier_pid = d->pid;
	s->dirtier_tid = d->tid;
	s->dirty_ns = d->dirty_ns;
}

/* A followed thread dirtied a folio: remember it for the folio's writeback. */
SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(on_folio_dirtied, struct folio *folio, struct address_space *mapping)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (tgid && tracked(tgid))
		remember_dirtier(ctx, folio, mapping);
	return 0;
}

/* Fills `s` from the current task for request `rq`: who it is for and from where. A
 * request is kept if a followed thread made it, or if it writes back pages a followed
 * thread dirtied (charged to that thread); with -a, every request but record's own. The
 * rest are left before any stack is taken (false). */
static __always_inline bool capture_request(void *ctx, struct request *rq, struct io_start *s)
{
	__u64 id = bpf_get_current_pid_tgid();
	s->pid = id >> 32;
	s->tid = (__u32)id;
	s->tracked = s->pid && tracked(s->pid);
	if (system_wide) {
		if (s->pid == self_tgid && s->pid)
			return false;
		find_dirtier(rq, s);
	} else {
		find_dirtier(rq, s);
		if (!s->tracked && !s->dirtier_pid)
			return false;
	}
	s->issue_ns = 0;
	s->issue_bytes = 0;
	bpf_get_current_comm(s->comm, sizeof(s->comm));
	s->kstack_bytes = bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), TP_BTF_SKIP);
	/* Kernel threads (writeback's kworkers) have no user stack to walk. */
	struct task_struct *task = bpf_get_current_task_btf();
	__s32 unwound = -1;
	if (task->flags & PF_KTHREAD)
		s->ustack_bytes = 0;
	else if ((unwound = unwind_user_stack(s->pid, s->ustack)) >= 0)
		s->ustack_bytes = unwound;
	else
		s->ustack_bytes =
			bpf_get_stack(ctx, s->ustack, sizeof(s->ustack), BPF_F_USER_STACK);
	return true;
}

static __always_inline struct io_start *find_request(__u64 key)
{
	struct io_start *s = bpf_map_lookup_elem(&io_starts, &key);
	return s ? s : bpf_map_lookup_elem(&io_starts_more, &key);
}

static __always_inline void keep_request(__u64 key, struct io_start *s)
{
	if (bpf_map_update_elem(&io_starts, &key, s, BPF_ANY) &&
	    bpf_map_update_elem(&io_starts_more, &key, s, BPF_ANY))
		count_drop(EVENT_BLOCK_IO);
}

/* A request may have been kept in either map. */
static __always_inline void forget_request(__u64 key)
{
	bpf_map_delete_elem(&io_starts, &key);
	bpf_map_delete_elem(&io_starts_more, &key);
}

/* Kept requests issued whose completion no program saw (their address started again), and
 * their bytes: some interrupts run no BPF program (on this project's VMs, bpftrace's missed
 * the same completions), and a completion there goes unseen. Said at the end, with the
 * requests still issued then. */
__u64 io_unseen_completions = 0;
__u64 io_unseen_bytes = 0;

/* `rq` starts: whatever its address held before ended. A request issued and not seen
 * completing is counted. */
static __always_inline void end_unseen(__u64 key)
{
	struct io_start *old = find_request(key);
	if (old && old->issue_ns) {
		__sync_fetch_and_add(&io_unseen_completions, 1);
		__sync_fetch_and_add(&io_unseen_bytes, old->issue_bytes);
	}
}

/* A request made from bios, in the context of the task that submitted them: the writer
 * itself, or writeback's flusher for the pages it writes back. The issue to the driver may
 * come later from another context (kblockd, the flusher of a plug, the next submitter), so
 * who the request is for is taken here. Each request starts once: whatever its address
 * held before (a request merged away or freed unissued) is replaced or dropped. */
static __always_inline int start_request(void *ctx, struct request *rq)
{
	if (!io_enabled)
		return 0;
	struct io_start *s = scratch_take();
	if (!s) {
		count_drop(EVENT_BLOCK_IO);
		return 0;
	}
	__u64 key = (__u64)rq;
	end_unseen(key);
	if (capture_request(ctx, rq, s))
		keep_request(key, s);
	else
		forget_request(key);
	s->busy = 0;
	return 0;
}

/* Kernel 6.5 and later: every request made from bios (blk_account_io_start). */
SEC("tp_btf/block_io_start")
int BPF_PROG(on_block_start, struct request *rq)
{
	return start_request(ctx, rq);
}

/* Before 6.5: requests put in an I/O scheduler's queue or a plug's list by their submitter.
 * A requeued request (already issued once) keeps its first submitter. */
SEC("tp_btf/block_rq_insert")
int BPF_PROG(on_block_insert, struct request *rq)
{
	struct io_start *known = find_request((__u64)rq);
	if (known && known->issue_ns)
		return 0;
	return start_request(ctx, rq);
}

/* The request goes to the driver: its latency is timed from here. A request not seen
 * starting (made before the recording began, or issued where it was made on a kernel
 * without block_io_start) is taken as it is issued. */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_block_issue, struct request *rq)
{
	if (!io_enabled)
		return 0;
	__u64 key = (__u64)rq;
	struct io_start *known = find_request(key);
	if (known) {
		known->issue_ns = bpf_ktime_get_ns();
		known->issue_bytes = BPF_CORE_READ(rq, __data_len);
		return 0;
	}
	struct io_start *s = scratch_take();
	if (!s) {
		count_drop(EVENT_BLOCK_IO);
		return 0;
	}
	if (capture_request(ctx, rq, s)) {
		s->issue_ns = bpf_ktime_get_ns();
		s->issue_bytes = BPF_CORE_READ(rq, __data_len);
		keep_request(key, s);
	}
	s->busy = 0;
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_block_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	if (completion_unseen_by_construction())
		return 0;
	struct io_start *s = find_request(key);
	if (!s)
		return 0;
	struct block_io_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_BLOCK_IO);
		forget_request(key);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	e->kind = EVENT_BLOCK_IO;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = s->pid;
	e->tid = s->tid;
	e->time_ns = now;
	/* Never issued (a request failed before it reached the driver): no device time. */
	e->issue_ns = s->issue_ns ? s->issue_ns : now;
	e->sector = BPF_CORE_READ(rq, __sector);
	e->bytes = BPF_CORE_READ(rq, __data_len);
	if (!e->bytes)
		e->bytes = nr_bytes;
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
	e->dev = disk ? ((__u32)BPF_CORE_READ(disk, major) << 20) | BPF_CORE_READ(disk, first_minor) : 0;
	__builtin_memset(e->rwbs, 0, sizeof(e->rwbs));
	fill_rwbs(e->rwbs, BPF_CORE_READ(rq, cmd_flags));
	__builtin_memcpy(e->comm, s->comm, sizeof(e->comm));
	e->tracked = s->tracked;
	e->kstack_bytes = s->kstack_bytes;
	e->ustack_bytes = s->ustack_bytes;
	e->dirtier_pid = s->dirtier_pid;
	e->dirtier_tid = s->dirtier_tid;
	e->dirty_ns = s->dirty_ns;
	__builtin_memcpy(e->kstack, s->kstack, sizeof(e->kstack));
	__builtin_memcpy(e->ustack, s->ustack, sizeof(e->ustack));
	bpf_ringbuf_submit(e, submit_flags());
	forget_request(key);
	return 0;
}
