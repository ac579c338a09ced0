// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Sampled sends followed to the device (record --follow send:1/N): the call marked at its
 * entry (requests.bpf.c) enters TCP, where its bytes' sequence numbers are kept on the
 * socket; each skb holding some of them is followed to the qdisc, the driver and the
 * device (REQ_MAX_REQUESTS skbs a call at most). */
#include "requests.bpf.h"
#include "unwind.bpf.h"
#include "net.bpf.h"

/* NETDEV_TX_BUSY: the driver refused the skb; it comes again. */
#define TX_BUSY 0x10
/* An skb's mark: its driver record was sent (a refused skb comes again). Never sent. */
#define MARK_AT_DRIVER 0x100

/* A sampled send's bytes on its socket: [seq, end). */
struct marked_send {
	struct request_mark m;
	__u32 seq;
	__u32 end;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct marked_send);
} marked_sends SEC(".maps");

/* Skbs holding a sampled send's bytes, to the device. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct request_mark);
} marked_skbs SEC(".maps");

/* The marked send enters TCP: its bytes' sequence numbers kept on the socket. */
SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(on_request_tcp, const struct sock *sk, const struct msghdr *msg,
	     const struct sk_buff *skb, int size_goal)
{
	if (!calls_marked)
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct marked_call *c = bpf_map_lookup_elem(&marked_calls, &tid);
	if (!c || c->m.kind != REQ_KIND_SEND || c->tcp_sent)
		return 0;
	c->tcp_sent = 1;
	__u64 size = BPF_CORE_READ(msg, msg_iter.count);
	__u32 seq = BPF_CORE_READ((const struct tcp_sock *)sk, write_seq);
	struct marked_send s = { .m = c->m, .seq = seq, .end = seq + (__u32)size };
	__u64 key = (__u64)sk;
	bpf_map_update_elem(&marked_sends, &key, &s, BPF_ANY);
	emit(&c->m, REQ_LAYER_TCP, size, 0);
	return 0;
}

/* An skb holding bytes of a marked send: followed to the device. */
SEC("tp_btf/net_dev_queue")
int BPF_PROG(on_request_queue, struct sk_buff *skb)
{
	__u64 sk = (__u64)skb->sk;
	if (!sk)
		return 0;
	struct marked_send *s = bpf_map_lookup_elem(&marked_sends, &sk);
	if (!s)
		return 0;
	__u32 seq = 0;
	__s64 payload = tcp_payload(skb, &seq);
	if (payload <= 0)
		return 0;
	__u32 end = seq + (__u32)payload;
	/* Before the call's bytes (an earlier call's), or past them. */
	if (!seq_after(end, s->seq) || !seq_after(s->end, seq))
		return 0;
	struct request_mark m = s->m;
	if (!seq_after(s->end, end))
		bpf_map_delete_elem(&marked_sends, &sk);
	if (!take_part(m.id))
		return 0;
	__u64 key = (__u64)skb;
	bpf_map_update_elem(&marked_skbs, &key, &m, BPF_ANY);
	emit(&m, REQ_LAYER_QDISC, payload, 0);
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_request_xmit, struct sk_buff *skb, struct net_device *dev)
{
	__u64 key = (__u64)skb;
	struct request_mark *m = bpf_map_lookup_elem(&marked_skbs, &key);
	if (!m || m->flags & MARK_AT_DRIVER)
		return 0;
	m->flags |= MARK_AT_DRIVER;
	struct request_mark copy = *m;
	copy.flags &= ~MARK_AT_DRIVER;
	emit(&copy, REQ_LAYER_DRIVER, skb->len, 0);
	return 0;
}

SEC("tp_btf/net_dev_xmit")
int BPF_PROG(on_request_sent, struct sk_buff *skb, int rc, struct net_device *dev,
	     unsigned int skb_len)
{
	if (rc == TX_BUSY)
		return 0;
	__u64 key = (__u64)skb;
	struct request_mark *m = bpf_map_lookup_elem(&marked_skbs, &key);
	if (!m)
		return 0;
	struct request_mark copy = *m;
	copy.flags &= ~MARK_AT_DRIVER;
	bpf_map_delete_elem(&marked_skbs, &key);
	emit(&copy, REQ_LAYER_DEVICE, skb_len, 0);
	return 0;
}
