// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Sampled requests followed through the layers (record --follow write:1/N, send:1/N, or
 * write:R/s): 1 in N write or send calls of the followed processes, chosen at random at the
 * syscall's entry (or the first call at least 1/R s after the last one chosen), carry a mark
 * down, and only marked requests send records, one per layer they pass.
 * Writes: the folios the call dirtied (writeback_dirty_folio while it runs), the block
 * request made of them (block_io_start: its bios' pages looked up), its issue and
 * completion; a request the call made itself (O_DIRECT) is its own. Sends: the call's entry
 * into TCP, then each skb holding its bytes (sequence numbers) to the qdisc, the driver and
 * the device (requests_send.bpf.c). Loaded only with --follow. */
#include "requests.bpf.h"
#include "bio_pages.bpf.h"

const volatile __u32 follow_write_every = 0;
const volatile __u32 follow_send_every = 0;
/* write:R/s, send:R/s: at least this long between two calls chosen (0: by count). */
const volatile __u64 follow_write_gap_ns = 0;
const volatile __u64 follow_send_gap_ns = 0;

/* When the last call of each kind was chosen (by time): [0] writes, [1] sends. */
__u64 last_chosen_ns[2] = {};

/* For the generated Rust types. */
struct request_event _request_event = {};

/* Ids of sampled calls so far. */
__u64 request_ids = 0;
/* Marked folios not written back yet (an estimate: evicted ones stay counted); 0 spares
 * each block request the walk of its pages. */
__u64 marked_pending = 0;

/* x86-64 syscall numbers. */
#define NR_WRITE 1
#define NR_PWRITE64 18
#define NR_WRITEV 20
#define NR_SENDTO 44
#define NR_SENDMSG 46
#define NR_PWRITEV 296
#define NR_PWRITEV2 328

#define S_IFMT 0170000
#define S_IFSOCK 0140000
#define S_IFREG 0100000
#define S_IFBLK 0060000
/* Folios sampled writes dirtied, until their writeback. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct folio_key);
	__type(value, struct request_mark);
} marked_folios SEC(".maps");

/* Marked folios not written back yet, by file (its page cache): a bio of a file with none
 * is not walked. Counts, as marked_pending's, may stay above what is left (evictions). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __s64);
} pending_by_file SEC(".maps");

/* One more (`by` 1) or one less (-1) marked folio of file `mapping` pending. */
static __always_inline void count_pending(__u64 mapping, __s64 by)
{
	__sync_fetch_and_add(&marked_pending, by);
	__s64 *n = bpf_map_lookup_elem(&pending_by_file, &mapping);
	if (!n && by > 0 && !bpf_map_update_elem(&pending_by_file, &mapping, &by, BPF_NOEXIST))
		return;
	if (!n)
		n = bpf_map_lookup_elem(&pending_by_file, &mapping);
	if (n)
		__sync_fetch_and_add(n, by);
}

/* Whether file `mapping` has marked folios pending. */
static __always_inline bool file_pending(__u64 mapping)
{
	__s64 *n = bpf_map_lookup_elem(&pending_by_file, &mapping);
	return n && *n > 0;
}

/* The sampled calls a block request carries. */
struct request_marks {
	struct request_mark m[REQ_MARKS];
	__u32 n;
	__u32 issued; /* its issue sent (a requeued request is issued again) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct request_marks);
} marked_requests SEC(".maps");

/* Where a walk collects a request's marks (too large for the stack): slot 0 for a request
 * made, 1 for one issued (an issue may interrupt the making of another). */
#define SCRATCH_MADE 0
#define SCRATCH_ISSUED 1
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct request_marks);
} marks_scratch SEC(".maps");

/* The file type (S_IFMT bits) of the current task's descriptor `fd`, and its page cache;
 * 0 if none. */
static __always_inline __u32 fd_type(long fd, __u64 *mapping)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return 0;
	*mapping = (__u64)BPF_CORE_READ(f, f_mapping);
	return BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT;
}

static __always_inline bool is_write_call(long nr)
{
	return nr == NR_WRITE || nr == NR_PWRITE64 || nr == NR_WRITEV || nr == NR_PWRITEV ||
	       nr == NR_PWRITEV2 || nr == NR_SENDTO || nr == NR_SENDMSG;
}

