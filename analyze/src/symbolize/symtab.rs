//! Function names from ELF symbol tables, picked among aliases as perf picks them, and
//! `name@plt` entries synthesized as perf does. Symbolizing reads only the symbols its
//! addresses fall in ([`tables_near`]); other uses build the whole tables once ([`tables`]).

use object::read::elf::{ElfFile, FileHeader, Sym};
use object::{elf, Object, ObjectSection, ObjectSymbol};

use std::sync::OnceLock;

use super::demangle::demangle;
use crate::files::ElfData;

/// A function symbol table, sorted by start.
pub(super) struct SymbolTable {
    /// (start, end, name); `end == start` where the size is unknown (then it runs to the next).
    pub(super) syms: Vec<(u64, u64, Name)>,
}

/// A symbol's name, demangled on first use: a static C++ program has tens of thousands of
/// symbols, a profile names a few dozen (demangling them all was a third of a small report).
/// Aliases that only their demangled names can tell apart (C++'s C1/C2 constructors, Rust's
/// impls) are kept all, and chosen among when first used.
pub(super) struct Name {
    raw: Raw,
    demangled: OnceLock<String>,
}

/// The mangled name or names behind a [`Name`].
enum Raw {
    /// Most symbols: one name, one allocation.
    One(Box<str>),
    /// Aliases, in table order.
    Aliases(Box<[Box<str>]>),
    /// A PLT entry's target: named `target@plt`.
    Plt(Box<str>),
}

impl Name {
    fn raw(raw: &str) -> Name {
        Name {
            raw: Raw::One(raw.into()),
            demangled: OnceLock::new(),
        }
    }

    fn aliases(names: &[&str]) -> Name {
        Name {
            raw: Raw::Aliases(names.iter().map(|&n| n.into()).collect()),
            demangled: OnceLock::new(),
        }
    }

    fn demangled(name: String) -> Name {
        Name {
            raw: Raw::Aliases(Box::default()),
            demangled: OnceLock::from(name),
        }
    }

