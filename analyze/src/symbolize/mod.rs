//! Stage 4, symbolize: addresses to function names (with inline frames) and source lines.
//!
//! One call per ELF file with all of its unique lookup addresses (the driver runs files in
//! parallel). Function names come from the symbol table (`.symtab`, else `.dynsym`, of the
//! separate debug file first, then of the file itself), picked among aliases as perf picks
//! them; inline frames and `file:line` come from DWARF (addr2line). Kernel addresses are looked
//! up in `/proc/kallsyms`, JIT code in `/tmp/perf-PID.map`. The files come from the
//! [`Loader`](crate::loader::Loader); nothing here opens a file.

mod dwarf;
mod symtab;

use std::sync::OnceLock;

use crate::loader::{ElfData, JitMap, Kallsyms};
use crate::resolve::Lookup;
use symtab::SymbolTable;

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
            // As perf prints C++ names: no parameters, no return type.
            let opts = cpp_demangle::DemangleOptions::default()
                .no_params()
                .no_return_type()
                .recursion_limit(CPP_DEMANGLE_RECURSION_LIMIT);
            if let Ok(d) = sym.demangle_with_options(&opts) {
                return d;
            }
        }
    }
    name.to_string()
}

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

/// Symbolizes `lookups` (SVMAs) of one ELF file, with DWARF from `dwarf` (see [`dwarf_file`])
/// when there is some. The result is aligned with `lookups`. An address nothing knows is one
/// `[unknown]` frame of `dso`.
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
    with_inline: bool,
) -> Vec<AddrInfo> {
    // Symbols and DWARF load side by side (unless prepared already): each is a fair share of
    // the work on libc.
    let (tables, loaded) = rayon::join(
        || symbols(elf, debug),
        || {
            let svmas: Vec<u64> = lookups.iter().map(Lookup::call_site).collect();
            dwarf.and_then(|d| dwarf::Loaded::load(d, &svmas))
        },
    );
    let frames = loaded.as_ref().and_then(dwarf::Frames::new);

    lookups
        .iter()
        .map(|l| {
            let sym = tables.iter().find_map(|t| t.lookup(l.addr));
            let svma = l.call_site();
            let same_function = !l.is_return
                || tables.iter().find_map(|t| t.lookup(svma)).map(|s| s.1) == sym.map(|s| s.1);
            let mut frames: Vec<FrameInfo> = match frames.as_ref().filter(|_| same_function) {
                Some(f) => f
                    .find(svma)
                    .into_iter()
                    .map(|f| FrameInfo {
                        function: f.name.as_deref().map_or_else(|| UNKNOWN.into(), demangle),
                        dso: dso.to_string(),
                        srcline: basename_line(f.file.as_deref(), f.line),
                        inlined: true,
                    })
                    .collect(),
                None => Vec::new(),
            };
            // find yields innermost first; the last one is the real (outer) function.
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

/// The function symbol holding `svma` of `elf`: its name (demangled), start and end (the next
/// symbol's start where the table gives no size).
pub fn function_at(
    elf: &ElfData,
    debug: Option<&ElfData>,
    svma: u64,
) -> Option<(String, u64, u64)> {
    symbols(elf, debug).iter().find_map(|t| t.bounds(svma))
}

/// The compilation units of `.debug_info` (uncompressed, as are `abbrev` and `aranges`) that
/// hold `svmas`, if they can be read without the others: what an archive keeps of DWARF.
pub fn dwarf_units_alone(
    info: &[u8],
    abbrev: &[u8],
    aranges: &[u8],
    svmas: &[u64],
) -> Option<Vec<std::ops::Range<usize>>> {
    dwarf::units_alone(info, abbrev, aranges, svmas)
}

/// Where in `.debug_line` the line programs of the units in `info` lie.
pub fn dwarf_line_programs(info: &[u8], abbrev: &[u8], line: &[u8]) -> Vec<std::ops::Range<usize>> {
    dwarf::line_programs(info, abbrev, line)
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

/// What symbolizing a file needs that can be made before its lookups are known, kept with
/// the file (see [`prepare`]).
#[derive(Default)]
pub struct Prepared {
    /// Its symbol tables (with its debug file's), once built.
    symbols: OnceLock<Vec<SymbolTable>>,
    /// Its DWARF sections inflated whole, if asked for early.
    dwarf: dwarf::Inflated,
}

/// Builds the symbol tables of `elf` and, `with_dwarf`, inflates the DWARF that answers for
/// it ([`dwarf_file`]): what the driver starts for the files a recording lists while the
/// recording is read.
pub fn prepare(elf: &ElfData, debug: Option<&ElfData>, with_dwarf: bool) {
    rayon::join(
        || symbols(elf, debug),
        || {
            if let Some(file) = dwarf_file(elf, debug, with_dwarf, with_dwarf) {
                dwarf::prefetch(file);
            }
        },
    );
}

/// The symbol tables of `elf` (built once).
fn symbols<'e>(elf: &'e ElfData, debug: Option<&ElfData>) -> &'e [SymbolTable] {
    elf.prepared
        .symbols
        .get_or_init(|| symbol_tables(elf, debug))
}

/// The symbol tables of the debug file and of `elf`, with `elf`'s PLT entries.
fn symbol_tables(elf: &ElfData, debug: Option<&ElfData>) -> Vec<SymbolTable> {
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
    tables
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
