//! Python frames in stacks (CPython 3.8 to 3.13): which processes run an interpreter, what their
//! samples' code objects are called, and the user stacks with each `_PyEval_EvalFrameDefault`
//! frame replaced by the Python frames it ran.
//!
//! A Python frame is written as an address in a synthetic mapping of its process (an
//! anonymous one, `//anon`, in one of format's [`SYNTHETIC_REGIONS`] regions: one no other
//! recorder following the process names slots in), one 16-byte slot per (code object, line),
//! named `qualname (file.py:line)` in `/tmp/perf-PID.map`, which perf reads for anonymous
//! mappings as it does for JIT code; analyze reads it the same way and `archive` keeps it.

mod code;
mod debug_offsets;
mod frame_objects;
mod notread;
mod offsets;
mod offsets_3_12;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use object::{Object, ObjectSymbol};

use crate::sideband::Fact;
use code::Code;
pub use offsets::Offsets;

/// The offsets of Python 3.`minor`, if a table of them is known (3.13 on: read from the
/// interpreter's `_Py_DebugOffsets` instead).
fn for_version(minor: u32) -> Option<&'static Offsets> {
    match minor {
        8 | 9 => Some(&frame_objects::PY_3_8),
        10 => Some(&frame_objects::PY_3_10),
        11 => Some(&offsets::PY_3_11),
        12 => Some(&offsets_3_12::PY_3_12),
        _ => None,
    }
}

use format::python::{synthetic_base, synthetic_region, SLOT, SYNTHETIC_LEN, SYNTHETIC_REGIONS};
/// Bytes of an interpreter binary read for its symbols.
const MAX_BINARY: u64 = 512 << 20;

/// An interpreter binary's facts (file addresses).
#[derive(Debug, Clone)]
struct Interpreter {
    minor: u32,
    /// `Py_Version` (3.11 on), as the file holds it.
    version: Option<u64>,
    /// 3.13 on: the layout its `_Py_DebugOffsets` gives, or why none.
    debug: Option<Result<Offsets, String>>,
    /// `_PyRuntime`'s address.
    runtime: u64,
    /// `_PyEval_EvalFrameDefault`'s range.
    eval: (u64, u64),
    /// p_vaddr - p_offset of each PT_LOAD, with its file range.
    segments: Vec<(u64, u64, u64)>,
}

/// A process running one.
struct Proc {
    /// When its interpreter was mapped (or it forked from one): an exec before that is
    /// not this interpreter's end.
    since: u64,
    runtime: u64,
    offsets: Offsets,
    /// `_PyEval_EvalFrameDefault` in the process.
    eval: (u64, u64),
    mem: Option<File>,
    codes: HashMap<u64, KnownCode>,
    /// (code, its generation, line) -> its slot's address.
    slots: HashMap<(u64, u32, u32), u64>,
    map: Option<File>,
    /// Whether the perf map was opened (or failed to).
    map_tried: bool,
    /// Where its synthetic mapping starts: a region no other recorder's lines in its perf map
    /// use, chosen as the map is opened.
    base: u64,
    /// Whether its synthetic mapping was written into the recording.
    mapped: bool,
    /// Its anonymous executable memory: where CPython's perf support (`-X perf`) puts the
    /// trampolines it enters eval calls through.
    anonymous: Vec<(u64, u64)>,
}

/// A code object as last read at its address. The address may be reused by another code
/// object once this one is freed (a module's code, freed once the module ran, then a
/// function's; code made by exec() or compile()): an address seen again after [`RECHECK`]
/// has its [`code::Identity`] read again (one read), and where it changed, or the code could
/// not be read before, the whole code object is read, a different one starting a new
/// generation with slots of its own. (With a full read once a second, a function's samples
/// were named after the module whose code had been at its address, or `[python code
/// 0x...]`, for up to a second: ~480 samples of `outer` in the Python tests on a loaded
/// machine.) record reads a sample's code objects when it takes the sample from the ring:
/// what it names are the objects there then.
struct KnownCode {
    code: Option<Code>,
    generation: u32,
    checked: Instant,
}

/// How long a code object's reading is trusted.
const RECHECK: Duration = Duration::from_millis(10);