    /// The demangled name; of aliases, perf's last criteria on the demangled names: fewer
    /// leading underscores, then longer, then first in table order.
    pub(super) fn get(&self) -> &str {
        self.demangled.get_or_init(|| {
            let rank = |n: &str| (std::cmp::Reverse(leading_underscores(n)), n.len());
            match &self.raw {
                Raw::One(name) => demangle(name),
                Raw::Plt(target) => format!("{}@plt", demangle(target)),
                Raw::Aliases(names) => names
                    .iter()
                    .map(|n| demangle(n))
                    .reduce(|best, n| if rank(&n) > rank(&best) { n } else { best })
                    .unwrap_or_default(),
            }
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Binding {
    Local,
    Weak,
    Global,
}

impl SymbolTable {
    /// `.symtab` if the file has function symbols there, else `.dynsym`.
    pub(super) fn of(elf: &ElfData) -> Option<SymbolTable> {
        let obj = object::File::parse(&*elf.bytes).ok()?;
        let all = |_| true;
        let mut raw = collect(&obj, false, all, elf.bytes.len());
        if raw.is_empty() {
            raw = collect(&obj, true, all, elf.bytes.len());
        }
        if raw.is_empty() {
            return None;
        }
        Some(SymbolTable { syms: choose(raw) })
    }

    /// A table of a Go program's functions (start, end, name) from its runtime's table:
    /// names as Go writes them, nothing to demangle.
    fn of_go(functions: Vec<(u64, u64, String)>) -> SymbolTable {
        let syms = functions
            .into_iter()
            .map(|(start, end, name)| (start, end, Name::demangled(name)))
            .collect();
        SymbolTable { syms }
    }

    /// The part of [`SymbolTable::of`] that looking up `queries` (sorted, SVMAs) reads: the
    /// symbols at the start each query falls after and at the next start (where a sizeless
    /// symbol ends), every alias there. [`SymbolTable::lookup`] and [`SymbolTable::bounds`]
    /// of a query give what they give on the whole table: no start of the whole table lies
    /// between a query and the start kept for it. Names are read only for those symbols, one
    /// pass over the table finding their starts (a profile touches a few dozen of libc's
    /// 6,700 functions; naming and sorting them all took 1-2 ms of a 5 ms report).
    /// `None`: the file has no symbol perf would keep; [`Near::Whole`]: all the names at a
    /// start kept are not UTF-8 (which the whole table drops: it decides then).
    fn near(elf: &ElfData, queries: &[u64]) -> Option<Near> {
        let obj = object::File::parse(&*elf.bytes).ok()?;
        let (starts, dynamic) = match starts_near(&obj, false, queries) {
            Some(s) => (s, false),
            None => (starts_near(&obj, true, queries)?, true),
        };
        let at = |start| starts.binary_search(&start).is_ok();
        let raw = collect(&obj, dynamic, at, 0);
        // Every start kept has a symbol with a non-empty name: one that is not UTF-8 is
        // dropped by `collect`, and the whole table is read instead.
        let mut found: Vec<u64> = raw.iter().map(|s| s.0).collect();
        found.sort_unstable();
        found.dedup();
        if found != starts {
            return Some(Near::Whole);
        }
        Some(Near::Part(SymbolTable { syms: choose(raw) }))
    }

    /// Symbols for the PLT entries of `elf` (`name@plt`, as perf synthesizes them): entry `i`
    /// of `.plt` (after its 16-byte header), or of `.plt.sec` where there is one, jumps
    /// through relocation `i` of `.rela.plt`, named by its dynamic symbol (empty for
    /// IRELATIVE; demangled when first looked up: libstdc++ has 1,037). x86-64 entries are
    /// 16 bytes.
    pub(super) fn plt(elf: &ElfData) -> Vec<(u64, u64, Name)> {
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
                    .unwrap_or_default();
                let start = first + i as u64 * ENTRY;
                let name = Name {
                    raw: Raw::Plt(name.into()),
                    demangled: OnceLock::new(),
                };
                (start, start + ENTRY, name)
            })
            .collect()
    }

    /// The symbol holding `svma`: name, start, and end (where a sizeless symbol runs to the
    /// next one; the last sizeless one is a single byte).
    pub(super) fn bounds(&self, svma: u64) -> Option<(String, u64, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= svma).checked_sub(1)?;
        let (start, end, name) = &self.syms[i];
        let end = if end == start {
            self.syms.get(i + 1).map_or(start + 1, |next| next.0)
        } else {
            *end
        };
        (svma < end).then(|| (name.get().to_string(), *start, end))
    }

    pub(super) fn lookup(&self, svma: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= svma).checked_sub(1)?;
        let (start, end, name) = &self.syms[i];
        (end == start || svma < *end).then(|| (name.get(), *start))
    }
}

/// Calls `f` with each symbol perf keeps of `.symtab` (`.dynsym` if `dynamic`): functions
/// (FUNC, GNU_IFUNC) and labels (NOTYPE, defined in a section, not hidden or internal),
/// defined, at a non-zero address: its start, size, binding and name (bytes; the caller
/// drops empty and non-UTF-8 ones). Read from the table's entries directly: through
/// object's format-independent symbols, a pass over libc's 10,000 took 0.3 ms.
fn kept_symbols<'d>(
    obj: &object::File<'d>,
    dynamic: bool,
    mut f: impl FnMut(u64, u64, Binding, &'d [u8]),
) {
    match obj {
        object::File::Elf32(e) => kept_in(e, dynamic, &mut f),
        object::File::Elf64(e) => kept_in(e, dynamic, &mut f),
        _ => {}
    }
}

