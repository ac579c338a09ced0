//! Offline unwinding of copied user stacks (REGS_USER + STACK_USER samples) with framehop:
//! DWARF CFI from `.eh_frame` (indexed by `.eh_frame_hdr`) or `.debug_frame`, frame pointers
//! where a module has no CFI.
//!
//! Terms: an *AVMA* is an address in the recorded process, an *SVMA* an address as the ELF file
//! states it; a module's bias maps one to the other.
//!
//! One [`ProcessUnwinder`] per process holds a framehop module per mapped ELF; unwinding takes
//! `&self` and a per-thread [`UnwindCache`], so samples of one process unwind in parallel.

use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};

use crate::files::{eh_frame_hdr_fits, ElfData, Loader};
pub use crate::read::UserRegs;

/// Bytes of a file the loader opened, shared, as framehop's section data; or bytes made here
/// (the CFI of CPython's trampolines, `py_trampolines`).
#[derive(Clone)]
pub struct MappedBytes {
    source: Source,
    range: Range<usize>,
}

#[derive(Clone)]
enum Source {
    File(Arc<ElfData>),
    Built(Arc<[u8]>),
}

impl MappedBytes {
    fn built(bytes: Arc<[u8]>) -> MappedBytes {
        MappedBytes {
            range: 0..bytes.len(),
            source: Source::Built(bytes),
        }
    }
}

impl Deref for MappedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.source {
            Source::File(elf) => &elf.bytes[self.range.clone()],
            Source::Built(b) => &b[self.range.clone()],
        }
    }
}

/// What framehop needs from one ELF file, read once and shared by every process mapping it.
pub struct ElfUnwindData {
    elf: Arc<ElfData>,
    base_svma: u64,
    text: Option<(Range<u64>, Range<usize>)>,
    eh_frame: Option<(Range<u64>, Range<usize>)>,
    eh_frame_hdr: Option<(Range<u64>, Range<usize>)>,
    debug_frame: Option<Range<usize>>,
    got: Option<Range<u64>>,
    /// `_PyEval_EvalFrameDefault` (SVMAs), in a CPython interpreter (see [`python_eval`]).
    eval: Option<Range<u64>>,
    /// Sections whose headers point outside the file (left out).
    pub damaged: Vec<String>,
}

/// The name of CPython's interpreter loop, whose frames Python frames replace.
const PYTHON_EVAL: &str = "_PyEval_EvalFrameDefault";

/// Whether `path` names a CPython interpreter (`python3.N`, `libpython3.N.so...`), whose
/// symbols [`python_eval`] looks through.
fn is_python(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python") || n.starts_with("libpython"))
}

/// `_PyEval_EvalFrameDefault`'s SVMAs in `obj` (an exported function: in the dynamic symbols
/// of every build, stripped or not).
fn python_eval(obj: &object::File<'_>) -> Option<Range<u64>> {
    use object::{Object, ObjectSymbol};
    obj.dynamic_symbols()
        .chain(obj.symbols())
        .find(|s| s.address() != 0 && s.name() == Ok(PYTHON_EVAL))
        .map(|s| s.address()..s.address() + s.size().max(1))
}

impl ElfUnwindData {
    /// Finds the unwind sections of an ELF file the loader opened.
    pub fn new(elf: Arc<ElfData>, path: &Path) -> Option<ElfUnwindData> {
        let obj = object::File::parse(&*elf.bytes).ok()?;
        // A section whose bytes are not all in the file is left out (its frames unwind as if
        // it had none), and named.
        let bad = std::cell::RefCell::new(Vec::new());
        let section = |name: &str| {
            elf.stored_section(&obj, name).unwrap_or_else(|name| {
                bad.borrow_mut().push(name);
                None
            })
        };
        let base_svma = elf.segments.iter().map(|s| s.svma).min().unwrap_or(0) & !0xfff;
        let eh_frame = section(".eh_frame");
        let mut eh_frame_hdr = section(".eh_frame_hdr");
        if let (Some(hdr), Some(frames)) = (&eh_frame_hdr, &eh_frame) {
            if !eh_frame_hdr_fits(&elf.bytes[hdr.1.clone()], hdr.0.start, &frames.0) {
                bad.borrow_mut().push(".eh_frame_hdr".into());
                eh_frame_hdr = None;
            }
        }
        Some(ElfUnwindData {
            base_svma,
            text: section(".text"),
            eh_frame,
            eh_frame_hdr,
            debug_frame: section(".debug_frame").map(|(_, r)| r),
            got: section(".got").map(|(svma, _)| svma),
            eval: is_python(path).then(|| python_eval(&obj)).flatten(),
            damaged: bad.into_inner(),
            elf: elf.clone(),
        })
    }