/// What record counted, for `-v` and the summary.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// The processes installed (by a mapping of the interpreter, or a fork).
    pub processes: Vec<u32>,
    /// Samples with Python frames, and those whose frames went into the stack.
    pub samples: u64,
    pub placed: u64,
    /// Samples whose user stack was copied (not unwound in the kernel): their Python frames
    /// written alone, for analyze to place once it unwinds the copy.
    pub copied: u64,
    pub frames: u64,
    /// Code objects whose memory could not be read.
    pub unreadable: u64,
    /// Addresses found holding another code object than when first read.
    pub replaced: u64,
    /// Of the unreadable, those read on a later try (their first samples stay unnamed).
    pub read_later: u64,
}

/// The Python processes of a recording.
pub struct Python {
    /// false: `--no-python`, nothing is read.
    pub enabled: bool,
    /// The followed processes the facts are filtered by (the side-band sees every process);
    /// `None`: all (system-wide).
    followed: Option<HashSet<u32>>,
    binaries: HashMap<String, Option<Interpreter>>,
    procs: HashMap<u32, Proc>,
    pub stats: Stats,
    /// Processes whose frames cannot be read, said at the end.
    pub not_read: notread::NotRead,
    /// A sample's Python frames as addresses (reused).
    frames: Vec<u64>,
}

/// A process the BPF programs must read frames of.
pub struct Watch {
    pub pid: u32,
    pub runtime: u64,
    pub offsets: bpf::PyOffsets,
}

fn interpreter(path: &str, minor: u32) -> Option<Interpreter> {
    use object::read::elf::ProgramHeader;
    // Mapped, not read: of a libpython with its debug info (31 MB for pyenv's 3.13) only the
    // headers, symbols and _PyRuntime's initial bytes are touched, most of them in the page
    // cache already (the loader read them). Read whole, it took 630 ms on a loaded machine,
    // and every sample of the process before was left without Python frames.
    let file = File::open(path).ok()?;
    if file.metadata().ok()?.len() > MAX_BINARY {
        return None;
    }
    // SAFETY: read-only and private; an interpreter's file is not rewritten while it runs
    // (packages replace files by renaming).
    let data = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).ok()?;
    let find = |name: &str| {
        elf.dynamic_symbols()
            .chain(elf.symbols())
            .find(|s| s.name() == Ok(name) && s.address() != 0)
            .map(|s| (s.address(), s.size()))
    };
    let (runtime, _) = find("_PyRuntime")?;
    let (eval, size) = find("_PyEval_EvalFrameDefault")?;
    let e = elf.endian();
    let segments: Vec<(u64, u64, u64)> = elf
        .elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(e) == object::elf::PT_LOAD)
        .map(|ph| {
            (
                ph.p_offset(e),
                ph.p_offset(e) + ph.p_filesz(e),
                ph.p_vaddr(e).wrapping_sub(ph.p_offset(e)),
            )
        })
        .collect();
    // Initialized data as the file holds it, at a (file) address.
    let at = |addr: u64, len: u64| {
        let (_, _, delta) = segments
            .iter()
            .find(|(from, to, delta)| (from + delta..to + delta).contains(&addr))?;
        let off = addr.wrapping_sub(*delta) as usize;
        data.get(off..off + len as usize)
    };
    let version = find("Py_Version")
        .and_then(|(a, _)| at(a, 8))
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")));
    let debug = (minor >= 13).then(|| match at(runtime, debug_offsets::NEEDED as u64) {
        Some(bytes) => debug_offsets::read(bytes),
        None => Err("its _PyRuntime is not in its file".into()),
    });
    Some(Interpreter {
        minor,
        version,
        debug,
        runtime,
        eval: (eval, eval + size.max(1)),
        segments,
    })
}

/// Whether a mapping's name is anonymous memory's, as the kernel and `/proc/PID/maps` name it.
fn is_anonymous(filename: &str) -> bool {
    filename.is_empty() || filename == "//anon" || filename.starts_with("[anon")
}

/// Where `/tmp/perf-PID.map` is.
pub fn perf_map_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/perf-{pid}.map"))
}

