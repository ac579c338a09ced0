//! An ELF file reduced to what analysis reads of it, zeroed in place elsewhere, so that
//! offsets, program headers and build ids stay as they were (perf reads the files too) while
//! zstd makes nothing of the zeros.
//!
//! Kept: the ELF, program and section headers; symbol tables (with versions and PLT
//! relocations, for `name@plt`); unwind tables (`.eh_frame`, `.eh_frame_hdr`,
//! `.debug_frame`); the DWARF sections lines and inline frames need (not location lists or
//! macros), pruned to the compilation units of the sampled functions; notes and debug links;
//! and the code of those functions (what annotate disassembles).

use std::ops::Range;

use object::{Object, ObjectSection};

use crate::files::ElfData;

/// Sections kept whole, by name.
const KEEP: &[&str] = &[
    ".symtab",
    ".strtab",
    ".dynsym",
    ".dynstr",
    ".shstrtab",
    ".gnu.version",
    ".gnu.version_d",
    ".gnu.version_r",
    ".rela.plt",
    ".rel.plt",
    ".plt",
    ".plt.sec",
    ".plt.got",
    ".dynamic",
    ".eh_frame",
    ".eh_frame_hdr",
    ".gnu_debuglink",
    ".gnu_debugdata",
];

/// DWARF sections kept (as `.debug_X` or `.zdebug_X`): those addr2line reads for lines and
/// inline frames, and call frame information for unwinding.
const DWARF_KEPT: &[&str] = &[
    "info",
    "abbrev",
    "line",
    "line_str",
    "str",
    "str_offsets",
    "addr",
    "aranges",
    "ranges",
    "rnglists",
    "frame",
];

fn kept_section(name: &str) -> bool {
    if KEEP.contains(&name) || name.starts_with(".note") {
        return true;
    }
    let dwarf = name
        .strip_prefix(".debug_")
        .or_else(|| name.strip_prefix(".zdebug_"));
    dwarf.is_some_and(|d| DWARF_KEPT.contains(&d))
}

/// `elf`'s bytes reduced to what analysis reads (see [`kept_ranges`]), and how many were kept.
/// Sections left out whole become `SHT_NOBITS`, as `objcopy --only-keep-debug` leaves them:
/// readers (BFD's, perf's) then do not look for data there (a compressed section of zeros
/// has no valid header, and BFD rejects the file). `.debug_info` keeps only the compilation
/// units of `functions` where they can be read alone, `.debug_line` only their line
/// programs: rewritten uncompressed at the end of the file, their section headers pointed
/// there (`.debug_aranges`, whose offsets no longer match, is left out).
pub(super) fn reduce(elf: &ElfData, functions: &[(u64, u64)]) -> (Vec<u8>, u64) {
    let Ok(obj) = object::File::parse(&*elf.bytes) else {
        return (elf.bytes.to_vec(), elf.bytes.len() as u64);
    };
    let rewritten = pruned_dwarf(elf, functions);
    let skip: Vec<&str> = match &rewritten {
        Some(sections) => sections
            .iter()
            .map(|s| s.0)
            .chain([".debug_aranges", ".zdebug_aranges"])
            .collect(),
        None => Vec::new(),
    };
    let keep = kept_ranges(&obj, elf, functions, &skip);
    let (mut out, mut kept) = reduced(&elf.bytes, &keep);
    for (at, is64) in dropped_section_headers(&obj, &skip) {
        mark_nobits(&mut out, at, is64, obj.endianness());
    }
    for (name, bytes) in rewritten.into_iter().flatten() {
        let Some((at, is64)) = obj
            .section_by_name(name)
            .and_then(|s| section_header_at(&obj, s.index().0))
        else {
            continue;
        };
        while out.len() % 8 != 0 {
            out.push(0);
        }
        let offset = out.len() as u64;
        out.extend_from_slice(&bytes);
        kept += bytes.iter().filter(|&&b| b != 0).count() as u64;
        point_section(
            &mut out,
            at,
            is64,
            obj.endianness(),
            offset,
            bytes.len() as u64,
        );
    }
    (out, kept)
}

