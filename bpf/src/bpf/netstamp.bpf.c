// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* TCP send calls timed by the kernel's TX timestamping (6.15+), where record has it: no
 * program runs per skb or per chunk of a send (netsend.bpf.c's hooks cost iperf3 7-9% of
 * its throughput over a veth, most of it the tracepoints' own dispatch, ~80 ns a hook here).
 * A sockops program asks the kernel for timestamp callbacks on every connection set up
 * while it is attached; the kernel then calls it once per send call (SENDMSG, at the end of
 * tcp_sendmsg_locked, with the skb holding the call's last byte). A tracked thread's call
 * that the socket's rate allows has that skb flagged: the kernel calls back when it enters
 * the qdisc (SCHED) and when the driver takes it (SND_SW). The call's stacks go to record
 * at its end (sock_send_length, the same thread, on_stamped_send): sockops may not walk
 * stacks. Its skb's record follows its call's: of the call's end and the skb at the driver,
 * the later sends it. A sample stands for send calls (its own and those of its socket the
 * rate skipped before it), not skbs. Only connections set up while recording are seen
 * (record follows skbs with -p and -a). Built for BPF v3 (kernels 5.12+): the meet is an
 * atomic that returns the old value. */
#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"
#include "net.bpf.h"
#include "send.bpf.h"

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
	send_state_made = 1;
	__u64 now = bpf_ktime_get_ns();
	c->stamp_tid = (__u32)id;
	c->stamp_call = STAMP_SKIPPED;
	if (c->stamp_state) {
		if (now - c->stamp_send_ns < STAMP_GIVE_UP_NS)
			return;
		skip_many(c, c->stamp_calls, c->stamp_skipped_bytes + c->stamp_len);
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
