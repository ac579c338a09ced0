//! An ELF file opened once: its bytes, segments, build id and debug link, and the one
//! translation between a process's addresses and the file's own ([`ElfData::mapping_bias`]).

use std::any::Any;
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment};

/// The bytes of a file: memory-mapped, owned where the image came from memory (`[vdso]`), or
/// shared with the archive that holds it.
pub enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
    Shared(Arc<[u8]>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
            Bytes::Shared(v) => v,
        }
    }
}

impl Bytes {
    /// Unmaps the pages of `part` (bytes of this file, else nothing is done) from this
    /// process, for a mapped file: they stay in the page cache, and a later read maps them
    /// again. A file read sparsely (a compiler's DWARF, a few names here and there) would
    /// otherwise stay mapped whole: each read maps the 64 KiB around it, or the whole large
    /// folio the page cache holds it in (on 6.18, up to 2 MiB), so that 49 units and their
    /// names mapped ripgrep's 17 MiB of DWARF for 1,787 samples.
    pub fn give_back(&self, part: &[u8]) {
        let Bytes::Mapped(map) = self else {
            return;
        };
        let base = map.as_ptr() as usize;
        let (start, len) = (part.as_ptr() as usize, part.len());
        if start < base || start + len > base + map.len() || len == 0 {
            return;
        }
        // Whole pages: those the part touches (a neighbour's reader maps its page again).
        let page = 4096;
        let from = (start - base) / page * page;
        let to = (start - base + len).div_ceil(page) * page;
        let to = to.min(map.len());
        // SAFETY: a read-only mapping of a file that is not written in place (see
        // `map_file`): dropping its pages loses nothing, a later read finds the same bytes.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
        };
    }

    /// Unmaps all of a mapped file's pages from this process ([`Bytes::give_back`]).
    pub fn give_back_all(&self) {
        self.give_back(self);
    }
}

/// What the stages above derive from a file once and keep with it, one value per type
/// (symbolize's symbol tables and inflated DWARF sections): made on first use by whichever
/// thread asks, borrowed for as long as the file lives. The files layer holds them without
/// knowing their types, so that it imports no stage.
#[derive(Default)]
pub struct Derived(elsa::sync::FrozenMap<std::any::TypeId, Box<dyn Any + Send + Sync>>);

impl Derived {
    /// The `T` kept with the file, made (as `T::default()`) if there is none yet. Make it
    /// cheap to create: the map is locked meanwhile; fill it later (`OnceLock` fields).
    pub fn get<T: Any + Send + Sync + Default>(&self) -> &T {
        let key = std::any::TypeId::of::<T>();
        let value = match self.0.get(&key) {
            Some(v) => v,
            None => self.0.insert_with(key, || Box::new(T::default())),
        };
        // Keyed by its own type: the downcast cannot fail.
        value.downcast_ref::<T>().expect("kept under its own type")
    }
}

/// One PT_LOAD segment: where its bytes sit in the file and at which SVMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub file_offset: u64,
    pub file_size: u64,
    pub svma: u64,
    /// Its size in memory (`p_memsz`: `.bss` lies past `file_size`).
    pub mem_size: u64,
    /// Whether it is mapped executable (`PF_X`): whether it holds code.
    pub executable: bool,
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
    /// Whether the file has a `.symtab` (a stripped file has `.dynsym` at most: the names
    /// of what it exports, none of its own functions).
    pub has_symtab: bool,
    /// What stages derive from the file once (symbol tables, inflated DWARF), kept with it.
    pub derived: Derived,
}

