//! The one place that opens files: ELF binaries (memory-mapped once, shared), their separate
//! debug files, the running kernel's `[vdso]` image, `/proc/kallsyms` and JIT maps
//! (`/tmp/perf-PID.map`). The stages ask the [`Loader`]; it caches every answer, failures too,
//! so each file is opened and parsed once however many mappings, threads and stages ask.
//!
//! The loader is `Sync`: the driver may ask it from several threads at once.

use std::collections::HashMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use object::{Object, ObjectSection, ObjectSegment};

/// The bytes of a file: memory-mapped, or owned where the image came from memory (`[vdso]`).
pub enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// One PT_LOAD segment: where its bytes sit in the file and at which SVMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub file_offset: u64,
    pub file_size: u64,
    pub svma: u64,
}

/// An ELF file, opened and checked once.
pub struct ElfData {
    /// Where it came from (a path, or `[vdso]`).
    pub name: String,
    pub bytes: Bytes,
    pub build_id: Option<Vec<u8>>,
    pub segments: Vec<Segment>,
    /// `.gnu_debuglink` file name, if the file has one.
    pub debuglink: Option<String>,
    /// Whether the file has DWARF line info of its own.
    pub has_debug_info: bool,
    /// Symbol tables and inflated DWARF, made once (see [`crate::symbolize::prepare`]).
    pub prepared: crate::symbolize::Prepared,
}

impl ElfData {
    fn parse(name: String, bytes: Bytes) -> Result<ElfData, String> {
        let obj =
            object::File::parse(&*bytes).map_err(|e| format!("{name}: not an ELF file: {e}"))?;
        let segments = obj
            .segments()
            .map(|s| {
                let (file_offset, file_size) = s.file_range();
                Segment {
                    file_offset,
                    file_size,
                    svma: s.address(),
                }
            })
            .collect();
        let build_id = obj.build_id().ok().flatten().map(<[u8]>::to_vec);
        let debuglink = obj
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
        let has_debug_info = obj
            .section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0);
        drop(obj);
        Ok(ElfData {
            name,
            bytes,
            build_id,
            segments,
            debuglink,
            has_debug_info,
            prepared: Default::default(),
        })
    }

    /// The bias (AVMA - SVMA) of a mapping of this file at `start..end` from file offset
    /// `pgoff`: the one translation between process addresses and the file's own, used by
    /// unwinding, symbolizing and every view after them.
    ///
    /// The mapping belongs to the PT_LOAD segment that covers most of its file range. Going by
    /// the segment that holds `pgoff` is wrong where a linker starts a segment on the page where
    /// the one before it ends (lld: R at offset 0 size 0x16368, R E at offset 0x16370 and SVMA
    /// 0x17370): the R E mapping's page offset 0x16000 lies in both, and the R segment's delta
    /// between offset and SVMA is one page off. `None` when no segment overlaps the mapping.
    pub fn mapping_bias(&self, start: u64, end: u64, pgoff: u64) -> Option<u64> {
        let file_end = pgoff.saturating_add(end.saturating_sub(start).max(1));
        let overlap = |s: &Segment| {
            let lo = pgoff.max(s.file_offset);
            let hi = file_end.min(s.file_offset.saturating_add(s.file_size.max(1)));
            hi.saturating_sub(lo)
        };
        // The first of equal overlaps: max_by_key would take the last.
        let best = self
            .segments
            .iter()
            .fold(None::<(&Segment, u64)>, |best, s| {
                match (best, overlap(s)) {
                    (_, 0) => best,
                    (Some((_, b)), o) if o <= b => best,
                    (_, o) => Some((s, o)),
                }
            })?
            .0;
        // File offset `pgoff` sits at `start`; in that segment it is at SVMA
        // `pgoff - file_offset + svma`.
        Some(start.wrapping_sub(pgoff.wrapping_sub(best.file_offset).wrapping_add(best.svma)))
    }

    /// The file's bytes at SVMAs `start..end`, where a PT_LOAD segment holds all of them
    /// (code, for annotate); `None` where the file does not (a debug file's `.text` is empty).
    pub fn bytes_at(&self, start: u64, end: u64) -> Option<&[u8]> {
        let s = self
            .segments
            .iter()
            .find(|s| s.svma <= start && end <= s.svma.saturating_add(s.file_size))?;
        let from = s.file_offset.checked_add(start - s.svma)?;
        let to = from.checked_add(end.checked_sub(start)?)?;
        self.bytes
            .get(usize::try_from(from).ok()?..usize::try_from(to).ok()?)
    }

    /// The build id as lowercase hex.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id.as_deref().map(hex)
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a build id from the recording matches a file's. perf pads build ids to 20 bytes
/// with zeros, so a shorter real id (e.g. 16-byte md5 ids) is compared by prefix.
pub fn build_ids_match(recorded: &[u8], file: &[u8]) -> bool {
    let mut r = recorded;
    while r.len() > file.len() && r.last() == Some(&0) {
        r = &r[..r.len() - 1];
    }
    r == file
}

