// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What the network programs share (net.bpf.c, netsend.bpf.c, netstamp.bpf.c): the current
 * thread's stacks and a socket's addresses in a net_event. Include after stack.bpf.h and
 * unwind.bpf.h. */
#ifndef NET_BPF_H
#define NET_BPF_H

#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10

/* The send call under way, or the last one, on each socket of a tracked process
 * (netsend.bpf.c): when it began (its stacks went to record then, in a net_call_event); the
 * skbs it produced are charged to it, also when the device sends them later from softirq or
 * another thread. */
struct send_call {
	__u64 send_ns;
	__u32 in_call; /* 1: between the call's first tcp_sendmsg_locked and its return */
	/* 1: the call's record went to record (the socket's rate had credit when it began);
	 * 0: its skbs are only counted, carried by a later followed skb. */
	__u32 call_followed;
	/* The socket's last skb into net_dev_queue: its times and the sequence numbers of its
	 * payload (the segments that software GSO cuts it into reach the driver as new skbs,
	 * netsend.bpf.c), and its address while it waits in send_skbs (0 in a CPU's slot, or
	 * of a call not followed: nothing to forget when it is cut). */
	__u64 last_skb;
	__u64 last_send_ns;
	__u64 last_queue_ns;
	__u32 last_seq;
	__u32 last_end;
	/* The socket's rate of skbs followed (send.bpf.h): credit in ns,
	 * when it was last topped up, and the skbs (and their bytes) not followed since the
	 * last one that was, which the next followed skb stands for. */
	__u64 credit_ns;
	__u64 credit_at;
	__u64 skipped_bytes;
	__u32 skipped;
	__u32 last_followed; /* 1: last_skb's call was followed */
	/* 1: the socket's owner is known (net.bpf.c's claim ran on a send of it): its later
	 * sends need not look it up in conns. */
	__u32 claimed;
	/* Send calls timed by the kernel's TX timestamping (netstamp.bpf.c): the
	 * call under way (STAMP_FOLLOWED: its skb is flagged; STAMP_SKIPPED: only counted, at
	 * its end), its thread, and the one flagged skb of the socket on its way (stamp_state
	 * set) with its call's times, bytes and the calls and bytes it stands for. */
	__u32 stamp_call;
	__u32 stamp_tid;
	__u32 stamp_state;
	__u32 stamp_len;
	__u32 stamp_calls;
	__u32 stamp_key; /* the flagged skb's key (the sequence number of its last byte) */
	/* The call's end and its skb at the driver each add one: the second sends the skb's
	 * record (after the call's, which the end sends first). */
	__u32 stamp_meet;
	__u64 stamp_send_ns;
	__u64 stamp_sched_ns;
	__u64 stamp_driver_ns;
	__u64 stamp_skipped_bytes;
	/* The socket's data seen at the driver (driver_seen): past its furthest byte
	 * (driver_known: set); and the range of its data last dropped on the way (excused: a
	 * gap there is no loss). */
	__u32 driver_next;
	__u32 driver_known;
	__u32 excused_start;
	__u32 excused_end;
	__u32 excused_set;
	__u32 _pad;
};

/* Kept in the socket itself (socket-local storage, freed with it): a lookup costs a pointer
 * walk, not a hash, on every chunk of every send and every skb queued. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct send_call);
} send_calls SEC(".maps") __weak;

/* 1 once any socket got send state (send_calls): until then record's end has no socket to
 * peek at, and skips its look through every process's descriptors. */
__u32 send_state_made __weak = 0;

/* An skb of a send call between net_dev_queue and net_dev_xmit (netsend.bpf.c); one
 * dropped on the way is forgotten at kfree_skb (net.bpf.c): its address, reused for a later
 * skb, would pass for it. */
struct send_skb {
	__u64 sk;
	__u64 send_ns;
	__u64 queue_ns;
	__u64 start_ns; /* net_dev_start_xmit (0: not yet) */
	/* Decided at its first net_dev_start_xmit: the skbs it stands for when followed (0:
	 * not decided yet), or skip (SKIPPED: not followed, counted in its socket's skipped;
	 * NOT_FOLLOWED: of a call not followed, to be counted so). */
	__u32 skbs;
	__u32 skip;
	__u64 skipped_bytes;
	__u32 seq; /* its first byte's sequence number */
	__u32 len; /* its payload's bytes */
};

#define SKIPPED 1
#define NOT_FOLLOWED 2
#define UNSEEN 3 /* testing: passes the driver as if unseen (netsend.bpf.c) */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* struct sk_buff * */
	__type(value, struct send_skb);
} send_skbs SEC(".maps") __weak;