/// `.debug_info` with only the compilation units that hold `functions`, and `.debug_line`
/// with only their line programs (the others zeroed: offsets stay), uncompressed; `None`
/// where that cannot be done (no aranges, units that refer to others).
fn pruned_dwarf(elf: &ElfData, functions: &[(u64, u64)]) -> Option<Vec<(&'static str, Vec<u8>)>> {
    if functions.is_empty() {
        return None;
    }
    let starts: Vec<u64> = functions.iter().map(|f| f.0).collect();
    let (info, line) = crate::symbolize::dwarf_pruned(elf, &starts)?;
    let mut out = Vec::new();
    if let Some(line) = line {
        out.push((".debug_line", line));
    }
    out.push((".debug_info", info));
    Some(out)
}

/// Where section `index`'s header is in the file, and whether the file is ELF64.
fn section_header_at(obj: &object::File<'_>, index: usize) -> Option<(usize, bool)> {
    use object::read::elf::FileHeader;
    fn of<H: FileHeader>(f: &object::read::elf::ElfFile<'_, H>, index: usize) -> usize {
        let h = f.elf_header();
        let e = f.endian();
        h.e_shoff(e).into() as usize + index * h.e_shentsize(e) as usize
    }
    match obj {
        object::File::Elf64(f) => Some((of(f, index), true)),
        object::File::Elf32(f) => Some((of(f, index), false)),
        _ => None,
    }
}

/// Points the section header at `at` to `size` bytes at `offset`, not compressed.
fn point_section(
    out: &mut [u8],
    at: usize,
    is64: bool,
    e: object::Endianness,
    offset: u64,
    size: u64,
) {
    let little = e == object::Endianness::Little;
    let mut put = |field: usize, width: usize, v: u64| {
        let bytes = if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        };
        let bytes = if little {
            &bytes[..width]
        } else {
            &bytes[8 - width..]
        };
        if let Some(f) = out.get_mut(at + field..at + field + width) {
            f.copy_from_slice(bytes);
        }
    };
    if is64 {
        put(24, 8, offset);
        put(32, 8, size);
    } else {
        put(16, 4, offset);
        put(20, 4, size);
    }
    clear_compressed(out, at, is64, little);
}

fn clear_compressed(out: &mut [u8], at: usize, is64: bool, little: bool) {
    let width = if is64 { 8 } else { 4 };
    if let Some(f) = out.get_mut(at + 8..at + 8 + width) {
        // SHF_COMPRESSED (0x800) is in the low word: the second byte of a little-endian
        // field, the second to last of a big-endian one.
        let i = if little { 1 } else { width - 2 };
        f[i] &= !0x08;
    }
}

/// Where the section headers of sections left out whole are (file offset), for ELF64 or not.
fn dropped_section_headers(obj: &object::File<'_>, skip: &[&str]) -> Vec<(usize, bool)> {
    use object::read::elf::FileHeader;
    fn of<H: FileHeader>(
        f: &object::read::elf::ElfFile<'_, H>,
        is64: bool,
        skip: &[&str],
    ) -> Vec<(usize, bool)> {
        let h = f.elf_header();
        let e = f.endian();
        let (shoff, entsize) = (h.e_shoff(e).into() as usize, h.e_shentsize(e) as usize);
        f.sections()
            .filter(|s| {
                let name = s.name().unwrap_or("");
                let exec = s.kind() == object::SectionKind::Text;
                s.file_range().is_some_and(|r| r.1 > 0)
                    && !exec
                    && (!kept_section(name) || skip.contains(&name) && name.contains("aranges"))
            })
            .map(|s| (shoff + s.index().0 * entsize, is64))
            .collect()
    }
    match obj {
        object::File::Elf64(f) => of(f, true, skip),
        object::File::Elf32(f) => of(f, false, skip),
        _ => Vec::new(),
    }
}

