//! `analyze archive`: the recording and, for every ELF file a sample touched (by build id),
//! what analysis reads of it; the rest of each file is zeroed in place, so that offsets,
//! program headers and build ids stay as they were (perf reads the files too) while zstd
//! makes nothing of the zeros.
//!
//! Kept: the ELF, program and section headers; symbol tables (with versions and PLT
//! relocations, for `name@plt`); unwind tables (`.eh_frame`, `.eh_frame_hdr`,
//! `.debug_frame`); the DWARF sections lines and inline frames need (not location lists or
//! macros); notes and debug links; and the code of every function a stack passes through
//! (what annotate disassembles).

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

use super::{build_id_link, cache_dir, MANIFEST, PERF_DATA};
use crate::loader::{self, ElfData, Loader};
use crate::pipeline::{self, EventSel, Options};
use crate::resolve::Source;

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

/// One archived file, for the manifest and the summary.
#[derive(Debug, Clone)]
pub struct Entry {
    pub build_id: String,
    /// `elf`, `debug`, `kallsyms`, `vmlinux` or `jit`.
    pub kind: &'static str,
    pub path: String,
    pub size: u64,
    pub kept: u64,
}

/// What was archived.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub recording: u64,
    pub entries: Vec<Entry>,
    /// Files the samples touched that could not be archived, and why.
    pub missing: Vec<String>,
    pub archive: u64,
}

impl Summary {
    /// The lines `analyze archive` prints.
    pub fn to_text(&self, out: &Path) -> String {
        let mb = |b: u64| b as f64 / 1e6;
        let mut s = String::new();
        let elf: u64 = self
            .entries
            .iter()
            .filter(|e| e.kind == "elf")
            .map(|e| e.size)
            .sum();
        for e in &self.entries {
            s += &format!(
                "  {:<8} {:>9.2} MB, kept {:>9.2} MB  {} ({})\n",
                e.kind,
                mb(e.size),
                mb(e.kept),
                e.path,
                e.build_id
            );
        }
        for m in &self.missing {
            s += &format!("  missing: {m}\n");
        }
        let size: u64 = self.entries.iter().map(|e| e.size).sum();
        let kept: u64 = self.entries.iter().map(|e| e.kept).sum();
        s += &format!(
            "wrote {}: {:.2} MB; the recording {:.2} MB and {} files of {:.2} MB, of which \
             {:.2} MB kept ({:.2} MB of unused sections and code left out); {:.1}% of the \
             recording plus its ELF files ({:.2} MB)\n",
            out.display(),
            mb(self.archive),
            mb(self.recording),
            self.entries.len(),
            mb(size),
            mb(kept),
            mb(size - kept),
            100.0 * self.archive as f64 / (self.recording + elf).max(1) as f64,
            mb(self.recording + elf),
        );
        s
    }
}

