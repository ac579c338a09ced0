// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What every kind of "any event" program shares (probes.bpf.c): what each event is
 * (trace_configs), this CPU's scratch event, and the steps of an event once its payload is
 * read: the filter, the stacks, the record sent, a pair's entry kept until its exit.
 * Include after filter.bpf.h, in probes.bpf.c only (its global functions are defined here). */
#ifndef TRACE_BPF_H
#define TRACE_BPF_H

/* What each attached event is (record's index = the attach cookie). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TRACE_EVENTS);
	__type(key, __u32);
	__type(value, struct trace_config);
} trace_configs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct trace_buf);
} trace_scratch SEC(".maps");

/* A pair's entry, per thread and entry event, until its exit. */
struct trace_start_key {
	__u32 tid;
	__u32 event;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TRACE_STARTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct trace_start_key);
	__type(value, struct trace_start);
} trace_starts SEC(".maps");

#include "trace_agg.bpf.h"

/* Forces the structs into BTF so the skeleton generates their Rust types. */
struct trace_record _trace_record = {};
struct trace_agg_key _trace_agg_key = {};
struct trace_agg_value _trace_agg_value = {};
enum trace_hist _trace_hist = 0;
struct trace_config _trace_config = {};
struct filter_prog _filter_prog = {};
enum trace_source _trace_source = 0;
enum filter_op _filter_op = 0;
enum filter_cmp _filter_cmp = 0;
enum filter_src _filter_src = 0;
enum filter_flags _filter_flags = 0;
enum filter_match _filter_match = 0;

/* The common header of a payload (trace_entry: type, flags, preempt count, pid). */
#define COMMON_SIZE 8

static __always_inline __u64 common_header(struct trace_config *c, struct trace_buf *b)
{
	return (__u64)b->e.tid << 32 | (c->common_type & 0xffff);
}
#define RAW_MASK (MAX_TRACE_RAW - 1)

/* The config of event `event`, and the scratch buffer with the current thread's identity;
 * NULL if recording is off or the thread is not followed. */
static __always_inline struct trace_buf *trace_begin(__u32 event, struct trace_config **c)
{
	if (!trace_enabled)
		return NULL;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (!tgid || !tracked(tgid))
		return NULL;
	*c = bpf_map_lookup_elem(&trace_configs, &event);
	if (!*c)
		return NULL;
	__u32 zero = 0;
	struct trace_buf *b = bpf_map_lookup_elem(&trace_scratch, &zero);
	if (!b)
		return NULL;
	b->e.kind = EVENT_TRACE;
	b->e.pid = tgid;
	b->e.tid = (__u32)id;
	b->e.time_ns = 0; /* taken once the event passes its filter (see trace_finish) */
	b->e.latency_ns = 0;
	b->e.event = event;
	b->e.raw_bytes = 0;
	b->e.kstack_bytes = 0;
	b->e.ustack_bytes = 0;
	b->e.stack_bytes = 0;
	b->e.stack_top = 0;
	b->e.user_regs[7] = 0;
	return b;
}

/* The heavy steps are global functions: the verifier checks each once, not once per path
 * of every program that calls it (inlined, on_tracepoint alone took 786k of the verifier's
 * million instructions and a second to load). They work on this CPU's trace_scratch. */

static __always_inline struct trace_buf *scratch(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&trace_scratch, &zero);
}

/* Whether the scratch event's payload passes filter `filter` (index + 1; 0: no filter). */
__noinline int trace_passes(__u32 filter)
{
	struct trace_buf *b = scratch();
	if (!filter || !b)
		return 1;
	return filter_pass(filter - 1, b->raw, b->e.raw_bytes);
}

/* Takes the scratch event's stacks (after the filter: a filtered-out event costs none). In
 * DWARF mode, a user stack the kernel cannot unwind (its tables are not built yet: the
 * first moments of a process) is copied; for a pair's entry (`entry`: no room to keep a
 * copy) its registers and top word are kept and the copy taken at the exit, when the
 * entry's caller frames still stand where they stood (a syscall's or a function's). */
