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
        self.bytes.get(self.file_range(start, end)?)
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

/// JIT code's names: from a perf map (`START SIZE name` lines the runtime writes to
/// /tmp/perf-PID.map, numbers in hex with or without `0x`), or from a jitdump file
/// (`jit-PID.dump`, perf's binary format: the code-load records).
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

    /// The code-load records of a jitdump file; a damaged or cut file gives what it holds
    /// up to the damage.
    fn parse_jitdump(path: PathBuf, bytes: &[u8]) -> Option<JitMap> {
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

pub use crate::kallsyms::Kallsyms;

type Cached<T> = Mutex<HashMap<String, Option<Arc<T>>>>;

/// Where files are looked for, besides the paths the recording names. For a binary of a known
/// build id, in order: the archive being read, `--symfs`, perf's build-id caches, the
/// original path (if its build id matches), a debuginfod server; for its symbols and DWARF,
/// its separate debug file: the archive, the build-id caches, `/usr/lib/debug/.build-id`,
/// `.gnu_debuglink`, debuginfod. A file with another build id is never used.
#[derive(Default)]
pub struct Sources {
    pub archive: Option<Arc<crate::archive::Archive>>,
    /// perf's `--symfs`: a directory prefixed to every path.
    pub symfs: Option<PathBuf>,
    /// perf's build-id caches (`$PERF_BUILDID_DIR`, else `~/.debug`).
    pub buildid_dirs: Vec<PathBuf>,
    /// Where separate debug files live (`/usr/lib/debug`).
    pub debug_root: PathBuf,
    pub debuginfod: Option<crate::debuginfod::Client>,
    /// Kernel symbols from this file (`/proc/kallsyms` text) instead of the running kernel's
    /// (`$BPFPERF_KALLSYMS`).
    pub kallsyms: Option<PathBuf>,
}

impl Sources {
    /// The sources the environment names: `PERF_BUILDID_DIR` (else `~/.debug`),
    /// `DEBUGINFOD_URLS`, `BPFPERF_KALLSYMS`.
    pub fn from_env() -> Sources {
        let buildid_dirs = std::env::var_os("PERF_BUILDID_DIR")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug")))
            .into_iter()
            .collect();
        Sources {
            buildid_dirs,
            debug_root: PathBuf::from("/usr/lib/debug"),
            debuginfod: crate::debuginfod::Client::from_env(),
            kallsyms: std::env::var_os("BPFPERF_KALLSYMS").map(PathBuf::from),
            ..Default::default()
        }
    }
}

/// Which sources [`Loader::find_elf`] looks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Search {
    /// Every source.
    Everywhere,
    /// Those on this machine, before debuginfod is asked (no debug file stand-in either).
    Here,
}

/// The cache key of a file asked for by path and build id.
fn elf_key(name: &str, expected: Option<&[u8]>) -> String {
    match expected {
        Some(id) => format!("{name}\0{}", hex(id)),
        None => name.to_string(),
    }
}

/// Where the kernel symbols in use came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KallsymsOrigin {
    /// The running kernel (`/proc/kallsyms`, through the per-boot cache).
    Running,
    /// The archive: the kernel of that build id (hex).
    Archive(String),
    /// A file the user named.
    File(PathBuf),
}

/// Opens files for the stages, once each.
#[derive(Default)]
pub struct Loader {
    elves: Cached<ElfData>,
    debug: Cached<ElfData>,
    jit: Cached<JitMap>,
    kallsyms: Mutex<Option<Option<Arc<Kallsyms>>>>,
    pub sources: Sources,
    /// Which source served each file (path -> source), for `analyze info`.
    served: Mutex<std::collections::BTreeMap<String, String>>,
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
    /// A loader for the sources the environment names.
    pub fn new() -> Loader {
        Loader::with_sources(Sources::from_env())
    }

    pub fn with_sources(sources: Sources) -> Loader {
        Loader {
            sources,
            ..Default::default()
        }
    }