/* Whether a call of `kind` may be chosen, by draw `r` (1 in N) or by time `now` (R/s). */
static __always_inline bool may_choose(__u32 kind, __u32 r, __u64 now)
{
	__u32 every = kind == REQ_KIND_WRITE ? follow_write_every : follow_send_every;
	__u64 gap = kind == REQ_KIND_WRITE ? follow_write_gap_ns : follow_send_gap_ns;
	if (every)
		return r % every == 0;
	if (gap)
		return now - last_chosen_ns[kind == REQ_KIND_SEND] >= gap;
	return false;
}

/* Chooses a call of `kind` that may be chosen: by time, only one of the CPUs that may. */
static __always_inline bool choose(__u32 kind, __u64 now)
{
	__u64 gap = kind == REQ_KIND_WRITE ? follow_write_gap_ns : follow_send_gap_ns;
	if (!gap)
		return true;
	__u64 *last = &last_chosen_ns[kind == REQ_KIND_SEND];
	__u64 was = *last;
	return now - was >= gap && __sync_val_compare_and_swap(last, was, now) == was;
}

/* A followed thread's write or send call: 1 in N (or R a second) is marked. The cheap
 * tests first: every system call of the machine passes here. */
SEC("tp_btf/sys_enter")
int BPF_PROG(on_request_enter, struct pt_regs *regs, long nr)
{
	if (!is_write_call(nr))
		return 0;
	__u32 r = bpf_get_prandom_u32();
	__u64 now = follow_write_gap_ns || follow_send_gap_ns ? bpf_ktime_get_ns() : 0;
	if (!may_choose(REQ_KIND_WRITE, r, now) && !may_choose(REQ_KIND_SEND, r, now))
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	if (!pid || !tracked(pid))
		return 0;
	/* A write to a file or a disk, or a send; writes to pipes and terminals are neither. */
	__u32 kind = REQ_KIND_SEND;
	__u64 mapping = 0;
	if (nr != NR_SENDTO && nr != NR_SENDMSG) {
		__u32 type = fd_type(regs->di, &mapping);
		if (type == S_IFSOCK && (nr == NR_WRITE || nr == NR_WRITEV))
			kind = REQ_KIND_SEND;
		else if (type == S_IFREG || type == S_IFBLK)
			kind = REQ_KIND_WRITE;
		else
			return 0;
	}
	/* The draw was made before the kind was known, and is the kind's own: 1 in N of
	 * each kind's calls. */
	if (!may_choose(kind, r, now) || !choose(kind, now))
		return 0;
	struct marked_call c = {
		.m = {
			.id = __sync_fetch_and_add(&request_ids, 1) + 1,
			.call_ns = now ?: bpf_ktime_get_ns(),
			.call_pid = pid,
			.call_tid = tid,
			.kind = kind,
		},
		.asked = nr == NR_WRITE || nr == NR_PWRITE64 ? regs->dx : 0,
		.mapping = mapping,
	};
	if (!bpf_map_update_elem(&marked_calls, &tid, &c, BPF_NOEXIST))
		__sync_fetch_and_add(&calls_marked, 1);
	else
		bpf_map_update_elem(&marked_calls, &tid, &c, BPF_ANY);
	return 0;
}

/* The marked call returns: its record, with the bytes it wrote or sent. */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_request_exit, struct pt_regs *regs, long ret)
{
	if (!calls_marked || !is_write_call(regs->orig_ax))
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct marked_call *c = bpf_map_lookup_elem(&marked_calls, &tid);
	if (!c)
		return 0;
	emit(&c->m, REQ_LAYER_CALL, ret > 0 ? ret : 0, 0);
	if (!bpf_map_delete_elem(&marked_calls, &tid))
		__sync_fetch_and_sub(&calls_marked, 1);
	return 0;
}

/* A folio of its file the marked write dirtied: marked for its writeback. (The
 * file system's own pages it dirties, a journal's, an inode table's, are not its data.) */
SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(on_request_dirty, struct folio *folio, struct address_space *mapping)
{
	if (!calls_marked)
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct marked_call *c = bpf_map_lookup_elem(&marked_calls, &tid);
	if (!c || c->m.kind != REQ_KIND_WRITE || (__u64)mapping != c->mapping)
		return 0;
	struct folio_key k = { .mapping = (__u64)mapping, .index = BPF_CORE_READ(folio, index) };
	if (!bpf_map_update_elem(&marked_folios, &k, &c->m, BPF_NOEXIST))
		count_pending(k.mapping, 1);
	else
		bpf_map_update_elem(&marked_folios, &k, &c->m, BPF_ANY);
	if (!c->page_cache_sent) {
		c->page_cache_sent = 1;
		emit(&c->m, REQ_LAYER_PAGE_CACHE, c->asked, 0);
	}
	return 0;
}

