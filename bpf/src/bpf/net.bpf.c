// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* TCP connections, as tcplife sees them: sock:inet_sock_set_state gives each connection's
 * life. State changes often run in softirq, on whatever thread was interrupted, so the owner
 * is kept per socket (keyed by the sock pointer) from the moments its process is current:
 * connect() (SYN_SENT); for an accepted connection its first send or receive
 * (sock_send_length, sock_recv_length), else its close() (FIN_WAIT1 when it closes first,
 * LAST_ACK when the peer did). At close the connection is sent whole, with the bytes tcp_sock counted. Retransmits,
 * resets and drops (kfree_skb of a socket's skb) are charged to the socket's owner. */
#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"
#include "net.bpf.h"

const volatile bool net_enabled = true;

/* Forces the event struct into BTF so the skeleton generates its Rust type. */
struct net_event _net_event = {};
enum net_what _net_what = 0;

/* A connection seen opening, or owned by a process seen closing it. */
struct conn {
	__u64 start_ns; /* 0: it was open before recording began */
	__u32 pid;	/* 0: owner not seen yet (an accepted connection before close()) */
	__u32 tid;
	char comm[16];
	__u8 active;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* struct sock * */
	__type(value, struct conn);
} conns SEC(".maps");

/* The stacks of the connect() that opened a connection of a tracked process. */
struct conn_stacks {
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64); /* struct sock * */
	__type(value, struct conn_stacks);
} conn_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct conn_stacks);
} conn_scratch SEC(".maps");

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(on_sock_state, const struct sock *sk, int oldstate, int newstate)
{
	if (!net_enabled || BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	__u64 key = (__u64)sk;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	if (newstate == TCP_SYN_SENT || newstate == TCP_SYN_RECV) {
		/* Born: by connect() in its thread, or as the child of a listener (softirq). */
		bool active = newstate == TCP_SYN_SENT;
		if (active && !(pid && tracked(pid)))
			return 0;
		struct conn c = { .start_ns = bpf_ktime_get_ns(), .active = active };
		if (active) {
			c.pid = pid;
			c.tid = (__u32)id;
			bpf_get_current_comm(c.comm, sizeof(c.comm));
			__u32 zero = 0;
			struct conn_stacks *s = bpf_map_lookup_elem(&conn_scratch, &zero);
			if (s) {
				take_stacks(ctx, pid, &s->kstack_bytes, s->kstack, &s->ustack_bytes,
					    s->ustack);
				if (bpf_map_update_elem(&conn_stacks, &key, s, BPF_ANY))
					count_drop(EVENT_NET);
			}
		}
		bpf_map_update_elem(&conns, &key, &c, BPF_ANY);
		return 0;
	}
	if (newstate == TCP_FIN_WAIT1 || newstate == TCP_LAST_ACK) {
		/* close() by the owner, in its thread. */
		struct conn *c = bpf_map_lookup_elem(&conns, &key);
		if (c && c->pid)
			return 0;
		if (!(pid && tracked(pid)) && !c)
			return 0;
		struct conn n = {};
		if (c)
			n = *c;
		n.pid = pid;
		n.tid = (__u32)id;
		bpf_get_current_comm(n.comm, sizeof(n.comm));
		bpf_map_update_elem(&conns, &key, &n, BPF_ANY);
		/* An accepted connection: no opener's stacks, the close()'s stand for them. */
		__u32 zero = 0;
		struct conn_stacks *s = bpf_map_lookup_elem(&conn_scratch, &zero);
		if (s && tracked(pid)) {
			take_stacks(ctx, pid, &s->kstack_bytes, s->kstack, &s->ustack_bytes, s->ustack);
			bpf_map_update_elem(&conn_stacks, &key, s, BPF_NOEXIST);
		}
		return 0;
	}
	/* A listener closing is no connection. */
	if (newstate != TCP_CLOSE || oldstate == TCP_LISTEN)
		return 0;
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (!c && !system_wide)
		return 0;
	struct conn owner = {};
	if (c) {
		owner = *c;
		bpf_map_delete_elem(&conns, &key);
	}
	struct conn_stacks *s = bpf_map_lookup_elem(&conn_stacks, &key);
	/* A connection never seen established (a refused connect) is still sent: it shows as
	 * a connection of 0 bytes from SYN_SENT. */
	if (!system_wide && !(owner.pid && tracked(owner.pid)))
		goto out;
	struct net_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_NET);
		goto out;
	}
	e->kind = EVENT_NET;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = owner.pid;
	e->tid = owner.tid;
	e->time_ns = bpf_ktime_get_ns();
	e->start_ns = owner.start_ns;
	const struct tcp_sock *tp = (const struct tcp_sock *)sk;
	e->tx_bytes = BPF_CORE_READ(tp, bytes_acked);
	e->rx_bytes = BPF_CORE_READ(tp, bytes_received);
	e->what = NET_CONN;
	e->reason = 0;
	fill_addrs(e, sk);
	e->oldstate = oldstate;
	e->active = owner.active;
	__builtin_memcpy(e->comm, owner.comm, sizeof(e->comm));
	if (s) {
		e->kstack_bytes = s->kstack_bytes;
		e->ustack_bytes = s->ustack_bytes;
		__builtin_memcpy(e->kstack, s->kstack, sizeof(e->kstack));
		__builtin_memcpy(e->ustack, s->ustack, sizeof(e->ustack));
	} else {
		e->kstack_bytes = 0;
		e->ustack_bytes = 0;
	}
	bpf_ringbuf_submit(e, submit_flags());
