// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Any event: one generic program per kind of attachment (tracepoint, uprobe, uretprobe, USDT
 * probe, kprobe, kretprobe), attached once per event with the event's index as its cookie
 * (trace_configs says what the event is). Each reads the event's payload (a tracepoint's
 * record as the kernel laid it out, a probe's arguments), runs the event's filter on it
 * before anything else is taken, then takes the stacks and sends a trace_event. The entry
 * of a pair (a return probe's function entry, --latency's first tracepoint) is kept per
 * thread with its time, stacks and payload; its exit sends them with the time between.
 * The steps every kind shares (config, scratch, filter, stacks, send, pairs): trace.bpf.h. */
#include "common.bpf.h"
#include "stack.bpf.h"
#include "unwind.bpf.h"
#include "filter.bpf.h"
#include <bpf/usdt.bpf.h>

const volatile bool trace_enabled = false;

#include "trace.bpf.h"

/* A tracepoint: its record, the fixed part then the dynamic data its __data_loc fields point
 * at (strings, arrays), as the kernel laid it out. */
static __always_inline int trace_tracepoint(void *ctx)
{
	struct trace_config *c;
	struct trace_buf *b = trace_begin(bpf_get_attach_cookie(ctx), &c);
	if (!b)
		return 0;
	__u32 size = c->fixed_size;
	if (size > MAX_TRACE_RAW)
		size = MAX_TRACE_RAW;
	if (size && bpf_probe_read_kernel(b->raw, size & (2 * MAX_TRACE_RAW - 1), ctx))
		return 0;
	/* The dynamic data ends where the furthest __data_loc field's data ends. */
	__u32 end = size;
	for (int i = 0; i < MAX_DATA_LOC; i++) {
		if (i >= c->n_data_loc)
			break;
		__u32 off = c->data_loc_off[i];
		if (off + 4 > size)
			continue;
		__u32 loc = 0;
		bpf_probe_read_kernel(&loc, 4, b->raw + (off & RAW_MASK));
		__u32 data_end = (loc & 0xffff) + (loc >> 16);
		if (data_end > end)
			end = data_end;
	}
	if (end > MAX_TRACE_RAW)
		end = MAX_TRACE_RAW;
	if (end > size) {
		__u32 more = end - size;
		if (bpf_probe_read_kernel(b->raw + (size & RAW_MASK), more & RAW_MASK,
					  (__u8 *)ctx + size))
			end = size;
	}
	b->e.raw_bytes = end;
	if (size >= COMMON_SIZE)
		*(__u64 *)b->raw = common_header(c, b);
	return trace_finish(ctx, c, true);
}

SEC("tracepoint")
int on_tracepoint(void *ctx)
{
	trace_tracepoint(ctx);
	/* 1: the kernel goes on to hand the event to perf's own users of the tracepoint (a
	 * perf record running beside us); 0 would hide it from them. */
	return 1;
}

/* A probe's payload: the common header, the probed address, then its arguments. */
static __always_inline void probe_payload(struct trace_buf *b, struct trace_config *c, __u64 ip,
					  const __u64 *args)
{
	/* raw follows the 8-byte aligned event: its words are aligned too. */
	__u64 *words = (__u64 *)b->raw;
	words[0] = common_header(c, b);
	words[1] = ip;
	__u32 n = c->n_args;
	/* Written one by one: as a loop, clang makes it a memcpy BPF cannot call. */
	words[2] = args[0];
	words[3] = args[1];
	words[4] = args[2];
	words[5] = args[3];
	words[6] = args[4];
	words[7] = args[5];
	b->e.raw_bytes = COMMON_SIZE + 8 + 8 * (n > 6 ? 6 : n);
}

/* An entry probe: its payload, then sent (or kept as a pair's entry). */
static __always_inline int probe_entry(struct pt_regs *ctx, struct trace_config *c,
				       struct trace_buf *b, const __u64 *args, bool kernel)
{
	probe_payload(b, c, PT_REGS_IP_CORE(ctx), args);
	return trace_finish(ctx, c, kernel);
}

/* The first six integer arguments (System V x86-64: rdi, rsi, rdx, rcx, r8, r9). */
static __always_inline void regs_args(struct pt_regs *regs, __u64 *args)
{
	args[0] = PT_REGS_PARM1_CORE(regs);
	args[1] = PT_REGS_PARM2_CORE(regs);
	args[2] = PT_REGS_PARM3_CORE(regs);
	args[3] = PT_REGS_PARM4_CORE(regs);
	args[4] = PT_REGS_PARM5_CORE(regs);
	args[5] = PT_REGS_PARM6_CORE(regs);
}