/// [`kept_symbols`] of one ELF class (32- or 64-bit).
fn kept_in<'d, Elf: FileHeader>(
    file: &ElfFile<'d, Elf>,
    dynamic: bool,
    f: &mut impl FnMut(u64, u64, Binding, &'d [u8]),
) {
    let endian = file.endian();
    let table = match dynamic {
        true => file.elf_dynamic_symbol_table(),
        false => file.elf_symbol_table(),
    };
    let strings = table.strings();
    for (i, sym) in table.symbols().iter().enumerate() {
        let shndx = sym.st_shndx(endian);
        let wanted = match sym.st_type() {
            elf::STT_FUNC | elf::STT_GNU_IFUNC => true,
            elf::STT_NOTYPE => {
                let in_section = match shndx {
                    elf::SHN_UNDEF | elf::SHN_ABS | elf::SHN_COMMON => false,
                    elf::SHN_XINDEX => table
                        .shndx(endian, object::SymbolIndex(i))
                        .is_some_and(|x| x != 0),
                    other => other.index().is_some(),
                };
                in_section && !matches!(sym.st_visibility(), elf::STV_HIDDEN | elf::STV_INTERNAL)
            }
            _ => false,
        };
        let start: u64 = sym.st_value(endian).into();
        if !wanted || shndx == elf::SHN_UNDEF || start == 0 {
            continue;
        }
        let binding = match sym.st_bind() {
            elf::STB_WEAK => Binding::Weak,
            elf::STB_GLOBAL | elf::STB_GNU_UNIQUE => Binding::Global,
            _ => Binding::Local,
        };
        if let Ok(name) = sym.name(endian, strings) {
            f(start, sym.st_size(endian).into(), binding, name);
        }
    }
}

/// The symbols perf keeps of `.symtab` (`.dynsym` if `dynamic`) whose start `at` accepts,
/// named: (start, size, binding, name). Room is made for every symbol of the table at once
/// (for all of them: growing by doubling would copy), if the file, `file_len` bytes, can
/// hold them (a damaged section header cannot make it larger); `file_len` 0: none made (for
/// the few symbols near some addresses).
fn collect<'d>(
    obj: &object::File<'d>,
    dynamic: bool,
    at: impl Fn(u64) -> bool,
    file_len: usize,
) -> Vec<(u64, u64, Binding, &'d str)> {
    let table = if dynamic { ".dynsym" } else { ".symtab" };
    let count = obj.section_by_name(table).map_or(0, |t| t.size() / 24);
    let mut raw = Vec::with_capacity(count.min(file_len as u64 / 24) as usize);
    kept_symbols(obj, dynamic, |start, size, binding, name| {
        if !name.is_empty() && at(start) {
            if let Ok(name) = std::str::from_utf8(name) {
                raw.push((start, size, binding, name));
            }
        }
    });
    raw
}

/// The starts of the symbols perf keeps of `.symtab` (`.dynsym` if `dynamic`) that looking
/// up `queries` (sorted) needs: for each query, the last start at or before it and the first
/// after it; sorted, each once. `None` if the table keeps no symbol.
fn starts_near(obj: &object::File<'_>, dynamic: bool, queries: &[u64]) -> Option<Vec<u64>> {
    // Starts fall into the gaps between queries: gap `j` holds those after query `j - 1` up
    // to query `j` (the last gap, those after every query). Each gap's first and last start.
    let mut first = vec![u64::MAX; queries.len() + 1];
    let mut last: Vec<Option<u64>> = vec![None; queries.len() + 1];
    let mut any = false;
    kept_symbols(obj, dynamic, |start, _, _, name| {
        if name.is_empty() {
            return;
        }
        any = true;
        let gap = queries.partition_point(|&q| q < start);
        first[gap] = first[gap].min(start);
        last[gap] = last[gap].max(Some(start));
    });
    if !any {
        return None;
    }
    let mut starts = Vec::with_capacity(2 * queries.len());
    // At or before query j: the last start of gaps 0..=j.
    let mut before: Option<u64> = None;
    for l in last.iter().take(queries.len()) {
        before = before.max(*l);
        starts.extend(before);
    }
    // After query j: the first start of the gaps after it.
    let mut after = u64::MAX;
    for f in first.iter().skip(1).rev() {
        after = after.min(*f);
        if after != u64::MAX {
            starts.push(after);
        }
    }
    starts.sort_unstable();
    starts.dedup();
    Some(starts)
}

