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

const volatile bool netsend_enabled = true;
/* The rate: one skb followed per interval per socket (0: every skb), from credit that
 * accrues with time up to the burst. */
const volatile __u64 send_interval_ns = 0;
const volatile __u64 send_burst_ns = 0;
/* The machine's cap on skbs followed, each CPU's share of it: one per cap_interval_ns,
 * from credit of up to cap_burst_ns (0: no cap). It bounds what many sockets, each within
 * its rate, write in all; the skbs past it are skipped as the rate's are. */
const volatile __u64 cap_interval_ns = 0;
const volatile __u64 cap_burst_ns = 0;
/* A kernel pointer computed as a number, readable directly (6.2). */
extern void *bpf_rdonly_cast(const void *obj__ign, __u32 btf_id) __ksym __weak;

/* For the generated Rust types. */
struct net_skb_event _net_skb_event = {};


struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct net_call_event);
} call_scratch SEC(".maps");

/* NETDEV_TX_BUSY: the driver refused the skb; the qdisc will hand it again. */
#define TX_BUSY 0x10

#define CALL_HEAD offsetof(struct net_call_event, kstack)

/* Where a thread's last send call whose stacks went to record was made: its user ip and
 * stack pointer at the syscall, and the syscall. A call from the same place at the same
 * depth by the same syscall has the same stacks (a send loop's calls all do), so they are
 * not walked again: walking them was most of the cost of following sends (7-8 us a call
 * for iperf3, whose code keeps no frame pointers). */
struct call_site {
	__u64 ip;
	__u64 sp;
	__u32 nr;
	__u32 pid;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct call_site);
} call_sites SEC(".maps");

/* Sends the call's record: its head, then only the frames each stack holds (none when they
 * are the thread's last call's). */
static __always_inline void send_call_event(void *ctx, const struct sock *sk, __u32 pid,
					    __u64 id, __u64 send_ns)
{
	__u32 zero = 0;
	struct net_call_event *e = bpf_map_lookup_elem(&call_scratch, &zero);
	if (!e)
		return;
	e->kind = EVENT_NET_CALL;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = pid;
	e->tid = (__u32)id;
	e->time_ns = send_ns;
	e->sk = (__u64)sk;
	fill_call_addrs(e, sk);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct call_site site = {
		.ip = regs->ip, .sp = regs->sp, .nr = (__u32)regs->orig_ax, .pid = pid
	};
	__u32 tid = (__u32)id;
	struct call_site *last = bpf_map_lookup_elem(&call_sites, &tid);
	e->same_stacks = last && last->ip == site.ip && last->sp == site.sp &&
			 last->nr == site.nr && last->pid == site.pid;
	bool lasting = true;
	if (e->same_stacks) {
		e->kstack_bytes = 0;
		e->ustack_bytes = 0;
	} else {
		lasting = take_stacks(ctx, pid, &e->kstack_bytes, e->kstack, &e->ustack_bytes,
				      e->ustack);
	}
	/* Another program of this CPU may have used the scratch meanwhile (preempted). */
	if (e->tid != (__u32)id || e->time_ns != send_ns) {
		count_drop(EVENT_NET);
		return;
	}
	__u8 same = e->same_stacks;
	__u32 ks = stack_len(e->kstack_bytes), us = stack_len(e->ustack_bytes);
	e->kstack_bytes = ks;
	e->ustack_bytes = us;
	struct bpf_dynptr out;
	if (bpf_ringbuf_reserve_dynptr(&events, CALL_HEAD + ks + us, 0, &out)) {
		bpf_ringbuf_discard_dynptr(&out, 0);
		count_drop(EVENT_NET);
		return;
	}
	bpf_dynptr_write(&out, 0, e, CALL_HEAD, 0);
	if (ks)
		bpf_dynptr_write(&out, CALL_HEAD, e->kstack, ks, 0);
	if (us)
		bpf_dynptr_write(&out, CALL_HEAD + ks, e->ustack, us, 0);
	bpf_ringbuf_submit_dynptr(&out, submit_flags());
	/* Only stacks that reached the ring stand for the calls after, and only those that will
	 * not unwind better later: a walk before record built the process's tables stops at the
	 * first function without frame pointers (iperf3's sends all stood on its libc write). */
	if (same)
		return;
	if (lasting)
		bpf_map_update_elem(&call_sites, &tid, &site, BPF_ANY);
	else if (last)
		bpf_map_delete_elem(&call_sites, &tid);
}

