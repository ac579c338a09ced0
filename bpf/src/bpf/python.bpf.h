// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Python frames: the interpreter frame chain of a sampled CPython (3.8 on) thread, read from
 * its thread state. record installs, per process, the address of `_PyRuntime` and the struct
 * offsets of the running version (py_procs); the sample then carries each frame's code
 * object and last instruction, and record names them.
 *
 * The thread state is found by walking the main interpreter's list of thread states for the
 * one whose native_thread_id is the sampled tid (cached per tid, checked at each use): the
 * list holds every thread that ever ran Python, whether it holds the GIL or not (a thread in
 * zlib or hashlib with the GIL released keeps its frames there), where the interpreter's
 * own "current thread state" is only the GIL holder's, and TLS would need glibc's layout. */
#ifndef PYTHON_BPF_H
#define PYTHON_BPF_H

#include "common.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PY_PROCS);
	__type(key, __u32);
	__type(value, struct py_proc);
} py_procs SEC(".maps") __weak;

/* tid -> its PyThreadState's address, as last found. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PY_THREADS);
	__type(key, __u32);
	__type(value, __u64);
} py_threads SEC(".maps") __weak;

static __always_inline __u64 py_read_ptr(__u64 addr)
{
	__u64 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* What a thread state's tstate_native_thread_id field holds for the current thread: its tid
 * as the process sees it (in its own PID namespace: a container's python has other thread ids
 * than the host's), or (before 3.11) its pthread_t, the fs base. */
static __always_inline __u64 py_thread_key(struct py_proc *p, __u32 tid)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	if (p->off.flags & PY_THREAD_BY_PTHREAD)
		return BPF_CORE_READ(task, thread.fsbase);
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	__u32 nr = BPF_CORE_READ(pid, numbers[level & 31].nr);
	return nr ? nr : tid;
}

static __always_inline bool py_is_thread(struct py_proc *p, __u64 tstate, __u64 key)
{
	__u64 native = 0;
	if (bpf_probe_read_user(&native, sizeof(native),
				(void *)(tstate + p->off.tstate_native_thread_id)))
		return false;
	return native == key;
}

struct py_thread_search {
	struct py_proc *p;
	__u64 key;
	__u64 t;
	__u64 found;
};

static long py_thread_step(__u32 i, struct py_thread_search *s)
{
	if (!s->t)
		return 1;
	if (py_is_thread(s->p, s->t, s->key)) {
		s->found = s->t;
		return 1;
	}
	s->t = py_read_ptr(s->t + s->p->off.tstate_next);
	return 0;
}

/* The sampled thread's PyThreadState, 0 if it has none (yet). The interpreter's threads are
 * searched one at a time (bpf_loop: the verifier checks one step, not PY_MAX_THREADS). */
static __always_inline __u64 py_thread_state(struct py_proc *p, __u32 tid)
{
	__u64 key = py_thread_key(p, tid);
	__u64 *cached = bpf_map_lookup_elem(&py_threads, &tid);
	if (cached && *cached && py_is_thread(p, *cached, key))
		return *cached;
	__u64 interp = py_read_ptr(p->runtime + p->off.runtime_interp_head);
	if (!interp)
		return 0;
	struct py_thread_search s = {
		.p = p,
		.key = key,
		.t = py_read_ptr(interp + p->off.interp_threads_head),
	};
	bpf_loop(PY_MAX_THREADS, py_thread_step, &s, 0);
	if (s.found)
		bpf_map_update_elem(&py_threads, &tid, &s.found, BPF_ANY);
	return s.found;
}

/* A u64 (8-aligned in the span, as pointer fields and 3.8-3.10's f_lasti are) and a byte at
 * `at` bytes into a frame's span as read. */
static __always_inline __u64 py_span_u64(const __u64 *span, __u16 at)
{
	return span[(at / 8) & (PY_FRAME_SPAN / 8 - 1)];
}

static __always_inline __u8 py_span_u8(const __u64 *span, __u16 at)
{
	return ((const __u8 *)span)[at & (PY_FRAME_SPAN - 1)];
}

/* The walk of a thread's frames, one bpf_loop step per frame: the frame to read next, where
 * its fields lie in its span (the bytes read at once), what was read. */