out:
	if (s)
		bpf_map_delete_elem(&conn_stacks, &key);
	return 0;
}

/* The first send or receive of an accepted connection, in its process's thread: its owner,
 * and the stacks standing for an opener's. */
static __always_inline void claim(void *ctx, const struct sock *sk)
{
	if (!net_enabled)
		return;
	__u64 key = (__u64)sk;
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (!c || c->pid)
		return;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	if (!pid)
		return;
	c->pid = pid;
	c->tid = (__u32)id;
	bpf_get_current_comm(c->comm, sizeof(c->comm));
	if (!tracked(pid))
		return;
	__u32 zero = 0;
	struct conn_stacks *s = bpf_map_lookup_elem(&conn_scratch, &zero);
	if (s) {
		take_stacks(ctx, pid, &s->kstack_bytes, s->kstack, &s->ustack_bytes, s->ustack);
		bpf_map_update_elem(&conn_stacks, &key, s, BPF_NOEXIST);
	}
}


/* Sends `what` about socket `sk` (may be NULL with -a), charged to its owner, with the
 * current stacks where the current thread is one of the owner's. */
static __always_inline void net_emit(void *ctx, const struct sock *sk, __u32 what, __u32 reason,
				     __u64 tx, __u64 rx)
{
	if (!net_enabled)
		return;
	__u64 key = (__u64)sk;
	struct conn *c = sk ? bpf_map_lookup_elem(&conns, &key) : 0;
	__u32 owner = c ? c->pid : 0;
	if (!system_wide && !(owner && tracked(owner)))
		return;
	struct net_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_NET);
		return;
	}
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	bool current = owner && pid == owner;
	e->kind = EVENT_NET;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = owner;
	e->tid = current ? (__u32)id : (c ? c->tid : 0);
	e->time_ns = bpf_ktime_get_ns();
	e->start_ns = c ? c->start_ns : 0;
	e->tx_bytes = tx;
	e->rx_bytes = rx;
	e->what = what;
	e->reason = reason;
	fill_addrs(e, sk);
	e->active = c ? c->active : 0;
	if (c)
		__builtin_memcpy(e->comm, c->comm, sizeof(e->comm));
	else
		__builtin_memset(e->comm, 0, sizeof(e->comm));
	if (current) {
		take_stacks(ctx, pid, &e->kstack_bytes, e->kstack, &e->ustack_bytes, e->ustack);
	} else {
		e->kstack_bytes = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), TP_BTF_SKIP);
		e->ustack_bytes = 0;
	}
	bpf_ringbuf_submit(e, submit_flags());
}

/* A socket call of the current thread returns: if it blocked (offcpu.bpf.c added its
 * intervals to sock_waits), one NET_WAIT names the socket's peer for them, with the call's
 * stacks. analyze labels the thread's off-CPU samples from first_ns to now with it. */
static __always_inline void sock_wait_end(void *ctx, const struct sock *sk, __u32 send)
{
	if (!socket_waits)
		return;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, pid = id >> 32;
	if (!pid || !tracked(pid))
		return;
	/* Its wait's last interval, where no sched_switch ended it, ends here. */
	offcpu_ended_unseen(pid, tid, bpf_ktime_get_ns(), 1);
	struct sock_wait *w = bpf_map_lookup_elem(&sock_waits, &tid);
	if (!w)
		return;
	struct sock_wait got = *w;
	bpf_map_delete_elem(&sock_waits, &tid);
	struct net_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(EVENT_NET);
		return;
	}
	__u64 key = (__u64)sk;
	struct conn *c = sk ? bpf_map_lookup_elem(&conns, &key) : 0;
	e->kind = EVENT_NET;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = pid;
	e->tid = tid;
	e->time_ns = bpf_ktime_get_ns();
	e->start_ns = got.first_ns;
	e->tx_bytes = got.blocked_ns;
	e->rx_bytes = got.intervals;
	e->what = NET_WAIT;
	e->reason = send;
	fill_addrs(e, sk);
	e->active = c ? c->active : 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	take_stacks(ctx, pid, &e->kstack_bytes, e->kstack, &e->ustack_bytes, e->ustack);
	bpf_ringbuf_submit(e, submit_flags());
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(on_sock_send, struct sock *sk, int ret, int flags)
{
	/* A socket a tracked thread sent on has send state: the send call is over (the next
	 * tcp_sendmsg_locked starts another), and its owner needs claiming once. */
	struct send_call *c = bpf_sk_storage_get(&send_calls, sk, 0, 0);
	if (c) {
		c->in_call = 0;
		if (!c->claimed) {
			claim(ctx, sk);
			c->claimed = 1;
		}
	} else {
		claim(ctx, sk);
	}
	sock_wait_end(ctx, sk, 1);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_sock_recv, struct sock *sk, int ret, int flags)
{
	if (is_tails_taker())
		return 0;
	claim(ctx, sk);
	sock_wait_end(ctx, sk, 0);
	return 0;
}