    /// Which source served each file asked for so far (path -> where from), and the files
    /// that stayed missing.
    pub fn served(&self) -> std::collections::BTreeMap<String, String> {
        self.served.lock().unwrap().clone()
    }

    fn serve(&self, path: &str, from: String) {
        self.served.lock().unwrap().insert(path.to_string(), from);
    }

    /// Notes a problem with a file, said once (see [`Loader::problems`]).
    pub(crate) fn problem(&self, line: String) {
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
    /// `expected` is the build id the recording gives: the file is looked for in the
    /// [`Sources`] in order, and one with another id is not used.
    pub fn elf(&self, name: &str, expected: Option<&[u8]>) -> Option<Arc<ElfData>> {
        cached(&self.elves, &elf_key(name, expected), || {
            match self.find_elf(name, expected, Search::Everywhere) {
                Ok((elf, from)) => {
                    self.serve(name, from);
                    Some(elf)
                }
                Err(why) => {
                    self.serve(name, "missing".into());
                    if let Some(why) = why {
                        self.problem(format!("{why}; its frames are [unknown]"));
                    }
                    None
                }
            }
        })
    }

    /// Looks for `name` of build id `expected` in the sources `search` names: the file and
    /// where it was, or why it is not there (`None`: nothing worth a warning).
    fn find_elf(
        &self,
        name: &str,
        expected: Option<&[u8]>,
        search: Search,
    ) -> Result<(ElfData, String), Option<String>> {
        let matches = |elf: &ElfData| match (expected, elf.build_id.as_deref()) {
            (Some(want), Some(have)) => build_ids_match(want, have),
            _ => true,
        };
        let id = expected
            .map(hex)
            .map(|h| h.trim_end_matches("00000000").to_string());
        let id = id.as_deref().filter(|h| h.len() > 2);
        let mut why_not: Vec<String> = Vec::new();
        let mut try_path = |path: &Path, from: &str| -> Option<(ElfData, String)> {
            let bytes = map_file(path).ok()?;
            match ElfData::parse(name.into(), bytes) {
                Ok(elf) if matches(&elf) => Some((elf, from.to_string())),
                Ok(elf) => {
                    why_not.push(format!(
                        "{}: build id {} differs from the recording's {}",
                        path.display(),
                        elf.build_id_hex().unwrap_or_default(),
                        expected.map(hex).unwrap_or_default()
                    ));
                    None
                }
                Err(e) => {
                    why_not.push(e);
                    None
                }
            }
        };
        if name == "[vdso]" {
            if let Some(found) = id
                .and_then(|id| self.sources.archive.as_ref()?.elf(id))
                .and_then(|b| ElfData::parse(name.into(), Bytes::Shared(b)).ok())
            {
                return Ok((found, "archive".into()));
            }
            let vdso = vdso_image().and_then(|b| ElfData::parse(name.into(), Bytes::Owned(b)));
            return match vdso {
                Ok(elf) if matches(&elf) => Ok((elf, "this process".into())),
                // Another machine's: its frames are [unknown], as expected.
                Ok(_) => Err(None),
                Err(e) => Err(Some(e)),
            };
        }
        if let Some(archive) = &self.sources.archive {
            if let Some(b) = id.and_then(|id| archive.elf(id)) {
                if let Ok(elf) = ElfData::parse(name.into(), Bytes::Shared(b)) {
                    return Ok((elf, format!("archive {}", archive.path.display())));
                }
            }
        }
        let relative = name.trim_start_matches('/');
        if let Some(symfs) = &self.sources.symfs {
            let at = symfs.join(relative);
            if let Some(found) = try_path(&at, &format!("--symfs {}", symfs.display())) {
                return Ok(found);
            }
        }
        if let Some(id) = id {
            for dir in &self.sources.buildid_dirs {
                let at = dir.join(crate::archive::cache_dir(name, id)).join("elf");
                if let Some(found) = try_path(&at, &format!("build-id cache {}", dir.display())) {
                    return Ok(found);
                }
            }
        }
        if let Some(found) = try_path(Path::new(name), "its path") {
            return Ok(found);
        }
        if search == Search::Everywhere {
            if let (Some(id), Some(client)) = (id, &self.sources.debuginfod) {
                let cached = client.cached(id, crate::debuginfod::Kind::Executable);
                if let Some(found) = try_path(&cached, "debuginfod") {
                    return Ok(found);
                }
            }
            // Last: the separate debug file alone (symbols and lines, no code or unwind
            // tables).
            if let Some(id) = id {
                let at = self.debug_by_id(&self.sources.debug_root, id);
                if let Some(found) = try_path(&at, "its debug file (no code)") {
                    return Ok(found);
                }
            }
        }
        Err(Some(
            why_not
                .pop()
                .unwrap_or_else(|| format!("{name}: not found")),
        ))
    }

    fn debug_by_id(&self, root: &Path, id: &str) -> PathBuf {
        root.join(".build-id")
            .join(&id[..2])
            .join(format!("{}.debug", &id[2..]))
    }

    /// The separate debug file of `elf`: the archive's, the build-id caches', by build id
    /// under `/usr/lib/debug/.build-id/`, by `.gnu_debuglink` (next to it, in its `.debug/`
    /// directory, under the debug root), then debuginfod's. A candidate whose build id
    /// differs from the binary's is skipped.
    pub fn debug_file(&self, elf: &ElfData) -> Option<Arc<ElfData>> {
        let id = elf.build_id_hex().filter(|h| h.len() > 2);
        if let (Some(id), Some(archive)) = (&id, &self.sources.archive) {
            if let Some(b) = archive.debug(id) {
                let key = format!("{}\0archive debug", id);
                return cached(&self.debug, &key, || {
                    ElfData::parse(
                        format!("{} (archived debug file)", elf.name),
                        Bytes::Shared(b),
                    )
                    .ok()
                });
            }
        }
        let root = &self.sources.debug_root;
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Some(id) = &id {
            for dir in &self.sources.buildid_dirs {
                candidates.push(
                    dir.join(crate::archive::cache_dir(&elf.name, id))
                        .join("debug"),
                );
            }
            candidates.push(self.debug_by_id(root, id));
        }
        if let (Some(link), Some(dir)) = (&elf.debuglink, Path::new(&elf.name).parent()) {
            candidates.push(dir.join(link));
            candidates.push(dir.join(".debug").join(link));
            candidates.push(root.join(dir.strip_prefix("/").unwrap_or(dir)).join(link));
        }
        if let (Some(id), Some(client)) = (&id, &self.sources.debuginfod) {
            candidates.push(client.cached(id, crate::debuginfod::Kind::DebugInfo));
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

    /// Fetches from debuginfod, in parallel, the binaries of `build_ids` (path -> id) that no
    /// local source has, and their debug files: afterwards [`Loader::elf`] finds them in the
    /// cache. A progress bar on a terminal; nothing without `DEBUGINFOD_URLS`.
    pub fn fetch_missing(&self, build_ids: &std::collections::HashMap<String, Vec<u8>>) {
        use rayon::prelude::*;
        let Some(client) = &self.sources.debuginfod else {
            return;
        };
        // The files a local source has are opened now (and kept: nothing opens them twice);
        // the others are fetched.
        let missing: Vec<(&String, String)> = build_ids
            .iter()
            .filter(|(path, _)| path.starts_with('/'))
            .filter_map(|(path, id)| {
                let hexed = hex(id).trim_end_matches("00000000").to_string();
                if hexed.len() <= 2 {
                    return None;
                }
                match self.find_elf(path, Some(id), Search::Here) {
                    Ok((elf, from)) => {
                        cached(&self.elves, &elf_key(path, Some(id)), || Some(elf));
                        self.serve(path, from);
                        None
                    }
                    Err(_) => Some((path, hexed)),
                }
            })
            .collect();
        if missing.is_empty() {
            return;
        }
        let bar = {
            use std::io::IsTerminal;
            std::io::stderr().is_terminal().then(|| {
                let b = indicatif::ProgressBar::new(missing.len() as u64);
                b.set_message("debuginfod");
                b
            })
        };
        missing.par_iter().for_each(|(_, id)| {
            if client
                .fetch(id, crate::debuginfod::Kind::Executable)
                .is_some()
            {
                client.fetch(id, crate::debuginfod::Kind::DebugInfo);
            }
            if let Some(b) = &bar {
                b.inc(1);
            }
        });
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        for p in client.problems.lock().unwrap().iter() {
            self.problem(p.clone());
        }
    }

    /// Opens the file at `path` (if it is there and has build id `build_id`) and its debug
    /// file, and prepares what symbolizing it needs (symbol tables; `with_dwarf`, its DWARF
    /// inflated): what the driver starts while the recording is read, for the files the
    /// recording lists.
    pub fn prepare(&self, path: &str, build_id: &[u8], with_dwarf: bool) {
        if !path.starts_with('/') {
            return;
        }
        let Some(elf) = self.elf(path, Some(build_id)) else {
            return;
        };
        let debug = self.debug_file(&elf);
        crate::symbolize::prepare(&elf, debug.as_deref(), with_dwarf);
    }

    /// The names of a process's JIT code: /tmp/perf-PID.map if it wrote one, else the
    /// jitdump file it mapped (`jitdump`, the path its mapping gives), read directly.
    pub fn jit_map(&self, pid: i32, jitdump: Option<&str>) -> Option<Arc<JitMap>> {
        // The archive's copy first, then the file.
        let read = |path: &str| -> Option<Vec<u8>> {
            match self.sources.archive.as_ref().and_then(|a| a.file_at(path)) {
                Some(b) => Some(b.to_vec()),
                None => std::fs::read(path).ok(),
            }
        };
        let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
        let map = cached(&self.jit, &path.to_string_lossy(), || {
            let text = read(&path.to_string_lossy())?;
            Some(JitMap::parse(path.clone(), &String::from_utf8_lossy(&text)))
        });
        map.or_else(|| {
            let dump = jitdump?;
            cached(&self.jit, dump, || {
                let bytes = read(dump)?;
                let map = JitMap::parse_jitdump(PathBuf::from(dump), &bytes);
                if map.is_none() {
                    self.problem(format!(
                        "{dump}: not a jitdump file; JIT frames are [unknown]"
                    ));
                }
                map
            })
        })
    }

    /// Kernel symbols: the archive's, else those of the file `$BPFPERF_KALLSYMS` names, else
    /// the running kernel's.
    pub fn kallsyms(&self) -> Option<Arc<Kallsyms>> {
        let mut k = self.kallsyms.lock().unwrap();
        k.get_or_insert_with(|| {
            let parse_text = |bytes: &[u8], from: &str| {
                let k = Kallsyms::parse(&String::from_utf8_lossy(bytes));
                if k.is_none() {
                    self.problem(format!(
                        "{from}: no kernel symbols; kernel frames are [unknown]"
                    ));
                }
                k.map(Arc::new)
            };
            if let Some((_, text)) = self.sources.archive.as_ref().and_then(|a| a.kallsyms()) {
                return parse_text(&text, "the archive's kallsyms");
            }
            if let Some(path) = &self.sources.kallsyms {
                return match std::fs::read(path) {
                    Ok(text) => parse_text(&text, &path.display().to_string()),
                    Err(e) => {
                        self.problem(format!(
                            "{}: {e}; kernel frames are [unknown]",
                            path.display()
                        ));
                        None
                    }
                };
            }
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

    /// Where [`Loader::kallsyms`] takes the kernel's symbols from.
    pub fn kallsyms_origin(&self) -> KallsymsOrigin {
        if let Some((id, _)) = self.sources.archive.as_ref().and_then(|a| a.kallsyms()) {
            return KallsymsOrigin::Archive(id);
        }
        match &self.sources.kallsyms {
            Some(path) => KallsymsOrigin::File(path.clone()),
            None => KallsymsOrigin::Running,
        }
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