/// Demangles `raw` (start, size, binding, name) and keeps, at each address, the symbol perf
/// keeps (util/symbol.c, choose_best_symbol: sized, not weak, global, fewer leading
/// underscores, longer name, first in the table). perf demangles as it loads, so it compares
/// demangled names: two Rust v0 aliases of equal mangled length,
/// `..3impyNtB9_7Display3fmt` and `..3impjNtB9_7Display3fmt`, are
/// `<u64 as core::fmt::Display>::fmt` and the longer `<usize as core::fmt::Display>::fmt`.
/// Sorted by start, (start, end, name). Only aliases are demangled here (to compare them); the
/// other names when first looked up.
fn choose(mut raw: Vec<(u64, u64, Binding, &str)>) -> Vec<(u64, u64, Name)> {
    // A stable sort: aliases keep table order.
    raw.sort_by_key(|s| s.0);
    let rank = |s: &(u64, u64, Binding, String)| {
        (
            s.1 > 0,
            s.2 != Binding::Weak,
            s.2 == Binding::Global,
            std::cmp::Reverse(leading_underscores(&s.3)),
            s.3.len(),
        )
    };
    // `rank`'s criteria that need no demangling.
    let rank_head =
        |s: &(u64, u64, Binding, &str)| (s.1 > 0, s.2 != Binding::Weak, s.2 == Binding::Global);
    // A damaged size must not wrap the end around: the symbol ends at the top.
    let end = |start: u64, size: u64| start.saturating_add(size);
    let mut out = Vec::with_capacity(raw.len());
    for group in raw.chunk_by(|a, b| a.0 == b.0) {
        if let [(start, size, _, name)] = group {
            out.push((*start, end(*start, *size), Name::raw(name)));
            continue;
        }
        // Ranked on all but the demangled length; those that tie (the same size too) are
        // told apart by it when first looked up.
        let top = group
            .iter()
            .map(&rank_head)
            .max()
            .expect("a group is not empty");
        let tied: Vec<&(u64, u64, Binding, &str)> =
            group.iter().filter(|s| rank_head(s) == top).collect();
        let (start, size) = (tied[0].0, tied[0].1);
        // Mangled names (C++, Rust) all, of one size: the rest waits for a lookup.
        let mangled = |n: &str| n.starts_with("_Z") || n.starts_with("_R");
        if tied.iter().all(|s| s.1 == size && mangled(s.3)) {
            let names: Vec<&str> = tied.iter().map(|s| s.3).collect();
            out.push((start, end(start, size), Name::aliases(&names)));
            continue;
        }
        // Sizes differ among the tied (the end depends on the choice) or plain names: now.
        let best = tied
            .iter()
            .map(|&&(start, size, binding, name)| (start, size, binding, demangle(name)))
            .reduce(|best, s| if rank(&s) > rank(&best) { s } else { best })
            .expect("a group is not empty");
        out.push((best.0, end(best.0, best.1), Name::demangled(best.3)));
    }
    out
}

fn leading_underscores(name: &str) -> usize {
    name.len() - name.trim_start_matches('_').len()
}

/// A file's whole symbol tables, built once and kept with the file ([`ElfData::derived`]).
#[derive(Default)]
struct Whole(OnceLock<Vec<SymbolTable>>);