impl Default for Python {
    fn default() -> Python {
        Python {
            enabled: true,
            followed: None,
            binaries: HashMap::new(),
            procs: HashMap::new(),
            stats: Stats::default(),
            not_read: Default::default(),
            frames: Vec::new(),
        }
    }
}

impl Python {
    /// Follows `pids` and their children only (not system-wide).
    pub fn follow(&mut self, pids: &[u32]) {
        self.followed = Some(pids.iter().copied().collect());
    }

    /// Learns from a side-band fact seen at `time`: an interpreter mapped (returns what the
    /// BPF programs must be told), a fork (the child runs it too), an exec or exit
    /// (forgotten). Facts may come out of order: each CPU's are read in turn, and a process
    /// that moves between CPUs during exec() has its exec on one and the new program's
    /// mappings on another (an exec read after the mapping it precedes forgot the
    /// interpreter: every Python frame of `nice python3 ...` lost, 1 run in 6 under load).
    pub fn observe(&mut self, fact: &Fact, time: u64) -> Option<Watch> {
        if !self.enabled {
            return None;
        }
        if let Some(followed) = &mut self.followed {
            match fact {
                Fact::Fork { pid, ppid, .. } if pid != ppid && followed.contains(ppid) => {
                    followed.insert(*pid);
                }
                Fact::Exit { pid, tid, .. } if pid == tid => {
                    followed.remove(pid);
                }
                _ => {}
            }
            if fact.pid().is_some_and(|p| !followed.contains(&p)) {
                return None;
            }
        }
        match fact {
            Fact::Mmap2 {
                pid,
                start,
                len,
                prot,
                filename,
                ..
            } if prot & 4 != 0 && is_anonymous(filename) => {
                let p = self.procs.get_mut(pid)?;
                let end = start.saturating_add(*len);
                p.anonymous.retain(|&(s, e)| e <= *start || s >= end);
                p.anonymous.push((*start, end));
                None
            }
            Fact::Mmap2 {
                pid,
                start,
                pgoff,
                prot,
                filename,
                ..
            } if prot & 4 != 0 => {
                let (major, minor) = notread::version_of_path(filename)?;
                if self.procs.contains_key(pid) {
                    return None;
                }
                if major != 3 {
                    let why = format!("no layout for {major}.{minor}");
                    self.not_read.note(*pid, major, minor, why);
                    return None;
                }
                let Some(interp) = self
                    .binaries
                    .entry(filename.clone())
                    .or_insert_with(|| interpreter(filename, minor))
                    .clone()
                else {
                    let why =
                        format!("no _PyRuntime or _PyEval_EvalFrameDefault read from {filename}");
                    self.not_read.note(*pid, major, minor, why);
                    return None;
                };
                let offsets = match (&interp.debug, for_version(interp.minor)) {
                    (Some(Ok(o)), _) => *o,
                    (Some(Err(why)), _) => {
                        self.not_read.note(*pid, major, minor, why.clone());
                        return None;
                    }
                    (None, Some(o)) => *o,
                    (None, None) => {
                        let found = interp
                            .version
                            .map_or(format!("3.{minor}"), notread::version_text);
                        let why = format!("no layout for {found}");
                        self.not_read.note(*pid, major, minor, why);
                        return None;
                    }
                };
                let (_, _, delta) = interp
                    .segments
                    .iter()
                    .find(|(from, to, _)| (*from..*to.max(&(from + 1))).contains(pgoff))?;
                // The load bias: the mapping's address less the file address it maps.
                let bias = start.wrapping_sub(pgoff.wrapping_add(*delta));
                self.not_read.read(*pid, major, minor);
                self.stats.processes.push(*pid);
                self.procs.insert(
                    *pid,
                    Proc {
                        since: time,
                        runtime: interp.runtime.wrapping_add(bias),
                        offsets,
                        eval: (interp.eval.0 + bias, interp.eval.1 + bias),
                        mem: None,
                        codes: HashMap::new(),
                        slots: HashMap::new(),
                        map: None,
                        map_tried: false,
                        base: synthetic_base(0),
                        mapped: false,
                        anonymous: Vec::new(),
                    },
                );
                Some(Watch {
                    pid: *pid,
                    runtime: interp.runtime.wrapping_add(bias),
                    offsets: offsets.for_bpf(),
                })
            }
            Fact::Fork { pid, ppid, .. } if pid != ppid => {
                // A new process: the parent's interpreter at the same addresses.
                self.not_read.inherit(*pid, *ppid);
                let parent = self.procs.get(ppid)?;
                let watch = Watch {
                    pid: *pid,
                    runtime: parent.runtime,
                    offsets: parent.offsets.for_bpf(),
                };
                let proc = Proc {
                    since: time,
                    runtime: parent.runtime,
                    offsets: parent.offsets,
                    eval: parent.eval,
                    mem: None,
                    codes: HashMap::new(),
                    slots: HashMap::new(),
                    map: None,
                    map_tried: false,
                    base: synthetic_base(0),
                    mapped: false,
                    anonymous: parent.anonymous.clone(),
                };
                self.procs.insert(*pid, proc);
                self.stats.processes.push(*pid);
                Some(watch)
            }
            Fact::Comm {
                pid, exec: true, ..
            } => {
                if self.procs.get(pid).is_some_and(|p| p.since <= time) {
                    self.procs.remove(pid);
                }
                None
            }

            _ => None,
        }
    }

