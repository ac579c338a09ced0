//! A code object's name, file and lines, read from the process's memory (`/proc/PID/mem`)
//! when record first meets it, and the line of an instruction from its location table.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::frame_objects;
use super::offsets::Lines;
use super::offsets::Offsets;

/// Characters of a name or file name kept.
const MAX_STRING: usize = 4096;
/// Bytes of a location table read.
const MAX_LINETABLE: usize = 1 << 20;

/// What a frame's name needs from its code object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    /// `co_qualname` (`Class.method`).
    pub name: String,
    pub file: String,
    pub first_line: u32,
    /// `co_linetable` (the 3.11 location table; before 3.11, as `lines` says).
    pub linetable: Vec<u8>,
    pub lines: Lines,
    /// What tells this code object from another later put at its address ([`identity`]).
    pub identity: Identity,
}

/// A code object's name, file and location table objects and first line, from its head:
/// another code object put at a freed one's address (pymalloc reuses it for the next of its
/// size: a module's code, freed once the module ran, then a function's) differs in one of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Identity {
    name: u64,
    file: u64,
    linetable: u64,
    first_line: i32,
}

fn identity_of(head: &[u8], o: &Offsets) -> Option<Identity> {
    let first = o.code_firstlineno as usize;
    Some(Identity {
        name: u64_at(head, o.code_qualname)?,
        file: u64_at(head, o.code_filename)?,
        linetable: u64_at(head, o.code_linetable)?,
        first_line: i32::from_ne_bytes(head.get(first..first + 4)?.try_into().ok()?),
    })
}

/// The identity of the code object at `addr` now: one read, where [`read`] takes four.
pub fn identity(mem: &File, addr: u64, o: &Offsets) -> Option<Identity> {
    identity_of(&read_exact(mem, addr, o.code_code_adaptive as usize)?, o)
}

fn read_exact(mem: &File, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    mem.read_exact_at(&mut buf, addr).ok()?;
    Some(buf)
}

fn u64_at(b: &[u8], off: u16) -> Option<u64> {
    let off = off as usize;
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// A `str` object's text (compact strings: every string the compiler makes is one).
fn read_str(mem: &File, addr: u64, o: &Offsets) -> Option<String> {
    let head = read_exact(mem, addr, o.unicode_compact_data as usize)?;
    let len = (u64_at(&head, o.unicode_length)? as usize).min(MAX_STRING);
    let state = u32::from_ne_bytes(
        head.get(o.unicode_state as usize..)?
            .get(..4)?
            .try_into()
            .ok()?,
    );
    let kind = (state >> 2) & 7;
    let compact = state >> 5 & 1 == 1;
    let ascii = state >> 6 & 1 == 1;
    if !compact {
        return None;
    }
    if ascii {
        let data = read_exact(mem, addr + o.unicode_ascii_data as u64, len)?;
        return String::from_utf8(data).ok();
    }
    let width = match kind {
        1 | 2 | 4 => kind as usize,
        _ => return None,
    };
    let data = read_exact(mem, addr + o.unicode_compact_data as u64, len * width)?;
    let chars = data.chunks_exact(width).map(|c| match width {
        1 => c[0] as u32,
        2 => u16::from_ne_bytes([c[0], c[1]]) as u32,
        _ => u32::from_ne_bytes([c[0], c[1], c[2], c[3]]),
    });
    Some(chars.map(|c| char::from_u32(c).unwrap_or('?')).collect())
}

/// Reads the code object at `addr`; `None` if its memory cannot be read or is no code.
pub fn read(mem: &File, addr: u64, o: &Offsets) -> Option<Code> {
    let head = read_exact(mem, addr, o.code_code_adaptive as usize)?;
    let identity = identity_of(&head, o)?;
    let name = read_str(mem, identity.name, o)?;
    let file = read_str(mem, identity.file, o)?;
    let table = identity.linetable;
    let linetable = read_exact(mem, table, o.bytes_data as usize)
        .and_then(|b| u64_at(&b, o.var_size))
        .and_then(|n| {
            read_exact(
                mem,
                table + o.bytes_data as u64,
                (n as usize).min(MAX_LINETABLE),
            )
        })
        .unwrap_or_default();
    Some(Code {
        name,
        file,
        first_line: identity.first_line.max(0) as u32,
        linetable,
        lines: o.lines,
        identity,
    })
}

/// Reads a varint of the location table (6 bits a byte, bit 6: more follow).
fn varint(t: &[u8], i: &mut usize) -> Option<u32> {
    let mut value = 0u32;
    let mut shift = 0;
    loop {
        let b = *t.get(*i)?;
        *i += 1;
        value |= ((b & 63) as u32).checked_shl(shift)?;
        if b & 64 == 0 {
            return Some(value);
        }
        shift += 6;
    }
}

fn svarint(t: &[u8], i: &mut usize) -> Option<i32> {
    let v = varint(t, i)?;
    Some(if v & 1 == 1 {
        -((v >> 1) as i32)
    } else {
        (v >> 1) as i32
    })
}

impl Code {
    /// The source line of the instruction at byte offset `lasti` of the bytecode, from the
    /// location table (CPython's Objects/locations.md: entries of a header byte, bit 7
    /// set, with a code in bits 3-6 and the code units covered, less one, in bits 0-2);
    /// `None` past the table's end.
    pub fn line_at(&self, lasti: u32) -> Option<u32> {
        if self.lines != Lines::Locations {
            return frame_objects::line_at(self.lines, &self.linetable, self.first_line, lasti);
        }
        let target = lasti / 2;
        let t = &self.linetable;
        let (mut i, mut unit, mut line) = (0usize, 0u32, self.first_line as i32);
        while i < t.len() {
            let b = t[i];
            i += 1;
            if b & 0x80 == 0 {
                return None;
            }
            let units = (b & 7) as u32 + 1;
            let delta = match (b >> 3) & 15 {
                15 => 0,
                14 => {
                    let d = svarint(t, &mut i)?;
                    for _ in 0..3 {
                        varint(t, &mut i)?;
                    }
                    d
                }
                13 => svarint(t, &mut i)?,
                c @ 10..=12 => {
                    i += 2;
                    c as i32 - 10
                }
                _ => {
                    i += 1;
                    0
                }
            };
            line += delta;
            if target < unit + units {
                return u32::try_from(line).ok();
            }
            unit += units;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_from_a_location_table() {
        // Entries: 2 units on the first line (no column), then 1 unit one line on (one-line
        // form 11), then 3 units 5 lines on (no-column form 13, svarint 10 = +5), then 1
        // unit 2 lines back (long form 14: svarint 5 = -2, then 3 varints).
        let code = Code {
            name: "f".into(),
            file: "f.py".into(),
            first_line: 10,
            linetable: vec![
                0x80 | 13 << 3 | 1,
                0,
                0x80 | 11 << 3,
                1,
                2,
                0x80 | 13 << 3 | 2,
                10,
                0x80 | 14 << 3,
                5,
                0,
                1,
                2,
            ],
            lines: Lines::Locations,
            identity: Identity::default(),
        };
        assert_eq!(code.line_at(0), Some(10));
        assert_eq!(code.line_at(2), Some(10));
        assert_eq!(code.line_at(4), Some(11));
        assert_eq!(code.line_at(6), Some(16));
        assert_eq!(code.line_at(10), Some(16));
        assert_eq!(code.line_at(12), Some(14));
        assert_eq!(code.line_at(14), None);
    }
}
