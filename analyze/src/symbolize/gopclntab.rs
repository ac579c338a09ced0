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

/// The table's functions (see [`functions`]); every offset checked against the table's size,
/// so a damaged table gives `None` or fewer names, never more work than its size allows.
fn parse(t: &[u8], text: u64) -> Option<Vec<(u64, u64, String)>> {
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
    let names = t.get(funcname..)?;
    let functab = t.get(pcln..)?;
    // nfunc + 1 entries (the last one ends the last function): (entry, func offset).
    let entry_size = if wide { 16 } else { 8 };
    if nfunc.checked_add(1)?.checked_mul(entry_size)? > functab.len() {
        return None;
    }
    let entry = |i: usize| -> Option<(u64, usize)> {
        let at = i * entry_size;
        if wide {
            Some((u64_at(functab, at)?, offset_at(functab, at + 8)?))
        } else {
            let off = u64::from(u32_at(functab, at)?);
            Some((
                text_start.checked_add(off)?,
                u32_at(functab, at + 4)? as usize,
            ))
        }
    };
    // Where each name ends: the next NUL, found by a binary search among all of them (a
    // damaged table's names without one must not be scanned again for every function).
    let nuls: Vec<usize> = names
        .iter()
        .enumerate()
        .filter_map(|(i, &c)| (c == 0).then_some(i))
        .collect();
    let mut out = Vec::with_capacity(nfunc);
    for i in 0..nfunc {
        let (start, func) = entry(i)?;
        let (end, _) = entry(i + 1)?;
        // The func record: its entry (uintptr or u32), then nameOff (i32) into the names.
        let name_field = func.checked_add(if wide { 8 } else { 4 })?;
        let name_off = u32_at(functab, name_field)? as usize;
        let end_of_name = nuls.get(nuls.partition_point(|&z| z < name_off)).copied();
        let Some(name) = end_of_name
            .and_then(|e| names.get(name_off..e))
            .and_then(|n| std::str::from_utf8(n).ok())
        else {
            continue;
        };
        if end > start && !name.is_empty() {
            out.push((start, end, name.to_string()));
        }
    }
    out.sort_unstable_by_key(|f| f.0);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Go 1.18 table of two functions at text + 0x10 and + 0x40, ending at + 0x80.
    fn table() -> Vec<u8> {
        let mut t = Vec::new();
        t.extend(GO_118.to_le_bytes());
        t.extend([0, 0, 1, 8]);
        let header = 8 + 8 * 8;
        let names = b"main.main\0main.work\0";
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
        for (entry, name) in [(0x10u32, 0u32), (0x40, 10)] {
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
    fn damaged_tables_give_nothing_or_less() {
        let t = table();
        for cut in 0..t.len() {
            let _ = parse(&t[..cut], 0);
        }
        let mut huge = t.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&huge, 0).is_none());
        let mut other = t;
        other[0] = 0;
        assert!(parse(&other, 0).is_none());
    }
}
