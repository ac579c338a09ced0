//! Function names from ELF symbol tables, picked among aliases as perf picks them, and
//! `name@plt` entries synthesized as perf does.

use object::{elf, Object, ObjectSection, ObjectSymbol, SymbolFlags, SymbolSection};

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
        // perf's choice of symbols: functions (FUNC, GNU_IFUNC) and labels (NOTYPE, defined
        // in a section, not hidden or internal), named, defined.
        let collect = |dynamic: bool| {
            let iter: Box<dyn Iterator<Item = object::Symbol<'_, '_>>> = if dynamic {
                Box::new(obj.dynamic_symbols())
            } else {
                Box::new(obj.symbols())
            };
            // Room for every symbol (functions are most; 24 bytes each): growing by doubling
            // would copy. Sized by the section, which a damaged file cannot make larger.
            let table = if dynamic { ".dynsym" } else { ".symtab" };
            let count = obj.section_by_name(table).map_or(0, |t| t.size() / 24);
            let mut raw: Vec<(u64, u64, Binding, &str)> =
                Vec::with_capacity(count.min(elf.bytes.len() as u64 / 24) as usize);
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
        Some(SymbolTable { syms: choose(raw) })
    }

    /// Symbols for the PLT entries of `elf` (`name@plt`, as perf synthesizes them): entry `i`
    /// of `.plt` (after its 16-byte header), or of `.plt.sec` where there is one, jumps
    /// through relocation `i` of `.rela.plt`, named by its dynamic symbol (empty for
    /// IRELATIVE). x86-64 entries are 16 bytes.
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
                    .map(demangle)
                    .unwrap_or_default();
                let start = first + i as u64 * ENTRY;
                (start, start + ENTRY, Name::demangled(format!("{name}@plt")))
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

/// A file's symbol tables, built once and kept with the file ([`ElfData::derived`]).
#[derive(Default)]
struct Tables(OnceLock<Vec<SymbolTable>>);

/// The symbol tables of `elf` and of its debug file (built once).
pub(super) fn tables<'e>(elf: &'e ElfData, debug: Option<&ElfData>) -> &'e [SymbolTable] {
    elf.derived
        .get::<Tables>()
        .0
        .get_or_init(|| symbol_tables(elf, debug))
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
            let syms = functions
                .into_iter()
                .map(|(start, end, name)| (start, end, Name::demangled(name)))
                .collect();
            tables.push(SymbolTable { syms });
        }
    }
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
}
