//! Stage 2, unwind: a [`RawSample`] (from read) in, its [`UnwoundStack`] out: the user frames,
//! innermost first, each an AVMA with the mapping it fell in ([`Located`]).
//!
//! Frame-pointer call chains (the sample's CALLCHAIN, walked by the kernel) pass through as
//! they are. Samples that carry REGS_USER + STACK_USER are unwound here offline with DWARF
//! CFI ([`dwarf`], framehop), one unwinder per process built from its mappings. Kernel frames
//! always come from the CALLCHAIN and need no unwinding.
//!
//! [`Unwinder::unwind`] takes `&self` and a per-thread [`UnwindCache`], so the driver runs it
//! over samples in parallel.

pub mod dwarf;
mod py_trampolines;

use std::collections::HashMap;

use format::python;

use crate::files::Loader;
use crate::read::{MapId, RawSample, Recording};
use dwarf::{ElfUnwindCache, ExecMapping, ProcessUnwinder, UnwoundFrame};
pub use dwarf::{StackEnd, UnwindCache};

/// A user frame after unwinding: its AVMA, the mapping it fell in, and whether it is a
/// return address (whose call site is the instruction before). 16 bytes (an `Option` of the
/// mapping would make it 24: a deep recursion's stacks hold hundreds of thousands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Located {
    pub addr: u64,
    /// The mapping, or [`NO_MAP`].
    map: MapId,
    pub is_return: bool,
}

const NO_MAP: MapId = MapId::MAX;

const _: () = assert!(std::mem::size_of::<Located>() == 16);

impl Located {
    pub fn new(addr: u64, map: Option<MapId>, is_return: bool) -> Located {
        Located {
            addr,
            // A recording cannot hold u32::MAX mappings: they are indexed by u32 from 0.
            map: map.unwrap_or(NO_MAP),
            is_return,
        }
    }

    /// The mapping the address fell in, if any.
    pub fn map(&self) -> Option<MapId> {
        (self.map != NO_MAP).then_some(self.map)
    }
}

/// The user part of a sample's stack, innermost first.
#[derive(Debug, Clone, Default)]
pub struct UnwoundStack {
    pub user: Vec<Located>,
    /// How DWARF unwinding ended; `None` for frame-pointer chains.
    pub end: Option<StackEnd>,
}

/// The unwinders of the processes that need one.
pub struct Unwinder<'r> {
    rec: &'r Recording,
    processes: HashMap<i32, ProcessUnwinder>,
    /// Why the recording's stack copies are not unwound, if they are not.
    pub not_unwound: Option<String>,
}

/// The architecture whose stack copies [`dwarf`] unwinds (registers and stack words as
/// x86-64 lays them out).
const UNWOUND_ARCH: &str = "x86_64";

impl<'r> Unwinder<'r> {
    /// Prepares DWARF unwinders for the processes of `samples` that copied user stacks.
    pub fn new<'s>(
        rec: &'r Recording,
        samples: impl IntoIterator<Item = &'s RawSample>,
        loader: &Loader,
    ) -> Self {
        let mut pids: Vec<i32> = samples
            .into_iter()
            .filter(|s| s.stack_copy.is_some())
            .map(|s| s.pid)
            .collect();
        // A recording made elsewhere (aarch64, i686): its registers and stack words would be
        // read as x86-64's, giving made-up frames. Its samples keep their kernel frames.
        if let Some(arch) = rec.arch.as_deref().filter(|a| *a != UNWOUND_ARCH) {
            let not_unwound = (!pids.is_empty()).then(|| {
                format!("stack copies of an {arch} recording are not unwound (only {UNWOUND_ARCH}'s are); their user frames are missing")
            });
            return Unwinder {
                rec,
                processes: HashMap::new(),
                not_unwound,
            };
        }
        pids.sort_unstable();
        pids.dedup();
        let mut elves = ElfUnwindCache::new(loader);
        let processes = pids
            .into_iter()
            .map(|pid| {
                // CPython's perf trampolines, by the process's perf map (its own, -X perf).
                let jit = rec
                    .process_maps
                    .get(&pid)
                    .is_some_and(|v| {
                        v.iter()
                            .any(|p| crate::read::is_anonymous(&rec.mappings[p.id as usize].path))
                    })
                    .then(|| loader.jit_map(pid, None))
                    .flatten();
                let maps: Vec<ExecMapping> = rec
                    .process_maps
                    .get(&pid)
                    .map_or(&[][..], |v| v)
                    .iter()
                    .map(|piece| {
                        // A piece of a mapping another was laid over: its part of the file.
                        let m = &rec.mappings[piece.id as usize];
                        ExecMapping {
                            start: piece.start,
                            end: piece.end,
                            pgoff: m.pgoff + piece.start.saturating_sub(m.start),
                            path: m.path.clone().into(),
                            build_id: m
                                .build_id
                                .clone()
                                .or_else(|| rec.build_ids.get(&m.path).cloned()),
                            py_trampolines: crate::read::is_anonymous(&m.path)
                                && jit
                                    .as_ref()
                                    .is_some_and(|j| py_trampolines::is_arena(j, piece.start)),
                        }
                    })
                    .collect();
                (pid, ProcessUnwinder::new(&maps, &mut elves))
            })
            .collect();
        Unwinder {
            rec,
            processes,
            not_unwound: None,
        }
    }

    /// The user frames of `s`.
    pub fn unwind(&self, cache: &mut UnwindCache, s: &RawSample) -> UnwoundStack {
        let (Some(copy), Some(unwinder)) = (&s.stack_copy, self.processes.get(&s.pid)) else {
            // Frame pointers: the kernel's chain, leaf first; every frame after the first is
            // a return address.
            return UnwoundStack {
                user: s
                    .user
                    .iter()
                    .enumerate()
                    .map(|(i, f)| Located::new(f.addr, f.map, i > 0))
                    .collect(),
                end: None,
            };
        };
        let mut out = Vec::new();
        let end = unwinder.unwind(cache, copy.regs, &copy.bytes, &mut out);
        // A caller found by DWARF unwinding is its call instruction (return address - 1), as
        // perf's DWARF unwinders (libunwind, libdw) report it: named, printed and looked up
        // there. That names a call that ends a function (`_start` calling `_dl_start`) by its
        // caller, where the kernel's frame-pointer chains, which stay return addresses, name the
        // function after it, as perf does for those.
        let mut user: Vec<Located> = out
            .iter()
            .map(|f| {
                let addr = match *f {
                    UnwoundFrame::InstructionPointer(a) => a,
                    UnwoundFrame::ReturnAddress(a) => a - 1,
                };
                Located::new(addr, self.rec.find_map(s.pid, addr), false)
            })
            .collect();
        // A copy's callchain holds its Python frames (record's, format::python): in place of
        // the eval frames that ran them.
        if !s.user.is_empty() && s.user.iter().all(|f| python::is_python_frame(f.addr)) {
            let frames: Vec<Located> = s
                .user
                .iter()
                .map(|f| Located::new(f.addr, f.map, false))
                .collect();
            let native = std::mem::take(&mut user);
            python::place(
                &native,
                |_, f| unwinder.in_python_eval(f.addr),
                &frames,
                |f| python::is_entry(f.addr),
                |f| {
                    f.map().is_some_and(|m| {
                        crate::read::is_anonymous(&self.rec.mappings[m as usize].path)
                    })
                },
                &mut user,
            );
        }
        UnwoundStack {
            user,
            end: Some(end),
        }
    }
}