/* What emit_one sends: r's marks from `from` on passed `layer`. */
struct emit_each {
	struct request_marks *r;
	__u64 bytes;
	__u32 from;
	__u32 layer;
	__u32 dev;
};

static long emit_one(__u32 i, struct emit_each *e)
{
	struct request_marks *r = e->r;
	if (i >= REQ_MARKS || i >= r->n)
		return 1;
	if (i >= e->from)
		emit(&r->m[i], e->layer, e->bytes, e->dev);
	return 0;
}

/* Each of r's marks from `from` on passed `layer` (a loop, verified once, not 16 copies
 * of emit). */
static __always_inline void emit_each(struct request_marks *r, __u32 from, __u32 layer,
				      __u64 bytes, __u32 dev)
{
	struct emit_each e = { .r = r, .bytes = bytes, .from = from, .layer = layer, .dev = dev };
	bpf_loop(REQ_MARKS, emit_one, &e, 0);
}

/* Whether r holds a mark of call `id` (found: set). */
struct find_mark {
	struct request_marks *r;
	__u64 id;
	bool found;
};

static long find_one(__u32 i, struct find_mark *f)
{
	struct request_marks *r = f->r;
	if (i >= REQ_MARKS || i >= r->n)
		return 1;
	f->found = r->m[i].id == f->id;
	return f->found;
}

static __always_inline void add_mark(struct request_marks *r, const struct request_mark *m)
{
	struct find_mark f = { .r = r, .id = m->id };
	bpf_loop(REQ_MARKS, find_one, &f, 0);
	if (f.found)
		return;
	__u32 n = r->n;
	if (n < REQ_MARKS && take_part(m->id)) {
		r->m[n] = *m;
		r->n = n + 1;
	}
}

/* A walk over a request's pages, collecting the marks of the folios they belong to. */
struct vec_walk {
	struct bio_pages c;
	__u64 last_folio;
	__u32 slot; /* marks_scratch's */
	bool consume; /* at issue: the folios found are forgotten */
};

/* Whether the bio just begun is to be walked: one of a file with no marked folios pending
 * (most, or a direct write's, whose pages are the caller's) is passed over whole. */
static __always_inline void skip_unmarked_bio(struct vec_walk *w)
{
	struct page *first = w->c.first;
	if (!first || !file_pending(key_of(folio_of(first)).mapping))
		w->c.left = 0;
}

/* One page of the walk: its folio's mark, if a sampled write dirtied it. */
static long walk_step(__u32 i, struct vec_walk *w)
{
	if (!w->c.vec_left) {
		int begun = bio_pages_next_entry(&w->c);
		if (!begun)
			skip_unmarked_bio(w);
		return begun < 0 ? 1 : 0;
	}
	struct page *page = bio_pages_next_page(&w->c);
	struct folio *f = folio_of(page);
	if ((__u64)f == w->last_folio)
		return 0;
	w->last_folio = (__u64)f;
	struct folio_key k = key_of(f);
	struct request_mark *m = bpf_map_lookup_elem(&marked_folios, &k);
	if (!m)
		return 0;
	struct request_marks *r = bpf_map_lookup_elem(&marks_scratch, &w->slot);
	if (r)
		add_mark(r, m);
	/* Kept until the issue: a request made may yet be merged into another before it. */
	if (w->consume && !bpf_map_delete_elem(&marked_folios, &k))
		count_pending(k.mapping, -1);
	return 0;
}

/* Adds to `r` (marks_scratch's `slot`) the calls whose marked folios request `rq`'s bios
 * hold (its first bio when it is made; at issue, the bios merged into it since), and sends
 * their writeback. */
static __always_inline void mark_from_pages(struct request *rq, struct request_marks *r,
					    __u32 slot)
{
	__u32 before = r->n;
	struct bio *bio = BPF_CORE_READ(rq, bio);
	if (!marked_pending || !bio)
		return;
	struct vec_walk w = { .slot = slot, .consume = slot == SCRATCH_ISSUED };
	bio_pages_begin(&w.c, bio);
	skip_unmarked_bio(&w);
	bpf_loop(REQ_MAX_PAGES, walk_step, &w, 0);
	if (r->n > before)
		emit_each(r, before, REQ_LAYER_WRITEBACK, BPF_CORE_READ(rq, __data_len), 0);
}

