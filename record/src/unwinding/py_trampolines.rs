//! CPython's perf trampolines (`python3.12 -X perf`, `PYTHONPERFSUPPORT=1`): each eval call
//! is entered through a copy of `_Py_trampoline_func_start` (Python/asm_trampoline.S), packed
//! end to end in 64 KiB anonymous arenas made executable by mprotect. That memory has no CFI,
//! and the trampoline keeps no frame pointer, so the frame-pointer rule JIT code gets ends
//! the stack there. Its x86-64 code:
//!
//! ```text
//! [endbr64]          (CET builds)
//! sub  $8, %rsp      CFA = rsp + 8 before it
//! call *%rcx         CFA = rsp + 16 from here ...
//! add  $8, %rsp      ... (the return address points here) ...
//! ret                CFA = rsp + 8 again
//! ```
//!
//! rbp is never touched. An arena is told by its first bytes (one trampoline), read from the
//! process's memory when its mapping is seen; its table is one row, CFA = rsp + 16 (return
//! address at CFA - 8, rbp unchanged), exact at every return address into a trampoline,
//! which is all the caller frames need. A sample whose own instruction is a trampoline's
//! first or last (2 of 5 instructions per Python call) would take a CFA 8 bytes off: its
//! stack may end there or take a wrong frame.

use bpf::{Cfa, UnwindRow};

use super::tables::FileTable;

/// One trampoline as CPython 3.12 and 3.13 copy it, without the endbr64 of CET builds.
const TRAMPOLINE: [u8; 11] = [
    0x48, 0x83, 0xec, 0x08, // sub $8, %rsp
    0xff, 0xd1, // call *%rcx
    0x48, 0x83, 0xc4, 0x08, // add $8, %rsp
    0xc3, // ret
];
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// Pages the table covers from a mapping's start (arenas next to each other can be one
/// mapping): 16 MiB, 256 arenas.
const PAGES: u32 = 4096;

/// Whether `head` (the first bytes of an anonymous executable mapping) is a trampoline arena.
pub fn is_arena(head: &[u8]) -> bool {
    let code = head.strip_prefix(&ENDBR64[..]).unwrap_or(head);
    code.starts_with(&TRAMPOLINE)
}

/// The first bytes of the mapping at `start` in process `pid`, enough for [`is_arena`].
pub fn head(pid: u32, start: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0; ENDBR64.len() + TRAMPOLINE.len()];
    mem.read_exact_at(&mut buf, start).ok()?;
    Some(buf)
}

/// The table of an arena: SVMAs are offsets from the mapping's start (bias = its start).
pub fn table() -> FileTable {
    FileTable {
        rows: vec![UnwindRow {
            pc: 0,
            cfa: Cfa::Rsp(16),
            rbp: None,
        }],
        pages: vec![0; PAGES as usize + 1],
        base_page: 0,
        segments: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arenas_are_told_by_their_first_trampoline() {
        let mut cet = ENDBR64.to_vec();
        cet.extend_from_slice(&TRAMPOLINE);
        assert!(is_arena(&cet));
        let plain: Vec<u8> = TRAMPOLINE.iter().chain(&TRAMPOLINE[..4]).copied().collect();
        assert!(is_arena(&plain));
        // V8 or HotSpot code, or a short read.
        assert!(!is_arena(&[
            0x55, 0x48, 0x89, 0xe5, 0xff, 0xd1, 0, 0, 0, 0, 0, 0
        ]));
        assert!(!is_arena(&TRAMPOLINE[..6]));
        let t = table();
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.pages.len(), PAGES as usize + 1);
    }

    /// This process's own memory, read as record reads a followed process's.
    #[test]
    fn the_head_of_a_mapping_is_read_from_the_process() {
        let bytes: Vec<u8> = ENDBR64.iter().chain(&TRAMPOLINE).copied().collect();
        let head = head(std::process::id(), bytes.as_ptr() as u64).unwrap();
        assert!(is_arena(&head));
    }
}
