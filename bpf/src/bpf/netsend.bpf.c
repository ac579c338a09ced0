// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* TCP sends followed to the device: tcp_sendmsg_locked marks the start of a tracked thread's
 * send call on a socket (its first chunk; sock_send_length, in net.bpf.c, its end) and keeps
 * the call's stacks; each skb of that socket that carries data is then timed through the
 * device layer: net_dev_queue (into the qdisc), net_dev_start_xmit (handed to the driver),
 * net_dev_xmit (the driver returned). The call's stacks go to record once, in a
 * net_call_event when it begins; each skb that reaches the device is a 64-byte net_skb_event
 * naming its call, whichever thread or softirq transmits it (an ACK-clocked transmit runs in
 * softirq); record joins them into one NET_SEND per skb. An skb on its way waits in its
 * CPU's slot where no qdisc can queue it (the device takes it before net_dev_queue's caller
 * returns), else in send_skbs (net.bpf.h). A call made from where the thread's last one was
 * (see call_sites) carries no frames: record gives it those. (A
 * whole net_event per skb, both stacks copied into each, cost iperf3 28% of its throughput
 * on a 2-core machine.) An skb that software GSO splits before the driver (a device without
 * TSO) reaches it as segments, new skbs: each is followed from there with the times of its
 * socket's last skb queued (exact without a qdisc, where the split follows the queueing at
 * once; behind a qdisc's backlog a later skb's).
 *
 * A socket's skbs are followed at a rate (send_interval_ns, in bursts up to send_burst_ns
 * of credit): each skb is timed through the device layer, but only those the rate allows
 * reach record, each standing for itself and those of its socket skipped since the last
 * (their count and bytes); the skipped ones after a socket's last followed skb go in a tail
 * record when its owner closes it and when it is done, and, for the sockets still open
 * when the recording ends, from an iterator over the sockets' storage (send_tails).
 * Sending each of iperf3's 70k skbs a second to record cost 10-20% of its throughput;
 * timing them all in here, about 1%. */
#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"
#include "net.bpf.h"
#include "send.bpf.h"

const volatile bool netsend_enabled = true;
/* Testing: about one skb of new data in this many reaches the driver as if the kernel ran
 * none of these programs for it (0: none; the verifier drops the checks). Never two in a
 * row: only an skb that starts where the last one seen there ended. */
const volatile __u32 unseen_every = 0;

/* Whether socket `c`'s skb whose first byte is `seq`, at the driver, is to pass unseen
 * (unseen_every; chosen by its sequence number's hash). */
static __always_inline bool passes_unseen(struct send_call *c, __u32 seq)
{
	return unseen_every && c->driver_known && seq == c->driver_next &&
	       ((seq * 2654435761u) >> 16) % unseen_every == 0;
}

/* For the generated Rust types. */
struct net_skb_event _net_skb_event = {};

/* NETDEV_TX_BUSY: the driver refused the skb; the qdisc will hand it again. */
#define TX_BUSY 0x10

SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(on_tcp_sendmsg, const struct sock *sk, const struct msghdr *msg,
	     const struct sk_buff *skb, int size_goal)
{
	if (!netsend_enabled)
		return 0;
	/* The call's later chunks: nothing new (only a tracked thread's call is marked). */
	struct send_call *c = bpf_sk_storage_get(&send_calls, (struct sock *)sk, 0, 0);
	if (c && c->in_call)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	if (!pid || !tracked(pid))
		return 0;
	if (!c)
		c = bpf_sk_storage_get(&send_calls, (struct sock *)sk, 0,
				       BPF_SK_STORAGE_GET_F_CREATE);
	if (!c) {
		count_drop(EVENT_NET);
		return 0;
	}
	send_state_made = 1;
	/* The socket's next new byte goes out at snd_nxt: where driver_seen starts. */
	if (!c->driver_known) {
		c->driver_next = BPF_CORE_READ((const struct tcp_sock *)sk, snd_nxt);
		c->driver_known = 1;
	}
	__u64 now = bpf_ktime_get_ns();
	c->send_ns = now;
	c->in_call = 1;
	c->call_followed = has_credit(c, now);
	if (c->call_followed)
		send_call_event(ctx, sk, pid, id, now);
	return 0;
}

