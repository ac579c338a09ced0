//! Function names of stripped Go programs, from `.gopclntab`: the table the Go runtime keeps
//! to name its own stack traces, which `-ldflags=-s` and Debian's packaging leave in place
//! when they strip `.symtab` (perf has no reader for it and names all of their code
//! `[unknown]`). Formats of Go 1.16 to 1.22+ (magics 0xfffffffa, 0xfffffff0, 0xfffffff1),
//! little-endian, 8-byte pointers; any other table gives no names.

use object::{Object, ObjectSection};

use crate::files::ElfData;

const GO_116: u32 = 0xffff_fffa;
const GO_118: u32 = 0xffff_fff0;
const GO_120: u32 = 0xffff_fff1;

/// (start, end, name) of each function the table lists, sorted by start; `None` where the
/// file has no `.gopclntab` of a known format, or it is damaged.
pub(super) fn functions(elf: &ElfData) -> Option<Vec<(u64, u64, String)>> {
    let obj = object::File::parse(&*elf.bytes).ok()?;
    let data = obj.section_by_name(".gopclntab")?.data().ok()?;
    // A position-independent program's table has its text start relocated at run time (0 in
    // the file): the start of .text, where Go's linker puts runtime.text.
    let text = obj.section_by_name(".text").map_or(0, |s| s.address());
    parse(data, text)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn offset_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64_at(b, at)?).ok()
}

/// A function table's header, read: where its entries and names are.
struct Table<'t> {
    names: &'t [u8],
    functab: &'t [u8],
    nfunc: usize,
    text_start: u64,
    /// Go 1.16's layout: entries of (u64 entry, u64 func offset); later, (u32, u32).
    wide: bool,
}

