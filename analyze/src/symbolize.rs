//! Stage 4, symbolize: addresses to function names (with inline frames) and source lines.
//!
//! One call per ELF file with all of its unique lookup addresses (the driver runs files in
//! parallel). Function names come from the symbol table (`.symtab`, else `.dynsym`, of the
//! separate debug file first, then of the file itself), picked among aliases as perf picks
//! them; inline frames and `file:line` come from DWARF (addr2line). Kernel addresses are looked
//! up in `/proc/kallsyms`, JIT code in `/tmp/perf-PID.map`. The files come from the
//! [`Loader`](crate::loader::Loader); nothing here opens a file.

use std::borrow::Cow;

use addr2line::gimli;
use object::{elf, Object, ObjectSection, ObjectSymbol, SymbolFlags, SymbolSection};

use crate::loader::{ElfData, JitMap, Kallsyms};
use crate::resolve::Lookup;

/// One frame as shown to people.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FrameInfo {
    pub function: String,
    /// The file it came from (`[kernel.kallsyms]`, `/usr/lib/.../libc.so.6`, `[unknown]`).
    pub dso: String,
    /// `file:line`, when DWARF says.
    pub srcline: Option<String>,
    /// An inlined call (not a real stack frame).
    pub inlined: bool,
}

impl FrameInfo {
    pub fn unknown(dso: &str) -> FrameInfo {
        FrameInfo {
            function: UNKNOWN.into(),
            dso: dso.into(),
            srcline: None,
            inlined: false,
        }
    }

    pub fn is_unknown(&self) -> bool {
        self.function == UNKNOWN
    }
}

/// How unresolved frames are named, as perf names them.
pub const UNKNOWN: &str = "[unknown]";

/// What one address symbolizes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrInfo {
    /// The function and the functions inlined into it at this address, outermost first.
    pub frames: Vec<FrameInfo>,
    /// Start (SVMA) of the outer function's symbol, for `symbol+offset`.
    pub start: Option<u64>,
}

/// How deep the C++ demangler may recurse: hostile or corrupt names must not overflow the stack.
const CPP_DEMANGLE_RECURSION_LIMIT: u32 = 128;

/// Demangles Rust and C++ names; others (and names the demanglers reject) stay as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        let parse =
            cpp_demangle::ParseOptions::default().recursion_limit(CPP_DEMANGLE_RECURSION_LIMIT);
        if let Ok(sym) = cpp_demangle::Symbol::new_with_options(name, &parse) {
            let opts = cpp_demangle::DemangleOptions::default()
                .no_params()
                .recursion_limit(CPP_DEMANGLE_RECURSION_LIMIT);
            if let Ok(d) = sym.demangle_with_options(&opts) {
                return d;
            }
        }
    }
    name.to_string()
}