/* Whether a qdisc may queue `skb` (at net_dev_queue, its transmit queue chosen): its
 * queue's qdisc has an enqueue (a device without one, noqueue's, sends it at once). */
static __always_inline bool qdisc_queues(const struct sk_buff *skb)
{
	struct net_device *dev = skb->dev;
	if (!dev)
		return true;
	struct netdev_queue *txq = dev->_tx;
	__u16 i = skb->queue_mapping;
	/* The queue's fields read directly (a helper call per field cost 70 ns an skb). */
	if (i && bpf_ksym_exists(bpf_rdonly_cast))
		txq = bpf_rdonly_cast((void *)((__u64)txq +
					       i * bpf_core_type_size(struct netdev_queue)),
				      bpf_core_type_id_kernel(struct netdev_queue));
	else if (i)
		return true;
	if (!txq)
		return true;
	struct Qdisc *q = txq->qdisc;
	return !q || q->enqueue;
}

/* Whether the device cuts GSO skb `skb` into segments in software before its driver (it
 * lacks the offload for its GSO type): the skb never reaches the driver, its segments do, as
 * new skbs (follow_segment). Not held: its entry would outlive it, until the LRU or another
 * skb at its address took its place. */
static __always_inline bool split_in_software(const struct sk_buff *skb)
{
	struct net_device *dev = skb->dev;
	if (!dev || !bpf_ksym_exists(bpf_rdonly_cast))
		return false;
	struct skb_shared_info *sh = bpf_rdonly_cast(
		skb->head + skb->end, bpf_core_type_id_kernel(struct skb_shared_info));
	if (!sh->gso_size)
		return false;
	__u64 need = (__u64)sh->gso_type << NETIF_F_GSO_SHIFT;
	return (dev->features & need) != need;
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(on_net_dev_queue, struct sk_buff *skb)
{
	if (!netsend_enabled)
		return 0;
	__u64 skey = (__u64)skb;
	struct send_slot *slot = slot_here();
	if (!slot)
		return 0;
	/* An skb at the address of one that left the slot unsent (freed on the way) is not it. */
	if (slot->skb == skey)
		slot->skb = 0;
	__s64 payload = 0;
	__u32 seq = 0;
	struct send_call *c = followed_data(skb, &payload, &seq);
	if (!c)
		return 0;
	c->last_seq = seq;
	c->last_end = seq + (__u32)payload;
	c->last_followed = c->call_followed;
	c->last_skb = 0;
	bool queues = qdisc_queues(skb);
	/* An skb of a call not followed is counted where it reaches the driver: from the slot,
	 * or, behind a qdisc, as an skb unknown there. */
	if (!c->call_followed) {
		if (!queues) {
			slot->s = (struct send_skb){
				.skip = NOT_FOLLOWED,
				.seq = seq,
				.len = (__u32)payload,
			};
			slot->skb = skey;
		}
		return 0;
	}
	struct send_skb s = {
		.sk = (__u64)skb->sk,
		.send_ns = c->send_ns,
		.queue_ns = bpf_ktime_get_ns(),
		.seq = seq,
		.len = (__u32)payload,
	};
	if (queues) {
		if (!split_in_software(skb)) {
			hold_skb(skey, &s);
			c->last_skb = skey;
		}
	} else {
		slot->s = s;
		slot->skb = skey;
	}
	c->last_send_ns = s.send_ns;
	c->last_queue_ns = s.queue_ns;
	return 0;
}

/* Whether the socket's rate and the machine's cap let skb `s` (of `len` bytes) reach
 * record: if so it stands for the skbs skipped before it, else it is one of them. Decided
 * once, at the skb's first net_dev_start_xmit (a refused one comes again). */
static __always_inline void follow_or_skip(struct send_call *c, struct send_skb *s, __u32 len,
					   __u64 now)
{
	if (s->skbs || s->skip)
		return;
	if (!has_credit(c, now) || !cap_allows(now)) {
		skip(c, len);
		s->skip = SKIPPED;
		return;
	}
	spend(c, &s->skbs, &s->skipped_bytes);
}

/* An skb of TCP data that reaches the driver unknown: one of a call not followed (or a
 * segment of one), counted; or a segment of a followed skb that software GSO split (its
 * sequence number in the socket's last queued skb's, which was followed), followed from
 * here with that skb's times as the rate allows. The skb split never reaches the driver:
 * it is forgotten (its address, reused for a later skb, would pass for it: 4 of 1,386
 * sends once). Behind a qdisc's backlog, a segment of an earlier skb is only counted, and
 * that skb's entry waits for the LRU. A driver that refuses an skb counted here (it comes
 * again) makes it count twice. */
static __always_inline void follow_segment(const struct sk_buff *skb, __u64 skey,
					   struct send_slot *slot)
{
	__s64 payload = 0;
	__u32 seq = 0;
	struct send_call *c = followed_data(skb, &payload, &seq);
	if (!c || passes_unseen(c, seq))
		return;
	driver_seen(c, seq, (__u32)payload);
	bool split_here = seq - c->last_seq < c->last_end - c->last_seq;
	if (!(split_here && c->last_followed && c->last_queue_ns)) {
		/* Cut behind a backlog: the earlier skb it was cut from stays held (for the LRU). */
		skip(c, skb->len);
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	struct send_skb s = {
		.sk = (__u64)skb->sk,
		.send_ns = c->last_send_ns,
		.queue_ns = c->last_queue_ns,
		.start_ns = now,
		.seq = seq,
		.len = (__u32)payload,
	};
	follow_or_skip(c, &s, skb->len, now);
	/* The driver has it now, on this CPU: its net_dev_xmit follows. */
	if (!s.skip) {
		slot->s = s;
		slot->skb = skey;
	}
	__u64 split = c->last_skb;
	if (split && split != skey) {
		unhold_skb(split);
		c->last_skb = 0;
	}
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_net_dev_start_xmit, const struct sk_buff *skb, const struct net_device *dev)
{
	if (!netsend_enabled)
		return 0;
	__u64 skey = (__u64)skb;
	struct send_slot *slot = slot_here();
	if (!slot)
		return 0;
	struct send_skb *s = NULL;
	if (slot->skb == skey) {
		s = &slot->s;
	} else {
		/* The slot's skb would have reached the driver first: one not started is gone
		 * (cut into segments, or freed). One started is an outer device's (a tunnel's). */
		if (slot->skb && !slot->s.start_ns)
			slot->skb = 0;
		s = held_skb(skey);
	}
	if (!s) {
		follow_segment(skb, skey, slot);
		return 0;
	}
	if (s->start_ns)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	s->start_ns = now;
	struct sock *sk = skb->sk;
	struct send_call *c = sk ? bpf_sk_storage_get(&send_calls, sk, 0, 0) : NULL;
	if (c && passes_unseen(c, s->seq)) {
		s->skip = UNSEEN;
		return 0;
	}
	if (c)
		driver_seen(c, s->seq, s->len);
	if (s->skip == NOT_FOLLOWED) {
		if (c)
			skip(c, skb->len);
		s->skip = SKIPPED;
		return 0;
	}
	/* Without its socket's state it stands for itself (net_dev_xmit's default). */
	if (c)
		follow_or_skip(c, s, skb->len, now);
	return 0;
}

SEC("tp_btf/net_dev_xmit")
int BPF_PROG(on_net_dev_xmit, struct sk_buff *skb, int rc, struct net_device *dev,
	     unsigned int skb_len)
{
	__u64 skey = (__u64)skb;
	struct send_slot *slot = slot_here();
	if (!slot)
		return 0;
	struct send_skb s;
	if (slot->skb == skey) {
		slot->skb = 0;
		/* Refused: the qdisc hands it again, maybe from another CPU. */
		if (rc == TX_BUSY) {
			slot->s.start_ns = 0;
			hold_skb(skey, &slot->s);
			return 0;
		}
		s = slot->s;
	} else {
		struct send_skb *found = held_skb(skey);
		if (!found)
			return 0;
		if (rc == TX_BUSY) {
			found->start_ns = 0;
			return 0;
		}
		s = *found;
		unhold_skb(skey);
	}
	/* Any other return (0; NET_XMIT_DROP, NET_XMIT_CN) and the driver took the skb: it
	 * reached the device, and its record stands for the skipped skbs it carries too (a
	 * driver's drop lost them before: veth's, for a peer whose MTU the skb exceeds). */
	if (s.skip)
		return 0;
	struct net_skb_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_NET);
		return 0;
	}
	e->kind = EVENT_NET_SKB;
	e->cpu = bpf_get_smp_processor_id();
	e->time_ns = bpf_ktime_get_ns();
	e->send_ns = s.send_ns;
	e->sk = s.sk;
	e->len = skb_len;
	__u64 qdisc = s.start_ns >= s.queue_ns ? s.start_ns - s.queue_ns : 0;
	e->qdisc_ns = qdisc > 0xffffffff ? 0xffffffff : (__u32)qdisc;
	e->queue_ns = s.queue_ns - s.send_ns;
	e->skbs = s.skbs ? s.skbs : 1;
	e->_pad = 0;
	e->skipped_bytes = s.skipped_bytes;
	bpf_ringbuf_submit(e, submit_flags());
	return 0;
}