impl<'t> Table<'t> {
    /// The table `t`'s header; `None` where it is of no known format, or its entries do not
    /// fit in it.
    fn read(t: &'t [u8], text: u64) -> Option<Table<'t>> {
        let magic = u32_at(t, 0)?;
        // Header: magic, two pad bytes, min instruction size, pointer size, then words.
        if *t.get(7)? != 8 {
            return None;
        }
        let word = |i: usize| offset_at(t, 8 + 8 * i);
        let (nfunc, text_start, funcname, pcln, wide) = match magic {
            GO_118 | GO_120 => {
                let start = match u64_at(t, 8 + 16)? {
                    0 => text,
                    s => s,
                };
                (word(0)?, start, word(3)?, word(7)?, false)
            }
            GO_116 => (word(0)?, 0, word(2)?, word(6)?, true),
            _ => return None,
        };
        let table = Table {
            names: t.get(funcname..)?,
            functab: t.get(pcln..)?,
            nfunc,
            text_start,
            wide,
        };
        // nfunc + 1 entries (the last one ends the last function): (entry, func offset).
        if nfunc.checked_add(1)?.checked_mul(table.entry_size())? > table.functab.len() {
            return None;
        }
        Some(table)
    }

    fn entry_size(&self) -> usize {
        if self.wide {
            16
        } else {
            8
        }
    }

    /// Entry `i`: where its function starts, and the offset of its func record.
    fn entry(&self, i: usize) -> Option<(u64, usize)> {
        let at = i * self.entry_size();
        if self.wide {
            Some((u64_at(self.functab, at)?, offset_at(self.functab, at + 8)?))
        } else {
            let off = u64::from(u32_at(self.functab, at)?);
            Some((
                self.text_start.checked_add(off)?,
                u32_at(self.functab, at + 4)? as usize,
            ))
        }
    }

    /// Where the name of the func record at `func` starts in the names.
    fn name_at(&self, func: usize) -> Option<usize> {
        // The func record: its entry (uintptr or u32), then nameOff (i32) into the names.
        let name_field = func.checked_add(if self.wide { 8 } else { 4 })?;
        Some(u32_at(self.functab, name_field)? as usize)
    }

    /// Function `i` as (start, end, name), given where its name ends (`name_end`); `None`
    /// where it is unnamed, empty or unreadable (the whole table leaves those out).
    fn function(
        &self,
        i: usize,
        name_end: impl Fn(usize) -> Option<usize>,
    ) -> Option<(u64, u64, &'t str)> {
        let (start, func) = self.entry(i)?;
        let (end, _) = self.entry(i + 1)?;
        let name_off = self.name_at(func)?;
        let name = self.names.get(name_off..name_end(name_off)?)?;
        let name = std::str::from_utf8(name).ok()?;
        (end > start && !name.is_empty()).then_some((start, end, name))
    }
}

/// The table's functions (see [`functions`]); every offset checked against the table's size,
/// so a damaged table gives `None` or fewer names, never more work than its size allows.
fn parse(t: &[u8], text: u64) -> Option<Vec<(u64, u64, String)>> {
    let table = Table::read(t, text)?;
    // Where each name ends: the next NUL, found by a binary search among all of them (a
    // damaged table's names without one must not be scanned again for every function).
    let nuls: Vec<usize> = (table.names.iter().enumerate())
        .filter_map(|(i, &c)| (c == 0).then_some(i))
        .collect();
    let name_end = |at: usize| nuls.get(nuls.partition_point(|&z| z < at)).copied();
    let mut out = Vec::with_capacity(table.nfunc);
    for i in 0..table.nfunc {
        table.entry(i)?;
        table.entry(i + 1)?;
        if let Some((start, end, name)) = table.function(i, name_end) {
            out.push((start, end, name.to_string()));
        }
    }
    out.sort_unstable_by_key(|f| f.0);
    Some(out)
}

/// How far a name's end is looked for from its start, when only some functions are named
/// ([`functions_near`]); past it, the whole table is read instead.
const LONGEST_NAME: usize = 4096;

/// The functions [`functions`] gives that looking up `queries` (sorted, deduplicated) reads:
/// for each, the function of the last entry starting at or before it, sorted. Go's linker
/// writes the entries in order of their starts, and the runtime searches them so; lookups
/// of the queries then give what the whole list gives (an entry left out, unnamed, ends
/// where the next begins, so the one before it does not reach the query either). `None`:
/// no known table, entries out of order where a query fell, or a name not ended within
/// [`LONGEST_NAME`] bytes; the whole list decides then. (gofmt's 5,000 functions, all named
/// and sorted for a profile touching a few hundred: 1.5 ms of a 25 ms report.)
pub(super) fn functions_near(elf: &ElfData, queries: &[u64]) -> Option<Vec<(u64, u64, String)>> {
    let obj = object::File::parse(&*elf.bytes).ok()?;
    let data = obj.section_by_name(".gopclntab")?.data().ok()?;
    let text = obj.section_by_name(".text").map_or(0, |s| s.address());
    near(data, text, queries)
}

/// [`functions_near`] of the table `t`.
fn near(t: &[u8], text: u64, queries: &[u64]) -> Option<Vec<(u64, u64, String)>> {
    let table = Table::read(t, text)?;
    let names = table.names;
    // Set where a name runs past LONGEST_NAME without ending: only the whole table's search
    // (by every NUL) tells where it ends.
    let too_long = std::cell::Cell::new(false);
    let name_end = |at: usize| {
        let rest = names.get(at..)?;
        let window = &rest[..rest.len().min(LONGEST_NAME)];
        let end = window.iter().position(|&c| c == 0).map(|n| at + n);
        too_long.set(too_long.get() || (end.is_none() && rest.len() > LONGEST_NAME));
        end
    };
    let start_of = |i: usize| table.entry(i).map(|(start, _)| start);
    let mut out: Vec<(u64, u64, String)> = Vec::new();
    let mut last = None;
    for &q in queries {
        // The last entry starting at or before q (binary search over entries 0..nfunc).
        let (mut lo, mut hi) = (0, table.nfunc);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if start_of(mid)? <= q {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let Some(i) = lo.checked_sub(1) else {
            continue;
        };
        if last == Some(i) {
            continue;
        }
        last = Some(i);
        // In order around it, as the search assumed.
        if i > 0 && start_of(i - 1)? > start_of(i)? || start_of(i + 1)? < start_of(i)? {
            return None;
        }
        let function = table.function(i, name_end);
        if too_long.get() {
            return None;
        }
        if let Some((start, end, name)) = function {
            out.push((start, end, name.to_string()));
        }
    }
    out.sort_unstable_by_key(|f| f.0);
    out.dedup_by_key(|f| f.0);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Go 1.18 table of two functions at text + 0x10 and + 0x40, ending at + 0x80.
    fn table() -> Vec<u8> {
        table_named(b"main.main\0main.work\0", [0, 10])
    }

    /// [`table`] with the names `names`, the functions' at offsets `offsets` in them.
    fn table_named(names: &[u8], offsets: [u32; 2]) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend(GO_118.to_le_bytes());
        t.extend([0, 0, 1, 8]);
        let header = 8 + 8 * 8;
        let funcname = header;
        let pcln = funcname + names.len();
        // nfunc, nfiles, textStart, funcnameOffset, cuOffset, filetabOffset, pctabOffset,
        // pclnOffset
        for w in [2, 0, 0x40_1000, funcname as u64, 0, 0, 0, pcln as u64] {
            t.extend(w.to_le_bytes());
        }
        t.extend(names);
        // functab: 3 entries, then the two func records (entryOff, nameOff).
        let funcs = 3 * 8;
        for (entry, func) in [(0x10u32, funcs), (0x40, funcs + 8), (0x80, 0)] {
            t.extend(entry.to_le_bytes());
            t.extend((func as u32).to_le_bytes());
        }
        for (entry, name) in [(0x10u32, offsets[0]), (0x40, offsets[1])] {
            t.extend(entry.to_le_bytes());
            t.extend(name.to_le_bytes());
        }
        t
    }

    #[test]
    fn functions_are_read_with_their_ends() {
        assert_eq!(
            parse(&table(), 0).unwrap(),
            [
                (0x40_1010, 0x40_1040, "main.main".to_string()),
                (0x40_1040, 0x40_1080, "main.work".to_string())
            ]
        );
    }

    #[test]
    fn functions_near_queries_are_the_whole_tables_that_hold_them() {
        let t = table();
        let main = (0x40_1010, 0x40_1040, "main.main".to_string());
        let work = (0x40_1040, 0x40_1080, "main.work".to_string());
        let both = [main, work];
        assert_eq!(near(&t, 0, &[0x40_1000]).unwrap(), []);
        assert_eq!(near(&t, 0, &[0x40_1010, 0x40_103f]).unwrap(), both[..1]);
        assert_eq!(near(&t, 0, &[0x40_1011, 0x40_1050]).unwrap(), both);
        // Past the last function: the last entry ends it, nothing holds the query.
        assert_eq!(near(&t, 0, &[0x40_1050, 0x40_1090]).unwrap(), both[1..]);
        // Entries out of order where a query falls: the whole table decides.
        let mut unsorted = t.clone();
        let functab = 8 + 8 * 8 + 20;
        unsorted[functab + 8..functab + 12].copy_from_slice(&0x08u32.to_le_bytes());
        assert_eq!(near(&unsorted, 0, &[0x40_1011]), None);
        // A name not ended within LONGEST_NAME bytes: the whole table decides, where a query
        // falls in its function only.
        let mut long = b"main.main\0".to_vec();
        long.resize(10 + LONGEST_NAME + 1, b'x');
        let long = table_named(&long, [0, 10]);
        assert_eq!(near(&long, 0, &[0x40_1011]).unwrap(), both[..1]);
        assert_eq!(near(&long, 0, &[0x40_1011, 0x40_1050]), None);
    }

    #[test]
    fn damaged_tables_give_nothing_or_less() {
        let t = table();
        for cut in 0..t.len() {
            let _ = parse(&t[..cut], 0);
            let _ = near(&t[..cut], 0, &[0x40_1000, 0x40_1010, 0x40_1050, 0x40_1090]);
        }
        let mut huge = t.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&huge, 0).is_none());
        let mut other = t;
        other[0] = 0;
        assert!(parse(&other, 0).is_none());
    }
}
