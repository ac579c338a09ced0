// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Sampled requests followed through the layers (record --follow write:1/N, send:1/N): 1 in N
 * write or send calls of the followed processes, chosen at random at the syscall's entry,
 * carry a mark down, and only marked requests send records, one per layer they pass.
 * Writes: the folios the call dirtied (writeback_dirty_folio while it runs), the block
 * request made of them (block_io_start: its bios' pages looked up), its issue and
 * completion; a request the call made itself (O_DIRECT) is its own. Sends: the call's entry
 * into TCP, then each skb holding its bytes (sequence numbers) to the qdisc, the driver and
 * the device (requests_send.bpf.c). Loaded only with --follow. */
#include "requests.bpf.h"

const volatile __u32 follow_write_every = 0;
const volatile __u32 follow_send_every = 0;

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
#define PAGE_SHIFT 12
#define PAGE_SIZE (1u << PAGE_SHIFT)

struct folio_key {
	__u64 mapping;
	__u64 index;
};

/* Folios sampled writes dirtied, until their writeback. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct folio_key);
	__type(value, struct request_mark);
} marked_folios SEC(".maps");

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

/* A followed thread's write or send call: 1 in N is marked. */
SEC("tp_btf/sys_enter")
int BPF_PROG(on_request_enter, struct pt_regs *regs, long nr)
{
	if (!is_write_call(nr))
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
	__u32 every = kind == REQ_KIND_WRITE ? follow_write_every : follow_send_every;
	if (!every || bpf_get_prandom_u32() % every)
		return 0;
	struct marked_call c = {
		.m = {
			.id = __sync_fetch_and_add(&request_ids, 1) + 1,
			.call_ns = bpf_ktime_get_ns(),
			.call_pid = pid,
			.call_tid = tid,
			.kind = kind,
		},
		.asked = nr == NR_WRITE || nr == NR_PWRITE64 ? regs->dx : 0,
		.mapping = mapping,
	};
	bpf_map_update_elem(&marked_calls, &tid, &c, BPF_ANY);
	return 0;
}

/* The marked call returns: its record, with the bytes it wrote or sent. */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_request_exit, struct pt_regs *regs, long ret)
{
	if (!is_write_call(regs->orig_ax))
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct marked_call *c = bpf_map_lookup_elem(&marked_calls, &tid);
	if (!c)
		return 0;
	emit(&c->m, REQ_LAYER_CALL, ret > 0 ? ret : 0, 0);
	bpf_map_delete_elem(&marked_calls, &tid);
	return 0;
}

/* A folio of its file the marked write dirtied: marked for its writeback. (The
 * file system's own pages it dirties, a journal's, an inode table's, are not its data.) */
SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(on_request_dirty, struct folio *folio, struct address_space *mapping)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct marked_call *c = bpf_map_lookup_elem(&marked_calls, &tid);
	if (!c || c->m.kind != REQ_KIND_WRITE || (__u64)mapping != c->mapping)
		return 0;
	struct folio_key k = { .mapping = (__u64)mapping, .index = BPF_CORE_READ(folio, index) };
	if (!bpf_map_update_elem(&marked_folios, &k, &c->m, BPF_NOEXIST))
		__sync_fetch_and_add(&marked_pending, 1);
	else
		bpf_map_update_elem(&marked_folios, &k, &c->m, BPF_ANY);
	if (!c->page_cache_sent) {
		c->page_cache_sent = 1;
		emit(&c->m, REQ_LAYER_PAGE_CACHE, c->asked, 0);
	}
	return 0;
}

static __always_inline void add_mark(struct request_marks *r, const struct request_mark *m)
{
	for (int i = 0; i < REQ_MARKS; i++) {
		if (i >= r->n)
			break;
		if (r->m[i].id == m->id)
			return;
	}
	__u32 n = r->n;
	if (n < REQ_MARKS && take_part(m->id)) {
		r->m[n] = *m;
		r->n = n + 1;
	}
}

/* A walk over a request's bios, page by page (a vector entry may span pages, and
 * folios: physically contiguous ones are merged into one). */
struct vec_walk {
	struct bio *bio;
	struct bio_vec *vec;
	__u32 idx;
	__u32 skip;     /* bytes of the bio's first entry before it starts (a split's part) */
	__s64 left;     /* bytes of the bio's entries not yet begun */
	struct page *page; /* the current entry's first page */
	__u64 pos;      /* the walk's offset from it */
	__u32 vec_left; /* bytes of the current entry still ahead */
	__u64 last_folio;
	__u32 slot; /* marks_scratch's */
	bool consume; /* at issue: the folios found are forgotten */
};