/// The symbol tables of `elf` and of its debug file, whole (built once).
pub(super) fn tables<'e>(elf: &'e ElfData, debug: Option<&ElfData>) -> &'e [SymbolTable] {
    elf.derived
        .get::<Whole>()
        .0
        .get_or_init(|| symbol_tables(elf, debug))
}

/// What [`SymbolTable::near`] found in a file.
enum Near {
    /// The part of the table the queries read.
    Part(SymbolTable),
    /// Nothing decided: read the whole table.
    Whole,
}

/// Symbol tables for looking up a set of addresses: the whole ones of a file, or the parts
/// of them those addresses read.
pub(super) enum Tables<'e> {
    Whole(&'e [SymbolTable]),
    Part(Vec<SymbolTable>),
}

impl std::ops::Deref for Tables<'_> {
    type Target = [SymbolTable];
    fn deref(&self) -> &[SymbolTable] {
        match self {
            Tables::Whole(t) => t,
            Tables::Part(t) => t,
        }
    }
}

/// The symbol tables of `elf` and of its debug file as far as looking up `queries` (SVMAs)
/// reads them ([`SymbolTable::near`]), with `elf`'s PLT entries; the whole tables where they
/// are built already, or where the parts cannot tell (no symbol table: a Go program's own
/// table of its functions, whole). Lookups of those queries give what the whole tables give.
pub(super) fn tables_near<'e>(
    elf: &'e ElfData,
    debug: Option<&ElfData>,
    queries: &[u64],
) -> Tables<'e> {
    if let Some(whole) = elf.derived.get::<Whole>().0.get() {
        return Tables::Whole(whole);
    }
    let mut queries = queries.to_vec();
    queries.sort_unstable();
    queries.dedup();
    let mut parts = Vec::new();
    for file in debug.into_iter().chain(std::iter::once(elf)) {
        match SymbolTable::near(file, &queries) {
            Some(Near::Part(t)) => parts.push(t),
            Some(Near::Whole) => return Tables::Whole(tables(elf, debug)),
            None => {}
        }
    }
    if parts.is_empty() {
        // A stripped Go program: the functions of its runtime's table the queries fall in.
        let Some(functions) = super::gopclntab::functions_near(elf, &queries) else {
            return Tables::Whole(tables(elf, debug));
        };
        parts.push(SymbolTable::of_go(functions));
    }
    with_plt(&mut parts, elf);
    Tables::Part(parts)
}

/// The symbol tables of the debug file and of `elf`, with `elf`'s PLT entries.
fn symbol_tables(elf: &ElfData, debug: Option<&ElfData>) -> Vec<SymbolTable> {
    let mut tables: Vec<SymbolTable> = debug
        .into_iter()
        .chain(std::iter::once(elf))
        .filter_map(SymbolTable::of)
        .collect();
    if tables.is_empty() {
        // A stripped Go program: the runtime's own table of its functions.
        if let Some(functions) = super::gopclntab::functions(elf).filter(|f| !f.is_empty()) {
            tables.push(SymbolTable::of_go(functions));
        }
    }
    with_plt(&mut tables, elf);
    tables
}

