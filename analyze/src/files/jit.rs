//! JIT code's names: perf maps and jitdump files.

use std::path::PathBuf;

/// JIT code's names: from a perf map (`START SIZE name` lines the runtime writes to
/// /tmp/perf-PID.map, numbers in hex with or without `0x`), or from a jitdump file
/// (`jit-PID.dump`, perf's binary format: the code-load records).
pub struct JitMap {
    pub path: PathBuf,
    /// (start, end, name), sorted by start.
    pub symbols: Vec<(u64, u64, String)>,
}

impl JitMap {
    pub(super) fn parse(path: PathBuf, text: &str) -> JitMap {
        let mut symbols: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, ' ');
                let start = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
                let size = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
                let name = f.next()?.trim().to_string();
                Some((start, start.checked_add(size)?, name))
            })
            .collect();
        symbols.sort_by_key(|s| s.0);
        JitMap { path, symbols }
    }

    /// The code-load records of a jitdump file; a damaged or cut file gives what it holds
    /// up to the damage.
    pub(super) fn parse_jitdump(path: PathBuf, bytes: &[u8]) -> Option<JitMap> {
        const MAGIC: u32 = 0x4A69_5444; // "JiTD"
        const CODE_LOAD: u32 = 0;
        let u32_at = |b: &[u8], at: usize, swap: bool| {
            let v = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?);
            Some(if swap { v.swap_bytes() } else { v })
        };
        let u64_at = |b: &[u8], at: usize, swap: bool| {
            let v = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
            Some(if swap { v.swap_bytes() } else { v })
        };
        let magic = u32_at(bytes, 0, false)?;
        let swap = match magic {
            MAGIC => false,
            m if m.swap_bytes() == MAGIC => true,
            _ => return None,
        };
        let mut at = u32_at(bytes, 8, swap)? as usize; // the header's total_size
        let mut symbols = Vec::new();
        while let (Some(id), Some(size)) = (u32_at(bytes, at, swap), u32_at(bytes, at + 4, swap)) {
            let size = size as usize;
            let Some(record) = bytes
                .get(at..at.saturating_add(size))
                .filter(|_| size >= 16)
            else {
                break;
            };
            if id == CODE_LOAD {
                // header 16, pid 4, tid 4, vma 8, code_addr 8, code_size 8, code_index 8, name
                let load = (|| {
                    let addr = u64_at(record, 32, swap)?;
                    let len = u64_at(record, 40, swap)?;
                    let name = record.get(56..)?;
                    let end = name.iter().position(|&b| b == 0)?;
                    Some((
                        addr,
                        addr.checked_add(len)?,
                        String::from_utf8_lossy(&name[..end]).into_owned(),
                    ))
                })();
                symbols.extend(load);
            }
            at += size;
        }
        symbols.sort_by_key(|s: &(u64, u64, String)| s.0);
        Some(JitMap { path, symbols })
    }

    /// The symbol containing `avma`, with its start.
    pub fn lookup(&self, avma: u64) -> Option<(&str, u64)> {
        let i = self.symbols.partition_point(|s| s.0 <= avma);
        let (start, end, name) = self.symbols.get(i.checked_sub(1)?)?;
        (avma < *end).then_some((name.as_str(), *start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jit_map_lookup() {
        let m = JitMap::parse("x".into(), "1000 10 foo\n2000 0x20 bar baz\nnonsense\n");
        assert_eq!(m.lookup(0x1008), Some(("foo", 0x1000)));
        assert_eq!(m.lookup(0x1010), None);
        assert_eq!(m.lookup(0x201f), Some(("bar baz", 0x2000)));
    }

    #[test]
    fn jitdump_code_loads_and_damaged_files() {
        let mut b: Vec<u8> = Vec::new();
        for v in [0x4A69_5444u32, 1, 40, 62, 0, 7] {
            b.extend(v.to_le_bytes());
        }
        b.extend([0u8; 16]); // timestamp, flags
        let name = b"jitted\0";
        let size = 56 + name.len() as u32 + 3;
        b.extend(0u32.to_le_bytes());
        b.extend(size.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(7u32.to_le_bytes());
        b.extend(7u32.to_le_bytes());
        for v in [0x5000u64, 0x5000, 3, 0] {
            b.extend(v.to_le_bytes());
        }
        b.extend(name);
        b.extend([0xc3, 0x90, 0x90]);
        let m = JitMap::parse_jitdump("x".into(), &b).unwrap();
        assert_eq!(m.lookup(0x5002), Some(("jitted", 0x5000)));
        assert_eq!(m.lookup(0x5003), None);
        // Every cut and every flipped byte: no panic, no more than the file held.
        for cut in 0..b.len() {
            let m = JitMap::parse_jitdump("x".into(), &b[..cut]);
            assert!(m.is_none_or(|m| m.symbols.len() <= 1));
        }
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0xff;
            let _ = JitMap::parse_jitdump("x".into(), &d);
        }
    }
}