    /// Reads the code objects of an event's Python frames not met before, while the
    /// process lives.
    pub fn observe_event(&mut self, e: &bpf::Event) {
        match e {
            bpf::Event::OnCpu(s) | bpf::Event::Fault(s) => self.observe_frames(s.pid, &s.python),
            bpf::Event::OffCpu(o) => self.observe_frames(o.pid, &o.python),
            bpf::Event::Wakeup(w) => self.observe_frames(w.pid, &w.python),
            _ => {}
        }
    }

    fn observe_frames(&mut self, pid: u32, frames: &[bpf::PyFrame]) {
        if frames.is_empty() {
            return;
        }
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        for f in frames {
            let known = p.codes.get(&f.code);
            if known.is_some_and(|k| k.checked.elapsed() < RECHECK) {
                continue;
            }
            if p.mem.is_none() {
                p.mem = File::open(format!("/proc/{pid}/mem")).ok();
            }
            let read = known.and_then(|k| k.code.as_ref()).map(|c| c.identity);
            if read.is_some()
                && read
                    == p.mem
                        .as_ref()
                        .and_then(|m| code::identity(m, f.code, &p.offsets))
            {
                p.codes.get_mut(&f.code).expect("known").checked = Instant::now();
                continue;
            }
            let code = p
                .mem
                .as_ref()
                .and_then(|m| code::read(m, f.code, &p.offsets));
            match p.codes.get_mut(&f.code) {
                Some(k) => {
                    k.checked = Instant::now();
                    if code.is_some() && code != k.code {
                        match k.code {
                            Some(_) => self.stats.replaced += 1,
                            None => self.stats.read_later += 1,
                        }
                        k.code = code;
                        k.generation += 1;
                    }
                }
                None => {
                    self.stats.unreadable += code.is_none() as u64;
                    p.codes.insert(
                        f.code,
                        KnownCode {
                            code,
                            generation: 0,
                            checked: Instant::now(),
                        },
                    );
                }
            }
        }
    }

    /// The synthetic mapping to write before `pid`'s first sample with Python frames.
    pub fn take_mapping(&mut self, pid: u32) -> Option<Fact> {
        let p = self.procs.get_mut(&pid)?;
        if p.mapped || p.slots.is_empty() {
            return None;
        }
        p.mapped = true;
        Some(Fact::Mmap2 {
            pid,
            tid: pid,
            start: p.base,
            len: SYNTHETIC_LEN,
            pgoff: 0,
            maj: 0,
            min: 0,
            ino: 0,
            ino_generation: 0,
            prot: libc::PROT_READ as u32 | libc::PROT_EXEC as u32,
            flags: libc::MAP_PRIVATE as u32 | libc::MAP_ANONYMOUS as u32,
            filename: "//anon".into(),
        })
    }