/// A JIT map: `START SIZE name` lines written by the runtime to /tmp/perf-PID.map.
pub struct JitMap {
    pub path: PathBuf,
    /// (start, end, name), sorted by start.
    pub symbols: Vec<(u64, u64, String)>,
}

impl JitMap {
    fn parse(path: PathBuf, text: &str) -> JitMap {
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

    /// The symbol containing `avma`, with its start.
    pub fn lookup(&self, avma: u64) -> Option<(&str, u64)> {
        let i = self.symbols.partition_point(|s| s.0 <= avma);
        let (start, end, name) = self.symbols.get(i.checked_sub(1)?)?;
        (avma < *end).then_some((name.as_str(), *start))
    }
}

pub use crate::kallsyms::Kallsyms;

type Cached<T> = Mutex<HashMap<String, Option<Arc<T>>>>;

/// Opens files for the stages, once each.
#[derive(Default)]
pub struct Loader {
    elves: Cached<ElfData>,
    debug: Cached<ElfData>,
    jit: Cached<JitMap>,
    kallsyms: Mutex<Option<Option<Arc<Kallsyms>>>>,
    /// Where separate debug files live (`/usr/lib/debug` unless changed).
    pub debug_root: Option<PathBuf>,
    /// Why files could not be used, one line per file, in the order met.
    problems: Mutex<Vec<String>>,
}

fn cached<T>(cache: &Cached<T>, key: &str, open: impl FnOnce() -> Option<T>) -> Option<Arc<T>> {
    if let Some(v) = cache.lock().unwrap().get(key) {
        return v.clone();
    }
    // Opened outside the lock: two threads may race to open the same file; one result wins.
    let v = open().map(Arc::new);
    cache
        .lock()
        .unwrap()
        .entry(key.to_string())
        .or_insert(v)
        .clone()
}

impl Loader {
    pub fn new() -> Loader {
        Loader::default()
    }

    fn problem(&self, line: String) {
        let mut p = self.problems.lock().unwrap();
        if !p.contains(&line) {
            p.push(line);
        }
    }

    /// What went wrong so far (files missing, unreadable, build ids that differ).
    pub fn problems(&self) -> Vec<String> {
        self.problems.lock().unwrap().clone()
    }

    /// The ELF file a mapping names: a path, or `[vdso]` (taken from this process: the same
    /// image when the recording was made on the running kernel, which the build id checks).
    /// `expected` is the build id the recording gives; a file with another id is not used.
    pub fn elf(&self, name: &str, expected: Option<&[u8]>) -> Option<Arc<ElfData>> {
        let elf = cached(&self.elves, name, || {
            let r = if name == "[vdso]" {
                vdso_image().and_then(|b| ElfData::parse(name.into(), Bytes::Owned(b)))
            } else {
                map_file(Path::new(name)).and_then(|b| ElfData::parse(name.into(), b))
            };
            r.map_err(|e| self.problem(format!("{e}; its frames are [unknown]")))
                .ok()
        })?;
        if let (Some(want), Some(have)) = (expected, elf.build_id.as_deref()) {
            if !build_ids_match(want, have) {
                self.problem(format!(
                    "{name}: build id {} differs from the recording's {}; its frames are [unknown]",
                    hex(have),
                    hex(want)
                ));
                return None;
            }
        }
        Some(elf)
    }

