//! Stage 3, resolve: an unwound frame ([`Located`], from unwind) in, a [`Key`] out: the file
//! that holds its code ([`File`], opened through [`crate::files`]) and the address to look
//! up there ([`Lookup`]). The one place that translates a process's addresses into a file's.
//!
//! Terms: an *AVMA* is an address in the recorded process; an *SVMA* is the address the ELF
//! file itself states. Each mapping has one bias, AVMA - SVMA, from
//! [`ElfData::mapping_bias`] (the translation unwinding uses too). A return address
//! keeps its flag: symbolize names it as perf does (by the symbol holding the address itself)
//! and looks up its line and inline frames one byte back, at the call instruction.
//!
//! Files are asked of the [`Loader`] once per mapping, with the build id the recording states
//! for them: a file that changed since the recording is not used (the loader says so once).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::files::{ElfData, JitMap, Loader};
use crate::read::{is_anonymous, MapId, Recording};
use crate::unwind::Located;

/// Index into [`Resolver::files`].
pub type FileId = u32;

/// Where the code of a mapping can be symbolized.
pub enum Source {
    /// An ELF file (or the `[vdso]` image), and its separate debug file if there is one.
    Elf {
        elf: Arc<ElfData>,
        debug: Option<Arc<ElfData>>,
    },
    /// Anonymous executable memory described by a JIT map: looked up by AVMA.
    Jit(Arc<JitMap>),
}

/// A file frames point into.
pub struct File {
    /// How reports name it: the mapped path, `[vdso]`, or the JIT map's path.
    pub dso: String,
    /// `None` when it cannot be read (missing, changed, not ELF): its frames are `[unknown]`.
    pub source: Option<Source>,
}

/// An address to look up in a file: an SVMA (an AVMA for JIT code), and whether it is a
/// return address. Packed to 4-byte alignment, so that a [`Key`] is 16 bytes and not 24 (a
/// deep recursion's stacks hold hundreds of thousands of keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(C, packed(4))]
pub struct Lookup {
    pub addr: u64,
    pub is_return: bool,
}

impl Lookup {
    /// Where the instruction of this frame is: the call instruction for a return address.
    pub fn call_site(&self) -> u64 {
        self.addr.wrapping_sub(self.is_return as u64)
    }
}

/// The lookup key of a frame: which file, and what to look up there.
pub type Key = (FileId, Lookup);

const _: () = assert!(std::mem::size_of::<Option<Key>>() == 16);

/// What a frame resolves to.
enum Resolved {
    Key(Key),
    /// Its mapping's file is known and the address lies outside the file's code.
    NotCode,
    /// Nothing can tell (no mapping, an unreadable file, a mapping outside its segments).
    Unknown,
}

/// A mapping's file, and the mapping's bias (AVMA - SVMA) where it is an ELF file.
type MapFile = (FileId, Option<u64>);

pub struct Resolver<'r> {
    rec: &'r Recording,
    files: Vec<File>,
    /// The file of each mapping, and the mapping's bias (AVMA - SVMA) where it is an ELF file.
    file_of_map: FxHashMap<MapId, MapFile>,
}

/// The jitdump file process `pid` mapped (`.../jit-PID.dump`), if it did.
fn jitdump_of(rec: &Recording, pid: i32) -> Option<&str> {
    let name = format!("jit-{pid}.dump");
    rec.mappings
        .iter()
        .find(|m| m.pid == pid && m.path.rsplit('/').next() == Some(name.as_str()))
        .map(|m| m.path.as_str())
}

