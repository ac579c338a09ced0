//! Python frames in a sample's callchain: where record writes them and how they take the
//! place of the interpreter's eval frames, for record (stacks unwound in the kernel) and
//! analyze (stack copies it unwinds) alike.
//!
//! A Python frame is an address in a synthetic anonymous mapping of its process
//! ([`SYNTHETIC_BASE`], [`SYNTHETIC_LEN`]), one [`SLOT`]-byte slot per (code object, line),
//! which the process's perf map (`/tmp/perf-PID.map`) names `qualname (file.py:line)`: perf
//! and analyze read it as they read a JIT's. Within its slot, the address says whether the
//! frame is the first its eval call ran (an *entry* frame, [`ENTRY_OFFSET`]) or not
//! ([`FRAME_OFFSET`]): each `_PyEval_EvalFrameDefault` frame of the native stack ran the
//! Python frames from the innermost one not yet placed out to the next entry frame.
//!
//! A sample whose user stack the kernel unwound has its eval frames already replaced (record
//! did it, [`place`]). A sample whose stack was copied (DWARF mode, before its process's
//! unwind tables were in) carries its Python frames, innermost first, as the user part of its
//! callchain: perf shows them above the frames it unwinds from the copy, and analyze puts them
//! in place of the eval frames it unwinds ([`place`] again).

/// Where the synthetic mappings of Python frames lie in each process: far below where
/// Linux places mmaps (just under 0x7fff_ffff_ffff) and far above any binary's or heap's
/// usual place. A recording's mapping of a process is one of [`SYNTHETIC_REGIONS`] regions
/// from here ([`synthetic_base`]): two recorders following the same process name their
/// slots in the same perf map, each in a region of its own.
pub const SYNTHETIC_BASE: u64 = 0x2000_0000_0000;
/// A mapping's length: room for 16 M (code, line) slots.
pub const SYNTHETIC_LEN: u64 = 1 << 28;
/// Regions a mapping may take (64 GiB of addresses in all).
pub const SYNTHETIC_REGIONS: u64 = 256;

/// Where region `k` (modulo [`SYNTHETIC_REGIONS`]) starts.
pub fn synthetic_base(k: u64) -> u64 {
    SYNTHETIC_BASE + (k % SYNTHETIC_REGIONS) * SYNTHETIC_LEN
}

/// The region `addr` lies in, if it lies in one.
pub fn synthetic_region(addr: u64) -> Option<u64> {
    is_python_frame(addr).then(|| (addr - SYNTHETIC_BASE) / SYNTHETIC_LEN)
}
/// Bytes per (code object, line) slot.
pub const SLOT: u64 = 16;
/// A frame's address in its slot. As a return address or an instruction pointer (the
/// address less one) it stays in it.
pub const FRAME_OFFSET: u64 = 8;
/// An entry frame's address in its slot (the first frame its eval call ran).
pub const ENTRY_OFFSET: u64 = 12;

/// The address of a frame in the slot starting at `slot`.
pub fn frame_address(slot: u64, entry: bool) -> u64 {
    slot + if entry { ENTRY_OFFSET } else { FRAME_OFFSET }
}

/// Whether `addr` lies in a synthetic mapping of Python frames.
pub fn is_python_frame(addr: u64) -> bool {
    (SYNTHETIC_BASE..SYNTHETIC_BASE + SYNTHETIC_REGIONS * SYNTHETIC_LEN).contains(&addr)
}

/// Whether the Python frame at `addr` (as written, see [`frame_address`]) is an entry frame.
pub fn is_entry(addr: u64) -> bool {
    addr % SLOT == ENTRY_OFFSET
}

