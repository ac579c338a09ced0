// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A block request's pages, bio by bio and page by page (a vector entry may span pages, and
 * folios: physically contiguous ones are merged into one), and the folio and file of each,
 * read by loads (requests.bpf.c's walk). */
#ifndef BIO_PAGES_BPF_H
#define BIO_PAGES_BPF_H

#include "common.bpf.h"

/* x86-64's pages. */
#define PAGE_SHIFT 12
#define PAGE_SIZE (1u << PAGE_SHIFT)

/* A folio by its file (its page cache) and its index there. */
struct folio_key {
	__u64 mapping;
	__u64 index;
};

/* The 64-bit word at kernel address `addr`, by a load (bpf_rdonly_cast: 6.2; the block
 * layers' programs, the only ones here to use it, need 6.5), where BPF_CORE_READ is a helper
 * call. It goes through a type whose first member is a 64-bit number (timespec64's tv_sec),
 * so that the verifier takes it as a number, as it would not a union's field that may hold
 * a pointer (a page's compound_head). */
static __always_inline __u64 kernel_word(const void *addr)
{
	return ((struct timespec64 *)bpf_rdonly_cast(addr,
						     bpf_core_type_id_kernel(struct timespec64)))
		->tv_sec;
}

/* The folio `page` belongs to. */
static __always_inline struct folio *folio_of(struct page *page)
{
	__u64 head =
		kernel_word((void *)page + bpf_core_field_offset(struct page, compound_head));
	return (struct folio *)((head & 1) ? head - 1 : (__u64)page);
}

/* Folio `f`'s key: its file and its index there. */
static __always_inline struct folio_key key_of(struct folio *f)
{
	return (struct folio_key){
		.mapping = kernel_word((void *)f + bpf_core_field_offset(struct folio, mapping)),
		.index = kernel_word((void *)f + bpf_core_field_offset(struct folio, index)),
	};
}

/* Where a walk over a chain of bios is. */
struct bio_pages {
	struct bio *bio;
	struct bio_vec *vec;
	struct page *first; /* the bio's first page, once begun */
	__u32 idx;
	__u32 skip;     /* bytes of the bio's first entry before it starts (a split's part) */
	__s64 left;     /* bytes of the bio's entries not yet begun (0: the bio is passed over) */
	struct page *page; /* the current entry's first page */
	__u64 pos;      /* the walk's offset from it */
	__u32 vec_left; /* bytes of the current entry still ahead */
};

/* Begins bio `bio`; its first page in c->first. */
static __always_inline void bio_pages_begin(struct bio_pages *c, struct bio *bio)
{
	c->bio = bio;
	c->vec = BPF_CORE_READ(bio, bi_io_vec);
	c->idx = BPF_CORE_READ(bio, bi_iter.bi_idx);
	c->skip = BPF_CORE_READ(bio, bi_iter.bi_bvec_done);
	c->left = (__s64)BPF_CORE_READ(bio, bi_iter.bi_size) + c->skip;
	c->vec_left = 0;
	c->first = NULL;
	if (!c->vec) {
		c->left = 0;
		return;
	}
	struct bio_vec *bv = (void *)c->vec + (__u64)c->idx * bpf_core_type_size(struct bio_vec);
	c->first = BPF_CORE_READ(bv, bv_page);
}

/* Begins the next vector entry: 1; or the next bio past this one's end: 0; -1 at the end. */
static __always_inline int bio_pages_next_entry(struct bio_pages *c)
{
	if (c->left <= 0) {
		struct bio *cur = c->bio; /* (a local: CO-RE would relocate c->bio too) */
		struct bio *next = cur ? BPF_CORE_READ(cur, bi_next) : NULL;
		if (!next)
			return -1;
		bio_pages_begin(c, next);
		return 0;
	}
	if (!c->vec)
		return -1;
	struct bio_vec *bv = (void *)c->vec + (__u64)c->idx * bpf_core_type_size(struct bio_vec);
	c->idx++;
	__u32 len = BPF_CORE_READ(bv, bv_len);
	c->left -= len ? len : 1;
	c->page = BPF_CORE_READ(bv, bv_page);
	c->pos = BPF_CORE_READ(bv, bv_offset) + c->skip;
	c->vec_left = len > c->skip ? len - c->skip : 0;
	c->skip = 0;
	if (!c->page)
		c->vec_left = 0;
	return 1;
}

/* The current entry's next page (c->vec_left > 0), the walk moved past it. */
static __always_inline struct page *bio_pages_next_page(struct bio_pages *c)
{
	struct page *page = (void *)c->page + (c->pos >> PAGE_SHIFT) *
						      bpf_core_type_size(struct page);
	__u32 in_page = PAGE_SIZE - (c->pos & (PAGE_SIZE - 1));
	__u32 step = in_page < c->vec_left ? in_page : c->vec_left;
	c->pos += step;
	c->vec_left -= step;
	return page;
}

#endif