static __always_inline void walk_bio(struct vec_walk *w, struct bio *bio)
{
	w->bio = bio;
	w->vec = BPF_CORE_READ(bio, bi_io_vec);
	w->idx = BPF_CORE_READ(bio, bi_iter.bi_idx);
	w->skip = BPF_CORE_READ(bio, bi_iter.bi_bvec_done);
	w->left = (__s64)BPF_CORE_READ(bio, bi_iter.bi_size) + w->skip;
	w->vec_left = 0;
}

/* Begins the next vector entry (of the next bio past this one's end); false at the end. */
static __always_inline bool next_entry(struct vec_walk *w)
{
	if (w->left <= 0) {
		struct bio *cur = w->bio; /* (a local: CO-RE would relocate w->bio too) */
		struct bio *next = cur ? BPF_CORE_READ(cur, bi_next) : NULL;
		if (!next)
			return false;
		walk_bio(w, next);
		if (w->left <= 0)
			return false;
	}
	if (!w->vec)
		return false;
	struct bio_vec *bv = (void *)w->vec + (__u64)w->idx * bpf_core_type_size(struct bio_vec);
	w->idx++;
	__u32 len = BPF_CORE_READ(bv, bv_len);
	w->left -= len ? len : 1;
	w->page = BPF_CORE_READ(bv, bv_page);
	w->pos = BPF_CORE_READ(bv, bv_offset) + w->skip;
	w->vec_left = len > w->skip ? len - w->skip : 0;
	w->skip = 0;
	if (!w->page)
		w->vec_left = 0;
	return true;
}

/* One page of the walk: its folio's mark, if a sampled write dirtied it. */
static long walk_step(__u32 i, struct vec_walk *w)
{
	if (!w->vec_left)
		return next_entry(w) ? 0 : 1;
	struct page *page = (void *)w->page + (w->pos >> PAGE_SHIFT) *
						      bpf_core_type_size(struct page);
	__u32 in_page = PAGE_SIZE - (w->pos & (PAGE_SIZE - 1));
	__u32 step = in_page < w->vec_left ? in_page : w->vec_left;
	w->pos += step;
	w->vec_left -= step;
	unsigned long head = BPF_CORE_READ(page, compound_head);
	__u64 folio = (head & 1) ? head - 1 : (__u64)page;
	if (folio == w->last_folio)
		return 0;
	w->last_folio = folio;
	struct folio *f = (struct folio *)folio;
	struct folio_key k = {
		.mapping = (__u64)BPF_CORE_READ(f, mapping),
		.index = BPF_CORE_READ(f, index),
	};
	struct request_mark *m = bpf_map_lookup_elem(&marked_folios, &k);
	if (!m)
		return 0;
	struct request_marks *r = bpf_map_lookup_elem(&marks_scratch, &w->slot);
	if (r)
		add_mark(r, m);
	/* Kept until the issue: a request made may yet be merged into another before it. */
	if (w->consume && !bpf_map_delete_elem(&marked_folios, &k))
		__sync_fetch_and_sub(&marked_pending, 1);
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
	walk_bio(&w, bio);
	bpf_loop(REQ_MAX_PAGES, walk_step, &w, 0);
	__u64 bytes = BPF_CORE_READ(rq, __data_len);
	for (int i = 0; i < REQ_MARKS; i++) {
		if (i >= r->n)
			break;
		if (i >= before)
			emit(&r->m[i], REQ_LAYER_WRITEBACK, bytes, 0);
	}
}

static __always_inline bool is_write(struct request *rq)
{
	return (BPF_CORE_READ(rq, cmd_flags) & 0xff) == REQ_OP_WRITE;
}

/* A block request made: one carrying folios of marked writes (writeback, fsync), or the
 * marked write's own (direct I/O), in the context of whoever made it. */
SEC("tp_btf/block_io_start")
int BPF_PROG(on_request_start, struct request *rq)
{
	if (!is_write(rq))
		return 0;
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
	struct marked_call *c = r->n ? NULL : bpf_map_lookup_elem(&marked_calls, &tid);
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
	__u32 dev = disk_of(rq);
	for (int i = 0; i < REQ_MARKS; i++) {
		if (i >= r->n)
			break;
		emit(&r->m[i], layer, bytes, dev);
	}
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
	emit_marks(rq, REQ_LAYER_BLOCK_COMPLETE, nr_bytes);
	return 0;
}