/// Puts the Python frames `python` (innermost first; `entry` tells each eval call's first)
/// in place of the eval frames of the native stack `native` (innermost first; `in_eval` says
/// whether frame `i` is in `_PyEval_EvalFrameDefault`), into `out`: each eval frame becomes
/// the Python frames it ran, from the innermost not yet placed to the next entry frame.
/// Frames whose eval call the native stack does not reach (its unwinding ended before it)
/// go at its outer end, in order. Returns the number of Python frames placed.
///
/// The frame just outside an eval frame whose Python frames were placed is left out when
/// `trampoline` says it is one: CPython's perf support (`-X perf`, 3.12 on) enters each eval
/// call through a trampoline of its own in anonymous memory, which its perf map names
/// `py::qualname:file`, the function the placed frames name already.
pub fn place<T: Copy>(
    native: &[T],
    mut in_eval: impl FnMut(usize, &T) -> bool,
    python: &[T],
    mut entry: impl FnMut(&T) -> bool,
    mut trampoline: impl FnMut(&T) -> bool,
    out: &mut Vec<T>,
) -> usize {
    out.clear();
    // The Python frames not placed yet.
    let mut rest = python;
    let mut placed_before = false;
    for (i, f) in native.iter().enumerate() {
        if std::mem::take(&mut placed_before) && trampoline(f) {
            continue;
        }
        if !rest.is_empty() && in_eval(i, f) {
            // The frames this eval call ran: up to its entry frame.
            let end = rest
                .iter()
                .position(&mut entry)
                .map_or(rest.len(), |e| e + 1);
            out.extend_from_slice(&rest[..end]);
            rest = &rest[end..];
            placed_before = true;
            continue;
        }
        out.push(*f);
    }
    out.extend_from_slice(rest);
    python.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Natives are small numbers (eval frames 100..), Python frames 1000.. (entries odd).
    fn placed(native: &[u64], python: &[u64]) -> Vec<u64> {
        let mut out = vec![7];
        let n = place(
            native,
            |_, &f| (100..200).contains(&f),
            python,
            |&f| f % 2 == 1,
            |&f| (500..600).contains(&f),
            &mut out,
        );
        assert_eq!(n, python.len());
        out
    }

    #[test]
    fn each_eval_frame_becomes_the_python_frames_its_call_ran() {
        // leaf, eval (ran 1000, 1002, entry 1001), C, eval (ran entry 1003), main.
        assert_eq!(
            placed(&[1, 100, 2, 101, 3], &[1000, 1002, 1001, 1003]),
            [1, 1000, 1002, 1001, 2, 1003, 3]
        );
        // No entry marked: one eval call ran them all.
        assert_eq!(placed(&[100, 3], &[1000, 1002]), [1000, 1002, 3]);
        // An eval frame with nothing left to place stays.
        assert_eq!(placed(&[100, 101, 3], &[1001]), [1001, 101, 3]);
    }

    #[test]
    fn trampolines_of_placed_eval_calls_are_left_out() {
        // eval (its trampoline 500 outside), C, eval (trampoline 501), main.
        assert_eq!(
            placed(&[100, 500, 2, 101, 501, 3], &[1001, 1003]),
            [1001, 2, 1003, 3]
        );
        // Only right outside an eval frame whose Python frames were placed.
        assert_eq!(placed(&[500, 100, 2, 501], &[1001]), [500, 1001, 2, 501]);
        assert_eq!(placed(&[100, 101, 501], &[1001]), [1001, 101, 501]);
    }

    #[test]
    fn frames_the_native_stack_does_not_reach_go_at_its_outer_end() {
        assert_eq!(
            placed(&[1, 100], &[1001, 1003, 1000]),
            [1, 1001, 1003, 1000]
        );
        // A copied stack: no native frames written, the Python frames alone.
        assert_eq!(placed(&[], &[1000, 1001]), [1000, 1001]);
        assert_eq!(placed(&[1, 2], &[]), [1, 2]);
    }

    #[test]
    fn addresses_say_which_frames_are_entries() {
        let slot = SYNTHETIC_BASE + 5 * SLOT;
        let (plain, entry) = (frame_address(slot, false), frame_address(slot, true));
        assert!(!is_entry(plain) && is_entry(entry));
        // Read back as call sites (less one), both stay in their slot.
        for a in [plain, entry, plain - 1, entry - 1] {
            assert_eq!(a / SLOT * SLOT, slot);
            assert!(is_python_frame(a));
        }
        assert!(!is_python_frame(SYNTHETIC_BASE - 1));
        assert!(is_python_frame(synthetic_base(7) + 5 * SLOT + FRAME_OFFSET));
        assert_eq!(synthetic_region(synthetic_base(7) + 5 * SLOT), Some(7));
        assert!(!is_python_frame(
            SYNTHETIC_BASE + SYNTHETIC_REGIONS * SYNTHETIC_LEN
        ));
    }
}
