//! CPython's perf trampolines (`python3.12 -X perf`) in copied stacks: anonymous executable
//! memory without CFI, where framehop's frame-pointer rule ends the stack (a trampoline keeps
//! no frame pointer). Each is `[endbr64] sub $8,%rsp; call *%rcx; add $8,%rsp; ret`
//! (Python/asm_trampoline.S), packed end to end in arenas that the process's perf map names
//! (`py::qualname:file`, the first at the arena's start). An arena's module gets CFI made
//! here: one CIE and one FDE over the whole mapping, CFA = rsp + 16, the return address at
//! CFA - 8, rbp unchanged. Exact at every return address into a trampoline (what the frames
//! above need); at a trampoline's `sub` or `ret` the CFA is 8 bytes off (as record's kernel
//! table, `record/src/unwinding/py_trampolines.rs`).

use std::ops::{Deref, Range};

use framehop::{ExplicitModuleSectionInfo, Module};

/// Whether a mapping starting at `start` is a trampoline arena, by the process's perf map:
/// a `py::` entry begins there.
pub fn is_arena(jit: &crate::files::JitMap, start: u64) -> bool {
    jit.lookup(start)
        .is_some_and(|(name, at)| at == start && name.starts_with("py::"))
}

/// `.eh_frame` bytes for code at SVMAs `0..len`: CFA = rsp + 16, return address at CFA - 8.
fn eh_frame(len: u64) -> Vec<u8> {
    let mut cie = vec![
        0,
        0,
        0,
        0, // CIE id
        1, // version
        b'z',
        b'R',
        0,    // augmentation
        1,    // code alignment factor
        0x78, // data alignment factor: -8
        16,   // return address register (rip)
        1,    // augmentation data length
        0x04, // FDE addresses: DW_EH_PE_udata8, absolute
        0x0c,
        7,
        16, // DW_CFA_def_cfa rsp, 16
        0x80 | 16,
        1, // DW_CFA_offset rip, 1 * -8
    ];
    cie.resize(20, 0); // DW_CFA_nop to 8-byte alignment (with the length: 24)
    let mut out = Vec::new();
    out.extend_from_slice(&(cie.len() as u32).to_le_bytes());
    out.extend_from_slice(&cie);
    let mut fde = Vec::new();
    // The CIE pointer: from this field back to the CIE.
    fde.extend_from_slice(&((out.len() + 4) as u32).to_le_bytes());
    fde.extend_from_slice(&0u64.to_le_bytes()); // pc_begin
    fde.extend_from_slice(&len.to_le_bytes()); // pc_range
    fde.push(0); // augmentation data length
    fde.resize(28, 0);
    out.extend_from_slice(&(fde.len() as u32).to_le_bytes());
    out.extend_from_slice(&fde);
    out.extend_from_slice(&0u32.to_le_bytes()); // terminator
    out
}

/// The framehop module of an arena mapped at `avma` (its SVMAs: offsets from its start), its
/// CFI held as `hold` makes it.
pub fn module<D: Deref<Target = [u8]>>(
    avma: Range<u64>,
    hold: impl FnOnce(Vec<u8>) -> D,
) -> Module<D> {
    let len = avma.end - avma.start;
    let bytes = eh_frame(len);
    let n = bytes.len() as u64;
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: None,
        text: None,
        got_svma: None,
        eh_frame_svma: Some(len..len + n),
        eh_frame: Some(hold(bytes)),
        eh_frame_hdr_svma: None,
        eh_frame_hdr: None,
        debug_frame: None,
        stubs_svma: None,
        stub_helper_svma: None,
        unwind_info: None,
        text_segment_svma: None,
        text_segment: None,
    };
    let start = avma.start;
    Module::new("[python trampolines]".to_string(), avma, start, info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
    use framehop::{FrameAddress, Unwinder};

    /// A sample in a trampoline's `add` (after its call returned) and a return address into
    /// one: each frame's caller is the word at CFA - 8 = rsp + 8.
    #[test]
    fn frames_in_an_arena_unwind_by_rsp_plus_16() {
        let arena = 0x7f00_0000_0000u64..0x7f00_0001_0000;
        let mut unwinder = UnwinderX86_64::new();
        unwinder.add_module(module(arena.clone(), |b| b));
        let mut cache = CacheX86_64::<_>::new();
        let sp = 0x7ffc_0000_1000u64;
        // sp: scratch, sp + 8: a return address into the arena (a second trampoline's
        // call), sp + 16: scratch, sp + 24: the outer caller's return address.
        let back_in = arena.start + 11 + 6;
        let stack = [0u64, back_in, 0, 0x1234_5678];
        let mut read = |addr: u64| -> Result<u64, ()> {
            let i = addr.checked_sub(sp).ok_or(())? / 8;
            stack.get(i as usize).copied().ok_or(())
        };
        let ip = arena.start + 6;
        let mut it = unwinder.iter_frames(
            ip,
            UnwindRegsX86_64::new(ip, sp, 0x5555),
            &mut cache,
            &mut read,
        );
        let mut frames = Vec::new();
        while let Ok(Some(f)) = it.next() {
            frames.push(match f {
                FrameAddress::InstructionPointer(a) => a,
                FrameAddress::ReturnAddress(a) => a.get(),
            });
        }
        assert_eq!(frames[..3], [ip, back_in, 0x1234_5678]);
    }
}
