//! Stage 4, symbolize: looked-up addresses to function names (with inline frames) and source
//! lines.
//!
//! Takes the unique [`Lookup`]s of each file (SVMAs, from resolve), kernel addresses and JIT
//! addresses; gives an [`AddrInfo`] for each: its frames, outermost first. The driver calls it
//! once per file with all of that file's addresses, files in parallel. Function names come
//! from the symbol table (`.symtab`, else `.dynsym`, of the separate debug file first, then of
//! the file itself), picked among aliases as perf picks them ([`symtab`]); inline frames and
//! `file:line` come from DWARF ([`dwarf`], addr2line), loaded only as far as the lookups
//! need. Kernel addresses are looked up in kallsyms, JIT code in perf maps. The files come
//! from [`crate::files`]; nothing here opens one.
//!
//! [`Symbolized`] is what this stage's driver step hands every view: each sample's stack as
//! ids into one table of frames.

mod demangle;
mod dwarf;
mod fde;
mod frame;
mod gopclntab;
mod inlines;
mod symbolized;
mod symtab;

use crate::files::{ElfData, JitMap, Kallsyms};
use crate::resolve::Lookup;
use crate::UNKNOWN;
pub use demangle::demangle;
pub use fde::address_name;
pub use frame::{AddrInfo, FrameInfo};
pub use symbolized::{FrameAddr, Stats, Symbolized, SymbolizedStack, TimedSample};

fn basename_line(file: Option<&str>, line: Option<u32>) -> Option<String> {
    Some(format!("{}:{}", file?.rsplit('/').next()?, line?))
}

/// The file whose DWARF answers for `elf`: its separate debug file, else itself, if it has
/// debug info and inline frames or source lines are wanted (names need no DWARF).
pub fn dwarf_file<'a>(
    elf: &'a ElfData,
    debug: Option<&'a ElfData>,
    with_inline: bool,
    with_lines: bool,
) -> Option<&'a ElfData> {
    debug
        .filter(|d| d.has_debug_info)
        .or(Some(elf).filter(|e| e.has_debug_info))
        .filter(|_| with_inline || with_lines)
}

/// How [`symbolize_elf`] names what it finds.
#[derive(Debug, Clone, Copy)]
pub struct Naming {
    /// Show inlined functions as frames of their own.
    pub inline: bool,
    /// Name code that no symbol covers by the function its unwind tables delimit
    /// (`FILE!0xSVMA`, see [`address_name`]); else `[unknown]`, as perf names it.
    pub by_address: bool,
    /// Look up source lines (`file:line`); without them, inline frames are found by name
    /// alone ([`inlines`]), the line programs never parsed.
    pub lines: bool,
}

/// Symbolizes `lookups` (SVMAs) of one ELF file, with DWARF from `dwarf` (see [`dwarf_file`])
/// when there is some. The result is aligned with `lookups`. An address no symbol or DWARF
/// names is named by the function its unwind tables delimit when `naming.by_address` (and it
/// has one there), else it is one `[unknown]` frame of `dso`.
///
/// The function is named by the symbol holding the address itself, as perf names it (for a
/// return address after a call that ends a function, that is the next symbol); its line and
/// inline frames come from the call site. Where the two disagree, the symbol alone is shown.
pub fn symbolize_elf(
    elf: &ElfData,
    debug: Option<&ElfData>,
    dso: &str,
    lookups: &[Lookup],
    dwarf: Option<&ElfData>,
    naming: Naming,
) -> Vec<AddrInfo> {
    let with_inline = naming.inline;
    // Symbols and DWARF load side by side (unless prepared already): each is a fair share of
    // the work on libc.
    let svmas: Vec<u64> = lookups.iter().map(Lookup::call_site).collect();
    // Each address is named by the symbol holding it, and checked against its call site's.
    let queries: Vec<u64> = lookups
        .iter()
        .map(|l| l.addr)
        .chain(svmas.iter().copied())
        .collect();
    let (tables, loaded) = rayon::join(
        || symtab::tables_near(elf, debug, &queries),
        || dwarf.and_then(|d| dwarf::Loaded::load(d, &svmas)),
    );
    let mut named = loaded
        .as_ref()
        .filter(|_| !naming.lines)
        .and_then(|l| l.names(&svmas));
    let frames = match named {
        Some(_) => None,
        None => loaded.as_ref().and_then(dwarf::Frames::new),
    };
    let mut find = |k: usize, svma: u64| match (&mut named, &frames) {
        (Some(named), _) => named.get_mut(k).map(std::mem::take).unwrap_or_default(),
        (None, Some(f)) => f.find(svma),
        (None, None) => Vec::new(),
    };

    let infos = lookups
        .iter()
        .enumerate()
        .map(|(k, l)| {
            let sym = tables.iter().find_map(|t| t.lookup(l.addr));
            let svma = l.call_site();
            let same_function = !l.is_return
                || tables.iter().find_map(|t| t.lookup(svma)).map(|s| s.1) == sym.map(|s| s.1);
            let mut frames: Vec<FrameInfo> = match same_function {
                true => find(k, svma)
                    .into_iter()
                    .map(|f| FrameInfo {
                        function: f.name.as_deref().map_or_else(|| UNKNOWN.into(), demangle),
                        dso: dso.to_string(),
                        srcline: basename_line(f.file.as_deref(), f.line),
                        inlined: true,
                        by_address: false,
                    })
                    .collect(),
                false => Vec::new(),
            };
            // find yields innermost first; the last one is the real (outer) function.
            frames.reverse();
            // No symbol and no DWARF: the function the unwind tables delimit, found by the
            // call site (a return address can be the first byte after its function).
            let by_address = (sym.is_none() && frames.is_empty() && naming.by_address)
                .then(|| fde::lookup(elf, svma))
                .flatten();
            if let Some((start, _)) = by_address {
                return AddrInfo {
                    frames: vec![FrameInfo {
                        function: address_name(dso, start),
                        dso: dso.to_string(),
                        srcline: None,
                        inlined: false,
                        by_address: true,
                    }],
                    start: Some(start),
                };
            }
            match frames.first_mut() {
                Some(outer) => {
                    outer.inlined = false;
                    // The symbol table names the real function as perf does (clones like
                    // foo.constprop.0 keep their suffix).
                    if let Some((name, _)) = sym {
                        outer.function = name.to_string();
                    }
                }
                None => frames.push(FrameInfo {
                    function: sym.map_or(UNKNOWN.into(), |s| s.0.to_string()),
                    dso: dso.to_string(),
                    srcline: None,
                    inlined: false,
                    by_address: false,
                }),
            }
            if !with_inline {
                frames.truncate(1);
            }
            AddrInfo {
                frames,
                start: sym.map(|s| s.1),
            }
        })
        .collect();
    // Done with the files: what was read of them is unmapped (it stays in the page cache),
    // so that the files symbolized side by side are not all mapped at once.
    for file in [Some(elf), debug, dwarf].into_iter().flatten() {
        dwarf::give_back(file);
    }
    infos
}

