// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Page-cache use (cachestat): pages looked up, added and dirtied, counted per followed
 * process in the kernel from the filemap and writeback tracepoints; user space takes (and
 * empties) the counts each second. */
#include "common.bpf.h"

const volatile bool cache_enabled = true;

/* Per CPU: a read() on each of a program's threads adds without an atomic operation or a
 * cache line moving between CPUs (this runs for every read() of the followed programs). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct cache_counts);
} cache_counts SEC(".maps");

struct cache_counts _cache_counts = {};

/* The counters of the current process, if it is tracked. */
static __always_inline struct cache_counts *cache_of_current(void)
{
	if (!cache_enabled)
		return NULL;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid || !tracked(tgid))
		return NULL;
	struct cache_counts *c = bpf_map_lookup_elem(&cache_counts, &tgid);
	if (c)
		return c;
	struct cache_counts zero = {};
	bpf_map_update_elem(&cache_counts, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&cache_counts, &tgid);
}

/* Pages in a folio: 1 unless it is large (PG_head; flags lead both struct page and folio). */
static __always_inline __u64 folio_pages(struct folio *folio)
{
	__u64 flags = 0;
	bpf_probe_read_kernel(&flags, sizeof(flags), folio);
	if (!(flags & (1ull << bpf_core_enum_value(enum pageflags, PG_head))))
		return 1;
	if (!bpf_core_field_exists(folio->_nr_pages))
		return 1;
	__u32 n = BPF_CORE_READ(folio, _nr_pages);
	return n ? n : 1;
}

/* read(): the pages a lookup asked for, first..last. */
SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(on_cache_read, struct address_space *mapping, unsigned long index,
	     unsigned long last_index)
{
	struct cache_counts *c = cache_of_current();
	if (c && last_index >= index)
		c->accesses += last_index - index + 1;
	return 0;
}

/* A page fault on a file mapping looks up one page. */
SEC("tp_btf/mm_filemap_fault")
int BPF_PROG(on_cache_fault, struct address_space *mapping, unsigned long index)
{
	struct cache_counts *c = cache_of_current();
	if (c)
		c->accesses += 1;
	return 0;
}

/* A folio added to the page cache: read in for this process, or new pages it writes. */
SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(on_cache_add, struct folio *folio)
{
	struct cache_counts *c = cache_of_current();
	if (c)
		c->added += folio_pages(folio);
	return 0;
}

/* A folio dirtied by this process (writeback happens later, often by a kernel thread). */
SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(on_cache_dirty, struct folio *folio, struct address_space *mapping)
{
	struct cache_counts *c = cache_of_current();
	if (c)
		c->dirtied += folio_pages(folio);
	return 0;
}
