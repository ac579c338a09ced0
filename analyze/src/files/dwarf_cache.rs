//! A cache of debug files' DWARF sections inflated, by build id, so that only the first
//! analysis that needs a file's compressed DWARF pays for inflating it. Debian compresses its
//! debug files: libc's (libc6-dbg) takes about 25 ms of CPU to inflate, twice what the rest
//! of a report of a small recording costs; mapped from the cache it costs nothing.
//!
//! One file per build id, `dwarf/<build id>` in the cache directory of
//! [`super::kallsyms_cache`] (created 0700; files 0600, written whole then renamed into
//! place, never changed in place): a fingerprint of the compressed sections it came from,
//! a header naming each section and its length, then the sections one after another. Files
//! with one build id can differ (an archive's reduced copy of a debug file keeps its build
//! id): the reader gives the sections only for the same fingerprint, and its caller checks
//! the lengths against the debug file's own compression headers.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::elf::Bytes;

const MAGIC: &[u8; 8] = b"BPDWARF1";

/// Section names are short (`.debug_str_offsets` is the longest asked for).
const MAX_NAME: usize = 64;
/// More sections than DWARF has: a header claiming more is damaged.
const MAX_SECTIONS: usize = 64;

/// Inflated sections of one debug file, mapped from the cache.
pub struct DwarfCache {
    bytes: Bytes,
    /// Section name and where its bytes lie in `bytes`.
    sections: Vec<(String, std::ops::Range<usize>)>,
}

impl DwarfCache {
    /// The inflated bytes of section `name`, if the cache holds it.
    pub fn section(&self, name: &str) -> Option<&[u8]> {
        let (_, at) = self.sections.iter().find(|(n, _)| n == name)?;
        self.bytes.get(at.clone())
    }

    /// The mapped file.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The names of the sections held, with their lengths.
    pub fn lengths(&self) -> impl Iterator<Item = (&str, usize)> {
        self.sections.iter().map(|(n, r)| (n.as_str(), r.len()))
    }
}

fn path(build_id: &str) -> Option<PathBuf> {
    // A build id is hex (it names a file): anything else is not looked up.
    if build_id.is_empty() || !build_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(super::kallsyms_cache::dir()?.join("dwarf").join(build_id))
}

/// The cached sections of the debug file with `build_id` (hex), mapped, if there are any
/// and they are whole.
pub fn load(build_id: &str, fingerprint: u64) -> Option<DwarfCache> {
    let file = std::fs::File::open(path(build_id)?).ok()?;
    // SAFETY: the file is the user's own (0600 in a 0700 directory) and only ever replaced
    // by rename, never written in place, so the mapping does not change under us.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    decode(Bytes::Mapped(map), fingerprint)
}

/// Caches `sections` (name, inflated bytes) of the debug file with `build_id` (hex). Failing
/// to write is not an error (the cache only saves time).
pub fn store(build_id: &str, fingerprint: u64, sections: &[(&str, &[u8])]) {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let Some(at) = path(build_id) else {
        return;
    };
    let Some(dir) = at.parent() else {
        return;
    };
    if std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .is_err()
    {
        return;
    }
    // Unique per writer (threads of one process, tests, included).
    let tmp = dir.join(format!(
        ".{build_id}.{}.{}",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(&header(fingerprint, sections))?;
            for (_, bytes) in sections {
                f.write_all(bytes)?;
            }
            Ok(())
        });
    if written.is_err() || std::fs::rename(&tmp, &at).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Magic, fingerprint, count, then each section's name (length-prefixed) and length.
fn header(fingerprint: u64, sections: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + sections.len() * 32);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&fingerprint.to_le_bytes());
    b.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    for (name, bytes) in sections {
        b.push(name.len().min(MAX_NAME) as u8);
        b.extend_from_slice(&name.as_bytes()[..name.len().min(MAX_NAME)]);
        b.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    }
    b
}

/// Reads what [`store`] wrote; `None` if it is not that, whole.
fn decode(b: Bytes, fingerprint: u64) -> Option<DwarfCache> {
    if b.get(..8)? != MAGIC || b.get(8..16)? != fingerprint.to_le_bytes() {
        return None;
    }
    let count = u32::from_le_bytes(b.get(16..20)?.try_into().ok()?) as usize;
    if count > MAX_SECTIONS {
        return None;
    }
    let mut at = 20;
    let mut lengths = Vec::with_capacity(count);
    for _ in 0..count {
        let len = *b.get(at)? as usize;
        let name = std::str::from_utf8(b.get(at + 1..at + 1 + len)?).ok()?;
        at += 1 + len;
        let size = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
        at += 8;
        lengths.push((name.to_string(), usize::try_from(size).ok()?));
    }
    let mut sections = Vec::with_capacity(count);
    for (name, len) in lengths {
        let end = at.checked_add(len)?;
        sections.push((name, at..end));
        at = end;
    }
    // Exactly the file: a cut or padded file is not trusted.
    (at == b.len()).then_some(DwarfCache { bytes: b, sections })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let info = vec![7u8; 1000];
        let line = b"line program".to_vec();
        let sections = [(".debug_info", &info[..]), (".debug_line", &line[..])];
        let mut b = header(5, &sections);
        b.extend_from_slice(&info);
        b.extend_from_slice(&line);
        let decode = |b: &[u8], fingerprint| decode(Bytes::Owned(b.to_vec()), fingerprint);
        let back = decode(&b, 5).unwrap();
        assert_eq!(back.section(".debug_info"), Some(&info[..]));
        assert_eq!(back.section(".debug_line"), Some(&line[..]));
        assert_eq!(back.section(".debug_str"), None);
        assert!(decode(&b, 6).is_none(), "another file with that build id");
        assert!(decode(&b[..b.len() - 1], 5).is_none(), "cut");
        let mut longer = b.clone();
        longer.push(0);
        assert!(decode(&longer, 5).is_none(), "padded");
        let mut bad = b.clone();
        bad[16] = 0xff; // 255 sections
        assert!(decode(&bad, 5).is_none(), "count");
        let mut huge = b;
        huge[20 + 1 + 11..20 + 1 + 11 + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge, 5).is_none(), "length");
    }

    #[test]
    fn only_hex_build_ids_name_files() {
        assert!(path("../../etc/passwd").is_none());
        assert!(path("").is_none());
    }
}
