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
    pub(crate) fn parse(text: &str) -> Option<Kallsyms> {
        let mut names = String::with_capacity(text.len() / 2);
        let mut syms: Vec<(u64, u32, u32)> = Vec::with_capacity(text.len() / 40);
        for l in text.lines() {
            let mut f = l.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if !matches!(kind, "T" | "t" | "W" | "w") {
                continue;
            }
            // BPF programs and ftrace/kprobe trampolines come and go: not the kernel's code,
            // and they would make a cached table wrong.
            if f.next()
                .is_some_and(|m| m == "[bpf]" || m.starts_with("[__builtin"))
            {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr != 0 {
                let at = names.len() as u32;
                names.push_str(name);
                syms.push((addr, at, names.len() as u32));
            }
        }
        if syms.is_empty() {
            // All addresses zero: kptr_restrict hides them.
            return None;
        }
        // Aliases at one address: perf keeps the last one listed (it gives each sizeless
        // symbol the room up to the next one, then prefers the alias with room).
        syms.sort_by_key(|s| s.0);
        syms.reverse();
        syms.dedup_by_key(|s| s.0);
        syms.reverse();
        let mut table = Vec::with_capacity(HEADER + syms.len() * ENTRY + names.len());
        table.extend_from_slice(&(syms.len() as u64).to_le_bytes());
        table.extend_from_slice(&(names.len() as u64).to_le_bytes());
        for (addr, start, end) in syms {
            table.extend_from_slice(&addr.to_le_bytes());
            table.extend_from_slice(&start.to_le_bytes());
            table.extend_from_slice(&end.to_le_bytes());
        }
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

    /// The symbol containing `addr` and its start.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.index_of(addr)?;
        Some((self.name(i), self.entry(i).0))
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
            if kept || matches!(name, "_text" | "_stext" | "_etext") {
                out.push_str(&format!("{:016x} T {name}\n", self.entry(i).0));
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
";
        let whole = Kallsyms::parse(text).unwrap();
        let addrs = [
            0xffff_ffff_8100_0180,
            0xffff_ffff_c000_1010,
            0xffff_ffff_c010_0004,
        ];
        let subset = Kallsyms::parse(&whole.subset_text(addrs)).unwrap();
        for a in addrs {
            assert_eq!(subset.lookup(a), whole.lookup(a), "at {a:#x}");
        }
        assert_eq!(whole.lookup(0xffff_ffff_c000_1010).unwrap().0, "_einittext");
        assert_eq!(subset.address_of("_text"), Some(0xffff_ffff_8100_0000));
    }
}