/* The skbs socket `sk`'s rate skipped after its last followed one, as a tail record (send_ns
 * 0: record gives them that one's call and times). */
static __always_inline void send_tail(const struct sock *sk, struct send_call *c)
{
	__u32 skbs;
	__u64 bytes;
	take_skipped(c, &skbs, &bytes);
	if (!skbs)
		return;
	struct net_skb_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_NET);
		return;
	}
	e->kind = EVENT_NET_SKB;
	e->cpu = bpf_get_smp_processor_id();
	e->time_ns = bpf_ktime_get_ns();
	e->send_ns = 0;
	e->sk = (__u64)sk;
	e->len = 0;
	e->qdisc_ns = 0;
	e->queue_ns = 0;
	e->skbs = skbs;
	e->_pad = 0;
	e->skipped_bytes = bytes;
	bpf_ringbuf_submit(e, submit_flags());
}

/* A socket closed by its owner (FIN_WAIT1, LAST_ACK) or done (CLOSE): its tail. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(on_send_close, const struct sock *sk, int oldstate, int newstate)
{
	if (!netsend_enabled ||
	    (newstate != TCP_FIN_WAIT1 && newstate != TCP_LAST_ACK && newstate != TCP_CLOSE))
		return 0;
	struct send_call *c = bpf_sk_storage_get(&send_calls, (struct sock *)sk, 0, 0);
	if (!c)
		return 0;
	if (c->skipped)
		send_tail(sk, c);
	/* Every byte sent was acknowledged: none is still on its way. */
	if (newstate == TCP_CLOSE)
		trailing_unseen(sk, c, fin_sent(oldstate));
	return 0;
}

/* The tails of the sockets still open, and their data sent but not seen at the driver, when
 * the recording ends: record attaches this program then and peeks at each open socket that
 * has send state (recv of no bytes, MSG_PEEK | MSG_DONTWAIT) through a copy of its
 * descriptor (pidfd_getfd). No iterator over send_calls: the kernel here (6.18.44) refuses
 * iterator programs (EPERM), as it refuses fentry. */
SEC("tp_btf/sock_recv_length")
int BPF_PROG(send_tails, struct sock *sk, int ret, int flags)
{
	if (!is_tails_taker() || !(flags & MSG_PEEK))
		return 0;
	struct send_call *c = bpf_sk_storage_get(&send_calls, sk, 0, 0);
	if (!c)
		return 0;
	if (c->skipped)
		send_tail(sk, c);
	trailing_unseen(sk, c, fin_sent(BPF_CORE_READ(sk, __sk_common.skc_state)));
	return 0;
}