struct py_walk {
	struct py_proc *p;
	__u64 *code_out;
	__u32 *lasti_out;
	__u64 frame;
	__u32 n;
	__u32 len;
	__u16 start, at_code, at_prev, at_instr, at_owner, at_entry;
	__u64 span[PY_FRAME_SPAN / 8];
};

static long py_walk_step(__u32 i, struct py_walk *w)
{
	__u32 len = w->len;
	if (!w->frame || len == 0 || len > PY_FRAME_SPAN)
		return 1;
	if (bpf_probe_read_user(w->span, len, (void *)(w->frame + w->start)))
		return 1;
	struct py_proc *p = w->p;
	/* (3.14's f_executable is a tagged reference: its low bits are no address.) */
	__u64 code = py_span_u64(w->span, w->at_code) & ~7ULL;
	__u64 instr = py_span_u64(w->span, w->at_instr);
	__u8 entry = 0, owner = 0;
	__u32 lasti = (__u32)(instr - code - p->off.code_code_adaptive);
	if (p->off.flags & PY_ENTRY_BY_OWNER) {
		owner = py_span_u8(w->span, w->at_owner);
	} else if (p->off.flags & PY_FRAME_OBJECTS) {
		entry = 1;
		lasti = (__u32)instr;
	} else {
		entry = py_span_u8(w->span, w->at_entry);
	}
	if (!code)
		return 1;
	w->code_out[i & (MAX_PY_FRAMES - 1)] =
		code | (entry ? 1 : 0) | (owner == PY_FRAME_OWNED_BY_CSTACK ? 2 : 0);
	w->lasti_out[i & (MAX_PY_FRAMES - 1)] = lasti;
	w->n = i + 1;
	w->frame = py_span_u64(w->span, w->at_prev);
	return 0;
}

/* Reads into code_out[] and lasti_out[] (MAX_PY_FRAMES each) the Python frames of the current
 * thread `tid` of process `p`; returns how many (0: a thread that runs no Python). Each
 * frame's fields are read in one bpf_probe_read_user of the bytes that hold them all (its
 * span): one read per frame, where a read per field cost four (3.11) or three (3.8-3.10).
 * One frame a bpf_loop step: the verifier checks one, not MAX_PY_FRAMES (it took half of
 * record's start-up). */
static __always_inline __u32 py_read_frames(struct py_proc *p, __u64 *code_out, __u32 *lasti_out,
					    __u32 tid)
{
	__u64 tstate = py_thread_state(p, tid);
	if (!tstate)
		return 0;
	__u64 frame = py_read_ptr(tstate + p->off.tstate_cframe);
	if (!(p->off.flags & PY_NO_CFRAME) && frame)
		frame = py_read_ptr(frame + p->off.cframe_current_frame);
	__u16 start = p->off.frame_span_start;
	/* Field by field: the span is left as it is (each step reads it whole before it looks
	 * at it), not zeroed on each path here for the verifier to check. */
	struct py_walk w;
	w.p = p;
	w.code_out = code_out;
	w.lasti_out = lasti_out;
	w.frame = frame;
	w.n = 0;
	w.len = p->off.frame_span_len;
	w.start = start;
	/* Each field's place in the span. */
	w.at_code = p->off.frame_code - start;
	w.at_prev = p->off.frame_previous - start;
	w.at_instr = p->off.frame_prev_instr - start;
	w.at_owner = p->off.frame_owner - start;
	w.at_entry = p->off.frame_is_entry - start;
	bpf_loop(MAX_PY_FRAMES, py_walk_step, &w, 0);
	return w.n;
}

/* Fills *frames, code[] and lasti[] (MAX_PY_FRAMES each) with the current thread's Python
 * frames (none: not a Python process, or a thread that runs no Python). */
static __always_inline void read_python_frames(__u32 *frames, __u64 *code_out, __u32 *lasti_out,
					       __u32 tgid, __u32 tid)
{
	struct py_proc *p = bpf_map_lookup_elem(&py_procs, &tgid);
	*frames = p ? py_read_frames(p, code_out, lasti_out, tid) : 0;
}

#endif
