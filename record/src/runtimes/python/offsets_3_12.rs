//! CPython 3.12's layout on x86-64: `offsetof` and `sizeof` in the headers of pyenv's 3.12.1
//! (include/python3.12, internal headers included), as `fixtures/python/offsets.c` prints
//! them; `offsets_match_the_headers` compares.
//!
//! What changed from 3.11: `_PyInterpreterFrame` starts with `f_code`, and has no
//! `is_entry`: each `_PyEval_EvalFrameDefault` call links a frame of its own, owned by the C
//! stack, behind the first frame it runs (read as the mark of an eval call's entry); the
//! thread list, `native_thread_id`, `_PyCFrame.current_frame` and the code object's fields
//! moved; `str` objects lost `wstr` (smaller headers).

use super::offsets::Offsets;

pub const PY_3_12: Offsets = Offsets {
    runtime_interp_head: 40,
    interp_threads_head: 72,
    tstate_next: 8,
    tstate_native_thread_id: 144,
    tstate_cframe: 56,
    cframe_current_frame: 0,
    frame_code: 0,
    frame_previous: 8,
    frame_prev_instr: 56,
    frame_is_entry: 0,
    frame_owner: 70,
    entry_by_owner: true,
    no_cframe: false,
    frame_objects: false,
    lines: super::offsets::Lines::Locations,
    code_filename: 112,
    code_qualname: 128,
    code_firstlineno: 68,
    code_linetable: 136,
    code_code_adaptive: 192,
    var_size: 16,
    bytes_data: 32,
    unicode_length: 16,
    unicode_state: 32,
    unicode_ascii_data: 40,
    unicode_compact_data: 56,
};
