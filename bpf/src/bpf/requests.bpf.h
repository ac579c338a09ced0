// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What the two halves of --follow share (requests.bpf.c: calls and writes;
 * requests_send.bpf.c: sends): a sampled call's mark, the calls under way, the bound on
 * what each follows, the record sent at each layer. */
#ifndef REQUESTS_BPF_H
#define REQUESTS_BPF_H

#include "common.bpf.h"

/* What a sampled call carries down. */
struct request_mark {
	__u64 id;
	__u64 call_ns;
	__u32 call_pid;
	__u32 call_tid;
	__u32 kind;
	__u32 flags;
};

/* A sampled call under way, by thread. */
struct marked_call {
	struct request_mark m;
	__u64 asked; /* write, pwrite: the bytes asked for (writev: 0) */
	__u64 mapping; /* a write: its file's page cache (struct address_space *) */
	__u8 page_cache_sent;
	__u8 tcp_sent;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct marked_call);
} marked_calls SEC(".maps") __weak;

/* Sampled calls under way now (entries of marked_calls): while 0, as almost always at a
 * rate of 1 in 1000, the layers' programs return at once, with no lookup. */
__u64 calls_marked __weak = 0;

/* Block requests or skbs followed so far per sampled call (REQ_MAX_REQUESTS at most). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u32);
} followed_parts SEC(".maps") __weak;

/* Sends one record: `m` passed `layer`, now, in the current context. */
static __always_inline void emit(const struct request_mark *m, __u32 layer, __u64 bytes,
				 __u32 dev)
{
	struct request_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_REQUEST);
		return;
	}
	__u64 id = bpf_get_current_pid_tgid();
	e->kind = EVENT_REQUEST;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->time_ns = bpf_ktime_get_ns();
	e->id = m->id;
	e->call_ns = m->call_ns;
	e->bytes = bytes;
	e->layer = layer;
	e->req_kind = m->kind;
	e->call_pid = m->call_pid;
	e->call_tid = m->call_tid;
	e->dev = dev;
	e->flags = m->flags;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, submit_flags());
}

/* Whether call `id` may follow one more block request or skb. */
static __always_inline bool take_part(__u64 id)
{
	__u32 one = 1;
	__u32 *n = bpf_map_lookup_elem(&followed_parts, &id);
	if (!n)
		return !bpf_map_update_elem(&followed_parts, &id, &one, BPF_ANY);
	if (*n >= REQ_MAX_REQUESTS)
		return false;
	__sync_fetch_and_add(n, 1);
	return true;
}

#endif