    /// Whether the file has any CFI at all.
    pub fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    fn bytes(&self, range: &Range<usize>) -> MappedBytes {
        MappedBytes {
            source: Source::File(self.elf.clone()),
            range: range.clone(),
        }
    }

    fn module(&self, name: &str, avma: Range<u64>, bias: u64) -> Module<MappedBytes> {
        let info = ExplicitModuleSectionInfo {
            base_svma: self.base_svma,
            text_svma: self.text.as_ref().map(|t| t.0.clone()),
            text: self.text.as_ref().map(|t| self.bytes(&t.1)),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|t| t.0.clone()),
            eh_frame: self.eh_frame.as_ref().map(|t| self.bytes(&t.1)),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|t| t.0.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|t| self.bytes(&t.1)),
            debug_frame: self.debug_frame.as_ref().map(|r| self.bytes(r)),
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            text_segment_svma: None,
            text_segment: None,
        };
        Module::new(
            name.to_string(),
            avma,
            bias.wrapping_add(self.base_svma),
            info,
        )
    }
}

/// A file by path and the build id the recording gives for it.
type FileKey = (PathBuf, Option<Vec<u8>>);

/// Unwind data of each ELF file, found once; the files come from the [`Loader`].
pub struct ElfUnwindCache<'l> {
    loader: &'l Loader,
    files: HashMap<FileKey, Option<Arc<ElfUnwindData>>>,
}

impl<'l> ElfUnwindCache<'l> {
    pub fn new(loader: &'l Loader) -> Self {
        ElfUnwindCache {
            loader,
            files: HashMap::new(),
        }
    }

    /// The unwind data of the file at `path` whose build id is `build_id` (where the
    /// recording gives one: the loader finds that file, wherever it is now).
    pub fn get(&mut self, path: &Path, build_id: Option<&[u8]>) -> Option<Arc<ElfUnwindData>> {
        let loader = self.loader;
        self.files
            .entry((path.to_path_buf(), build_id.map(<[u8]>::to_vec)))
            .or_insert_with(|| {
                let elf = loader.elf(&path.to_string_lossy(), build_id)?;
                let data = ElfUnwindData::new(elf, path)?;
                if !data.damaged.is_empty() {
                    loader.problem(format!(
                        "{}: damaged: {} point outside the file or cannot be read; \
                         not unwound through it",
                        path.display(),
                        data.damaged.join(", ")
                    ));
                }
                Some(Arc::new(data))
            })
            .clone()
    }
}

/// An executable mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecMapping {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub path: PathBuf,
    /// The build id the recording gives for the file.
    pub build_id: Option<Vec<u8>>,
    /// Anonymous memory holding CPython's perf trampolines (`py_trampolines`).
    pub py_trampolines: bool,
}

/// Why a stack ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StackEnd {
    /// The unwinder found the root (the return address chain ended cleanly).
    Root,
    /// The next frame lies beyond the bytes the sample copied.
    CopyTooShort,
    /// Unwinding failed (bad CFI, a corrupt frame pointer chain, a loop).
    UnwindError,
    /// The depth limit was reached.
    TooDeep,
    /// A return address lies outside every executable mapping of the process, or outside
    /// the code of the file its mapping holds: a word of garbage taken for a return address
    /// (the frame before it had no CFI, or a damaged frame pointer). It stays, as an
    /// `[unknown]` frame; nothing unwound from it could be trusted.
    OutsideCode,
}

/// One frame of an unwound stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnwoundFrame {
    /// The sampled instruction.
    InstructionPointer(u64),
    /// A return address: the call site is the instruction before it.
    ReturnAddress(u64),
}

impl UnwoundFrame {
    pub fn address(&self) -> u64 {
        match *self {
            UnwoundFrame::InstructionPointer(a) | UnwoundFrame::ReturnAddress(a) => a,
        }
    }
}