/// Adds `elf`'s PLT entries to the first of its `tables` (the one in use), so that sizeless
/// symbols before the PLT end where it begins; a symbol at an entry's start keeps its place.
fn with_plt(tables: &mut Vec<SymbolTable>, elf: &ElfData) {
    let plt = SymbolTable::plt(elf);
    if plt.is_empty() {
        return;
    }
    if tables.is_empty() {
        tables.push(SymbolTable { syms: Vec::new() });
    }
    let t = &mut tables[0];
    t.syms.extend(plt);
    t.syms.sort_by_key(|s| s.0);
    t.syms.dedup_by_key(|s| s.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    const U64: &str = "_RNvXsd_NtNtNtCsgEmfK2I1SDS_4core3fmt3num3impyNtB9_7Display3fmt";
    const USIZE: &str = "_RNvXsi_NtNtNtCsgEmfK2I1SDS_4core3fmt3num3impjNtB9_7Display3fmt";

    fn names(raw: Vec<(u64, u64, Binding, &str)>) -> Vec<String> {
        choose(raw)
            .into_iter()
            .map(|s| s.2.get().to_string())
            .collect()
    }

    #[test]
    fn aliases_are_chosen_on_demangled_names() {
        // Equal mangled lengths: the longer demangled name, in either table order.
        for order in [[U64, USIZE], [USIZE, U64]] {
            let raw = order
                .iter()
                .map(|n| (0x1000, 266, Binding::Global, *n))
                .collect();
            assert_eq!(names(raw), ["<usize as core::fmt::Display>::fmt"]);
        }
        // Leading underscores are counted on demangled names: `_ZN3foo3barEv` is `foo::bar`,
        // with none, and beats a shorter C alias without any.
        let raw = vec![
            (0x1000, 8, Binding::Global, "foo_b"),
            (0x1000, 8, Binding::Global, "_ZN3foo3barEv"),
        ];
        assert_eq!(names(raw), ["foo::bar"]);
        // Size, weakness and binding come first; ties keep table order.
        let raw = vec![
            (0x1000, 8, Binding::Local, "a_long_local_name"),
            (0x1000, 8, Binding::Weak, "a_longer_weak_name"),
            (0x1000, 8, Binding::Global, "g"),
            (0x2000, 8, Binding::Global, "first"),
            (0x2000, 8, Binding::Global, "later"),
        ];
        assert_eq!(names(raw), ["g", "first"]);
    }

    /// Every symbol of `tables` holding one of `queries`, as lookup and bounds give them.
    fn looked_up(tables: &[SymbolTable], queries: &[u64]) -> Vec<String> {
        queries
            .iter()
            .map(|&q| {
                let sym = tables.iter().find_map(|t| t.lookup(q));
                let bounds = tables.iter().find_map(|t| t.bounds(q));
                format!("{q:#x}: {sym:?} {bounds:?}")
            })
            .collect()
    }

    #[test]
    fn the_parts_of_the_tables_a_lookup_reads_give_what_the_whole_tables_give() {
        // This test program (.symtab: tens of thousands of Rust and C symbols, aliases among
        // them), libc (.dynsym, aliases, a PLT) and Debian's gofmt (stripped: the functions
        // of the Go runtime's table, .gopclntab).
        let gofmt = std::path::PathBuf::from("/usr/bin/gofmt");
        assert!(
            gofmt.exists() || std::env::var_os("CI").is_none(),
            "golang-go is missing (scripts/setup installs it)"
        );
        let files = [
            std::env::current_exe().unwrap(),
            "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
        ]
        .into_iter()
        .chain(gofmt.exists().then_some(gofmt));
        for path in files {
            let bytes = std::fs::read(&path).unwrap();
            let name = path.display().to_string();
            let elf = ElfData::parse(name.clone(), crate::files::Bytes::Owned(bytes)).unwrap();
            let whole = symbol_tables(&elf, None);
            let symbols: usize = whole.iter().map(|t| t.syms.len()).sum();
            assert!(symbols > 1000, "{name}: {symbols} symbols");
            if name.ends_with("gofmt") {
                assert!(SymbolTable::of(&elf).is_none(), "{name} is not stripped");
            }
            // Starts, their neighbours and ends, and addresses between symbols, of every
            // `step`-th symbol: a few queries and many.
            for step in [997, 61, 3] {
                let queries: Vec<u64> = whole[0]
                    .syms
                    .iter()
                    .step_by(step)
                    .flat_map(|&(start, end, _)| {
                        [start - 1, start, start + 1, (start + end) / 2, end, end + 7]
                    })
                    .collect();
                let Tables::Part(part) = tables_near(&elf, None, &queries) else {
                    panic!("{name}: the whole tables were read");
                };
                assert_eq!(
                    looked_up(&part, &queries),
                    looked_up(&whole, &queries),
                    "{name}, every {step}th symbol"
                );
                // Each probed symbol, the ones before and after it, the next one's end; and
                // the PLT's entries.
                let probed = queries.len() / 6;
                let plt = SymbolTable::plt(&elf).len();
                let kept: usize = part.iter().map(|t| t.syms.len()).sum();
                assert!(
                    kept <= 4 * probed + plt,
                    "{name}: {kept} of {symbols} symbols kept for {probed} probed"
                );
            }
        }
    }

    /// `kept_symbols` reads table entries directly: it keeps what object's own reading of
    /// them gives, by perf's rules, for this test program's .symtab and libc's .dynsym.
    #[test]
    fn symbols_read_directly_are_those_objects_reading_gives() {
        use object::{SymbolFlags, SymbolSection};
        let files = [
            std::env::current_exe().unwrap(),
            "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
        ];
        for path in files {
            let bytes = std::fs::read(&path).unwrap();
            let obj = object::File::parse(&*bytes).unwrap();
            for dynamic in [false, true] {
                let mut direct = Vec::new();
                kept_symbols(&obj, dynamic, |start, size, binding, name| {
                    direct.push((start, size, binding, name.to_vec()));
                });
                let symbols: Vec<object::Symbol<'_, '_>> = match dynamic {
                    true => obj.dynamic_symbols().collect(),
                    false => obj.symbols().collect(),
                };
                let generic: Vec<_> = symbols
                    .iter()
                    .filter_map(|s| {
                        let SymbolFlags::Elf { st_info, st_other } = s.flags() else {
                            return None;
                        };
                        let wanted = match st_info.st_type() {
                            elf::STT_FUNC | elf::STT_GNU_IFUNC => true,
                            elf::STT_NOTYPE => {
                                matches!(s.section(), SymbolSection::Section(_))
                                    && !matches!(
                                        st_other.visibility(),
                                        elf::STV_HIDDEN | elf::STV_INTERNAL
                                    )
                            }
                            _ => false,
                        };
                        if !wanted || s.is_undefined() || s.address() == 0 {
                            return None;
                        }
                        let binding = match st_info.st_bind() {
                            elf::STB_WEAK => Binding::Weak,
                            elf::STB_GLOBAL | elf::STB_GNU_UNIQUE => Binding::Global,
                            _ => Binding::Local,
                        };
                        let name = s.name_bytes().ok()?.to_vec();
                        Some((s.address(), s.size(), binding, name))
                    })
                    .collect();
                assert!(
                    direct == generic,
                    "{}, dynamic {dynamic}: {} kept directly, {} by object",
                    path.display(),
                    direct.len(),
                    generic.len()
                );
                if dynamic == path.ends_with("libc.so.6") {
                    assert!(direct.len() > 1000, "{}: {}", path.display(), direct.len());
                }
            }
        }
    }

    /// PLT entries are named `target@plt`, the target demangled when first looked up.
    #[test]
    fn plt_entries_are_named_by_their_demangled_targets() {
        let path = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
        let bytes = std::fs::read(path).unwrap();
        let elf = ElfData::parse(path.into(), crate::files::Bytes::Owned(bytes)).unwrap();
        let plt = SymbolTable::plt(&elf);
        assert!(plt.len() > 500, "{} PLT entries", plt.len());
        // Nothing demangled yet: a profile looks up a few of them.
        assert!(plt.iter().all(|s| s.2.demangled.get().is_none()));
        let names: Vec<&str> = plt.iter().map(|s| s.2.get()).collect();
        assert!(names.iter().all(|n| n.ends_with("@plt")), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("_Z")), "{names:?}");
        assert!(
            names
                .iter()
                .any(|n| n.starts_with("std::") && n.contains("::")),
            "{names:?}"
        );
        assert!(names.contains(&"memcpy@plt"), "{names:?}");
    }
}