    /// The separate debug file of `elf`: by build id under `<debug root>/.build-id/`, else by
    /// `.gnu_debuglink` next to it, in its `.debug/` directory, or under the debug root. A
    /// candidate whose build id differs from the binary's is skipped.
    pub fn debug_file(&self, elf: &ElfData) -> Option<Arc<ElfData>> {
        let root = self
            .debug_root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/usr/lib/debug"));
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Some(id) = elf.build_id_hex().filter(|h| h.len() > 2) {
            candidates.push(
                root.join(".build-id")
                    .join(&id[..2])
                    .join(format!("{}.debug", &id[2..])),
            );
        }
        if let (Some(link), Some(dir)) = (&elf.debuglink, Path::new(&elf.name).parent()) {
            candidates.push(dir.join(link));
            candidates.push(dir.join(".debug").join(link));
            candidates.push(root.join(dir.strip_prefix("/").unwrap_or(dir)).join(link));
        }
        for c in candidates {
            let key = c.to_string_lossy().into_owned();
            if key == elf.name || !c.is_file() {
                continue;
            }
            let Some(d) = cached(&self.debug, &key, || {
                map_file(&c)
                    .and_then(|b| ElfData::parse(key.clone(), b))
                    .ok()
            }) else {
                continue;
            };
            match (&elf.build_id, &d.build_id) {
                (Some(a), Some(b)) if a != b => {
                    self.problem(format!(
                        "{key}: build id differs from {}'s; not used",
                        elf.name
                    ));
                }
                _ => return Some(d),
            }
        }
        None
    }

    /// Opens the file at `path` (if it is there and has build id `build_id`) and its debug
    /// file, and prepares what symbolizing it needs (symbol tables; `with_dwarf`, its DWARF
    /// inflated): what the driver starts while the recording is read, for the files the
    /// recording lists.
    pub fn prepare(&self, path: &str, build_id: &[u8], with_dwarf: bool) {
        if !path.starts_with('/') || !Path::new(path).is_file() {
            return;
        }
        let Some(elf) = self.elf(path, None) else {
            return;
        };
        if elf
            .build_id
            .as_deref()
            .is_some_and(|have| !build_ids_match(build_id, have))
        {
            return;
        }
        let debug = self.debug_file(&elf);
        crate::symbolize::prepare(&elf, debug.as_deref(), with_dwarf);
    }

    /// /tmp/perf-PID.map, if the process wrote one.
    pub fn jit_map(&self, pid: i32) -> Option<Arc<JitMap>> {
        let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
        cached(&self.jit, &path.to_string_lossy(), || {
            let text = std::fs::read_to_string(&path).ok()?;
            Some(JitMap::parse(path.clone(), &text))
        })
    }

    /// Kernel symbols of the running kernel.
    pub fn kallsyms(&self) -> Option<Arc<Kallsyms>> {
        let mut k = self.kallsyms.lock().unwrap();
        k.get_or_insert_with(|| {
            if let Some(k) = crate::kallsyms_cache::load() {
                return Some(Arc::new(k));
            }
            let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
            let k = Kallsyms::parse(&text);
            match &k {
                Some(k) => crate::kallsyms_cache::store(k),
                None => self.problem(
                    "/proc/kallsyms: no addresses (kptr_restrict?); kernel frames are [unknown]"
                        .into(),
                ),
            }
            k.map(Arc::new)
        })
        .clone()
    }
}

/// Release of the running kernel (`uname -r`).
pub fn running_kernel_release() -> Option<String> {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    Some(r.trim().to_string())
}

/// Build id of the running kernel, from /sys/kernel/notes.
pub fn running_kernel_build_id() -> Option<Vec<u8>> {
    let notes = std::fs::read("/sys/kernel/notes").ok()?;
    let mut p = 0usize;
    while p + 12 <= notes.len() {
        let word = |o: usize| u32::from_ne_bytes(notes[o..o + 4].try_into().unwrap()) as usize;
        let (namesz, descsz, kind) = (word(p), word(p + 4), word(p + 8));
        let name_at = p + 12;
        let desc_at = name_at + namesz.div_ceil(4) * 4;
        let next = desc_at + descsz.div_ceil(4) * 4;
        if next > notes.len() {
            break;
        }
        if kind == 3 && notes.get(name_at..name_at + 3) == Some(b"GNU") {
            return Some(notes[desc_at..desc_at + descsz].to_vec());
        }
        p = next;
    }
    None
}

fn map_file(path: &Path) -> Result<Bytes, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: a read-only map of a binary; binaries are not rewritten while we analyze them
    // (a package upgrade replaces the file, it does not write into it).
    let map =
        unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Bytes::Mapped(map))
}