/// The function holding `svma` of `elf`: its name (demangled), start and end. The symbol
/// holding it (ending at the next symbol's start where the table gives no size), else the
/// function its unwind tables delimit, named by its address ([`address_name`]).
pub fn function_at(
    elf: &ElfData,
    debug: Option<&ElfData>,
    svma: u64,
) -> Option<(String, u64, u64)> {
    symtab::tables(elf, debug)
        .iter()
        .find_map(|t| t.bounds(svma))
        .or_else(|| {
            let (start, end) = fde::lookup(elf, svma)?;
            Some((address_name(&elf.name, start), start, end))
        })
}

/// What an archive keeps of `file`'s DWARF for looking up `svmas`: `.debug_info` with only
/// the compilation units that hold them, and `.debug_line` with only their line programs
/// (the others zeroed: offsets stay; `None`: it has none), uncompressed; `None` where the
/// units cannot be read without the others (no aranges, references between units).
pub fn dwarf_pruned(file: &ElfData, svmas: &[u64]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    dwarf::pruned(file, svmas)
}

/// One level of the source location of an instruction: the function (demangled) and the
/// `file:line` there. For an inlined function's code, the levels below it give the call site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFrame {
    pub function: Option<String>,
    /// The path DWARF gives (compilation directory joined).
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// The source locations of instructions at `svmas` of `elf`, innermost (inlined) first, from
/// the DWARF that answers for it; empty where there is none.
pub fn source_locations(
    elf: &ElfData,
    debug: Option<&ElfData>,
    svmas: &[u64],
) -> Vec<Vec<SourceFrame>> {
    let loaded = dwarf_file(elf, debug, true, true).and_then(|d| dwarf::Loaded::load(d, svmas));
    let frames = loaded.as_ref().and_then(dwarf::Frames::new);
    svmas
        .iter()
        .map(|&a| match &frames {
            Some(f) => f
                .find(a)
                .into_iter()
                .map(|f| SourceFrame {
                    function: f.name.as_deref().map(demangle),
                    file: f.file,
                    line: f.line,
                })
                .collect(),
            None => Vec::new(),
        })
        .collect()
}

/// With `with_dwarf`, inflates the DWARF that answers for `elf` ([`dwarf_file`]): what the
/// driver starts for the files a recording lists while the recording is read. Symbol tables
/// are not built ahead: symbolizing reads only the part of them its addresses need.
pub fn prepare(elf: &ElfData, debug: Option<&ElfData>, with_dwarf: bool) {
    if let Some(file) = dwarf_file(elf, debug, with_dwarf, with_dwarf) {
        dwarf::prefetch(file);
    }
}

/// Symbolizes JIT code addresses (AVMAs) of one process.
pub fn symbolize_jit(map: &JitMap, lookups: &[Lookup]) -> Vec<AddrInfo> {
    let dso = map.path.to_string_lossy();
    lookups
        .iter()
        .map(|l| {
            let hit = map.lookup(l.addr);
            AddrInfo {
                frames: vec![FrameInfo {
                    function: hit.map_or(UNKNOWN.into(), |h| h.0.to_string()),
                    dso: dso.to_string(),
                    srcline: None,
                    inlined: false,
                    by_address: false,
                }],
                start: hit.map(|h| h.1),
            }
        })
        .collect()
}

/// The kernel's name for `addr` (a lookup address), if `kallsyms` has it.
pub fn symbolize_kernel(kallsyms: Option<&Kallsyms>, addr: u64) -> AddrInfo {
    let hit = kallsyms.and_then(|k| k.lookup(addr));
    AddrInfo {
        frames: vec![FrameInfo {
            function: hit.map_or(UNKNOWN.into(), |h| h.0.to_string()),
            dso: "[kernel.kallsyms]".into(),
            srcline: None,
            inlined: false,
            by_address: false,
        }],
        start: hit.map(|h| h.1),
    }
}
