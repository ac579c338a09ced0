//! The running kernel's text symbols, in one flat table that is either built from
//! /proc/kallsyms or memory-mapped from the cache ([`super::kallsyms_cache`]) as it lies on
//! disk: a cached table costs no parsing and no copy (reading it into memory was a tenth of
//! a report's CPU, most of it the kernel zeroing fresh pages).
//!
//! Table layout, little-endian: symbol count `n` (u64), names length (u64), `n` entries
//! (address u64, name start u32, name end u32) sorted by address, then the names.

use super::elf::Bytes;

const HEADER: usize = 16;
const ENTRY: usize = 16;

/// Kernel text symbols of the running kernel (and its modules), sorted by address.
pub struct Kallsyms {
    bytes: Bytes,
    /// Where the table starts in `bytes`.
    at: usize,
    n: usize,
}

impl Kallsyms {
    /// The table at `at` of `bytes`; `None` unless it is whole, sorted and in bounds.
    pub(crate) fn from_table(bytes: Bytes, at: usize) -> Option<Kallsyms> {
        let u64_at = |o: usize| Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?));
        let n = usize::try_from(u64_at(at)?).ok()?;
        let names_len = usize::try_from(u64_at(at + 8)?).ok()?;
        let names_at = at.checked_add(HEADER)?.checked_add(n.checked_mul(ENTRY)?)?;
        if n == 0 || bytes.len() != names_at.checked_add(names_len)? {
            return None;
        }
        let k = Kallsyms { bytes, at, n };
        let mut last = 0;
        for e in k.entries() {
            let (addr, start, end) = decode(e);
            if addr < last || start > end || end as usize > names_len {
                return None;
            }
            last = addr;
        }
        Some(k)
    }

    /// Parses /proc/kallsyms text (kept: text symbols with an address).
    ///
    /// kallsyms gives no sizes: a symbol ends where the next one starts, except where code of
    /// another kind begins: the last symbol of the kernel or of a module ends on the page
    /// after its start (as perf ends it), and where a BPF program or an ftrace trampoline
    /// (`[bpf]`, `[__builtin*]`: they come and go, and would make a cached table wrong) starts,
    /// the symbol before it ends. Those ends are entries without a name.
    pub(crate) fn parse(text: &str) -> Option<Kallsyms> {
        Kallsyms::parse_where(text, |module| {
            module.is_none_or(|m| m != "[bpf]" && !m.starts_with("[__builtin"))
        })
    }

    /// Parses the BPF programs of /proc/kallsyms text (`[bpf]` lines) alone: what the running
    /// kernel has loaded now.
    pub(crate) fn parse_bpf(text: &str) -> Option<Kallsyms> {
        Kallsyms::parse_where(text, |module| module == Some("[bpf]"))
    }

    /// Parses the text symbols whose module (`[name]`, none for the kernel's own) `keep`
    /// accepts; the others end the symbols before them.
    fn parse_where(text: &str, keep: impl Fn(Option<&str>) -> bool) -> Option<Kallsyms> {
        // (address, module, name, kept), in the order listed.
        let mut lines: Vec<(u64, Option<&str>, &str, bool)> = Vec::with_capacity(text.len() / 40);
        for l in text.lines() {
            let mut f = l.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if !matches!(kind, "T" | "t" | "W" | "w") {
                continue;
            }
            let module = f.next();
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr != 0 {
                lines.push((addr, module, name, keep(module)));
            }
        }
        if !lines.iter().any(|l| l.3) {
            // All addresses zero (kptr_restrict hides them), or none kept.
            return None;
        }
        lines.sort_by_key(|l| l.0);
        const PAGE: u64 = 4096;
        // (address, rank, name): an end has rank 0, a symbol its place in the listing + 1.
        let mut syms: Vec<(u64, usize, &str)> = Vec::with_capacity(lines.len());
        for (i, &(addr, module, name, kept)) in lines.iter().enumerate() {
            if !kept {
                syms.push((addr, 0, ""));
                continue;
            }
            syms.push((addr, i + 1, name));
            // The last symbol of its kind: it ends on the page after its start.
            let next = lines[i + 1..].iter().find(|l| l.0 > addr);
            if next.is_none_or(|n| n.1 != module) {
                let end = (addr + PAGE).div_ceil(PAGE) * PAGE;
                if next.is_none_or(|n| end < n.0) {
                    syms.push((end, 0, ""));
                }
            }
        }
        // Aliases at one address: perf keeps the last one listed (it gives each sizeless
        // symbol the room up to the next one, then prefers the alias with room); a symbol
        // over an end.
        syms.sort_by_key(|s| (s.0, s.1));
        // `_text` and `_stext` name where the kernel's text starts, which a later boot's
        // shift is found by ([`Kallsyms::shift`]), and which an archive's subset must keep;
        // newer kernels (this machine's 6.18) list `__pi__text` after them at one address, which the
        // rule above keeps. They stay too, just before it: lookups find the last entry at an
        // address, [`Kallsyms::address_of`] finds them.
        let starts: Vec<(u64, usize, &str)> = syms
            .iter()
            .filter(|s| matches!(s.2, "_text" | "_stext"))
            .copied()
            .collect();
        syms.reverse();
        syms.dedup_by_key(|s| s.0);
        syms.reverse();
        for start in starts {
            if !syms.contains(&start) {
                let at = syms.partition_point(|s| s.0 < start.0);
                syms.insert(at, start);
            }
        }
        let mut names = String::with_capacity(text.len() / 2);
        let mut table = Vec::with_capacity(HEADER + syms.len() * ENTRY + text.len() / 2);
        table.extend_from_slice(&(syms.len() as u64).to_le_bytes());
        table.extend_from_slice(&0u64.to_le_bytes());
        for (addr, _, name) in syms {
            let start = names.len() as u32;
            names.push_str(name);
            table.extend_from_slice(&addr.to_le_bytes());
            table.extend_from_slice(&start.to_le_bytes());
            table.extend_from_slice(&(names.len() as u32).to_le_bytes());
        }
        table[8..16].copy_from_slice(&(names.len() as u64).to_le_bytes());
        table.extend_from_slice(names.as_bytes());
        Kallsyms::from_table(Bytes::Owned(table), 0)
    }

    /// The table as [`Kallsyms::from_table`] reads it (for the cache).
    pub(crate) fn table(&self) -> &[u8] {
        &self.bytes[self.at..]
    }

    /// The sorted entries, each as it lies in the table (see [`decode`]).
    fn entries(&self) -> &[[u8; ENTRY]] {
        let table = &self.bytes[self.at + HEADER..][..self.n * ENTRY];
        table.as_chunks().0
    }

    fn entry(&self, i: usize) -> (u64, u32, u32) {
        decode(&self.entries()[i])
    }

    fn name_bytes(&self, i: usize) -> &[u8] {
        let (_, start, end) = self.entry(i);
        let names = &self.bytes[self.at + HEADER + self.n * ENTRY..];
        &names[start as usize..end as usize]
    }

    /// The name of symbol `i` (`[unknown]` if the table holds no UTF-8 there).
    fn name(&self, i: usize) -> &str {
        std::str::from_utf8(self.name_bytes(i)).unwrap_or(crate::UNKNOWN)
    }

    /// The address of the symbol `name`.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        (0..self.n)
            .find(|&i| self.name_bytes(i) == name.as_bytes())
            .map(|i| self.entry(i).0)
    }

    /// The symbol containing `addr` and its start. Past the end of a symbol (see
    /// [`Kallsyms::parse`]) and past `_etext` or `_einittext` (the ends of the kernel's text
    /// and init text, not functions), none: an offset there would be larger than the symbol.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.index_of(addr)?;
        let name = self.name(i);
        if matches!(name, "" | "_etext" | "_einittext") {
            return None;
        }
        Some((name, self.entry(i).0))
    }

    fn index_of(&self, addr: u64) -> Option<usize> {
        self.entries()
            .partition_point(|e| decode(e).0 <= addr)
            .checked_sub(1)
    }

    /// The shift from a recording's kernel addresses to these symbols' (KASLR of another
    /// boot). The recording names the kernel mapping after the symbol its page offset is the
    /// address of (`[kernel.kallsyms]_text`, older perf `[kernel.kallsyms]_stext`): `mapping`
    /// is that name and page offset; 0 when it does not say.
    pub fn shift(&self, mapping: Option<(&str, u64)>) -> u64 {
        mapping
            .filter(|&(_, pgoff)| pgoff != 0)
            .and_then(|(path, pgoff)| {
                let symbol = path.strip_prefix("[kernel.kallsyms]")?;
                Some(self.address_of(symbol)?.wrapping_sub(pgoff))
            })
            .unwrap_or(0)
    }

    /// As much of this table as `addrs` need, as /proc/kallsyms text: for each address the
    /// symbol holding it and the next one (where it ends), and `_text`, `_stext`, `_etext`
    /// (a later boot's shift). Parsed again, it gives what this table gives at `addrs`.
    pub fn subset_text(&self, addrs: impl IntoIterator<Item = u64>) -> String {
        let mut keep = vec![false; self.n];
        for a in addrs {
            if let Some(i) = self.index_of(a) {
                keep[i] = true;
                if let Some(next) = keep.get_mut(i + 1) {
                    *next = true;
                }
            }
        }
        let mut out = String::new();
        for (i, kept) in keep.into_iter().enumerate() {
            let name = self.name(i);
            let addr = self.entry(i).0;
            if name.is_empty() {
                // An end: where a BPF program starts, as kallsyms lists one.
                if kept {
                    out.push_str(&format!("{addr:016x} t bpfperf_end\t[bpf]\n"));
                }
            } else if kept || matches!(name, "_text" | "_stext" | "_etext") {
                out.push_str(&format!("{addr:016x} T {name}\n"));
            }
        }
        out
    }
}