impl<'r> Resolver<'r> {
    /// Opens the files behind `maps` (the mappings the stacks use), in order.
    pub fn new(rec: &'r Recording, maps: impl IntoIterator<Item = MapId>, loader: &Loader) -> Self {
        let mut r = Resolver {
            rec,
            files: Vec::new(),
            file_of_map: FxHashMap::default(),
        };
        let mut by_name: FxHashMap<String, FileId> = FxHashMap::default();
        for map in maps {
            let m = &rec.mappings[map as usize];
            let jit = is_anonymous(&m.path);
            let name = if jit {
                format!("/tmp/perf-{}.map", m.pid)
            } else {
                m.path.clone()
            };
            if !jit && !m.path.starts_with('/') && m.path != "[vdso]" {
                continue; // [heap], [stack], [vsyscall], [uprobes]: nothing to look up
            }
            let id = *by_name.entry(name.clone()).or_insert_with(|| {
                let source = if jit {
                    let map = loader.jit_map(m.pid, jitdump_of(rec, m.pid));
                    if map.is_none() {
                        loader.problem(format!(
                            "process {}: code in anonymous memory ({}) and no perf map ({name}) \
                             or jitdump names it; its frames are [unknown]",
                            m.pid, m.path
                        ));
                    }
                    map.map(Source::Jit)
                } else {
                    let expected = m
                        .build_id
                        .as_deref()
                        .or_else(|| rec.build_ids.get(&m.path).map(Vec::as_slice));
                    loader.elf(&m.path, expected).map(|elf| Source::Elf {
                        debug: loader.debug_file(&elf),
                        elf,
                    })
                };
                r.files.push(File { dso: name, source });
                (r.files.len() - 1) as FileId
            });
            let bias = match &r.files[id as usize].source {
                Some(Source::Elf { elf, .. }) => elf.mapping_bias(m.start, m.end, m.pgoff),
                _ => None,
            };
            r.file_of_map.insert(map, (id, bias));
        }
        r
    }

    pub fn files(&self) -> &[File] {
        &self.files
    }

    /// The lookup key of each of a stack's frames, or `None` where no file can tell (no
    /// mapping, unreadable file, a mapping outside the file's segments) or the address lies
    /// outside the file's code. Neighbouring frames mostly lie in one mapping: its file is
    /// found once for them.
    pub fn resolve_all(&self, user: &[Located]) -> Vec<Option<Key>> {
        let mut last: Option<(MapId, Option<&MapFile>)> = None;
        user.iter()
            .map(|loc| {
                let file = loc.map().and_then(|m| match last {
                    Some((lm, f)) if lm == m => f,
                    _ => {
                        let f = self.file_of_map.get(&m);
                        last = Some((m, f));
                        f
                    }
                });
                match self.resolved_in(loc, file) {
                    Resolved::Key(k) => Some(k),
                    Resolved::NotCode | Resolved::Unknown => None,
                }
            })
            .collect()
    }

    fn resolved(&self, loc: &Located) -> Resolved {
        self.resolved_in(loc, loc.map().and_then(|m| self.file_of_map.get(&m)))
    }

    /// What `loc` resolves to, in `file` (its mapping's file and bias, if known).
    fn resolved_in(&self, loc: &Located, file: Option<&MapFile>) -> Resolved {
        let Some(&(file, bias)) = file else {
            return Resolved::Unknown;
        };
        let lookup = |addr| Lookup {
            addr,
            is_return: loc.is_return,
        };
        match &self.files[file as usize].source {
            Some(Source::Jit(_)) => Resolved::Key((file, lookup(loc.addr))),
            Some(Source::Elf { elf, .. }) => match bias {
                Some(bias) => {
                    let l = lookup(loc.addr.wrapping_sub(bias));
                    // An executable mapping can reach past the file's code: a library whose
                    // first segment is executable is mapped whole with its rights before its
                    // data segment is mapped over it, and only the first mapping makes a
                    // record. A broken frame-pointer chain pointing into `.bss` is no call
                    // site; the nearest symbol (`_edata`) would be a made-up name.
                    if elf.is_code(l.call_site()) {
                        Resolved::Key((file, l))
                    } else {
                        Resolved::NotCode
                    }
                }
                None => Resolved::Unknown,
            },
            None => Resolved::Unknown,
        }
    }

    /// The dso name of the mapping of `loc`, for frames that cannot be resolved: `[unknown]`
    /// for an address outside every executable mapping, or outside the code of the file an
    /// executable mapping holds.
    pub fn dso_of(&self, loc: &Located) -> &str {
        match loc.map() {
            Some(_) if matches!(self.resolved(loc), Resolved::NotCode) => crate::UNKNOWN,
            Some(m) => match self.file_of_map.get(&m) {
                Some(&(f, _)) => &self.files[f as usize].dso,
                None => &self.rec.mappings[m as usize].path,
            },
            None => crate::UNKNOWN,
        }
    }
}