static __always_inline bool is_write(struct request *rq)
{
	return (BPF_CORE_READ(rq, cmd_flags) & 0xff) == REQ_OP_WRITE;
}

/* Marked calls whose request was issued and not seen completing (its address started
 * again; as for blockio.bpf.c's requests, some interrupts run no BPF program). Said at the
 * end, with the marks of requests still issued then. */
__u64 req_unseen_completions = 0;

/* `rq` starts: the marks its address held before are done with; those of an issued request
 * whose completion went unseen are counted. */
static __always_inline void end_unseen_marks(__u64 key)
{
	struct request_marks *old = bpf_map_lookup_elem(&marked_requests, &key);
	if (!old)
		return;
	if (old->issued)
		__sync_fetch_and_add(&req_unseen_completions, old->n);
	bpf_map_delete_elem(&marked_requests, &key);
}

/* A block request made: one carrying folios of marked writes (writeback, fsync), or the
 * marked write's own (direct I/O), in the context of whoever made it. */
SEC("tp_btf/block_io_start")
int BPF_PROG(on_request_start, struct request *rq)
{
	if (!is_write(rq))
		return 0;
	end_unseen_marks((__u64)rq);
	__u32 slot = SCRATCH_MADE;
	struct request_marks *r = bpf_map_lookup_elem(&marks_scratch, &slot);
	if (!r)
		return 0;
	r->n = 0;
	r->issued = 0;
	mark_from_pages(rq, r, slot);
	/* None of its pages marked (a direct write's are the caller's own): made by the
	 * marked write itself (O_DIRECT; an O_DSYNC write's writeback has marked pages). */
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct marked_call *c =
		r->n || !calls_marked ? NULL : bpf_map_lookup_elem(&marked_calls, &tid);
	if (c && c->m.kind == REQ_KIND_WRITE) {
		struct request_mark m = c->m;
		m.flags |= REQ_FLAG_DIRECT;
		add_mark(r, &m);
		if (r->n)
			emit(&m, REQ_LAYER_WRITEBACK, BPF_CORE_READ(rq, __data_len), 0);
	}
	if (!r->n)
		return 0;
	__u64 key = (__u64)rq;
	bpf_map_update_elem(&marked_requests, &key, r, BPF_ANY);
	return 0;
}

static __always_inline __u32 disk_of(struct request *rq)
{
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
	return disk ? ((__u32)BPF_CORE_READ(disk, major) << 20) | BPF_CORE_READ(disk, first_minor)
		    : 0;
}

/* Each marked call a request carries passed `layer`. */
static __always_inline void emit_marks(struct request *rq, __u32 layer, __u64 bytes)
{
	__u64 key = (__u64)rq;
	struct request_marks *r = bpf_map_lookup_elem(&marked_requests, &key);
	if (!r)
		return;
	emit_each(r, 0, layer, bytes, disk_of(rq));
	if (layer == REQ_LAYER_BLOCK_COMPLETE)
		bpf_map_delete_elem(&marked_requests, &key);
}

/* Issued to the driver: bios merged into it since it was made may hold marked folios. */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_request_issue, struct request *rq)
{
	if (!is_write(rq))
		return 0;
	__u64 key = (__u64)rq;
	__u32 slot = SCRATCH_ISSUED;
	struct request_marks *r = bpf_map_lookup_elem(&marks_scratch, &slot);
	if (!r)
		return 0;
	struct request_marks *known = bpf_map_lookup_elem(&marked_requests, &key);
	if (known) {
		*r = *known;
	} else {
		r->n = 0;
		r->issued = 0;
	}
	__u32 before = r->n;
	mark_from_pages(rq, r, slot);
	if (!r->n)
		return 0;
	bool first = !r->issued;
	r->issued = 1;
	if (r->n != before || first)
		bpf_map_update_elem(&marked_requests, &key, r, BPF_ANY);
	if (first)
		emit_marks(rq, REQ_LAYER_BLOCK_ISSUE, BPF_CORE_READ(rq, __data_len));
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_request_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	if (completion_unseen_by_construction())
		return 0;
	emit_marks(rq, REQ_LAYER_BLOCK_COMPLETE, nr_bytes);
	return 0;
}