/// An entry: address, and start and end of the name in the names.
fn decode(e: &[u8; ENTRY]) -> (u64, u32, u32) {
    let addr = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
    let start = u32::from_le_bytes(e[8..12].try_into().expect("4 bytes"));
    let end = u32::from_le_bytes(e[12..].try_into().expect("4 bytes"));
    (addr, start, end)
}

#[cfg(test)]
mod tests {
    use super::Kallsyms;

    #[test]
    fn a_subset_names_its_addresses_as_the_whole_table_does() {
        // A data symbol and a BPF program between text symbols: the lookups skip both.
        let text = "\
ffffffff81000000 T _text
ffffffff81000100 T start_kernel
ffffffff81200000 T _etext
ffffffff81300000 T _einittext
ffffffff81300010 d some_data
ffffffffc0001000 t bpf_prog_1234_handler [bpf]
ffffffffc0100000 t mod_func [some_module]
ffffffffc0100200 t mod_other [some_module]
ffffffffc0104000 t bpf_prog_5678_handler [bpf]
ffffffffc0200000 t other_func [other_module]
";
        let whole = Kallsyms::parse(text).unwrap();
        let addrs = [
            0xffff_ffff_8100_0180,
            0xffff_ffff_c000_1010,
            0xffff_ffff_c010_0004,
            0xffff_ffff_c010_0204,
            0xffff_ffff_c010_4010,
            0xffff_ffff_c020_0004,
            0xffff_ffff_c020_1ff0,
            0xffff_ffff_c020_2010,
        ];
        let subset = Kallsyms::parse(&whole.subset_text(addrs)).unwrap();
        for a in addrs {
            assert_eq!(subset.lookup(a), whole.lookup(a), "at {a:#x}");
        }
        assert_eq!(subset.address_of("_text"), Some(0xffff_ffff_8100_0000));
        assert_eq!(
            whole.lookup(0xffff_ffff_c010_0204),
            Some(("mod_other", 0xffff_ffff_c010_0200))
        );
    }