/// Sets the section header at `at` to `SHT_NOBITS` (8), without `SHF_COMPRESSED`.
fn mark_nobits(out: &mut [u8], at: usize, is64: bool, e: object::Endianness) {
    let little = e == object::Endianness::Little;
    let nobits = if little {
        8u32.to_le_bytes()
    } else {
        8u32.to_be_bytes()
    };
    if let Some(t) = out.get_mut(at + 4..at + 8) {
        t.copy_from_slice(&nobits);
    }
    clear_compressed(out, at, is64, little);
}

/// The ranges of `elf`'s bytes that analysis reads, with the code of `functions` (SVMA
/// ranges), without the sections named in `skip`.
fn kept_ranges(
    obj: &object::File<'_>,
    elf: &ElfData,
    functions: &[(u64, u64)],
    skip: &[&str],
) -> Vec<Range<usize>> {
    let bytes = &elf.bytes[..];
    let mut keep: Vec<Range<usize>> = header_ranges(obj);
    for section in obj.sections() {
        let name = section.name().unwrap_or("");
        if let Some((offset, size)) = section.file_range() {
            if kept_section(name) && !skip.contains(&name) {
                keep.push(offset as usize..(offset + size) as usize);
            }
        }
    }
    // Code, where the file holds it (a separate debug file's .text has no bytes: its
    // segments' file ranges hold other sections).
    let has_code = obj
        .sections()
        .any(|s| s.kind() == object::SectionKind::Text && s.file_range().is_some());
    if has_code {
        for &(start, end) in functions {
            keep.extend(elf.file_range(start, end));
        }
    }
    for r in &mut keep {
        r.end = r.end.min(bytes.len());
        r.start = r.start.min(r.end);
    }
    keep.sort_by_key(|r| r.start);
    keep
}

/// The ELF header, program headers and section headers.
fn header_ranges(obj: &object::File<'_>) -> Vec<Range<usize>> {
    use object::read::elf::FileHeader;
    fn of<H: FileHeader>(f: &object::read::elf::ElfFile<'_, H>) -> Vec<Range<usize>> {
        let h = f.elf_header();
        let e = f.endian();
        let ph = h.e_phoff(e).into() as usize;
        let sh = h.e_shoff(e).into() as usize;
        vec![
            0..std::mem::size_of::<H>(),
            ph..ph + h.e_phnum(e) as usize * h.e_phentsize(e) as usize,
            sh..sh + h.e_shnum(e) as usize * h.e_shentsize(e) as usize,
        ]
    }
    match obj {
        object::File::Elf64(f) => of(f),
        object::File::Elf32(f) => of(f),
        _ => Vec::new(),
    }
}

/// `bytes` with everything outside `keep` zeroed, and how many bytes were kept.
fn reduced(bytes: &[u8], keep: &[Range<usize>]) -> (Vec<u8>, u64) {
    let mut out = vec![0u8; bytes.len()];
    let mut kept = 0u64;
    let mut done = 0usize;
    for r in keep {
        let start = r.start.max(done);
        if start < r.end {
            out[start..r.end].copy_from_slice(&bytes[start..r.end]);
            kept += (r.end - start) as u64;
            done = r.end;
        }
    }
    (out, kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduced_keeps_ranges_and_zeroes_the_rest() {
        let bytes: Vec<u8> = (1..=20).collect();
        let (out, kept) = reduced(&bytes, &[0..2, 1..4, 10..12]);
        assert_eq!(kept, 6);
        assert_eq!(&out[..4], &[1, 2, 3, 4]);
        assert!(out[4..10].iter().all(|&b| b == 0));
        assert_eq!(&out[10..12], &[11, 12]);
        assert_eq!(out.len(), 20);
    }

    #[test]
    fn dwarf_for_lines_is_kept_and_location_lists_are_not() {
        for kept in [
            ".debug_info",
            ".zdebug_line",
            ".eh_frame",
            ".note.gnu.build-id",
        ] {
            assert!(kept_section(kept), "{kept}");
        }
        for dropped in [
            ".debug_loclists",
            ".debug_macro",
            ".rodata",
            ".data",
            ".text",
        ] {
            assert!(!kept_section(dropped), "{dropped}");
        }
    }
}