/* Whether the socket's rate allows one more skb followed now: its credit topped up with
 * the time since it last was, up to the burst. */
static __always_inline bool has_credit(struct send_call *c, __u64 now)
{
	__u64 interval = send_interval_ns;
	if (!interval)
		return true;
	__u64 credit = c->credit_ns + (now - c->credit_at);
	if (credit > send_burst_ns)
		credit = send_burst_ns;
	c->credit_ns = credit;
	c->credit_at = now;
	return credit >= interval;
}

/* This CPU's credit under the machine's cap. */
struct send_cap {
	__u64 credit_ns;
	__u64 credit_at;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct send_cap);
} send_cap SEC(".maps");

/* Whether the machine's cap allows one more skb followed on this CPU now (and takes its
 * credit if so). */
static __always_inline bool cap_allows(__u64 now)
{
	__u64 interval = cap_interval_ns;
	if (!interval)
		return true;
	__u32 zero = 0;
	struct send_cap *k = bpf_map_lookup_elem(&send_cap, &zero);
	if (!k)
		return true;
	__u64 credit = k->credit_ns + (now - k->credit_at);
	if (credit > cap_burst_ns)
		credit = cap_burst_ns;
	k->credit_at = now;
	if (credit < interval) {
		k->credit_ns = credit;
		return false;
	}
	k->credit_ns = credit - interval;
	return true;
}

/* An skb of `len` bytes that the socket's rate skips: counted, for the next one followed. */
static __always_inline void skip(struct send_call *c, __u32 len)
{
	c->skipped += 1;
	c->skipped_bytes += len;
}

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
	__u64 now = bpf_ktime_get_ns();
	c->send_ns = now;
	c->in_call = 1;
	c->call_followed = has_credit(c, now);
	if (c->call_followed)
		send_call_event(ctx, sk, pid, id, now);
	return 0;
}

/* Bytes of TCP payload in an skb on its way to the device (skb->data at its link header),
 * and the sequence number of its first byte. The skb's fields are read directly (a tp_btf
 * argument: no helper call per field). */
static __always_inline __s64 tcp_payload(const struct sk_buff *skb, __u32 *seq)
{
	unsigned char *head = skb->head;
	unsigned char *data = skb->data;
	__u16 th = skb->transport_header;
	struct {
		__be32 seq;
		__be32 ack;
		__u8 off;
	} h = {};
	if (bpf_probe_read_kernel(&h, sizeof(h), head + th + 4))
		return -1;
	*seq = bpf_ntohl(h.seq);
	__s64 headers = (__s64)th + (h.off >> 4) * 4 - (data - head);
	return (__s64)skb->len - headers;
}

/* The send state of `skb`'s socket if a tracked thread sent on it and the skb carries data
 * (not the connection's pure ACKs, SYN or FIN), with its payload and first sequence
 * number; NULL otherwise. */
static __always_inline struct send_call *followed_data(const struct sk_buff *skb,
						      __s64 *payload, __u32 *seq)
{
	struct sock *sk = skb->sk;
	if (!sk)
		return NULL;
	/* Only sockets a tracked thread sent on have storage. */
	struct send_call *c = bpf_sk_storage_get(&send_calls, sk, 0, 0);
	if (!c || sk->sk_protocol != IPPROTO_TCP)
		return NULL;
	*payload = tcp_payload(skb, seq);
	return *payload > 0 ? c : NULL;
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
			slot->s = (struct send_skb){ .skip = NOT_FOLLOWED };
			slot->skb = skey;
		}
		return 0;
	}
	struct send_skb s = {
		.sk = (__u64)skb->sk,
		.send_ns = c->send_ns,
		.queue_ns = bpf_ktime_get_ns(),
	};
	if (queues) {
		hold_skb(skey, &s);
		c->last_skb = skey;
	} else {
		slot->s = s;
		slot->skb = skey;
	}
	c->last_send_ns = s.send_ns;
	c->last_queue_ns = s.queue_ns;
	return 0;
}

/* One skb (or, timed by TX timestamps, one call) followed now: the socket's rate spent on
 * it, and it stands for itself and what the socket skipped before it (`count`, and the
 * skipped ones' bytes). */
