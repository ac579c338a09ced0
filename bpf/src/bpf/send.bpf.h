// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What the two ways of following TCP sends share: skb by skb through the device layer
 * (netsend.bpf.c) and send calls timed by the kernel's TX timestamps (netstamp.bpf.c). A
 * followed call's record with its stacks, and the rate and cap that decide what is followed:
 * what is not is counted, and the next followed one stands for it. Include after net.bpf.h. */
#ifndef SEND_BPF_H
#define SEND_BPF_H

/* The rate: one skb followed per interval per socket (0: every skb), from credit that
 * accrues with time up to the burst. */
const volatile __u64 send_interval_ns __weak = 0;
const volatile __u64 send_burst_ns __weak = 0;
/* The machine's cap on skbs followed, each CPU's share of it: one per cap_interval_ns,
 * from credit of up to cap_burst_ns (0: no cap). It bounds what many sockets, each within
 * its rate, write in all; the skbs past it are skipped as the rate's are. */
const volatile __u64 cap_interval_ns __weak = 0;
const volatile __u64 cap_burst_ns __weak = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct net_call_event);
} call_scratch SEC(".maps") __weak;

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
} call_sites SEC(".maps") __weak;

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
} send_cap SEC(".maps") __weak;

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

/* `count` skbs (or calls) of `bytes` in all, skipped: added atomically, as taken. The bytes
 * go first, so that who takes a count takes its bytes too. */
static __always_inline void skip_many(struct send_call *c, __u32 count, __u64 bytes)
{
	__sync_fetch_and_add(&c->skipped_bytes, bytes);
	__sync_fetch_and_add(&c->skipped, count);
}

/* An skb of `len` bytes that the socket's rate skips: counted, for the next one followed.
 * Atomically (BPF v3), as taken: an skb a qdisc held leaves on whichever CPU dequeues it,
 * without the socket's lock, while its owner may be closing the socket (a tail taken then
 * lost the skbs counted meanwhile: 1 of 42 in a CI run). */
static __always_inline void skip(struct send_call *c, __u32 len)
{
	skip_many(c, 1, len);
}

/* What the socket skipped since it was last taken (the skbs and their bytes), leaving none. */
static __always_inline void take_skipped(struct send_call *c, __u32 *count, __u64 *bytes)
{
	*count = __sync_lock_test_and_set(&c->skipped, 0);
	*bytes = __sync_lock_test_and_set(&c->skipped_bytes, 0);
}

/* One skb (or, timed by TX timestamps, one call) followed now: the socket's rate spent on
 * it, and it stands for itself and what the socket skipped before it (`count`, and the
 * skipped ones' bytes). */
static __always_inline void spend(struct send_call *c, __u32 *count, __u64 *skipped_bytes)
{
	c->credit_ns -= send_interval_ns;
	take_skipped(c, count, skipped_bytes);
	*count += 1;
}


#endif