static __always_inline int on_probe(struct pt_regs *ctx, bool kernel)
{
	struct trace_config *c;
	struct trace_buf *b = trace_begin(bpf_get_attach_cookie(ctx), &c);
	if (!b)
		return 0;
	__u64 args[6];
	regs_args(ctx, args);
	return probe_entry(ctx, c, b, args, kernel);
}

/* A return probe: its entry's payload, then the return address and the return value. */
static __always_inline int on_return(struct pt_regs *ctx)
{
	struct trace_config *c;
	struct trace_buf *b = trace_begin(bpf_get_attach_cookie(ctx), &c);
	if (!b || !c->entry)
		return 0;
	b->e.time_ns = bpf_ktime_get_ns();
	return trace_exit(c->entry, c->filter, 1, PT_REGS_IP_CORE(ctx), PT_REGS_RC_CORE(ctx));
}

SEC("uprobe")
int on_uprobe(struct pt_regs *ctx)
{
	return on_probe(ctx, false);
}

SEC("uretprobe")
int on_uretprobe(struct pt_regs *ctx)
{
	return on_return(ctx);
}

SEC("kprobe")
int on_kprobe(struct pt_regs *ctx)
{
	return on_probe(ctx, true);
}

SEC("kretprobe")
int on_kretprobe(struct pt_regs *ctx)
{
	return on_return(ctx);
}

/* A USDT probe: its arguments as its note's specs say (libbpf reads them). */
SEC("usdt")
int on_usdt(struct pt_regs *ctx)
{
	struct trace_config *c;
	struct trace_buf *b = trace_begin(bpf_usdt_cookie(ctx), &c);
	if (!b)
		return 0;
	__u64 args[6] = {};
	for (int i = 0; i < 6; i++) {
		long v = 0;
		if (i >= c->n_args || bpf_usdt_arg(ctx, i, &v))
			break;
		args[i] = v;
	}
	return probe_entry(ctx, c, b, args, false);
}

/* ---- syscalls: tracepoints, built here from the raw syscall tracepoints ----
 * A syscalls:sys_enter_NAME tracepoint attached through perf costs every call of NAME the
 * perf machinery (a record built in a perf buffer, copied for BPF): about twice what tp_btf
 * sys_enter costs, which sees every syscall and looks the number up. The record is the one
 * the kernel's syscall tracepoints lay out: the common header, __syscall_nr (int, then 4
 * bytes of padding), then each argument as a u64 (sys_enter) or the return value (sys_exit).
 * Compat (32-bit) syscalls are left out, as the kernel's syscall tracepoints leave them. */

/* Syscall number (+ SYSCALL_SLOTS for exits) -> the event's index + 1. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * SYSCALL_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} syscall_events SEC(".maps");

/* arch/x86/include/asm/thread_info.h: the task is in a 32-bit syscall. */
#define TS_COMPAT 0x0002

/* The event for syscall `key` (already offset for exits), and its buffer, if it is traced and
 * the thread followed. */
static __always_inline struct trace_buf *syscall_begin(__u32 key, struct trace_config **c)
{
	__u32 *event = bpf_map_lookup_elem(&syscall_events, &key);
	if (!event || !*event)
		return NULL;
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->thread_info.status & TS_COMPAT)
		return NULL;
	return trace_begin(*event - 1, c);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long id)
{
	if ((__u64)id >= SYSCALL_SLOTS)
		return 0;
	struct trace_config *c;
	struct trace_buf *b = syscall_begin(id, &c);
	if (!b)
		return 0;
	__u64 *w = (__u64 *)b->raw;
	w[0] = common_header(c, b);
	w[1] = (__u32)id;
	/* The syscall ABI's argument registers. */
	w[2] = regs->di;
	w[3] = regs->si;
	w[4] = regs->dx;
	w[5] = regs->r10;
	w[6] = regs->r8;
	w[7] = regs->r9;
	b->e.raw_bytes = c->fixed_size < 64 ? c->fixed_size : 64;
	/* No kernel stack: a syscall's is its entry path, the same every time (perf has none). */
	return trace_finish(ctx, c, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	__u64 nr = regs->orig_ax;
	if (nr >= SYSCALL_SLOTS)
		return 0;
	struct trace_config *c;
	struct trace_buf *b = syscall_begin(nr + SYSCALL_SLOTS, &c);
	if (!b)
		return 0;
	__u64 *w = (__u64 *)b->raw;
	w[0] = common_header(c, b);
	w[1] = (__u32)nr;
	w[2] = ret;
	b->e.raw_bytes = c->fixed_size < 24 ? c->fixed_size : 24;
	return trace_finish(ctx, c, false);
}