/* How many skbs send_skbs holds, about (inserts less deletes; the LRU's evictions go
 * uncounted, so it may stay above): while none, an skb in no slot is looked up nowhere
 * (two hash lookups spared for every skb sent past a device without a qdisc). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} send_skbs_held SEC(".maps") __weak;

static __always_inline __s64 *skbs_held(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&send_skbs_held, &zero);
}

/* Puts `s` in send_skbs for `skey`. Counted before it goes in, as unhold_skb uncounts
 * after it is out, so that the count is never below the skbs held: counted after, a CPU
 * that dequeued and sent the skb meanwhile took its count off first, and while the count
 * stood at 0 the other CPU's held_skb missed an skb that was held (one whole skb behind a
 * qdisc lost now and then, nothing counted: the qdisc test's rare shortfall). */
static __always_inline void hold_skb(__u64 skey, struct send_skb *s)
{
	__s64 *n = skbs_held();
	if (n)
		__sync_fetch_and_add(n, 1);
	if (bpf_map_update_elem(&send_skbs, &skey, s, BPF_ANY) && n)
		__sync_fetch_and_sub(n, 1);
}

/* The skb `skey` in send_skbs, if any. */
static __always_inline struct send_skb *held_skb(__u64 skey)
{
	__s64 *n = skbs_held();
	if (n && *n <= 0)
		return NULL;
	return bpf_map_lookup_elem(&send_skbs, &skey);
}

/* Removes skb `skey` from send_skbs, if there. */
static __always_inline void unhold_skb(__u64 skey)
{
	__s64 *n = skbs_held();
	if (n && *n <= 0)
		return;
	if (!bpf_map_delete_elem(&send_skbs, &skey) && n)
		__sync_fetch_and_sub(n, 1);
}

/* Bytes of TCP payload in an skb on its way to the device or dropped on the way (wherever
 * skb->data points, up to its transport header), and the sequence number of its first byte.
 * The skb's fields are read directly (a tp_btf argument: no helper call per field). */
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

/* Whether sequence number `a` comes after `b` (modulo 2^32). */
static __always_inline bool seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

/* Socket `c`'s data [seq, seq + len) at the driver. A TCP socket's skbs reach the driver
 * in the order of their data (one transmit queue per socket at a time), so one that starts
 * past the furthest byte seen there follows skbs that passed the driver unseen: on this VM
 * the kernel now and then runs none of the programs for a hook, counting no miss (softirq
 * work done on its agent's thread), and a whole skb went unseen. Those are lost, and
 * counted: one for each gap (at least one skb; how many is not known, as skbs vary in size
 * from a byte to 64 KB: the sizes either side, or the socket's largest so far, guessed one
 * too many in 2 of ~24 recordings, an skb early on being over twice any seen yet). Not data
 * that was dropped on the way (excused; TCP sends it again). */
static __always_inline void driver_seen(struct send_call *c, __u32 seq, __u32 len)
{
	if (c->driver_known && seq_after(seq, c->driver_next)) {
		bool excused = c->excused_set && !seq_after(c->excused_start, c->driver_next) &&
			       !seq_after(seq, c->excused_end);
		if (!excused)
			count_drop(EVENT_NET);
	}
	if (!c->driver_known || seq_after(seq + len, c->driver_next)) {
		c->driver_next = seq + len;
		c->driver_known = 1;
	}
}

/* Socket `c`'s data [seq, seq + len) dropped before the driver (a qdisc's or a local
 * firewall's drop): excused where it leaves a gap (driver_seen). */
static __always_inline void excuse_dropped(struct send_call *c, __u32 seq, __u32 len)
{
	if (c->excused_set && c->excused_end == seq) {
		c->excused_end = seq + len;
		return;
	}
	c->excused_start = seq;
	c->excused_end = seq + len;
	c->excused_set = 1;
}

/* Socket `sk`'s last skbs: its data sent (up to snd_nxt, less a FIN's sequence number where
 * `fin`) past the furthest byte seen at the driver went unseen, or has not reached the
 * driver when the recording ends (as an skb still queued, it is not known to). Lost. */
static __always_inline void trailing_unseen(const struct sock *sk, struct send_call *c, bool fin)
{
	__u32 snd_nxt = BPF_CORE_READ((const struct tcp_sock *)sk, snd_nxt);
	__u32 end = snd_nxt - (fin ? 1 : 0);
	if (c->driver_known && seq_after(end, c->driver_next))
		driver_seen(c, end, 0);
}

/* record's own process (its pid): at the end it peeks at the sockets still open to take
 * their tails (netsend.bpf.c's send_tails); its peeks are no socket use of the workload's. */
