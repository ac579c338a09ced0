//! CPython 3.8 to 3.10: frames are frame objects (`PyFrameObject`: `tstate->frame`,
//! `f_back`, `f_code`, `f_lasti`), one per `_PyEval_EvalFrameDefault` call; threads are
//! found by `thread_id` (their pthread_t: no `native_thread_id` before 3.11); code objects
//! have no `co_qualname` (the name is `co_name`) and give lines by `co_lnotab` (3.8, 3.9) or
//! 3.10's `co_linetable`. Offsets from pyenv's 3.8.18, 3.9.18 and 3.10.13 headers, as
//! `fixtures/python/offsets.c` prints them; `offsets_match_the_headers` compares.

use super::offsets::{Lines, Offsets};

/// 3.8 and 3.9 (the same layout where the reader looks).
pub const PY_3_8: Offsets = Offsets {
    runtime_interp_head: 32,
    interp_threads_head: 8,
    tstate_next: 8,
    // thread_id (pthread_t).
    tstate_native_thread_id: 176,
    // frame (PyFrameObject *).
    tstate_cframe: 24,
    cframe_current_frame: 0,
    frame_code: 32,
    // f_back.
    frame_previous: 24,
    // f_lasti.
    frame_prev_instr: 104,
    frame_is_entry: 0,
    frame_owner: 0,
    entry_by_owner: false,
    no_cframe: true,
    frame_objects: true,
    lines: Lines::Lnotab,
    code_filename: 104,
    // co_name.
    code_qualname: 112,
    code_firstlineno: 40,
    // co_lnotab.
    code_linetable: 120,
    // sizeof(PyCodeObject): what is read of one.
    code_code_adaptive: 176,
    var_size: 16,
    bytes_data: 32,
    unicode_length: 16,
    unicode_state: 32,
    unicode_ascii_data: 48,
    unicode_compact_data: 72,
};

/// 3.10: f_lasti moved, and counts code units; co_linetable.
pub const PY_3_10: Offsets = Offsets {
    frame_prev_instr: 96,
    lines: Lines::Linetable310,
    ..PY_3_8
};

/// The line of the instruction at `lasti` (as the frame holds it) by a table of (bytes,
/// line delta) pairs: 3.8-3.9's `co_lnotab` (a delta applies from its address on) or
/// 3.10's `co_linetable` (a pair covers its bytes with its line; -128: no line).
pub fn line_at(lines: Lines, table: &[u8], first_line: u32, lasti: u32) -> Option<u32> {
    let mut line = first_line as i64;
    match lines {
        Lines::Locations => None,
        Lines::Lnotab => {
            let mut addr = 0u64;
            for pair in table.chunks_exact(2) {
                addr += pair[0] as u64;
                if addr > lasti as u64 {
                    break;
                }
                line += pair[1] as i8 as i64;
            }
            u32::try_from(line).ok()
        }
        Lines::Linetable310 => {
            let target = lasti as u64 * 2;
            let mut start = 0u64;
            for pair in table.chunks_exact(2) {
                let end = start + pair[0] as u64;
                let delta = pair[1] as i8;
                if delta != -128 {
                    line += delta as i64;
                }
                if (start..end).contains(&target) {
                    return u32::try_from(line).ok();
                }
                start = end;
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_from_lnotab_and_the_3_10_linetable() {
        // lnotab: line 10 from 0, +1 from byte 6, +3 from byte 10, -2 from byte 10 (a
        // negative delta), 300 bytes on in two steps.
        let lnotab = [6, 1, 4, 3, 0, 0xfe];
        assert_eq!(line_at(Lines::Lnotab, &lnotab, 10, 0), Some(10));
        assert_eq!(line_at(Lines::Lnotab, &lnotab, 10, 4), Some(10));
        assert_eq!(line_at(Lines::Lnotab, &lnotab, 10, 6), Some(11));
        assert_eq!(line_at(Lines::Lnotab, &lnotab, 10, 12), Some(12));
        // 3.10: 4 bytes on line 11, 6 with no line (-128), 2 on line 14; lasti in units.
        let linetable = [4, 1, 6, 0x80, 2, 3];
        assert_eq!(line_at(Lines::Linetable310, &linetable, 10, 1), Some(11));
        assert_eq!(line_at(Lines::Linetable310, &linetable, 10, 2), Some(11));
        assert_eq!(line_at(Lines::Linetable310, &linetable, 10, 5), Some(14));
        assert_eq!(line_at(Lines::Linetable310, &linetable, 10, 6), None);
    }

    /// Against the interpreters' own mapping (`dis.findlinestarts`, each instruction's line
    /// the last start at or before it), for a function with loops, a branch, a multi-line
    /// call and a jump back: pyenv's 3.8 (co_lnotab) and 3.10 (co_linetable).
    #[test]
    fn lines_as_the_interpreters_say() {
        let script = r#"
import dis, sys
def f(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            total += i
        else:
            total -= (
                i
                * 2)
    while total > 10:
        total //= 2
    return total
c = f.__code__
table = c.co_linetable if sys.version_info >= (3, 10) else c.co_lnotab
starts = dict(dis.findlinestarts(c))
line = None
lines = []
for ins in dis.get_instructions(c):
    line = starts.get(ins.offset, line)
    lines.append("%d:%d" % (ins.offset, line))
print(c.co_firstlineno, table.hex(), " ".join(lines))
"#;
        for (python, lines) in [
            ("/root/.pyenv/versions/3.8.18/bin/python3.8", Lines::Lnotab),
            (
                "/root/.pyenv/versions/3.10.13/bin/python3.10",
                Lines::Linetable310,
            ),
        ] {
            let out = std::process::Command::new(python)
                .args(["-c", script])
                .output()
                .unwrap_or_else(|e| panic!("{python}: {e}"));
            let text = String::from_utf8(out.stdout).unwrap();
            let mut words = text.split_whitespace();
            let first: u32 = words.next().unwrap().parse().unwrap();
            let hex = words.next().unwrap();
            let table: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            let mut checked = 0;
            for pair in words {
                let (offset, line) = pair.split_once(':').unwrap();
                let (offset, line): (u32, u32) = (offset.parse().unwrap(), line.parse().unwrap());
                // The frame's f_lasti: bytes before 3.10, code units in 3.10.
                let lasti = if lines == Lines::Linetable310 {
                    offset / 2
                } else {
                    offset
                };
                assert_eq!(
                    line_at(lines, &table, first, lasti),
                    Some(line),
                    "{python}: instruction at {offset}"
                );
                checked += 1;
            }
            assert!(checked > 20, "{python}: {text}");
        }
    }
}
