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
};

/* Kept in the socket itself (socket-local storage, freed with it): a lookup costs a pointer
 * walk, not a hash, on every chunk of every send and every skb queued. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct send_call);
} send_calls SEC(".maps") __weak;

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
};

#define SKIPPED 1
#define NOT_FOLLOWED 2

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

/* Set once a qdisc cut a held skb into segments itself (tbf's for one above its burst): the
 * skb never reaches the driver, and its entry outlives it. */
volatile __u32 held_skbs_cut __weak = 0;

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
	/* One still held at this address, not started and to be written, was freed unseen at
	 * the driver (an address is reused only once its skb is freed): lost, and counted. The
	 * kernel runs no program at all for some hooks (softirq work done on a VM's agent
	 * thread: a whole skb behind a qdisc missed now and then, no recursion miss counted). */
	struct send_skb *old = bpf_map_lookup_elem(&send_skbs, &skey);
	if (old && !old->start_ns && !old->skip && !held_skbs_cut)
		count_drop(EVENT_NET);
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