    /// Newer kernels (6.18 here) list `__pi__text` after `_stext` and `_text` at one address: the
    /// lookup there names it, as perf does, and `_text` is still found for a later boot's
    /// shift, also in an archive's subset.
    #[test]
    fn text_start_aliases_keep_text_for_the_shift() {
        let text = "\
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81000000 T __pi__text
ffffffff81000100 T start_kernel
ffffffff81200000 T _etext
";
        let k = Kallsyms::parse(text).unwrap();
        assert_eq!(k.address_of("_text"), Some(0xffff_ffff_8100_0000));
        assert_eq!(k.address_of("_stext"), Some(0xffff_ffff_8100_0000));
        assert_eq!(
            k.lookup(0xffff_ffff_8100_0010),
            Some(("__pi__text", 0xffff_ffff_8100_0000))
        );
        assert_eq!(
            k.lookup(0xffff_ffff_8100_0110),
            Some(("start_kernel", 0xffff_ffff_8100_0100))
        );
        // Recorded at _text = 0xffffffff81000000, now at 0xffffffff9a000000.
        let later = Kallsyms::parse(&text.replace("ffffffff81", "ffffffff9a")).unwrap();
        let shift = later.shift(Some(("[kernel.kallsyms]_text", 0xffff_ffff_8100_0000)));
        assert_eq!(shift, 0x1900_0000);
        let subset = Kallsyms::parse(&k.subset_text([0xffff_ffff_8100_0110])).unwrap();
        assert_eq!(subset.address_of("_text"), Some(0xffff_ffff_8100_0000));
    }