/// A function symbol table, sorted by start.
struct SymbolTable {
    /// (start, end, name); `end == start` where the size is unknown (then it runs to the next).
    syms: Vec<(u64, u64, String)>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Binding {
    Local,
    Weak,
    Global,
}

impl SymbolTable {
    /// `.symtab` if the file has function symbols there, else `.dynsym`.
    fn of(elf: &ElfData) -> Option<SymbolTable> {
        let obj = object::File::parse(&*elf.bytes).ok()?;
        // perf's choice of symbols: functions (FUNC, GNU_IFUNC) and labels (NOTYPE, defined
        // in a section, not hidden or internal), named, defined.
        let collect = |dynamic: bool| {
            let mut raw: Vec<(u64, u64, Binding, &str)> = Vec::new();
            let iter: Box<dyn Iterator<Item = object::Symbol<'_, '_>>> = if dynamic {
                Box::new(obj.dynamic_symbols())
            } else {
                Box::new(obj.symbols())
            };
            for s in iter {
                let SymbolFlags::Elf { st_info, st_other } = s.flags() else {
                    continue;
                };
                let wanted = match st_info.st_type() {
                    elf::STT_FUNC | elf::STT_GNU_IFUNC => true,
                    elf::STT_NOTYPE => {
                        matches!(s.section(), SymbolSection::Section(_))
                            && !matches!(st_other.visibility(), elf::STV_HIDDEN | elf::STV_INTERNAL)
                    }
                    _ => false,
                };
                if !wanted || s.is_undefined() || s.address() == 0 {
                    continue;
                }
                let Ok(name) = s.name() else { continue };
                if name.is_empty() {
                    continue;
                }
                let binding = match st_info.st_bind() {
                    elf::STB_WEAK => Binding::Weak,
                    elf::STB_GLOBAL | elf::STB_GNU_UNIQUE => Binding::Global,
                    _ => Binding::Local,
                };
                raw.push((s.address(), s.size(), binding, name));
            }
            raw
        };
        let mut raw = collect(false);
        if raw.is_empty() {
            raw = collect(true);
        }
        if raw.is_empty() {
            return None;
        }
        // Aliases at one address: keep the one perf keeps (sized, not weak, global, fewer
        // leading underscores, longer name, first in the table).
        let rank = |s: &(u64, u64, Binding, &str)| {
            (
                s.1 > 0,
                s.2 != Binding::Weak,
                s.2 == Binding::Global,
                std::cmp::Reverse(s.3.len() - s.3.trim_start_matches('_').len()),
                s.3.len(),
            )
        };
        // A stable sort: ties keep table order.
        raw.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| rank(b).cmp(&rank(a))));
        raw.dedup_by_key(|s| s.0);
        Some(SymbolTable {
            syms: raw
                .into_iter()
                .map(|(start, size, _, name)| (start, start + size, demangle(name)))
                .collect(),
        })
    }

    /// Symbols for the PLT entries of `elf` (`name@plt`, as perf synthesizes them): entry `i`
    /// of `.plt` (after its 16-byte header), or of `.plt.sec` where there is one, jumps
    /// through relocation `i` of `.rela.plt`, named by its dynamic symbol (empty for
    /// IRELATIVE). x86-64 entries are 16 bytes.
    fn plt(elf: &ElfData) -> Vec<(u64, u64, String)> {
        const ENTRY: u64 = 16;
        let Ok(obj) = object::File::parse(&*elf.bytes) else {
            return Vec::new();
        };
        let (Some(plt), Some(rela)) = (
            obj.section_by_name(".plt"),
            obj.section_by_name(".rela.plt"),
        ) else {
            return Vec::new();
        };
        let first = match obj.section_by_name(".plt.sec") {
            Some(sec) => sec.address(),
            None => plt.address() + ENTRY,
        };
        let Ok(data) = rela.data() else {
            return Vec::new();
        };
        let dynsym = obj.dynamic_symbol_table();
        data.chunks_exact(24)
            .enumerate()
            .map(|(i, r)| {
                let info = u64::from_le_bytes(r[8..16].try_into().unwrap());
                let index = (info >> 32) as usize;
                let name = dynsym
                    .as_ref()
                    .filter(|_| index != 0)
                    .and_then(|t| {
                        object::ObjectSymbolTable::symbol_by_index(t, object::SymbolIndex(index))
                            .ok()
                    })
                    .and_then(|s| s.name().ok())
                    .map(demangle)
                    .unwrap_or_default();
                let start = first + i as u64 * ENTRY;
                (start, start + ENTRY, format!("{name}@plt"))
            })
            .collect()
    }

    fn lookup(&self, svma: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= svma).checked_sub(1)?;
        let (start, end, name) = &self.syms[i];
        (end == start || svma < *end).then_some((name.as_str(), *start))
    }
}

fn basename_line(file: Option<&str>, line: Option<u32>) -> Option<String> {
    Some(format!("{}:{}", file?.rsplit('/').next()?, line?))
}

/// Symbolizes `lookups` (SVMAs) of one ELF file, with DWARF from `debug` (its separate debug
/// file) when there is one. The result is aligned with `lookups`. An address nothing knows is
/// one `[unknown]` frame of `dso`.
///
/// The function is named by the symbol holding the address itself, as perf names it (for a
/// return address after a call that ends a function, that is the next symbol); its line and
/// inline frames come from the call site. Where the two disagree, the symbol alone is shown.
/// The DWARF sections addr2line reads for inline frames and lines. The others stay unloaded
/// (debug files compress them: inflating location lists and macros cost a tenth of a report).
pub const DWARF_SECTIONS: [gimli::SectionId; 10] = {
    use gimli::SectionId::*;
    [
        DebugAbbrev,
        DebugAddr,
        DebugAranges,
        DebugInfo,
        DebugLine,
        DebugLineStr,
        DebugRanges,
        DebugRngLists,
        DebugStr,
        DebugStrOffsets,
    ]
};

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