/// The `[vdso]` image of this process, read from its own memory.
fn vdso_image() -> Result<Vec<u8>, String> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("[vdso]: {e}"))?;
    let line = maps
        .lines()
        .find(|l| l.ends_with("[vdso]"))
        .ok_or("[vdso]: this process has none")?;
    let range = line.split_whitespace().next().unwrap_or("");
    let (a, b) = range.split_once('-').ok_or("[vdso]: odd /proc/self/maps")?;
    let start = u64::from_str_radix(a, 16).map_err(|e| format!("[vdso]: {e}"))?;
    let end = u64::from_str_radix(b, 16).map_err(|e| format!("[vdso]: {e}"))?;
    use std::io::{Read, Seek, SeekFrom};
    let mut mem = std::fs::File::open("/proc/self/mem").map_err(|e| format!("[vdso]: {e}"))?;
    mem.seek(SeekFrom::Start(start))
        .map_err(|e| format!("[vdso]: {e}"))?;
    let mut buf = vec![0; (end - start) as usize];
    mem.read_exact(&mut buf)
        .map_err(|e| format!("[vdso]: {e}"))?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vdso_is_an_elf_with_symbols() {
        let l = Loader::new();
        let Some(v) = l.elf("[vdso]", None) else {
            return; // no vdso here
        };
        assert!(!v.segments.is_empty());
        let obj = object::File::parse(&*v.bytes).unwrap();
        assert!(obj.dynamic_symbols().count() > 0);
    }

    #[test]
    fn jit_map_lookup() {
        let m = JitMap::parse("x".into(), "1000 10 foo\n2000 0x20 bar baz\nnonsense\n");
        assert_eq!(m.lookup(0x1008), Some(("foo", 0x1000)));
        assert_eq!(m.lookup(0x1010), None);
        assert_eq!(m.lookup(0x201f), Some(("bar baz", 0x2000)));
    }

    fn elf_with(segments: Vec<Segment>) -> ElfData {
        ElfData {
            name: "x".into(),
            bytes: Bytes::Owned(Vec::new()),
            build_id: None,
            segments,
            debuglink: None,
            has_debug_info: false,
            prepared: Default::default(),
        }
    }

    #[test]
    fn mapping_bias_picks_the_segment_the_mapping_covers() {
        // lld's layout: the R E segment starts on the R segment's last file page.
        let elf = elf_with(vec![
            Segment {
                file_offset: 0,
                file_size: 0x16368,
                svma: 0,
            },
            Segment {
                file_offset: 0x16370,
                file_size: 0x45c70,
                svma: 0x17370,
            },
        ]);
        let (start, pgoff) = (0x5555_5556_b000, 0x16000);
        let bias = elf.mapping_bias(start, start + 0x46000, pgoff).unwrap();
        // AVMA start + 0x370 is file offset 0x16370, the R E segment's first byte.
        assert_eq!(start + 0x370 - bias, 0x17370);
        // The R mapping from offset 0 keeps SVMA = file offset.
        let r = 0x5555_5555_5000;
        assert_eq!(elf.mapping_bias(r, r + 0x17000, 0), Some(r));
        // A mapping outside every segment has none.
        assert_eq!(elf.mapping_bias(r, r + 0x1000, 0x100000), None);
    }

    #[test]
    fn padded_build_ids_match() {
        assert!(build_ids_match(&[1, 2, 0, 0], &[1, 2]));
        assert!(build_ids_match(&[1, 2], &[1, 2]));
        assert!(!build_ids_match(&[1, 3, 0, 0], &[1, 2]));
    }
}