/// Per-thread unwind rule cache, shared by the process unwinders a thread serves.
///
/// framehop keys a cached rule by its address and the unwinder's modules generation, a u16
/// from one global counter that every unwinder made and every module added advances. Past
/// 65,535 of them (a system-wide recording of thousands of processes) two unwinders can
/// share a generation, and a rule cached for one process would unwind another's code at
/// the same address (non-PIE binaries: Go's). From then on, a cache that moves to another
/// process unwinder starts empty.
pub struct UnwindCache {
    rules: CacheX86_64,
    /// The [`ProcessUnwinder::id`] it last served (0: none).
    serving: u64,
}

impl Default for UnwindCache {
    fn default() -> Self {
        UnwindCache {
            rules: CacheX86_64::new(),
            serving: 0,
        }
    }
}

impl UnwindCache {
    /// Makes the cache fit to serve unwinder `id`.
    fn serve(&mut self, id: u64) {
        if self.serving == id {
            return;
        }
        if self.serving != 0 && GENERATIONS_TAKEN.load(Ordering::Relaxed) > u16::MAX as u64 {
            self.rules = CacheX86_64::new();
        }
        self.serving = id;
    }
}

/// framehop module generations taken (one per unwinder made, one per module added): past
/// u16::MAX, generations repeat (see [`UnwindCache`]).
static GENERATIONS_TAKEN: AtomicU64 = AtomicU64::new(0);

/// The next [`ProcessUnwinder::id`].
static NEXT_UNWINDER: AtomicU64 = AtomicU64::new(1);

/// The unwinder of one process: one module per executable mapping.
pub struct ProcessUnwinder {
    unwinder: UnwinderX86_64<MappedBytes>,
    /// Unique in this run, from 1: which unwinder a cache last served.
    id: u64,
    /// Mappings whose ELF had no CFI or could not be opened (frame pointers are used there).
    pub without_cfi: Vec<PathBuf>,
    /// Where the process has code (AVMAs), sorted: each executable mapping, less what of a
    /// file's mapping lies outside its executable segments.
    code: Vec<Range<u64>>,
    /// `_PyEval_EvalFrameDefault` in the process (AVMAs), where it runs CPython.
    eval: Vec<Range<u64>>,
}

/// Whether a mapping's path names a file the loader can be asked for (not anonymous memory,
/// `[heap]` or `[stack]`; `[vdso]` is one).
fn is_file(path: &Path) -> bool {
    let p = path.to_string_lossy();
    (p.starts_with('/') && !crate::read::is_anonymous(&p)) || p == "[vdso]"
}

/// Frames beyond this are not unwound.
pub const MAX_FRAMES: usize = 512;

impl ProcessUnwinder {
    pub fn new(mappings: &[ExecMapping], elves: &mut ElfUnwindCache<'_>) -> ProcessUnwinder {
        let mut unwinder = UnwinderX86_64::new();
        let mut modules = 0;
        let mut without_cfi = Vec::new();
        let mut code = Vec::new();
        let mut eval = Vec::new();
        for m in mappings {
            if m.py_trampolines {
                let hold = |b: Vec<u8>| MappedBytes::built(Arc::from(b));
                unwinder.add_module(super::py_trampolines::module(m.start..m.end, hold));
                code.push(m.start..m.end);
                modules += 1;
                continue;
            }
            // Anonymous memory (JIT code: named from perf maps later) is no file to ask for:
            // frame pointers unwind through it.
            let elf = if is_file(&m.path) {
                elves.get(&m.path, m.build_id.as_deref())
            } else {
                None
            };
            let Some(elf) = elf else {
                without_cfi.push(m.path.clone());
                code.push(m.start..m.end);
                continue;
            };
            if !elf.has_cfi() {
                without_cfi.push(m.path.clone());
            }
            // No bias (no segment overlaps the mapping, or none at all): cannot tell.
            let Some(bias) = elf.elf.mapping_bias(m.start, m.end, m.pgoff) else {
                code.push(m.start..m.end);
                continue;
            };
            if let Some(e) = &elf.eval {
                let avma = e.start.wrapping_add(bias)..e.end.wrapping_add(bias);
                if avma.start >= m.start && avma.end <= m.end {
                    eval.push(avma);
                }
            }
            code.extend(
                elf.elf
                    .segments
                    .iter()
                    .filter(|s| s.executable)
                    .filter_map(|s| {
                        let start = s.svma.wrapping_add(bias).max(m.start);
                        let end = s
                            .svma
                            .wrapping_add(s.mem_size.max(s.file_size))
                            .wrapping_add(bias)
                            .min(m.end);
                        (start < end).then_some(start..end)
                    }),
            );
            unwinder.add_module(elf.module(&m.path.to_string_lossy(), m.start..m.end, bias));
            modules += 1;
        }
        code.sort_unstable_by_key(|r| r.start);
        GENERATIONS_TAKEN.fetch_add(1 + modules, Ordering::Relaxed);
        ProcessUnwinder {
            unwinder,
            id: NEXT_UNWINDER.fetch_add(1, Ordering::Relaxed),
            without_cfi,
            code,
            eval,
        }
    }