__noinline int trace_stacks(void *ctx __arg_ctx, __u32 kernel, __u32 entry)
{
	struct trace_buf *b = scratch();
	if (!b)
		return 0;
	if (kernel)
		b->e.kstack_bytes = bpf_get_stack(ctx, b->e.kstack, sizeof(b->e.kstack), 0);
	if (stack_copy_bytes) {
		__s32 unwound = unwind_user_stack(b->e.pid, b->e.ustack);
		if (unwound >= 0) {
			b->e.ustack_bytes = unwound;
			return 0;
		}
		struct task_struct *task = bpf_get_current_task_btf();
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
		fill_user_regs(b->e.user_regs, regs);
		__u64 sp = regs->sp;
		if (entry) {
			b->e.stack_top = 0;
			bpf_probe_read_user(&b->e.stack_top, 8, (void *)sp);
			return 0;
		}
		__u64 cap = stack_copy_bytes < MAX_OFFCPU_COPY ? stack_copy_bytes : MAX_OFFCPU_COPY;
		b->e.stack_bytes = copy_offcpu_stack(b->stack, sp, stack_copy_len(task, sp, cap));
		return 0;
	}
	b->e.ustack_bytes =
		bpf_get_stack(ctx, b->e.ustack, sizeof(b->e.ustack), BPF_F_USER_STACK);
	return 0;
}

/* Sends the scratch event in one record: trace_record up to its stacks, the frames each
 * stack holds (not the whole arrays: 2 KB an event, most of it empty, was most of what an
 * event written cost), the payload, the stack copy. */
#define TRACE_HEAD offsetof(struct trace_record, kstack)

__noinline int trace_send(void)
{
	struct trace_buf *b = scratch();
	if (!b)
		return 0;
	/* A uprobe's program can be preempted, and another thread's event built in this CPU's
	 * buffer meanwhile: what is here then is not this thread's. */
	if (b->e.tid != (__u32)bpf_get_current_pid_tgid()) {
		count_drop(EVENT_TRACE);
		return 0;
	}
	/* --aggregate: counted in the kernel instead, where it can be. */
	if (trace_agg_count(b))
		return 0;
	b->e.cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(b->e.comm, sizeof(b->e.comm));
	__u32 raw = b->e.raw_bytes & RAW_MASK;
	if (b->e.raw_bytes >= MAX_TRACE_RAW)
		raw = MAX_TRACE_RAW;
	__u32 stack = b->e.stack_bytes;
	if (stack > MAX_OFFCPU_COPY)
		stack = MAX_OFFCPU_COPY;
	__u32 ks = stack_len(b->e.kstack_bytes), us = stack_len(b->e.ustack_bytes);
	b->e.raw_bytes = raw;
	b->e.stack_bytes = stack;
	b->e.kstack_bytes = ks;
	b->e.ustack_bytes = us;
	struct bpf_dynptr out;
	__u64 size = TRACE_HEAD + ks + us + raw + stack;
	if (bpf_ringbuf_reserve_dynptr(&events, size, 0, &out)) {
		bpf_ringbuf_discard_dynptr(&out, 0);
		count_drop(EVENT_TRACE);
		return 0;
	}
	__u32 at = TRACE_HEAD;
	bpf_dynptr_write(&out, 0, &b->e, TRACE_HEAD, 0);
	if (ks)
		bpf_dynptr_write(&out, at, b->e.kstack, ks, 0);
	at += ks;
	if (us)
		bpf_dynptr_write(&out, at, b->e.ustack, us, 0);
	at += us;
	if (raw)
		bpf_dynptr_write(&out, at, b->raw, raw, 0);
	at += raw;
	if (stack)
		bpf_dynptr_write(&out, at, b->stack, stack, 0);
	bpf_ringbuf_submit_dynptr(&out, submit_flags());
	return 0;
}