    /// The user stack of `samples` on-CPU samples of `pid` with the same stacks (one sent,
    /// or a count kept in the kernel) with their Python frames in place of the eval frames
    /// that ran them, into `out`; false (out untouched) when they have none or they cannot
    /// be placed. A sample whose stack was copied (no user stack here) gets its Python frames
    /// alone, for analyze to place ([`format::python`]). Counted in [`Stats`].
    pub fn merge(
        &mut self,
        pid: u32,
        samples: u64,
        user_stack: &[u64],
        python: &[bpf::PyFrame],
        out: &mut Vec<u64>,
    ) -> bool {
        if let Some(p) = self.procs.get(&pid) {
            let (from, to) = p.eval;
            let in_eval = user_stack.iter().any(|ip| (from..=to).contains(ip));
            let frames = !python.is_empty();
            self.not_read.sampled(pid, samples, in_eval, frames);
        }
        if python.is_empty() {
            return false;
        }
        self.stats.samples += samples;
        let placed = self.merge_stack(pid, user_stack, python, out);
        if placed && user_stack.is_empty() {
            self.stats.copied += samples;
        } else {
            self.stats.placed += placed as u64 * samples;
        }
        placed
    }

    /// The same for any stack of process `pid` (off-CPU intervals, wakers), not counted:
    /// `user_stack` with its eval frames replaced, or the Python frames alone when it is
    /// empty (copied).
    pub fn merge_stack(
        &mut self,
        pid: u32,
        user_stack: &[u64],
        python: &[bpf::PyFrame],
        out: &mut Vec<u64>,
    ) -> bool {
        if python.is_empty() {
            return false;
        }
        let Some(p) = self.procs.get_mut(&pid) else {
            return false;
        };
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        for f in python {
            let line = p
                .codes
                .get(&f.code)
                .and_then(|k| k.code.as_ref())
                .map(|c| c.line_at(f.lasti).unwrap_or(c.first_line))
                .unwrap_or(0);
            let slot = p.slot(pid, f.code, line);
            frames.push(format::python::frame_address(slot, f.entry));
        }
        let (from, to) = p.eval;
        // Frames past the leaf are return addresses: their call is the byte before.
        let in_eval = |i: usize, &ip: &u64| {
            let pc = if i == 0 { ip } else { ip.wrapping_sub(1) };
            (from..to).contains(&pc)
        };
        let anon = &p.anonymous;
        let placed = format::python::place(
            user_stack,
            in_eval,
            &frames,
            |&a| format::python::is_entry(a),
            // Return addresses: their call is the byte before.
            |&ip| {
                anon.iter()
                    .any(|&(s, e)| (s..e).contains(&ip.wrapping_sub(1)))
            },
            out,
        );
        self.stats.frames += placed as u64;
        self.frames = frames;
        true
    }

    /// Perf maps written, for the archive and the summary.
    pub fn perf_maps(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self
            .procs
            .iter()
            .filter(|(_, p)| p.map.is_some())
            .map(|(&pid, _)| perf_map_path(pid))
            .collect();
        v.sort();
        v
    }
}

impl Proc {
    /// The start of (code, line)'s slot, named in the perf map when new.
    fn slot(&mut self, pid: u32, code: u64, line: u32) -> u64 {
        let known = self.codes.get(&code);
        let key = (code, known.map_or(0, |k| k.generation), line);
        if let Some(&a) = self.slots.get(&key) {
            return a;
        }
        if !self.map_tried {
            self.map_tried = true;
            let path = perf_map_path(pid);
            self.map = open_map(&path, process_start(pid));
            self.base = synthetic_base(free_region(&path, std::process::id().into()));
        }
        let index = (self.slots.len() as u64).min(SYNTHETIC_LEN / SLOT - 1);
        let start = self.base + index * SLOT;
        let name = match self.codes.get(&code).and_then(|k| k.code.as_ref()) {
            Some(c) => format!("{} ({}:{line})", c.name, c.file),
            None => format!("[python code {code:#x}]"),
        };
        if let Some(m) = &mut self.map {
            // perf-PID.map: START SIZE NAME, hex; a line per slot as it is made, in one
            // write (the process may append its own lines meanwhile).
            let _ = m.write_all(format!("{start:x} {SLOT:x} {name}\n").as_bytes());
        }
        self.slots.insert(key, start);
        start
    }
}