    /// Whether `avma` lies in CPython's `_PyEval_EvalFrameDefault`.
    pub fn in_python_eval(&self, avma: u64) -> bool {
        self.eval.iter().any(|r| r.contains(&avma))
    }

    /// Whether `avma` lies in the process's code.
    fn is_code(&self, avma: u64) -> bool {
        let i = self.code.partition_point(|r| r.start <= avma);
        self.code[..i].iter().rev().any(|r| avma < r.end)
    }

    /// Unwinds from `regs` over `stack` (the bytes copied from `regs.sp` upwards).
    pub fn unwind(
        &self,
        cache: &mut UnwindCache,
        regs: UserRegs,
        stack: &[u8],
        out: &mut Vec<UnwoundFrame>,
    ) -> StackEnd {
        cache.serve(self.id);
        let sp = regs.sp;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(sp).ok_or(())? as usize;
            let bytes = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(bytes.try_into().unwrap()))
        };
        let mut iter = self.unwinder.iter_frames(
            regs.ip,
            UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
            &mut cache.rules,
            &mut read_stack,
        );
        loop {
            if out.len() >= MAX_FRAMES {
                return StackEnd::TooDeep;
            }
            match iter.next() {
                Ok(Some(FrameAddress::InstructionPointer(a))) => {
                    out.push(UnwoundFrame::InstructionPointer(a))
                }
                Ok(Some(FrameAddress::ReturnAddress(a))) => {
                    out.push(UnwoundFrame::ReturnAddress(a.get()));
                    // Its call instruction: a return address can end its code.
                    if !self.is_code(a.get() - 1) {
                        return StackEnd::OutsideCode;
                    }
                }
                Ok(None) => return StackEnd::Root,
                Err(framehop::Error::CouldNotReadStack(_)) => return StackEnd::CopyTooShort,
                Err(_) => return StackEnd::UnwindError,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// framehop's generations wrap after 65,536 unwinders and modules: a cache that served
    /// one process unwinder must not hand its rules to another that came to share its
    /// generation (with the guard off, one of the unwinders below hits the first's rule).
    #[test]
    fn a_cache_never_hands_one_unwinders_rules_to_another() {
        let loader = Loader::new();
        let mut elves = ElfUnwindCache::new(&loader);
        let exe = std::env::current_exe().unwrap();
        let elf = elves
            .get(&exe, None)
            .expect("the test binary's unwind data");
        let (_, text) = elf.text.clone().expect("a .text section");
        let start = 0x1000_0000;
        let map = ExecMapping {
            start,
            end: start + elf.elf.bytes.len() as u64,
            pgoff: 0,
            path: exe,
            build_id: None,
            py_trampolines: false,
        };
        let regs = UserRegs {
            ip: start + text.start as u64 + 16,
            sp: 0x7000_0000,
            bp: 0,
        };
        let stack = [0u8; 64];
        let first = ProcessUnwinder::new(std::slice::from_ref(&map), &mut elves);
        let mut cache = UnwindCache::default();
        // Each unwinder below takes two generations: 65,536 of them go round the u16 twice,
        // whatever other tests take meanwhile.
        for k in 0..65_536 {
            first.unwind(&mut cache, regs, &stack, &mut Vec::new());
            let other = ProcessUnwinder::new(std::slice::from_ref(&map), &mut elves);
            let hits = cache.rules.stats().hit_count;
            other.unwind(&mut cache, regs, &stack, &mut Vec::new());
            assert!(
                cache.rules.stats().hit_count <= hits,
                "unwinder {k} after the first used the first's cached rule"
            );
        }
    }
}