static __always_inline void spend(struct send_call *c, __u32 *count, __u64 *skipped_bytes)
{
	c->credit_ns -= send_interval_ns;
	*count = 1 + c->skipped;
	*skipped_bytes = c->skipped_bytes;
	c->skipped = 0;
	c->skipped_bytes = 0;
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
	if (!c)
		return;
	bool split_here = seq - c->last_seq < c->last_end - c->last_seq;
	if (!(split_here && c->last_followed && c->last_queue_ns)) {
		skip(c, skb->len);
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	struct send_skb s = {
		.sk = (__u64)skb->sk,
		.send_ns = c->last_send_ns,
		.queue_ns = c->last_queue_ns,
		.start_ns = now,
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
	if (rc != 0 || s.skip)
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
	e->skbs = c->skipped;
	e->_pad = 0;
	e->skipped_bytes = c->skipped_bytes;
	c->skipped = 0;
	c->skipped_bytes = 0;
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
	if (c && c->skipped)
		send_tail(sk, c);
	return 0;
}

/* The tails of the sockets still open, when the recording ends: record reads this iterator
 * over send_calls once. */
SEC("iter/bpf_sk_storage_map")
int send_tails(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	struct sock *sk = ctx->sk;
	struct send_call *c = ctx->value;
	if (sk && c && c->skipped)
		send_tail(sk, c);
	return 0;
}

/* ---- Send calls timed by the kernel's TX timestamping (6.15+), where record has it: no
 * program runs per skb or per chunk of a send (the hooks above cost iperf3 7-9% of its
 * throughput over a veth, most of it the tracepoints' own dispatch, ~80 ns a hook here).
 * A sockops program asks the kernel for timestamp callbacks on every connection set up
 * while it is attached; the kernel then calls it once per send call (SENDMSG, at the end of
 * tcp_sendmsg_locked, with the skb holding the call's last byte). A tracked thread's call
 * that the socket's rate allows has that skb flagged: the kernel calls back when it enters
 * the qdisc (SCHED) and when the driver takes it (SND_SW). The call's stacks go to record
 * at its end (sock_send_length, the same thread, on_stamped_send): sockops may not walk
 * stacks. Its skb's record follows its call's: of the call's end and the skb at the driver,
 * the later sends it. A sample stands for send calls (its own and those of its socket the
 * rate skipped before it), not skbs. Only connections set up while recording are seen
 * (record follows skbs with -p and -a). */
const volatile bool netstamp_enabled = false;

extern int bpf_sock_ops_enable_tx_tstamp(struct bpf_sock_ops_kern *skops, __u64 flags) __ksym __weak;
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

#define SOL_SOCKET 1
#define STAMP_FOLLOWED 1
#define STAMP_SKIPPED 2
#define STAMP_AWAITING 1
/* A flagged skb not at the driver after this long (a driver that takes no software
 * timestamps) gives way to a later call; what it stood for is counted with that one. */
#define STAMP_GIVE_UP_NS 1000000000ULL

/* The timestamp key of the callback's skb (skb_shared_info's tskey, the sequence number of
 * the flagged byte): tells the flagged skb from a retransmitted earlier one, which keeps its
 * flag. 0 where it cannot be read. */
static __always_inline __u32 stamp_key(struct bpf_sock_ops *skops)
{
	if (!bpf_ksym_exists(bpf_rdonly_cast))
		return 0;
	struct bpf_sock_ops_kern *k = bpf_cast_to_kern_ctx(skops);
	struct sk_buff *skb = k->skb;
	if (!skb)
		return 0;
	struct skb_shared_info *sh =
		bpf_rdonly_cast(skb->head + skb->end, bpf_core_type_id_kernel(struct skb_shared_info));
	return sh->tskey;
}

/* The record of the socket's flagged skb (its call's went first). */
static __always_inline void send_stamped(struct send_call *c, __u64 sk)
{
	struct net_skb_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	c->stamp_state = 0;
	if (!e) {
		count_drop(EVENT_NET);
		return;
	}
	__u64 sched = c->stamp_sched_ns ? c->stamp_sched_ns : c->stamp_driver_ns;
	__u64 qdisc = c->stamp_driver_ns - sched;
	e->kind = EVENT_NET_SKB;
	e->cpu = bpf_get_smp_processor_id();
	e->time_ns = c->stamp_driver_ns;
	e->send_ns = c->stamp_send_ns;
	e->sk = sk;
	e->len = c->stamp_len;
	e->qdisc_ns = qdisc > 0xffffffff ? 0xffffffff : (__u32)qdisc;
	e->queue_ns = sched - c->stamp_send_ns;
	e->skbs = c->stamp_calls;
	e->_pad = 0;
	e->skipped_bytes = c->stamp_skipped_bytes;
	bpf_ringbuf_submit(e, submit_flags());
}

/* A send call's end (SENDMSG): flags its last skb if the thread is tracked, no skb of the
 * socket is on its way and the rate allows; else the call is counted at its end. */
static __always_inline void stamp_sendmsg(struct bpf_sock_ops *skops)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	struct bpf_sock *sk = skops->sk;
	if (!pid || !sk || !tracked(pid))
		return;
	struct send_call *c = bpf_sk_storage_get(&send_calls, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!c) {
		count_drop(EVENT_NET);
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	c->stamp_tid = (__u32)id;
	c->stamp_call = STAMP_SKIPPED;
	if (c->stamp_state) {
		if (now - c->stamp_send_ns < STAMP_GIVE_UP_NS)
			return;
		c->skipped += c->stamp_calls;
		c->skipped_bytes += c->stamp_skipped_bytes + c->stamp_len;
		c->stamp_state = 0;
	}
	if (!has_credit(c, now) || !cap_allows(now) ||
	    !bpf_ksym_exists(bpf_sock_ops_enable_tx_tstamp))
		return;
	if (bpf_sock_ops_enable_tx_tstamp(bpf_cast_to_kern_ctx(skops), 0))
		return;
	spend(c, &c->stamp_calls, &c->stamp_skipped_bytes);
	c->stamp_key = stamp_key(skops);
	c->stamp_meet = 0;
	c->stamp_call = STAMP_FOLLOWED;
	c->stamp_state = STAMP_AWAITING;
	c->stamp_send_ns = now;
	c->stamp_sched_ns = 0;
	c->stamp_driver_ns = 0;
	c->stamp_len = 0;
}

/* The flagged skb enters the qdisc (SCHED) or the driver takes it (SND_SW). */
static __always_inline void stamp_skb(struct bpf_sock_ops *skops, bool driver)
{
	struct bpf_sock *sk = skops->sk;
	if (!sk)
		return;
	struct send_call *c = bpf_sk_storage_get(&send_calls, sk, 0, 0);
	if (!c || c->stamp_state != STAMP_AWAITING || stamp_key(skops) != c->stamp_key)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (!c->stamp_sched_ns)
		c->stamp_sched_ns = now;
	if (!driver || c->stamp_driver_ns)
		return;
	c->stamp_driver_ns = now;
	if (__sync_fetch_and_add(&c->stamp_meet, 1) == 1)
		send_stamped(c, (__u64)sk);
}

SEC("sockops")
int on_sockops(struct bpf_sock_ops *skops)
{
	if (!netstamp_enabled)
		return 1;
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB: {
		int flags = SK_BPF_CB_TX_TIMESTAMPING;
		bpf_setsockopt(skops, SOL_SOCKET, SK_BPF_CB_FLAGS, &flags, sizeof(flags));
		break;
	}
	case BPF_SOCK_OPS_TSTAMP_SENDMSG_CB:
		stamp_sendmsg(skops);
		break;
	case BPF_SOCK_OPS_TSTAMP_SCHED_CB:
		stamp_skb(skops, false);
		break;
	case BPF_SOCK_OPS_TSTAMP_SND_SW_CB:
		stamp_skb(skops, true);
		break;
	}
	return 1;
}

/* A send call's end: a followed call's record (its stacks), then its skb's if that is at
 * the driver already; a skipped call's bytes counted. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(on_stamped_send, struct sock *sk, int ret, int flags)
{
	if (!netstamp_enabled)
		return 0;
	struct send_call *c = bpf_sk_storage_get(&send_calls, sk, 0, 0);
	if (!c || !c->stamp_call)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	if (c->stamp_tid != (__u32)id)
		return 0;
	__u32 len = ret > 0 ? (__u32)ret : 0;
	__u32 call = c->stamp_call;
	c->stamp_call = 0;
	if (call == STAMP_SKIPPED) {
		skip(c, len);
		return 0;
	}
	c->stamp_len = len;
	send_call_event(ctx, sk, id >> 32, id, c->stamp_send_ns);
	if (__sync_fetch_and_add(&c->stamp_meet, 1) == 1)
		send_stamped(c, (__u64)sk);
	return 0;
}
