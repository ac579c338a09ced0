/* The one definition of what the BPF programs and the Rust loader share: limits, event kinds
 * and event layouts. The Rust side uses the skeleton's generated `types::*`, never a copy. */
#ifndef BPFPERF_H
#define BPFPERF_H

/* Frames kept per stack (kernel and user each). perf's default max is 127. */
#define MAX_STACK_DEPTH 127

enum event_kind {
	EVENT_ON_CPU = 1, /* a cpu-clock sample */
	EVENT_EXIT = 2,   /* a tracked process exited (its whole thread group) */
};

/* One on-CPU sample. Stacks hold instruction pointers, innermost first; lengths in bytes as
 * bpf_get_stack returns them (negative: the error it returned). */
struct sample_event {
	__u32 kind;
	__u32 cpu;
	__u32 pid; /* tgid */
	__u32 tid;
	__u64 time_ns; /* CLOCK_MONOTONIC, as bpf_ktime_get_ns */
	__u64 period;  /* cpu-clock period of this sample, ns */
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u64 kstack[MAX_STACK_DEPTH];
	__u64 ustack[MAX_STACK_DEPTH];
};

/* A tracked thread group ended. */
struct exit_event {
	__u32 kind;
	__u32 pid;
	__u64 time_ns;
};

#endif