    #[test]
    fn no_symbol_is_given_an_offset_past_its_end() {
        let text = "\
ffffffff81000000 T _text
ffffffff81000100 T start_kernel
ffffffff81200000 T _etext
ffffffff81300000 T init_func
ffffffff81300100 T _einittext
ffffffffc0001000 t bpf_prog_1234_handler\t[bpf]
ffffffffc0100000 t mod_func\t[some_module]
ffffffffc0100200 t mod_other\t[some_module]
ffffffffc0104000 t bpf_prog_5678_handler\t[bpf]
ffffffffc0104800 t mod_late\t[some_module]
ffffffffc0200000 t other_func\t[other_module]
";
        let k = Kallsyms::parse(text).unwrap();
        let name = |a: u64| k.lookup(a).map(|(n, _)| n);
        assert_eq!(name(0xffff_ffff_8100_0180), Some("start_kernel"));
        // The ends of the kernel's text and init text are not functions.
        assert_eq!(name(0xffff_ffff_8120_0010), None);
        assert_eq!(name(0xffff_ffff_8130_0010), Some("init_func"));
        // A BPF program loaded after the kernel's text: not `_einittext+0x3ed00f10`.
        assert_eq!(name(0xffff_ffff_c000_1010), None);
        // A module's last symbol before a BPF program ends where the program starts...
        assert_eq!(name(0xffff_ffff_c010_1000), Some("mod_other"));
        assert_eq!(name(0xffff_ffff_c010_4010), None);
        assert_eq!(name(0xffff_ffff_c010_4810), Some("mod_late"));
        // ...and the last one before another module, on the page after its start, as perf
        // ends it: code loaded after it the table does not list is not its.
        assert_eq!(name(0xffff_ffff_c010_5fff), Some("mod_late"));
        assert_eq!(name(0xffff_ffff_c010_6000), None);
        assert_eq!(name(0xffff_ffff_c01f_0000), None);
        // The last symbol of all, the same.
        assert_eq!(name(0xffff_ffff_c020_0ff0), Some("other_func"));
        assert_eq!(name(0xffff_ffff_c020_1000), None);

        // The BPF programs alone, as the running kernel lists them.
        let bpf = Kallsyms::parse_bpf(text).unwrap();
        assert_eq!(
            bpf.lookup(0xffff_ffff_c000_1010),
            Some(("bpf_prog_1234_handler", 0xffff_ffff_c000_1000))
        );
        assert_eq!(bpf.lookup(0xffff_ffff_c010_0004), None);
        assert_eq!(
            bpf.lookup(0xffff_ffff_c010_4010).map(|h| h.0),
            Some("bpf_prog_5678_handler")
        );
        assert_eq!(bpf.lookup(0xffff_ffff_c010_4810), None);
    }
}