/* Per socket: tcp_sock's total_retrans at its last tcp_retransmit_skb, so that each event
 * carries the segments the kernel added to TcpRetransSegs for it (the two are added
 * together in __tcp_retransmit_skb). */
struct retrans_seen {
	__u32 total_retrans;
	__u32 seen;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct retrans_seen);
} retrans_seen SEC(".maps");

/* Errors __tcp_retransmit_skb gives up with before it counts TcpRetransSegs (the tracepoint
 * fires at its end all the same, 6.16+): the skb still in a queue of the host, routing,
 * memory, window, an skb already acked. */
static __always_inline bool gave_up_uncounted(int err)
{
	return err == -16 /* EBUSY */ || err == -12 /* ENOMEM */ || err == -11 /* EAGAIN */ ||
	       err == -22 /* EINVAL */ || err == -113 /* EHOSTUNREACH */;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(on_tcp_retransmit, const struct sock *sk, const struct sk_buff *skb, int err)
{
	/* err: what sending it returned. tx_bytes: the skb's segments (tcp_skb_pcount) at the
	 * tracepoint, after any tcp_fragment: the part retransmitted. rx_bytes: the segments
	 * the kernel added to TcpRetransSegs for this call (0: it gave up before sending), the
	 * growth of tcp_sock's total_retrans since the socket's last event, which the kernel
	 * adds to next to TcpRetransSegs; at a socket's first event, where that is unknown, the
	 * skb's segments unless err is one the kernel gives up with before counting. */
	if (!net_enabled || !sk)
		return 0;
	struct tcp_skb_cb *cb = (struct tcp_skb_cb *)&skb->cb[0];
	__u64 segs = BPF_CORE_READ(cb, tcp_gso_segs);
	if (!segs)
		segs = 1;
	__u32 total = BPF_CORE_READ((const struct tcp_sock *)sk, total_retrans);
	__u64 counted = gave_up_uncounted(err) ? 0 : segs;
	struct retrans_seen *r = bpf_sk_storage_get(&retrans_seen, (struct sock *)sk, 0,
						    BPF_SK_STORAGE_GET_F_CREATE);
	if (r) {
		/* tcp_disconnect() sets total_retrans back to 0. */
		if (r->seen)
			counted = total >= r->total_retrans ? total - r->total_retrans : total;
		r->total_retrans = total;
		r->seen = 1;
	}
	net_emit(ctx, sk, NET_RETRANSMIT, (__u32)err, segs, counted);
	return 0;
}

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(on_tcp_send_reset, const struct sock *sk, const struct sk_buff *skb, int reason)
{
	if (sk || system_wide)
		net_emit(ctx, sk, NET_SEND_RESET, (__u32)reason, 0, 0);
	return 0;
}

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(on_tcp_receive_reset, struct sock *sk)
{
	net_emit(ctx, sk, NET_RECV_RESET, 0, 0, 0);
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(on_kfree_skb, struct sk_buff *skb, void *location, int reason, struct sock *rx_sk)
{
	if (!net_enabled)
		return 0;
	__u64 skey = (__u64)skb;
	/* An skb on its way to the device is forgotten where it is freed, unless the driver
	 * has it (started): a driver's drop, whose net_dev_xmit follows and writes its record
	 * (which stands for the skbs its socket skipped before it: forgotten here, they were
	 * lost). */
	struct send_slot *slot = slot_here();
	if (slot && slot->skb == skey) {
		if (!slot->s.start_ns)
			slot->skb = 0;
	} else {
		struct send_skb *held = held_skb(skey);
		if (held && !held->start_ns)
			unhold_skb(skey);
	}
	/* Data dropped on its way leaves a gap at the driver that is no loss (driver_seen). */
	__s64 payload = 0;
	__u32 seq = 0;
	struct send_call *c = followed_data(skb, &payload, &seq);
	if (c)
		excuse_dropped(c, seq, (__u32)payload);
	struct sock *sk = BPF_CORE_READ(skb, sk);
	if (!sk)
		sk = rx_sk;
	if (!sk && !system_wide)
		return 0;
	net_emit(ctx, sk, NET_DROP, (__u32)reason, 0, 0);
	return 0;
}