/* Keeps the scratch event as its thread's pending entry of a pair. */
__noinline int trace_keep_entry(void)
{
	struct trace_buf *b = scratch();
	if (!b || b->e.tid != (__u32)bpf_get_current_pid_tgid())
		return 0;
	struct trace_start_key k = { .tid = b->e.tid, .event = b->e.event };
	if (bpf_map_update_elem(&trace_starts, &k, b, BPF_ANY))
		count_drop(EVENT_TRACE);
	return 0;
}

/* A pair's exit (the scratch event, of exit event `event`, entry `entry` + 1, filter as
 * trace_passes): its entry's payload, time and stacks, sent under the exit's index with the
 * time between; a return probe's return address and value (`ret_ip`, `ret`, if `tail`)
 * appended to the payload. */
__noinline int trace_exit(__u32 entry, __u32 filter, __u32 tail, __u64 ret_ip, __u64 ret)
{
	struct trace_buf *b = scratch();
	if (!b || !entry)
		return 0;
	struct trace_start_key k = { .tid = b->e.tid, .event = entry - 1 };
	struct trace_start *s = bpf_map_lookup_elem(&trace_starts, &k);
	if (!s)
		return 0;
	__u64 now = b->e.time_ns;
	__u32 event = b->e.event;
	bpf_probe_read_kernel(&b->e, sizeof(b->e), &s->e);
	__u32 n = s->e.raw_bytes;
	if (n > MAX_TRACE_RAW)
		n = MAX_TRACE_RAW;
	bpf_probe_read_kernel(b->raw, n & RAW_MASK, s->raw);
	bpf_map_delete_elem(&trace_starts, &k);
	b->e.latency_ns = now - b->e.time_ns;
	b->e.time_ns = now;
	b->e.event = event;
	b->e.stack_bytes = 0;
	__u64 sp = b->e.user_regs[7];
	if (sp && stack_copy_bytes) {
		/* The entry's stack, copied now (see trace_stacks), its top word as it was. */
		struct task_struct *task = bpf_get_current_task_btf();
		__u64 cap = stack_copy_bytes < MAX_OFFCPU_COPY ? stack_copy_bytes : MAX_OFFCPU_COPY;
		__u32 got = copy_offcpu_stack(b->stack, sp, stack_copy_len(task, sp, cap));
		if (got >= 8)
			*(__u64 *)b->stack = b->e.stack_top;
		b->e.stack_bytes = got;
		if (!got)
			b->e.user_regs[7] = 0;
	}
	if (tail && n + 16 <= MAX_TRACE_RAW) {
		__u64 words[2] = { ret_ip, ret };
		bpf_probe_read_kernel(b->raw + (n & RAW_MASK), 16, words);
		n += 16;
	}
	b->e.raw_bytes = n;
	if (!trace_passes(filter))
		return 0;
	return trace_send();
}

/* What follows the payload: a pair's exit is sent with its entry's; an entry is kept; any
 * other event passes its filter, takes its stacks and is sent. */
static __always_inline int trace_finish(void *ctx, struct trace_config *c, bool kernel)
{
	struct trace_buf *b = scratch();
	if (!b)
		return 0;
	/* The time, read after the filter where it can be: an event filtered out costs none
	 * (reading the clock was a tenth of a filtered-out syscall's cost). */
	if (c->entry) {
		b->e.time_ns = bpf_ktime_get_ns();
		return trace_exit(c->entry, c->filter, 0, 0, 0);
	}
	if (c->entry_only) {
		b->e.time_ns = bpf_ktime_get_ns();
		if (c->stacks)
			trace_stacks(ctx, kernel, 1);
		return trace_keep_entry();
	}
	if (!trace_passes(c->filter))
		return 0;
	b->e.time_ns = bpf_ktime_get_ns();
	if (c->stacks)
		trace_stacks(ctx, kernel, 0);
	return trace_send();
}

#endif /* TRACE_BPF_H */