impl ElfData {
    pub(crate) fn parse(name: String, bytes: Bytes) -> Result<ElfData, String> {
        let obj =
            object::File::parse(&*bytes).map_err(|e| format!("{name}: not an ELF file: {e}"))?;
        let segments = obj
            .segments()
            .map(|s| {
                let (file_offset, file_size) = s.file_range();
                let executable = match s.flags() {
                    object::SegmentFlags::Elf { p_flags, .. } => {
                        p_flags.0 & object::elf::PF_X.0 != 0
                    }
                    _ => true,
                };
                Segment {
                    file_offset,
                    file_size,
                    svma: s.address(),
                    mem_size: s.size(),
                    executable,
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
        let has_symtab = obj.section_by_name(".symtab").is_some_and(|s| s.size() > 0);
        drop(obj);
        Ok(ElfData {
            name,
            bytes,
            build_id,
            segments,
            debuglink,
            has_debug_info,
            has_symtab,
            derived: Derived::default(),
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
        self.bytes.get(self.file_range(start, end)?)
    }

    /// Section `name` of `obj` (this file, parsed) as stored: its SVMAs and where its bytes
    /// lie in the file (not decompressed). `Ok(None)`: no such section, or none of its bytes
    /// in the file (NOBITS); `Err(name)`: its header points past the file's end or its
    /// addresses overflow (section headers are not trusted).
    pub fn stored_section(
        &self,
        obj: &object::File<'_>,
        name: &str,
    ) -> Result<Option<StoredSection>, String> {
        let Some(s) = obj.section_by_name(name) else {
            return Ok(None);
        };
        let Some((off, size)) = s.file_range() else {
            return Ok(None);
        };
        let end = off
            .checked_add(size)
            .filter(|&e| e <= self.bytes.len() as u64);
        let svma_end = s.address().checked_add(s.size());
        match (end, svma_end) {
            (Some(end), Some(svma_end)) => {
                Ok(Some((s.address()..svma_end, off as usize..end as usize)))
            }
            _ => Err(name.to_string()),
        }
    }

    /// Where SVMAs `start..end` lie in the file, if one PT_LOAD segment holds all of them.
    pub fn file_range(&self, start: u64, end: u64) -> Option<std::ops::Range<usize>> {
        let s = self
            .segments
            .iter()
            .find(|s| s.svma <= start && end <= s.svma.saturating_add(s.file_size))?;
        let from = s.file_offset.checked_add(start - s.svma)?;
        let to = from.checked_add(end.checked_sub(start)?)?;
        let range = usize::try_from(from).ok()?..usize::try_from(to).ok()?;
        (range.end <= self.bytes.len()).then_some(range)
    }

    /// Whether SVMA `svma` lies in code: in an executable PT_LOAD segment (not in `.data`,
    /// `.bss` or read-only data, which an executable mapping can cover too: a library whose
    /// first segment is executable is first mapped whole with that segment's rights). A file
    /// without segments cannot tell, and says yes.
    pub fn is_code(&self, svma: u64) -> bool {
        self.segments.is_empty()
            || self.segments.iter().any(|s| {
                s.executable && svma >= s.svma && svma - s.svma < s.mem_size.max(s.file_size)
            })
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

/// [`hex`] read back: `None` for anything but an even number of hex digits.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
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

/// A section's SVMAs and where its bytes lie in the file ([`ElfData::stored_section`]).
pub type StoredSection = (Range<u64>, Range<usize>);

/// Whether `.eh_frame_hdr` (at SVMA `at`) points into `.eh_frame` (SVMAs `frames`): its
/// `eh_frame_ptr` at the section's start, every table entry's FDE inside it, in the encodings
/// every x86-64 linker writes (pc-relative and data-relative sdata4; anything else is taken
/// for damage). A damaged table makes the CFI reader subtract past zero.
pub fn eh_frame_hdr_fits(hdr: &[u8], at: u64, frames: &Range<u64>) -> bool {
    const PCREL_SDATA4: u8 = 0x1b;
    const UDATA4: u8 = 0x03;
    const DATAREL_SDATA4: u8 = 0x3b;
    let i32_at = |o: usize| -> Option<i64> {
        Some(i32::from_le_bytes(hdr.get(o..o + 4)?.try_into().ok()?) as i64)
    };
    if hdr.len() < 12 || hdr[0] != 1 {
        return false;
    }
    if (hdr[1], hdr[2], hdr[3]) != (PCREL_SDATA4, UDATA4, DATAREL_SDATA4) {
        return false;
    }
    let Some(ptr) = i32_at(4).map(|d| at.wrapping_add(4).wrapping_add_signed(d)) else {
        return false;
    };
    let count = u32::from_le_bytes(hdr[8..12].try_into().unwrap()) as usize;
    if ptr != frames.start || count.checked_mul(8).is_none_or(|n| 12 + n > hdr.len()) {
        return false;
    }
    (0..count).all(|k| {
        i32_at(12 + k * 8 + 4)
            .map(|d| at.wrapping_add_signed(d))
            .is_some_and(|fde| frames.contains(&fde))
    })
}

pub(super) fn map_file(path: &Path) -> Result<Bytes, String> {
    let file = open_regular(path)?;
    // SAFETY: a read-only map of a binary; binaries are not rewritten while we analyze them
    // (a package upgrade replaces the file, it does not write into it).
    let map =
        unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Bytes::Mapped(map))
}

/// Opens `path` for reading if it is a regular file. A recording names paths that may now be
/// anything: opening a FIFO would wait for a writer forever, a device could be endless.
pub(super) fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let at = |e: std::io::Error| format!("{}: {e}", path.display());
    // O_NONBLOCK: a FIFO opens at once instead of waiting; it is refused below.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(at)?;
    if !file.metadata().map_err(at)?.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    Ok(file)
}

/// Reads the regular file at `path` whole (see [`open_regular`]).
pub(super) fn read_regular(path: &Path) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut open_regular(path)?, &mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(bytes)
}

/// The `[vdso]` image of this process, read from its own memory.
pub(super) fn vdso_image() -> Result<Vec<u8>, String> {
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

    fn elf_with(segments: Vec<Segment>) -> ElfData {
        ElfData {
            name: "x".into(),
            bytes: Bytes::Owned(Vec::new()),
            build_id: None,
            segments,
            debuglink: None,
            has_debug_info: false,
            has_symtab: false,
            derived: Derived::default(),
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
                mem_size: 0x16368,
                executable: false,
            },
            Segment {
                file_offset: 0x16370,
                file_size: 0x45c70,
                svma: 0x17370,
                mem_size: 0x45c70,
                executable: true,
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
    fn code_is_what_executable_segments_hold() {
        // busy's layout: R, R E (.text), R, RW (.data, then .bss past the file's bytes).
        let seg = |svma, size, mem_size, executable| Segment {
            file_offset: svma,
            file_size: size,
            svma,
            mem_size,
            executable,
        };
        let elf = elf_with(vec![
            seg(0, 0x768, 0x768, false),
            seg(0x1000, 0x3fd, 0x3fd, true),
            seg(0x2000, 0x1e4, 0x1e4, false),
            seg(0x3dd0, 0x274, 0x290, false),
        ]);
        assert!(elf.is_code(0x1000) && elf.is_code(0x13fc));
        assert!(!elf.is_code(0x13fd), "past .text");
        assert!(!elf.is_code(0x500), "ELF header, .dynsym");
        assert!(!elf.is_code(0x4050), ".bss");
        assert!(
            elf_with(Vec::new()).is_code(0x4050),
            "no segments: cannot tell"
        );
    }

    #[test]
    fn padded_build_ids_match() {
        assert!(build_ids_match(&[1, 2, 0, 0], &[1, 2]));
        assert!(build_ids_match(&[1, 2], &[1, 2]));
        assert!(!build_ids_match(&[1, 3, 0, 0], &[1, 2]));
    }
}
