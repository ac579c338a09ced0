// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* TCP sends followed to the device: tcp_sendmsg_locked marks the start of a tracked thread's
 * send call on a socket (its first chunk; sock_send_length, in net.bpf.c, its end) and keeps
 * the call's stacks; each skb of that socket that carries data is then timed through the
 * device layer: net_dev_queue (into the qdisc), net_dev_start_xmit (handed to the driver),
 * net_dev_xmit (the driver returned). One NET_SEND per skb, charged to the send call,
 * whichever thread or softirq transmits it (an ACK-clocked transmit runs in softirq). An skb
 * that software GSO splits before the driver is followed no further (its segments are new
 * skbs). */
#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"
#include "net.bpf.h"

const volatile bool netsend_enabled = true;

/* An skb of a send call between net_dev_queue and net_dev_xmit. */
struct send_skb {
	__u64 sk;
	__u64 send_ns;
	__u64 queue_ns;
	__u64 start_ns; /* net_dev_start_xmit (0: not yet) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* struct sk_buff * */
	__type(value, struct send_skb);
} send_skbs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct send_call);
} send_scratch SEC(".maps");

/* NETDEV_TX_BUSY: the driver refused the skb; the qdisc will hand it again. */
#define TX_BUSY 0x10

SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(on_tcp_sendmsg, const struct sock *sk, const struct msghdr *msg,
	     const struct sk_buff *skb, int size_goal)
{
	if (!netsend_enabled)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	if (!pid || !tracked(pid))
		return 0;
	__u64 key = (__u64)sk;
	struct send_call *c = bpf_map_lookup_elem(&send_calls, &key);
	/* The call's later chunks: nothing new. */
	if (c && c->in_call)
		return 0;
	if (!c) {
		__u32 zero = 0;
		struct send_call *s = bpf_map_lookup_elem(&send_scratch, &zero);
		if (!s)
			return 0;
		bpf_map_update_elem(&send_calls, &key, s, BPF_ANY);
		c = bpf_map_lookup_elem(&send_calls, &key);
		if (!c) {
			count_drop(EVENT_NET);
			return 0;
		}
	}
	c->send_ns = bpf_ktime_get_ns();
	c->pid = pid;
	c->tid = (__u32)id;
	c->in_call = 1;
	bpf_get_current_comm(c->comm, sizeof(c->comm));
	take_stacks(ctx, pid, &c->kstack_bytes, c->kstack, &c->ustack_bytes, c->ustack);
	return 0;
}

/* Bytes of TCP payload in an skb on its way to the device (skb->data at its link header). */
static __always_inline __s64 tcp_payload(const struct sk_buff *skb)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	unsigned char *data = BPF_CORE_READ(skb, data);
	__u16 th = BPF_CORE_READ(skb, transport_header);
	__u8 off = 0;
	if (bpf_probe_read_kernel(&off, 1, head + th + 12))
		return -1;
	__s64 headers = (__s64)th + (off >> 4) * 4 - (data - head);
	return (__s64)BPF_CORE_READ(skb, len) - headers;
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(on_net_dev_queue, struct sk_buff *skb)
{
	if (!netsend_enabled)
		return 0;
	struct sock *sk = BPF_CORE_READ(skb, sk);
	if (!sk)
		return 0;
	__u64 key = (__u64)sk;
	struct send_call *c = bpf_map_lookup_elem(&send_calls, &key);
	if (!c || BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	/* Data only: not the connection's pure ACKs, SYN or FIN. */
	if (tcp_payload(skb) <= 0)
		return 0;
	struct send_skb s = {
		.sk = key,
		.send_ns = c->send_ns,
		.queue_ns = bpf_ktime_get_ns(),
	};
	__u64 skey = (__u64)skb;
	bpf_map_update_elem(&send_skbs, &skey, &s, BPF_ANY);
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_net_dev_start_xmit, const struct sk_buff *skb, const struct net_device *dev)
{
	__u64 skey = (__u64)skb;
	struct send_skb *s = bpf_map_lookup_elem(&send_skbs, &skey);
	if (s && !s->start_ns)
		s->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/net_dev_xmit")
int BPF_PROG(on_net_dev_xmit, struct sk_buff *skb, int rc, struct net_device *dev,
	     unsigned int skb_len)
{
	__u64 skey = (__u64)skb;
	struct send_skb *found = bpf_map_lookup_elem(&send_skbs, &skey);
	if (!found)
		return 0;
	if (rc == TX_BUSY) {
		found->start_ns = 0;
		return 0;
	}
	struct send_skb s = *found;
	bpf_map_delete_elem(&send_skbs, &skey);
	if (rc != 0)
		return 0;
	struct send_call *c = bpf_map_lookup_elem(&send_calls, &s.sk);
	if (!c)
		return 0;
	struct net_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_NET);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	e->kind = EVENT_NET;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = c->pid;
	e->tid = c->tid;
	e->time_ns = now;
	e->start_ns = s.send_ns;
	e->tx_bytes = skb_len;
	e->rx_bytes = s.queue_ns - s.send_ns;
	__u64 qdisc = s.start_ns >= s.queue_ns ? s.start_ns - s.queue_ns : 0;
	e->reason = qdisc > 0xffffffff ? 0xffffffff : (__u32)qdisc;
	e->what = NET_SEND;
	fill_addrs(e, (const struct sock *)s.sk);
	e->active = 0;
	__builtin_memcpy(e->comm, c->comm, sizeof(e->comm));
	e->kstack_bytes = c->kstack_bytes;
	e->ustack_bytes = c->ustack_bytes;
	__builtin_memcpy(e->kstack, c->kstack, sizeof(e->kstack));
	__builtin_memcpy(e->ustack, c->ustack, sizeof(e->ustack));
	bpf_ringbuf_submit(e, submit_flags());
	return 0;
}