/// One DWARF section of `file`, inflated if compressed (empty if absent). The driver loads a
/// file's sections in parallel: inflating libc's debug info is the longest single job.
pub fn load_section(file: &ElfData, id: gimli::SectionId) -> Cow<'_, [u8]> {
    object::File::parse(&*file.bytes)
        .ok()
        .and_then(|obj| {
            let section = obj.section_by_name(id.name())?;
            match section.uncompressed_data().ok()? {
                // Borrowed data outlives `obj`: it points into the file's bytes.
                Cow::Borrowed(b) => Some(Cow::Borrowed(b)),
                Cow::Owned(v) => Some(Cow::Owned(v)),
            }
        })
        .unwrap_or(Cow::Borrowed(&[]))
}

/// `dwarf`: the sections of [`dwarf_file`] from [`load_section`] (empty: no DWARF).
pub fn symbolize_elf(
    elf: &ElfData,
    debug: Option<&ElfData>,
    dso: &str,
    lookups: &[Lookup],
    dwarf: &[(gimli::SectionId, Cow<'_, [u8]>)],
    with_inline: bool,
) -> Vec<AddrInfo> {
    let mut tables: Vec<SymbolTable> = debug
        .into_iter()
        .chain(std::iter::once(elf))
        .filter_map(SymbolTable::of)
        .collect();
    let plt = SymbolTable::plt(elf);
    if !plt.is_empty() {
        // Into the table in use, so that sizeless symbols before the PLT end where it begins.
        if tables.is_empty() {
            tables.push(SymbolTable { syms: Vec::new() });
        }
        let t = &mut tables[0];
        t.syms.extend(plt);
        t.syms.sort_by_key(|s| s.0);
        t.syms.dedup_by_key(|s| s.0);
    }
    let dwarf_sections = (!dwarf.is_empty()).then(|| {
        gimli::DwarfSections::load(|id: gimli::SectionId| -> Result<&[u8], gimli::Error> {
            Ok(dwarf
                .iter()
                .find(|(have, _)| *have == id)
                .map_or(&[][..], |(_, bytes)| &bytes[..]))
        })
        .ok()
    });
    let dwarf_sections = dwarf_sections.flatten();
    let context = dwarf_sections.as_ref().and_then(|d| {
        let endian = gimli::RunTimeEndian::Little;
        addr2line::Context::from_dwarf(d.borrow(|s| gimli::EndianSlice::new(s, endian))).ok()
    });

    lookups
        .iter()
        .map(|l| {
            let sym = tables.iter().find_map(|t| t.lookup(l.addr));
            let svma = l.call_site();
            let same_function = !l.is_return
                || tables.iter().find_map(|t| t.lookup(svma)).map(|s| s.1) == sym.map(|s| s.1);
            let mut frames: Vec<FrameInfo> = Vec::new();
            if let Some(ctx) = context.as_ref().filter(|_| same_function) {
                if let Ok(mut iter) = ctx.find_frames(svma).skip_all_loads() {
                    while let Ok(Some(f)) = iter.next() {
                        let name = f
                            .function
                            .as_ref()
                            .and_then(|n| n.raw_name().ok())
                            .map(|n| demangle(&n));
                        let srcline = f
                            .location
                            .as_ref()
                            .and_then(|l| basename_line(l.file, l.line));
                        frames.push(FrameInfo {
                            function: name.unwrap_or_else(|| UNKNOWN.into()),
                            dso: dso.to_string(),
                            srcline,
                            inlined: true,
                        });
                    }
                }
            }
            // find_frames yields innermost first; the last one is the real (outer) function.
            frames.reverse();
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
        .collect()
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
        }],
        start: hit.map(|h| h.1),
    }
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn demangles_rust_and_cpp_and_survives_deep_nesting() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar");
        assert_eq!(demangle("main"), "main");
        // A pathologically nested C++ name: returned as it is, no stack overflow.
        let deep = format!("_Z1f{}i{}", "PFv".repeat(5000), "E".repeat(5000));
        assert!(!demangle(&deep).is_empty());
    }
}