/// `elf`'s bytes reduced to what analysis reads (see [`kept_ranges`]), and how many were kept.
/// Sections left out whole become `SHT_NOBITS`, as `objcopy --only-keep-debug` leaves them:
/// readers (BFD's, perf's) then do not look for data there (a compressed section of zeros
/// has no valid header, and BFD rejects the file). `.debug_info` keeps only the compilation
/// units of `functions` where they can be read alone, `.debug_line` only their line
/// programs: rewritten uncompressed at the end of the file, their section headers pointed
/// there (`.debug_aranges`, whose offsets no longer match, is left out).
fn reduce(elf: &ElfData, functions: &[(u64, u64)]) -> (Vec<u8>, u64) {
    let Ok(obj) = object::File::parse(&*elf.bytes) else {
        return (elf.bytes.to_vec(), elf.bytes.len() as u64);
    };
    let rewritten = pruned_dwarf(&obj, functions);
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
fn pruned_dwarf(
    obj: &object::File<'_>,
    functions: &[(u64, u64)],
) -> Option<Vec<(&'static str, Vec<u8>)>> {
    if functions.is_empty() {
        return None;
    }
    let data = |name: &str| obj.section_by_name(name)?.uncompressed_data().ok();
    let info = data(".debug_info")?;
    let abbrev = data(".debug_abbrev")?;
    let aranges = data(".debug_aranges")?;
    let starts: Vec<u64> = functions.iter().map(|f| f.0).collect();
    let units = crate::symbolize::dwarf_units_alone(&info, &abbrev, &aranges, &starts)?;
    let mut new_info = Vec::new();
    for u in units {
        new_info.extend_from_slice(info.get(u)?);
    }
    let mut out = Vec::new();
    if let Some(line) = data(".debug_line") {
        let mut new_line = vec![0u8; line.len()];
        for r in crate::symbolize::dwarf_line_programs(&new_info, &abbrev, &line) {
            if let (Some(from), Some(to)) = (line.get(r.clone()), new_line.get_mut(r)) {
                to.copy_from_slice(from);
            }
        }
        out.push((".debug_line", new_line));
    }
    out.push((".debug_info", new_info));
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
    for &(start, end) in functions {
        keep.extend(elf.file_range(start, end));
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

/// A tar of files and links, compressed with zstd as it is written.
struct Writer {
    tar: tar::Builder<zstd::Encoder<'static, std::fs::File>>,
}

impl Writer {
    fn create(path: &Path) -> Result<Writer, String> {
        use std::os::unix::fs::OpenOptionsExt;
        let at = |e: std::io::Error| format!("{}: {e}", path.display());
        // A recording holds memory contents (stack copies): 0600, as record writes it.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(at)?;
        let mut encoder = zstd::Encoder::new(file, 6).map_err(at)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let _ = encoder.multithread(threads);
        let _ = encoder.long_distance_matching(true);
        Ok(Writer {
            tar: tar::Builder::new(encoder),
        })
    }

    fn file(&mut self, name: &str, bytes: &[u8]) -> Result<(), String> {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        self.tar
            .append_data(&mut h, name, bytes)
            .map_err(|e| format!("{name}: {e}"))
    }

    fn link(&mut self, name: &str, target: &str) -> Result<(), String> {
        let mut h = tar::Header::new_gnu();
        h.set_size(0);
        h.set_mode(0o777);
        h.set_entry_type(tar::EntryType::Symlink);
        self.tar
            .append_link(&mut h, name, target)
            .map_err(|e| format!("{name}: {e}"))
    }

    fn finish(self) -> Result<(), String> {
        let encoder = self.tar.into_inner().map_err(|e| e.to_string())?;
        let mut file = encoder.finish().map_err(|e| e.to_string())?;
        file.flush().map_err(|e| e.to_string())
    }
}

/// Writes the archive of the recording at `input` to `output`.
pub fn write(input: &Path, output: &Path, loader: &Loader) -> Result<Summary, String> {
    let opened = crate::input::open(input).map_err(|e| e.to_string())?;
    let recording_bytes = opened.reader.input();
    let rec =
        crate::read::read_with(opened.reader, true, &mut |_| {}).map_err(|e| e.to_string())?;
    let options = Options {
        event: EventSel::All,
        inline: false,
        lines: false,
        ..Default::default()
    };
    let resolved = pipeline::resolve(&rec, &options, loader).map_err(|e| e.to_string())?;

    // The functions each file's frames are in.
    let files = resolved.resolver.files();
    let mut functions: Vec<Vec<(u64, u64)>> = vec![Vec::new(); files.len()];
    for &(f, lookup) in resolved.keys.iter().flatten().flatten() {
        if let Some(Source::Elf { elf, debug }) = &files[f as usize].source {
            if let Some((_, start, end)) =
                crate::symbolize::function_at(elf, debug.as_deref(), lookup.call_site())
            {
                functions[f as usize].push((start, end));
            }
        }
    }

    let mut summary = Summary {
        recording: recording_bytes.len() as u64,
        ..Default::default()
    };
    let mut w = Writer::create(output)?;
    w.file(PERF_DATA, &recording_bytes)?;
    for (f, file) in files.iter().enumerate() {
        let (elf, debug) = match &file.source {
            Some(Source::Elf { elf, debug }) => (elf, debug),
            Some(Source::Jit(map)) => {
                // JIT code's names, at their own path (a perf map or a jitdump file).
                let path = map.path.to_string_lossy();
                match std::fs::read(&map.path) {
                    Ok(bytes) => {
                        w.file(path.trim_start_matches('/'), &bytes)?;
                        summary.entries.push(Entry {
                            build_id: "-".into(),
                            kind: "jit",
                            path: path.into_owned(),
                            size: bytes.len() as u64,
                            kept: bytes.len() as u64,
                        });
                    }
                    Err(e) => summary.missing.push(format!("{path}: {e}")),
                }
                continue;
            }
            None => {
                summary
                    .missing
                    .push(format!("{}: not found here", file.dso));
                continue;
            }
        };
        let Some(id) = elf.build_id_hex() else {
            summary
                .missing
                .push(format!("{}: no build id, cannot be told apart", file.dso));
            continue;
        };
        let fs = &mut functions[f];
        fs.sort_unstable();
        fs.dedup();
        let dir = cache_dir(&file.dso, &id);
        let (bytes, kept) = reduce(elf, fs);
        w.file(&format!("{dir}/elf"), &bytes)?;
        summary.entries.push(Entry {
            build_id: id.clone(),
            kind: "elf",
            path: file.dso.clone(),
            size: elf.bytes.len() as u64,
            kept,
        });
        if let Some(d) = debug {
            let (bytes, kept) = reduce(d, fs);
            w.file(&format!("{dir}/debug"), &bytes)?;
            summary.entries.push(Entry {
                build_id: id.clone(),
                kind: "debug",
                path: d.name.clone(),
                size: d.bytes.len() as u64,
                kept,
            });
        }
        let (link, target) = build_id_link(&file.dso, &id);
        w.link(&link, &target)?;
    }

    // The kernel's symbols, when the recording's kernel is the one they describe.
    let has_kernel_frames = rec.samples.iter().any(|s| !s.kernel.is_empty());
    if has_kernel_frames {
        match kallsyms_text(&rec, loader) {
            Ok((id, text)) => {
                let full = text.len() as u64;
                let text = kallsyms_subset(&text, &rec);
                let dir = cache_dir("[kernel.kallsyms]", &id);
                w.file(&format!("{dir}/kallsyms"), &text)?;
                let (link, target) = build_id_link("[kernel.kallsyms]", &id);
                w.link(&link, &target)?;
                summary.entries.push(Entry {
                    build_id: id,
                    kind: "kallsyms",
                    path: "[kernel.kallsyms]".into(),
                    size: full,
                    kept: text.len() as u64,
                });
            }
            Err(why) => summary.missing.push(format!("[kernel.kallsyms]: {why}")),
        }
        if let Some(Vmlinux {
            path,
            elf: vmlinux,
            functions,
        }) = vmlinux(&rec, loader)
        {
            let id = vmlinux.build_id_hex().unwrap_or_default();
            let (bytes, kept) = reduce(&vmlinux, &functions);
            w.file(
                &format!("{}/vmlinux", cache_dir("[kernel.kallsyms]", &id)),
                &bytes,
            )?;
            summary.entries.push(Entry {
                build_id: id,
                kind: "vmlinux",
                path,
                size: vmlinux.bytes.len() as u64,
                kept,
            });
        }
    }
    let mut manifest = String::from(
        "# bpfperf archive: build id, kind, size, bytes kept (the rest zeroed), original path\n",
    );
    for e in &summary.entries {
        manifest += &format!(
            "{}\t{}\t{}\t{}\t{}\n",
            e.build_id, e.kind, e.size, e.kept, e.path
        );
    }
    w.file(MANIFEST, manifest.as_bytes())?;
    w.finish()?;
    summary.archive = std::fs::metadata(output).map_or(0, |m| m.len());
    Ok(summary)
}

/// The lines of `kallsyms` (its text) that the recording's kernel frames need: the symbol
/// holding each address and the one after it (where it ends), and `_text`/`_stext`, which
/// tell a later boot's shift (KASLR). Sorted by address, as the kernel lists them.
fn kallsyms_subset(kallsyms: &[u8], rec: &crate::read::Recording) -> Vec<u8> {
    let text = String::from_utf8_lossy(kallsyms);
    let mut lines: Vec<(u64, &str)> = text
        .lines()
        .filter_map(|l| Some((u64::from_str_radix(l.split(' ').next()?, 16).ok()?, l)))
        .collect();
    lines.sort_by_key(|l| l.0);
    let named = |n: &str| {
        lines
            .iter()
            .find(|l| l.1.split(' ').nth(2) == Some(n))
            .map(|l| l.0)
    };
    // Recorded addresses to this kallsyms' addresses, as pipeline's kernel_symbols shifts.
    let shift = rec
        .kernel_mapping()
        .filter(|m| m.pgoff != 0)
        .and_then(|m| {
            let symbol = m.path.strip_prefix("[kernel.kallsyms]")?;
            Some(named(symbol)?.wrapping_sub(m.pgoff))
        })
        .unwrap_or(0);
    let mut keep = vec![false; lines.len()];
    for s in &rec.samples {
        for &a in &s.kernel {
            let a = a.wrapping_add(shift);
            let i = lines.partition_point(|l| l.0 <= a);
            if let Some(i) = i.checked_sub(1) {
                keep[i] = true;
                if let Some(k) = keep.get_mut(i + 1) {
                    *k = true;
                }
            }
        }
    }
    let mut out = String::new();
    for (i, (_, line)) in lines.iter().enumerate() {
        let name = line.split(' ').nth(2).unwrap_or("");
        if keep[i] || matches!(name, "_text" | "_stext" | "_etext") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.into_bytes()
}

/// A vmlinux with debug info, and the functions of it the kernel frames are in.
struct Vmlinux {
    path: String,
    elf: std::sync::Arc<ElfData>,
    functions: Vec<(u64, u64)>,
}

/// The recording kernel's vmlinux, if one of its usual places has it (with the recording's
/// kernel build id).
fn vmlinux(rec: &crate::read::Recording, loader: &Loader) -> Option<Vmlinux> {
    let release = rec.os_release.clone()?;
    let id = rec.build_ids.get("[kernel.kallsyms]")?;
    let candidates = [
        format!("/usr/lib/debug/boot/vmlinux-{release}"),
        format!("/usr/lib/debug/lib/modules/{release}/vmlinux"),
        format!("/boot/vmlinux-{release}"),
        format!("/lib/modules/{release}/build/vmlinux"),
    ];
    let (path, elf) = candidates.iter().find_map(|p| {
        if !Path::new(p).is_file() {
            return None;
        }
        Some((p.clone(), loader.elf(p, Some(id))?))
    })?;
    // Recorded addresses to the file's: the recording names `_text`'s address as the kernel
    // mapping's page offset.
    let text_in_file = {
        let obj = object::File::parse(&*elf.bytes).ok()?;
        object::Object::symbols(&obj)
            .find(|s| object::ObjectSymbol::name(s) == Ok("_text"))
            .map(|s| object::ObjectSymbol::address(&s))?
    };
    let shift = rec
        .kernel_mapping()
        .map_or(0, |m| m.pgoff.wrapping_sub(text_in_file));
    let mut functions: Vec<(u64, u64)> = rec
        .samples
        .iter()
        .flat_map(|s| s.kernel.iter())
        .filter_map(|&a| {
            let (_, start, end) = crate::symbolize::function_at(&elf, None, a.wrapping_sub(shift))?;
            Some((start, end))
        })
        .collect();
    functions.sort_unstable();
    functions.dedup();
    Some(Vmlinux {
        path,
        elf,
        functions,
    })
}

/// The kernel symbols to archive: the build id (hex) they are filed under, and their text.
fn kallsyms_text(
    rec: &crate::read::Recording,
    loader: &Loader,
) -> Result<(String, Vec<u8>), String> {
    if let Some((id, text)) = loader.sources.archive.as_ref().and_then(|a| a.kallsyms()) {
        return Ok((id, text.to_vec()));
    }
    let recorded = rec
        .build_ids
        .get("[kernel.kallsyms]")
        .map(|id| loader::hex(id));
    let running = loader::running_kernel_build_id().map(|id| loader::hex(&id));
    let path: PathBuf = match &loader.sources.kallsyms {
        Some(p) => p.clone(),
        None => {
            if let (Some(r), Some(here)) = (&recorded, &running) {
                if !r.starts_with(here.as_str()) {
                    return Err("recorded on another kernel than this one; not archived".into());
                }
            }
            PathBuf::from("/proc/kallsyms")
        }
    };
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let id = recorded
        .map(|r| r.trim_end_matches("00000000").to_string())
        .or(running)
        .unwrap_or_else(|| "0".repeat(40));
    Ok((id, text))
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
