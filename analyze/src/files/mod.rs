//! files: the one place that finds and opens what the stages read, below them all and
//! importing none of them.
//!
//! Takes paths and build ids; gives ELF files ([`ElfData`]: binaries memory-mapped once and
//! shared, their separate debug files, the running kernel's `[vdso]` image), JIT maps
//! ([`JitMap`]), kernel symbols ([`Kallsyms`], through a per-boot cache), archives and the
//! recording itself ([`input`]). Files are looked for where [`Sources`] says (an archive,
//! `--symfs`, build-id caches, `/usr/lib/debug`, debuginfod). The [`Loader`] caches every
//! answer, failures too, so each file is opened and parsed once however many mappings,
//! threads and stages ask; it is `Sync`: the driver asks it from several threads at once.

pub mod archive;
pub mod debuginfod;
pub mod dwarf_cache;
mod elf;
pub mod input;
mod jit;
mod kallsyms;
mod kallsyms_cache;
pub mod packages;
pub mod running_kernel;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use elf::{build_ids_match, eh_frame_hdr_fits, hex, unhex, Bytes, Derived, ElfData, Segment};
use elf::{map_file, read_regular, vdso_image};
pub use jit::JitMap;
pub use kallsyms::Kallsyms;

type Cached<T> = Mutex<HashMap<String, Option<Arc<T>>>>;