const volatile __u32 tails_tgid __weak = 0;

#ifndef MSG_PEEK
#define MSG_PEEK 2
#endif

/* Whether the current thread is record's, taking the tails. */
static __always_inline bool is_tails_taker(void)
{
	return tails_tgid && (__u32)(bpf_get_current_pid_tgid() >> 32) == tails_tgid;
}

/* Whether a socket in TCP state `state` sent its FIN. */
static __always_inline bool fin_sent(int state)
{
	return state == TCP_FIN_WAIT1 || state == TCP_FIN_WAIT2 || state == TCP_CLOSING ||
	       state == TCP_LAST_ACK || state == TCP_TIME_WAIT;
}

/* This CPU's skb of a send call between net_dev_queue and net_dev_xmit, where the device
 * takes it before net_dev_queue's caller returns: no qdisc queues it (veth, loopback and
 * tunnels have none). Kept here, it costs no hash update, lookup and delete per skb (a
 * third of the cost of following every skb over a veth pair). One a qdisc may queue goes
 * to send_skbs (it may leave from another CPU, later); one the driver refuses, at
 * net_dev_xmit. */
struct send_slot {
	__u64 skb; /* 0: empty */
	struct send_skb s;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct send_slot);
} send_slot SEC(".maps") __weak;

/* This CPU's send slot. */
static __always_inline struct send_slot *slot_here(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&send_slot, &zero);
}

/* The current thread's stacks: kernel, and user (unwound where there are tables). False
 * when the user stack is a frame-pointer walk that DWARF mode would unwind better once
 * record has built the process's tables (so it stands for no later call). */
static __always_inline bool take_stacks(void *ctx, __u32 pid, __s32 *kbytes, __u64 *kstack,
					__s32 *ubytes, __u64 *ustack)
{
	*kbytes = bpf_get_stack(ctx, kstack, MAX_STACK_DEPTH * 8, TP_BTF_SKIP);
	struct task_struct *task = bpf_get_current_task_btf();
	__s32 unwound = -1;
	if (task->flags & PF_KTHREAD) {
		*ubytes = 0;
		return true;
	}
	if ((unwound = unwind_user_stack(pid, ustack)) >= 0) {
		*ubytes = unwound;
		return true;
	}
	*ubytes = bpf_get_stack(ctx, ustack, MAX_STACK_DEPTH * 8, BPF_F_USER_STACK);
	return !unwind_enabled;
}

/* The socket's addresses and ports (and its state) into a net_event or net_call_event. */
#define FILL_ADDRS(e, sk)                                                                       \
	do {                                                                                   \
		__builtin_memset((e)->saddr, 0, sizeof((e)->saddr));                           \
		__builtin_memset((e)->daddr, 0, sizeof((e)->daddr));                           \
		(e)->family = 0;                                                               \
		(e)->lport = 0;                                                                \
		(e)->rport = 0;                                                                \
		(e)->FILL_STATE = 0;                                                           \
		if (!(sk))                                                                     \
			break;                                                                 \
		(e)->family = BPF_CORE_READ(sk, __sk_common.skc_family);                       \
		/* inet_sport: skc_num is 0 once the socket left its hash (at close). */       \
		(e)->lport =                                                                   \
			bpf_ntohs(BPF_CORE_READ((const struct inet_sock *)(sk), inet_sport));  \
		(e)->rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));              \
		(e)->FILL_STATE = BPF_CORE_READ(sk, __sk_common.skc_state);                    \
		if ((e)->family == AF_INET6) {                                                 \
			BPF_CORE_READ_INTO(&(e)->saddr, sk,                                    \
					   __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);       \
			BPF_CORE_READ_INTO(&(e)->daddr, sk,                                    \
					   __sk_common.skc_v6_daddr.in6_u.u6_addr8);           \
		} else {                                                                       \
			__u32 s_ = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);               \
			__u32 d_ = BPF_CORE_READ(sk, __sk_common.skc_daddr);                   \
			__builtin_memcpy((e)->saddr, &s_, 4);                                  \
			__builtin_memcpy((e)->daddr, &d_, 4);                                  \
		}                                                                              \
	} while (0)

static __always_inline void fill_addrs(struct net_event *e, const struct sock *sk)
{
#define FILL_STATE oldstate
	FILL_ADDRS(e, sk);
#undef FILL_STATE
}

static __always_inline void fill_call_addrs(struct net_call_event *e, const struct sock *sk)
{
#define FILL_STATE state
	FILL_ADDRS(e, sk);
#undef FILL_STATE
}

#endif
