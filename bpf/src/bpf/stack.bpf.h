// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* User stacks as perf's DWARF mode records them: the 20 user registers and a copy of the
 * stack from SP up to the outermost frame, page by page. */
#ifndef STACK_BPF_H
#define STACK_BPF_H

#include "common.bpf.h"

/* The bytes of a kernel or user frame array (kstack/ustack of MAX_STACK_DEPTH frames) that
 * hold frames, given what bpf_get_stack returned: what an event that sends only the frames it
 * holds copies (traced events, a send call's stacks). */
#define STACK_ROOM (MAX_STACK_DEPTH * 8)

static __always_inline __u32 stack_len(__s32 bytes)
{
	__u32 n = bytes > 0 ? bytes : 0;
	if (n > STACK_ROOM)
		n = STACK_ROOM;
	/* A bound the verifier sees where the copy is made. */
	barrier_var(n);
	return n & 1023;
}

/* The end of the useful user stack above sp: nothing above the outermost frame is needed.
 * In a thread, glibc's thread descriptor sits at the thread pointer (fs) above the stack; in
 * the main thread, the initial stack pointer (mm->start_stack) is where _start began.
 * Otherwise the cap applies, and the copy stops at the first unreadable page. (bpf_find_vma
 * would give the stack's mapping end, but from the cpu-clock timer it stalled sampling on
 * one CPU here.) */
static __always_inline __u64 stack_copy_len(struct task_struct *task, __u64 sp, __u64 cap)
{
	__u64 fsbase = task->thread.fsbase;
	/* A Go thread runs a goroutine (or its g0) whose stack lies anywhere in the heap, and
	 * its fs points into the runtime's m, not above the stack: the runtime keeps the
	 * current g in TLS at fs:-8 (runtime.tlsg on linux/amd64), and g starts with its
	 * stack's bounds [lo, hi). Taken when they bracket sp, which another program's TLS word
	 * would not. */
	struct {
		__u64 lo;
		__u64 hi;
	} gstack = {};
	__u64 g = 0;
	if (fsbase && !bpf_probe_read_user(&g, sizeof(g), (void *)(fsbase - 8)) && g &&
	    !bpf_probe_read_user(&gstack, sizeof(gstack), (void *)g) && gstack.lo <= sp &&
	    sp < gstack.hi && gstack.hi - gstack.lo <= (1 << 30)) {
		__u64 len = gstack.hi - sp;
		return len > cap ? cap : len;
	}
	__u64 end = sp + cap;
	if (fsbase > sp && fsbase < end)
		end = fsbase;
	/* Read, not loaded: the verifier looks a pointer loaded from a trusted one up in the
	 * kernel's BTF by name, a scan of every type, at each visit (10% of start-up). */
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	if (mm) {
		__u64 start_stack = BPF_CORE_READ(mm, start_stack) + 16;
		if (start_stack > sp && start_stack < end)
			end = start_stack;
	}
	__u64 len = end - sp;
	return len > cap ? cap : len;
}

/* Copies `len` bytes of user stack from sp into `dst` (PAGES pages at most) page by page: an
 * unreadable page ends the copy but keeps what came before. Returns the bytes copied. */
#define DEFINE_COPY_USER_STACK(name, PAGES)                                                    \
	static __always_inline __u32 name(__u8 *dst, __u64 sp, __u64 len)                     \
	{                                                                                      \
		__u32 copied = 0;                                                              \
		_Pragma("unroll") for (int i = 0; i < (PAGES); i++)                            \
		{                                                                              \
			__u32 off = i * 4096;                                                  \
			if (off >= len)                                                        \
				break;                                                         \
			__u64 rem = len - off;                                                 \
			if (rem >= 4096) {                                                     \
				if (bpf_probe_read_user(dst + off, 4096, (void *)(sp + off)))  \
					break;                                                 \
				copied = off + 4096;                                           \
			} else {                                                               \
				__u32 n = rem & 4095;                                          \
				if (n && !bpf_probe_read_user(dst + off, n, (void *)(sp + off))) \
					copied = off + n;                                      \
				break;                                                         \
			}                                                                      \
		}                                                                              \
		return copied;                                                                 \
	}
DEFINE_COPY_USER_STACK(copy_sample_stack, MAX_STACK_COPY / 4096)
DEFINE_COPY_USER_STACK(copy_offcpu_stack, MAX_OFFCPU_COPY / 4096)

/* The 20 user registers perf records, in its order (AX BX CX DX SI DI BP SP IP FLAGS CS SS
 * R8..R15). */
static __always_inline void fill_user_regs(__u64 *r, struct pt_regs *regs)
{
	r[0] = regs->ax;
	r[1] = regs->bx;
	r[2] = regs->cx;
	r[3] = regs->dx;
	r[4] = regs->si;
	r[5] = regs->di;
	r[6] = regs->bp;
	r[7] = regs->sp;
	r[8] = regs->ip;
	r[9] = regs->flags;
	r[10] = regs->cs;
	r[11] = regs->ss;
	r[12] = regs->r8;
	r[13] = regs->r9;
	r[14] = regs->r10;
	r[15] = regs->r11;
	r[16] = regs->r12;
	r[17] = regs->r13;
	r[18] = regs->r14;
	r[19] = regs->r15;
}

/* DWARF mode: `task`'s user registers and a copy of its user stack (off-CPU and dirty
 * events, capped at MAX_OFFCPU_COPY). */
static __always_inline void keep_user_copy(struct task_struct *task, struct offcpu_copy_buf *b)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	fill_user_regs(b->e.user_regs, regs);
	__u64 sp = regs->sp;
	__u64 cap = stack_copy_bytes < MAX_OFFCPU_COPY ? stack_copy_bytes : MAX_OFFCPU_COPY;
	b->e.stack_bytes = copy_offcpu_stack(b->stack, sp, stack_copy_len(task, sp, cap));
}

#endif