/// Where files are looked for, besides the paths the recording names. For a binary of a known
/// build id, in order: the archive being read, `--symfs`, perf's build-id caches, the
/// original path (if its build id matches), a debuginfod server; for its symbols and DWARF,
/// its separate debug file: the archive, the build-id caches, `/usr/lib/debug/.build-id`,
/// `.gnu_debuglink`, debuginfod. A file with another build id is never used. The build id is
/// the recording's, else the one an archive's MANIFEST lists for the path (files met only in
/// call chains, which perf's recordings give none).
#[derive(Default)]
pub struct Sources {
    pub archive: Option<Arc<archive::Archive>>,
    /// perf's `--symfs`: a directory prefixed to every path.
    pub symfs: Option<PathBuf>,
    /// perf's build-id caches (`$PERF_BUILDID_DIR`, else `~/.debug`).
    pub buildid_dirs: Vec<PathBuf>,
    /// Where separate debug files live (`/usr/lib/debug`).
    pub debug_root: PathBuf,
    pub debuginfod: Option<debuginfod::Client>,
    /// Kernel symbols from this file (`/proc/kallsyms` text) instead of the running kernel's
    /// (`$BPFPERF_KALLSYMS`).
    pub kallsyms: Option<PathBuf>,
    /// The MANIFESTs of the build-id caches that are unpacked archives, read once.
    pub cache_manifests: std::sync::OnceLock<HashMap<String, Vec<u8>>>,
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
            debuginfod: debuginfod::Client::from_env(),
            kallsyms: std::env::var_os("BPFPERF_KALLSYMS").map(PathBuf::from),
            ..Default::default()
        }
    }

    /// The build id an archive lists for the binary at `path` that the recording gives none
    /// (see [`archive::listed_build_ids`]): the archive's MANIFEST, then those of the build-id
    /// caches (an archive unpacked as one keeps its MANIFEST at the top).
    fn listed_build_id(&self, path: &str) -> Option<Vec<u8>> {
        if let Some(id) = self.archive.as_ref().and_then(|a| a.listed_build_id(path)) {
            return Some(id.to_vec());
        }
        self.cache_manifests
            .get_or_init(|| {
                let mut listed = HashMap::new();
                for dir in self.buildid_dirs.iter().rev() {
                    if let Ok(m) = std::fs::read(dir.join(archive::MANIFEST)) {
                        listed.extend(archive::listed_build_ids(&m));
                    }
                }
                listed
            })
            .get(path)
            .cloned()
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
    running_bpf: Mutex<Option<Option<Arc<Kallsyms>>>>,
    pub sources: Sources,
    /// Which source served each file (path -> source), for `analyze info`.
    served: Mutex<std::collections::BTreeMap<String, String>>,
    /// Which source served the separate debug file of each file that has one (path of the
    /// file -> source).
    debug_served: Mutex<std::collections::BTreeMap<String, String>>,
    /// Why files could not be used, one line per file, in the order met.
    problems: Mutex<Vec<String>>,
    /// Why files opened ahead of the stages ([`Loader::elf_ahead`]) could not be used, by
    /// their key in `elves`: said when a stage asks for the file, so that what is said does
    /// not depend on how far the work ahead got (nor names files no frame is in).
    unsaid: Mutex<HashMap<String, String>>,
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

    /// Which source served each file asked for so far (path -> where from, and where its
    /// separate debug file came from if it has one: `its path; debug file: debuginfod`), and
    /// the files that stayed missing.
    pub fn served(&self) -> std::collections::BTreeMap<String, String> {
        let mut served = self.served.lock().unwrap().clone();
        for (path, from) in self.debug_served.lock().unwrap().iter() {
            if let Some(s) = served.get_mut(path) {
                s.push_str("; debug file: ");
                s.push_str(from);
            }
        }
        served
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
        let key = elf_key(name, expected);
        let elf = self.elf_keyed(name, expected, &key);
        if elf.is_none() {
            let why = self.unsaid.lock().unwrap().remove(&key);
            if let Some(why) = why {
                self.problem(why);
            }
        }
        elf
    }

    /// [`Loader::elf`] for work ahead of the stages (while a recording is read): why the
    /// file cannot be used is said only if a stage asks for it too.
    pub fn elf_ahead(&self, name: &str, expected: Option<&[u8]>) -> Option<Arc<ElfData>> {
        self.elf_keyed(name, expected, &elf_key(name, expected))
    }

    /// The file, opened once; why it is missing kept in `unsaid`.
    fn elf_keyed(&self, name: &str, expected: Option<&[u8]>, key: &str) -> Option<Arc<ElfData>> {
        cached(&self.elves, key, || {
            match self.find_elf(name, expected, Search::Everywhere) {
                Ok((elf, from)) => {
                    self.serve(name, from);
                    Some(elf)
                }
                Err(why) => {
                    self.serve(name, "missing".into());
                    if let Some(why) = why {
                        let why = format!("{why}; its frames are [unknown]");
                        self.unsaid.lock().unwrap().insert(key.to_string(), why);
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
        let listed = match expected {
            None => self.sources.listed_build_id(name),
            Some(_) => None,
        };
        let expected = expected.or(listed.as_deref());
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
            let bytes = match map_file(path) {
                Ok(b) => b,
                Err(e) => {
                    // There but unusable (not a regular file, unreadable): say why.
                    if path.symlink_metadata().is_ok() {
                        why_not.push(e);
                    }
                    return None;
                }
            };
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
            // perf's build-id cache keeps it as `vdso`, an unpacked archive as `elf`.
            let cached = id.into_iter().flat_map(|id| {
                self.sources.buildid_dirs.iter().flat_map(move |dir| {
                    let at = dir.join(archive::cache_dir(name, id));
                    ["vdso", "elf"].map(|file| (at.join(file), dir))
                })
            });
            for (at, dir) in cached {
                if let Some(found) = try_path(&at, &format!("build-id cache {}", dir.display())) {
                    return Ok(found);
                }
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
                let at = dir.join(archive::cache_dir(name, id)).join("elf");
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
                let cached = client.cached(id, debuginfod::Kind::Executable);
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
        self.debug_file_saying(elf, true)
    }

    /// [`Loader::debug_file`] for work ahead of the stages: a candidate of another build id
    /// is not said (a stage asking for the file says it).
    pub fn debug_file_ahead(&self, elf: &ElfData) -> Option<Arc<ElfData>> {
        self.debug_file_saying(elf, false)
    }

    fn debug_file_saying(&self, elf: &ElfData, say: bool) -> Option<Arc<ElfData>> {
        let id = elf.build_id_hex().filter(|h| h.len() > 2);
        if let (Some(id), Some(archive)) = (&id, &self.sources.archive) {
            if let Some(b) = archive.debug(id) {
                let key = format!("{}\0archive debug", id);
                let d = cached(&self.debug, &key, || {
                    ElfData::parse(
                        format!("{} (archived debug file)", elf.name),
                        Bytes::Shared(b),
                    )
                    .ok()
                });
                if d.is_some() {
                    self.serve_debug(&elf.name, format!("archive {}", archive.path.display()));
                }
                return d;
            }
        }
        let root = &self.sources.debug_root;
        // Where to look, and how `analyze info` names each place.
        let mut candidates: Vec<(PathBuf, String)> = Vec::new();
        if let Some(id) = &id {
            for dir in &self.sources.buildid_dirs {
                candidates.push((
                    dir.join(archive::cache_dir(&elf.name, id)).join("debug"),
                    format!("build-id cache {}", dir.display()),
                ));
            }
            candidates.push((self.debug_by_id(root, id), root.display().to_string()));
        }
        if let (Some(link), Some(dir)) = (&elf.debuglink, Path::new(&elf.name).parent()) {
            for c in [
                dir.join(link),
                dir.join(".debug").join(link),
                root.join(dir.strip_prefix("/").unwrap_or(dir)).join(link),
            ] {
                let from = format!("debug link {}", c.display());
                candidates.push((c, from));
            }
        }
        if let (Some(id), Some(client)) = (&id, &self.sources.debuginfod) {
            candidates.push((
                client.cached(id, debuginfod::Kind::DebugInfo),
                "debuginfod".into(),
            ));
        }
        for (c, from) in candidates {
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
                    if say {
                        self.problem(format!(
                            "{key}: build id differs from {}'s; not used",
                            elf.name
                        ));
                    }
                }
                _ => {
                    self.serve_debug(&elf.name, from);
                    return Some(d);
                }
            }
        }
        None
    }

    fn serve_debug(&self, path: &str, from: String) {
        self.debug_served
            .lock()
            .unwrap()
            .insert(path.to_string(), from);
    }

    /// Whether `elf` lacks what naming its frames and lines needs (a `.symtab`, DWARF) and
    /// no separate debug file here makes up for it: then debuginfod is asked for one.
    fn wants_debug_file(&self, elf: &ElfData) -> bool {
        let complete = |e: &ElfData| e.has_symtab && e.has_debug_info;
        !complete(elf) && !self.debug_file(elf).is_some_and(|d| complete(&d))
    }

    /// Fetches from debuginfod, in parallel, the binaries of `build_ids` (path -> id) that no
    /// local source has, and their debug files; and the debug files of the binaries here
    /// that have no symbol table or no DWARF (stripped, as every Debian binary is) and no
    /// separate debug file here, as gdb and elfutils ask for them: afterwards
    /// [`Loader::elf`] and [`Loader::debug_file`] find them in the cache. A progress bar on a
    /// terminal; nothing without `DEBUGINFOD_URLS`.
    pub fn fetch_missing(&self, build_ids: &std::collections::HashMap<String, Vec<u8>>) {
        use rayon::prelude::*;
        let Some(client) = &self.sources.debuginfod else {
            return;
        };
        // The files a local source has are opened now (and kept: nothing opens them twice);
        // the others are fetched, and the debug files of those here without symbols.
        let missing: Vec<(String, bool)> = build_ids
            .par_iter()
            .filter(|(path, _)| path.starts_with('/'))
            .filter_map(|(path, id)| {
                let hexed = hex(id).trim_end_matches("00000000").to_string();
                if hexed.len() <= 2 {
                    return None;
                }
                match self.find_elf(path, Some(id), Search::Here) {
                    Ok((elf, from)) => {
                        let elf = cached(&self.elves, &elf_key(path, Some(id)), || Some(elf))?;
                        self.serve(path, from);
                        // By the file's own build id (the recording's may be padded).
                        let own = elf.build_id_hex().filter(|h| h.len() > 2)?;
                        self.wants_debug_file(&elf).then_some((own, false))
                    }
                    Err(_) => Some((hexed, true)),
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
        missing.par_iter().for_each(|(id, gone)| {
            if !gone || client.fetch(id, debuginfod::Kind::Executable).is_some() {
                client.fetch(id, debuginfod::Kind::DebugInfo);
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

    /// The names of a process's JIT code: the jitdump file it mapped (`jitdump`, the path its
    /// mapping gives), read directly, else /tmp/perf-PID.map. The jitdump first: the process
    /// itself said it writes one, while a perf map at its pid may be another's, an earlier
    /// process's with the same pid (pids wrap at 32768 here: a test suite's Python processes
    /// left 382 maps, and node's JIT frames were named from one of them once).
    pub fn jit_map(&self, pid: i32, jitdump: Option<&str>) -> Option<Arc<JitMap>> {
        // The archive's copy first, then the file.
        let read = |path: &str| -> Option<Vec<u8>> {
            match self.sources.archive.as_ref().and_then(|a| a.file_at(path)) {
                Some(b) => Some(b.to_vec()),
                None => read_regular(Path::new(path)).ok(),
            }
        };
        let dumped = jitdump.and_then(|dump| {
            cached(&self.jit, dump, || {
                let bytes = read(dump)?;
                let map = JitMap::parse_jitdump(PathBuf::from(dump), &bytes);
                if map.is_none() {
                    self.problem(format!("{dump}: not a jitdump file"));
                }
                map
            })
        });
        dumped.or_else(|| {
            let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
            cached(&self.jit, &path.to_string_lossy(), || {
                let text = read(&path.to_string_lossy())?;
                Some(JitMap::parse(path.clone(), &String::from_utf8_lossy(&text)))
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
            if let Some(k) = kallsyms_cache::load() {
                return Some(Arc::new(k));
            }
            let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
            let k = Kallsyms::parse(&text);
            match &k {
                Some(k) => kallsyms_cache::store(k),
                None => self.problem(
                    "/proc/kallsyms: no addresses (kptr_restrict?); kernel frames are [unknown]"
                        .into(),
                ),
            }
            k.map(Arc::new)
        })
        .clone()
    }

    /// The BPF programs the running kernel has loaded now (`[bpf]` lines of /proc/kallsyms,
    /// read then: they come and go, no cache holds them). They name the frames of a recording
    /// made during this boot that has no KSYMBOL records, where its programs are still loaded.
    pub fn running_bpf_programs(&self) -> Option<Arc<Kallsyms>> {
        let mut k = self.running_bpf.lock().unwrap();
        k.get_or_insert_with(|| {
            let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
            Kallsyms::parse_bpf(&text).map(Arc::new)
        })
        .clone()
    }

    /// Why the kernel symbols [`Loader::kallsyms`] reads are not those of the recording's
    /// kernel (`recorded`: its build id, `release`: its release, as the file gives them), or
    /// `None` when they are or nothing tells otherwise. Symbols from a file the user named are
    /// theirs to choose.
    pub fn other_kernel(&self, recorded: Option<&[u8]>, release: Option<&str>) -> Option<String> {
        match self.kallsyms_origin() {
            KallsymsOrigin::Running => {
                if let (Some(want), Some(have)) = (recorded, running_kernel::build_id()) {
                    (!build_ids_match(want, &have)).then(|| "build ids differ".into())
                } else {
                    let (theirs, ours) = (release?, running_kernel::release()?);
                    (theirs != ours).then(|| format!("it ran {theirs}, this machine {ours}"))
                }
            }
            KallsymsOrigin::Archive(id) => recorded
                .is_some_and(|want| !hex(want).starts_with(&id))
                .then(|| "the archive's kernel symbols are another kernel's".into()),
            KallsymsOrigin::File(_) => None,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use object::Object;

    #[test]
    fn a_fifo_or_a_device_named_by_a_recording_is_refused_at_once() {
        let dir = std::env::temp_dir().join(format!("bpfperf-fifo-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let fifo = dir.join("libfifo.so");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let l = Loader::with_sources(Default::default());
        // Opened without O_NONBLOCK, this would wait for a writer forever.
        assert!(l.elf(fifo.to_str().unwrap(), None).is_none());
        assert!(l.elf("/dev/zero", None).is_none());
        let problems = l.problems();
        assert!(
            problems
                .iter()
                .any(|p| p.contains("libfifo.so: not a regular file")),
            "{problems:?}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A file the work ahead of the stages could not open is said missing only once a stage
    /// asks for it: what is said does not depend on how far that work got (a recording from
    /// another machine listed 40 kernel modules, said missing in some runs, not in others).
    #[test]
    fn a_file_missing_ahead_is_said_when_a_stage_asks() {
        let l = Loader::with_sources(Default::default());
        let (path, id) = ("/nonexistent/libgone.so", &[0xab; 20][..]);
        assert!(l.elf_ahead(path, Some(id)).is_none());
        assert!(l.elf_ahead(path, Some(id)).is_none());
        assert_eq!(l.problems(), Vec::<String>::new());
        assert!(l.elf(path, Some(id)).is_none());
        let problems = l.problems();
        assert!(
            problems.len() == 1 && problems[0].contains("libgone.so"),
            "{problems:?}"
        );
        // Said once, however often asked.
        assert!(l.elf(path, Some(id)).is_none());
        assert_eq!(l.problems().len(), 1);
    }

    /// A recording of another machine's vdso: from a build-id cache (perf's names it `vdso`),
    /// not this process's, whose build id differs.
    #[test]
    fn another_machines_vdso_comes_from_the_build_id_cache() {
        let ours = std::env::current_exe().unwrap();
        let bytes = std::fs::read(&ours).unwrap();
        let id = ElfData::parse("x".into(), Bytes::Owned(bytes.clone()))
            .unwrap()
            .build_id
            .expect("the test binary has a build id");
        let dir = std::env::temp_dir().join(format!("bpfperf-vdso-{}", std::process::id()));
        let at = dir.join("[vdso]").join(hex(&id));
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join("vdso"), &bytes).unwrap();
        let without = Loader::with_sources(Default::default());
        assert!(without.elf("[vdso]", Some(&id)).is_none());
        let l = Loader::with_sources(Sources {
            buildid_dirs: vec![dir.clone()],
            ..Default::default()
        });
        let v = l.elf("[vdso]", Some(&id)).expect("from the build-id cache");
        assert_eq!(v.build_id.as_deref(), Some(&id[..]));
        assert!(l.served()["[vdso]"].starts_with("build-id cache"));
        std::fs::remove_dir_all(&dir).ok();
    }

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
}