/// `-v`: what the Python frame reader did.
pub fn report(python: &Python) {
    let s = &python.stats;
    if !s.processes.is_empty() {
        eprintln!(
            "record: Python: processes {:?}, {} samples with Python frames, {} placed ({} frames), \
             {} for analyze to place (stack copied, not unwound in the kernel), {} code objects unreadable ({} read on a \
             later try), {} replaced at their address; \
             names in {}",
            s.processes,
            s.samples,
            s.placed,
            s.frames,
            s.copied,
            s.unreadable,
            s.read_later,
            s.replaced,
            python
                .perf_maps()
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

/// Said with or without `-v`: each process whose Python frames were not read, and why.
pub fn report_not_read(python: &Python) {
    for line in python.not_read.lines() {
        eprintln!("{line}");
    }
}

/// When process `pid` started (from its `starttime`, to 10 ms), if it is running.
fn process_start(pid: u32) -> Option<SystemTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name's closing parenthesis: state is field 3, starttime field 22.
    let ticks: u64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let clock = |id| {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        unsafe { libc::clock_gettime(id, &mut t) };
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    // The time since boot is CLOCK_BOOTTIME's (starttime counts suspended time too).
    let since_boot = clock(libc::CLOCK_BOOTTIME);
    let ago = since_boot.checked_sub(Duration::from_millis(ticks * 1000 / hz))?;
    SystemTime::now().checked_sub(ago)
}

/// The first region of the synthetic mappings, from `from` (record's pid) on, that no line of
/// the perf map at `path` names a slot in: another recorder following the same process writes
/// its names there too, each in its own region. At most the map's first 64 MiB are read.
fn free_region(path: &Path, from: u64) -> u64 {
    use std::io::{BufRead, Read};
    let mut used = std::collections::HashSet::new();
    if let Ok(f) = File::open(path) {
        for line in std::io::BufReader::new(f.take(64 << 20)).lines() {
            let Ok(line) = line else { break };
            let start = line
                .split(' ')
                .next()
                .and_then(|a| u64::from_str_radix(a, 16).ok());
            if let Some(k) = start.and_then(synthetic_region) {
                used.insert(k);
            }
        }
    }
    (0..SYNTHETIC_REGIONS)
        .map(|i| (from + i) % SYNTHETIC_REGIONS)
        .find(|k| !used.contains(k))
        .unwrap_or(from % SYNTHETIC_REGIONS)
}

/// Opens the perf map for appending lines. A map written since the process started is the
/// process's own (CPython's `-X perf` writes its trampolines' names there, a JIT its code's),
/// and is added to as it is (O_APPEND, as CPython opens it, so that the writers' lines never
/// overwrite each other); any other is what an earlier process of that pid left, and is
/// truncated. A map record makes is 0644 and the invoking sudo user's (perf reads a map only
/// when it is the reader's or root's). Never through a symbolic link (/tmp is everyone's). A
/// failure is said once: that process's Python frames stay unnamed (their addresses).
fn open_map(path: &Path, started: Option<SystemTime>) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let own = std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .and_then(|m| m.modified().ok())
        .is_some_and(|written| started.is_some_and(|t| written >= t));
    match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(!own)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_APPEND)
        .open(path)
    {
        Ok(f) => {
            if !own {
                crate::host::chown_to_invoking_user(path);
            }
            Some(f)
        }
        Err(e) => {
            eprintln!(
                "record: {}: {e}; its Python frames stay unnamed",
                path.display()
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each table against its version's headers: `fixtures/python/offsets.c` compiled with
    /// them and run. 3.11: Debian's python3.11-dev (scripts/setup installs it); 3.12: pyenv's.
    #[test]
    fn offsets_match_the_headers() {
        let check = offsets::tests::check_against_headers;
        check("/usr/include/python3.11", for_version(11).unwrap());
        check(
            "/root/.pyenv/versions/3.12.1/include/python3.12",
            for_version(12).unwrap(),
        );
        for (minor, full) in [(8, "3.8.18"), (9, "3.9.18"), (10, "3.10.13")] {
            check(
                &format!("/root/.pyenv/versions/{full}/include/python3.{minor}"),
                for_version(minor).unwrap(),
            );
        }
    }

    /// Each table's frame fields lie in one span python.bpf.h reads at once: 3.8-3.9 f_back
    /// (24) to f_lasti (104, read as 8 bytes), 3.10 to f_lasti at 96, 3.11 f_code (32) to
    /// is_entry (68), 3.12 f_code (0) to owner (70).
    #[test]
    fn each_table_reads_a_frame_in_one_span() {
        let span = |minor| for_version(minor).unwrap().frame_span();
        assert_eq!(span(8), Some((24, 88)));
        assert_eq!(span(9), Some((24, 88)));
        assert_eq!(span(10), Some((24, 80)));
        assert_eq!(span(11), Some((32, 37)));
        assert_eq!(span(12), Some((0, 71)));
        let far = Offsets {
            frame_owner: 200,
            ..*for_version(12).unwrap()
        };
        assert_eq!(far.frame_span(), None);
        assert_eq!(far.for_bpf().frame_span_len, u16::MAX);
    }

    #[test]
    fn a_perf_map_is_never_written_through_a_link() {
        let dir = std::env::temp_dir().join(format!("bpfperf-pymap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.join("perf-1.map");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(open_map(&link, None).is_none());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let plain = dir.join("perf-2.map");
        let mut f = open_map(&plain, None).unwrap();
        writeln!(f, "200000000000 10 f (f.py:1)").unwrap();
        assert_eq!(
            std::fs::read_to_string(&plain).unwrap(),
            "200000000000 10 f (f.py:1)\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A map written since its process started is the process's (CPython's -X perf): added
    /// to, each writer's lines after the other's; an older one is an earlier process's.
    #[test]
    fn a_processs_own_perf_map_is_added_to_and_a_stale_one_truncated() {
        let dir = std::env::temp_dir().join(format!("bpfperf-pymap2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("perf-3.map");
        let started = process_start(std::process::id()).expect("our own start");
        assert!(started <= SystemTime::now());
        std::fs::write(&path, "7f0000000000 b py::f:/t.py\n").unwrap();
        let mut ours = open_map(&path, Some(started)).unwrap();
        // The process appends as it goes (O_APPEND), between record's lines.
        let mut theirs = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        ours.write_all(b"200000000000 10 f (t.py:1)\n").unwrap();
        theirs.write_all(b"7f000000000b b py::g:/t.py\n").unwrap();
        ours.write_all(b"200000000010 10 g (t.py:2)\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "7f0000000000 b py::f:/t.py\n200000000000 10 f (t.py:1)\n\
             7f000000000b b py::g:/t.py\n200000000010 10 g (t.py:2)\n"
        );
        // Written before the process started: an earlier process's, gone.
        let later = SystemTime::now() + Duration::from_secs(5);
        let mut f = open_map(&path, Some(later)).unwrap();
        f.write_all(b"200000000000 10 h (t.py:3)\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "200000000000 10 h (t.py:3)\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `/usr/bin/python3.11` mapped into `pid`: its executable segment, as an MMAP2 says.
    fn python_mapped(pid: u32) -> Fact {
        use object::read::elf::ProgramHeader;
        let path = "/usr/bin/python3.11";
        let data = std::fs::read(path).expect("Debian's python3.11");
        let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
        let e = elf.endian();
        let text = elf
            .elf_program_headers()
            .iter()
            .find(|h| {
                h.p_type(e) == object::elf::PT_LOAD
                    && h.p_flags(e) & object::elf::PF_X == object::elf::PF_X
            })
            .unwrap();
        let pgoff = text.p_offset(e) & !0xfff;
        Fact::Mmap2 {
            pid,
            tid: pid,
            start: 0x5555_0000_0000 + pgoff,
            len: text.p_filesz(e),
            pgoff,
            maj: 0,
            min: 0,
            ino: 0,
            ino_generation: 0,
            prot: 5,
            flags: 2,
            filename: path.into(),
        }
    }

    /// A compact ASCII `str` object of 3.11's layout holding `text`, in this process.
    fn fake_str(text: &str) -> Vec<u8> {
        let o = &offsets::PY_3_11;
        let mut b = vec![0u8; o.unicode_ascii_data as usize + text.len() + 1];
        let at = |f: u16| f as usize;
        b[at(o.unicode_length)..at(o.unicode_length) + 8]
            .copy_from_slice(&(text.len() as u64).to_ne_bytes());
        // kind 1 (bits 2-4), compact (bit 5), ascii (bit 6).
        let state: u32 = 1 << 2 | 1 << 5 | 1 << 6;
        b[at(o.unicode_state)..at(o.unicode_state) + 4].copy_from_slice(&state.to_ne_bytes());
        b[at(o.unicode_ascii_data)..][..text.len()].copy_from_slice(text.as_bytes());
        b
    }

    #[test]
    fn an_address_holding_another_code_object_is_named_after_it_within_the_recheck() {
        // This process stands for a Python process: its code object below is garbage when
        // first met (freed, its memory not yet another's), then a function's code, then
        // another function's at the same address.
        let pid = std::process::id();
        let mut py = Python::default();
        assert!(py.observe(&python_mapped(pid), 200).is_some());
        let o = &offsets::PY_3_11;
        let name = fake_str("outer");
        let file = fake_str("w.py");
        let mut code = vec![0u8; o.code_code_adaptive as usize];
        let put = |code: &mut Vec<u8>, off: u16, v: u64| {
            code[off as usize..off as usize + 8].copy_from_slice(&v.to_ne_bytes());
        };
        // A name pointer into the first page, which nothing maps: unreadable.
        put(&mut code, o.code_qualname, 8);
        put(&mut code, o.code_filename, 8);
        let addr = code.as_ptr() as u64;
        let frame = bpf::PyFrame {
            code: addr,
            lasti: 0,
            entry: true,
        };
        py.observe_frames(pid, &[frame]);
        assert_eq!(py.stats.unreadable, 1);
        put(&mut code, o.code_qualname, name.as_ptr() as u64);
        put(&mut code, o.code_filename, file.as_ptr() as u64);
        std::thread::sleep(Duration::from_millis(20));
        py.observe_frames(pid, &[frame]);
        let known = &py.procs[&pid].codes[&addr];
        assert_eq!(
            known
                .code
                .as_ref()
                .map(|c| (c.name.as_str(), c.file.as_str())),
            Some(("outer", "w.py")),
            "read again 20 ms later"
        );
        assert_eq!((known.generation, py.stats.read_later), (1, 1));
        let other = fake_str("inner");
        put(&mut code, o.code_qualname, other.as_ptr() as u64);
        std::thread::sleep(Duration::from_millis(20));
        py.observe_frames(pid, &[frame]);
        let known = &py.procs[&pid].codes[&addr];
        assert_eq!(known.code.as_ref().map(|c| c.name.as_str()), Some("inner"));
        assert_eq!((known.generation, py.stats.replaced), (2, 1));
        std::hint::black_box((&code, &name, &file, &other));
    }

    #[test]
    fn an_exec_read_after_the_mapping_it_preceded_keeps_the_interpreter() {
        let exec = |pid| Fact::Comm {
            pid,
            tid: pid,
            comm: "python3.11".into(),
            exec: true,
        };
        let mut py = Python::default();
        // In order: the exec (of nice, say, running python), then python mapped.
        assert!(py.observe(&exec(7), 100).is_none());
        assert!(py.observe(&python_mapped(7), 200).is_some());
        assert!(py.procs.contains_key(&7));
        // The same facts read from two CPUs' buffers the other way round.
        assert!(py.observe(&python_mapped(8), 200).is_some());
        assert!(py.observe(&exec(8), 100).is_none());
        assert!(
            py.procs.contains_key(&8),
            "an earlier exec forgot the interpreter"
        );
        // A later exec (python running something else) does forget it.
        assert!(py.observe(&exec(8), 300).is_none());
        assert!(!py.procs.contains_key(&8));
    }
}
