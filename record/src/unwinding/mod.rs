//! Unwinding in the kernel (DWARF mode): a thread of its own builds the unwind table of each
//! file the followed processes map (once per file) and installs each process's mappings for
//! the BPF programs, following the side-band facts in order: a mapping adds to its process,
//! a fork copies the parent's, an exec clears them, an exit forgets the process. Until a
//! process's tables are in, its stacks are copied as before (the kernel says so per event).

mod py_trampolines;
mod tables;

use std::collections::{HashMap, HashSet};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::sideband::Fact;
use tables::FileTable;

/// How a file is told apart: device and inode, or the name of a special mapping (`[vdso]`);
/// or anonymous executable memory (JIT code).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FileKey {
    Inode {
        maj: u32,
        min: u32,
        ino: u64,
    },
    Special(String),
    /// JIT code has no CFI: its frames follow the frame-pointer rule, as `perf -g` walks
    /// them. V8 keeps frame pointers; HotSpot's interpreter does, and its compiled code only
    /// with -XX:+PreserveFramePointer (else the walk skips the compiled method's caller or
    /// ends: a read that fails or a frame that does not go up stops it).
    Jit,
    /// CPython's perf trampolines (`-X perf`, 3.12 on): anonymous executable memory whose
    /// first bytes are a trampoline; one rule for all of it (`py_trampolines`).
    PyTrampolines,
}

/// An executable mapping of a followed process.
#[derive(Debug, Clone)]
struct Mapped {
    start: u64,
    end: u64,
    pgoff: u64,
    file: FileKey,
}

/// What the worker is told, in the side-band's order.
enum Job {
    Map {
        pid: u32,
        path: String,
        mapped: Mapped,
    },
    Fork {
        pid: u32,
        ppid: u32,
    },
    Exec {
        pid: u32,
    },
    Exit {
        pid: u32,
    },
}

/// What the worker did, for `-v`.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Files with a table (with rows, or frame pointers only) and their rows.
    pub files: usize,
    pub rows: u64,
    /// Processes whose mappings were installed (at some time).
    pub processes: usize,
    /// Milliseconds spent building tables.
    pub build_ms: f64,
    /// Files left without a table, and why (one line each).
    pub failed: Vec<String>,
}

/// The worker and the followed processes the facts are filtered by.
pub struct Unwinding {
    tx: Option<mpsc::Sender<Job>>,
    worker: Option<JoinHandle<Stats>>,
    followed: HashSet<u32>,
}

impl Unwinding {
    /// Starts the worker with the kernel's `tables`, following `pids` (and their children).
    pub fn start(tables: bpf::UnwindTables, pids: &[u32]) -> Unwinding {
        let (tx, rx) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("record-unwind".into())
            .spawn(move || {
                // Until a process's tables are in, its samples are stack copies: the tables
                // go before the recorded program's own work when both want the CPUs (a
                // failure is harmless: root-only, and the thread keeps the usual priority).
                // SAFETY: setpriority on this thread's own id.
                unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
                Worker::new(tables).run(rx)
            })
            .expect("spawn the unwind-table thread");
        Unwinding {
            tx: Some(tx),
            worker: Some(worker),
            followed: pids.iter().copied().collect(),
        }
    }

    /// Passes on the facts about followed processes.
    pub fn observe<'f>(&mut self, facts: impl IntoIterator<Item = &'f Fact>) {
        let Some(tx) = &self.tx else {
            return;
        };
        for fact in facts {
            let job = match fact {
                Fact::Fork { pid, ppid, .. } if pid != ppid => {
                    if !self.followed.contains(ppid) {
                        continue;
                    }
                    self.followed.insert(*pid);
                    Job::Fork {
                        pid: *pid,
                        ppid: *ppid,
                    }
                }
                Fact::Comm {
                    pid, exec: true, ..
                } if self.followed.contains(pid) => Job::Exec { pid: *pid },
                Fact::Exit { pid, tid, .. } if pid == tid && self.followed.contains(pid) => {
                    self.followed.remove(pid);
                    Job::Exit { pid: *pid }
                }
                Fact::Mmap2 {
                    pid,
                    start,
                    len,
                    pgoff,
                    maj,
                    min,
                    ino,
                    prot,
                    filename,
                    ..
                } if prot & 4 != 0 && self.followed.contains(pid) => {
                    let file = if filename == "//anon" {
                        FileKey::Jit
                    } else if filename.starts_with('/') {
                        FileKey::Inode {
                            maj: *maj,
                            min: *min,
                            ino: *ino,
                        }
                    } else if filename == "[vdso]" {
                        FileKey::Special(filename.clone())
                    } else {
                        continue; // other anonymous code: no table
                    };
                    Job::Map {
                        pid: *pid,
                        path: filename.clone(),
                        mapped: Mapped {
                            start: *start,
                            end: start.saturating_add(*len),
                            pgoff: *pgoff,
                            file,
                        },
                    }
                }
                _ => continue,
            };
            if tx.send(job).is_err() {
                self.tx = None;
                return;
            }
        }
    }

    /// Stops the worker (before the profiler whose memory it writes goes) and says what it
    /// did.
    pub fn finish(mut self) -> Stats {
        self.tx = None;
        self.worker
            .take()
            .and_then(|w| w.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Unwinding {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

struct Worker {
    tables: bpf::UnwindTables,
    /// Each file's table and segments, once built (`None`: it cannot have one).
    files: HashMap<FileKey, Option<(bpf::UnwindTable, FileTable)>>,
    processes: HashMap<u32, Vec<Mapped>>,
    stats: Stats,
    installed: HashSet<u32>,
    /// No process is installed before then (`BPFPERF_TABLES_AFTER_MS=N`, N ms after the
    /// worker starts: tests, to have a process's first samples copied by construction).
    not_before: Option<Instant>,
}

impl Worker {
    fn new(tables: bpf::UnwindTables) -> Worker {
        Worker {
            tables,
            files: HashMap::new(),
            processes: HashMap::new(),
            stats: Stats::default(),
            installed: HashSet::new(),
            not_before: std::env::var("BPFPERF_TABLES_AFTER_MS")
                .ok()
                .and_then(|ms| ms.parse().ok())
                .map(|ms| Instant::now() + std::time::Duration::from_millis(ms)),
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Job>) -> Stats {
        while let Ok(first) = rx.recv() {
            // Everything that waits, then each changed process installed once.
            let mut changed = HashSet::new();
            let mut job = Some(first);
            while let Some(j) = job.take().or_else(|| rx.try_recv().ok()) {
                self.apply(j, &mut changed);
            }
            if let Some(wait) = self
                .not_before
                .and_then(|t| t.checked_duration_since(Instant::now()))
            {
                std::thread::sleep(wait);
            }
            for pid in changed {
                self.install(pid);
            }
        }
        self.stats
    }

    fn apply(&mut self, job: Job, changed: &mut HashSet<u32>) {
        match job {
            Job::Map {
                pid,
                path,
                mut mapped,
            } => {
                if mapped.file == FileKey::Jit
                    && py_trampolines::head(pid, mapped.start)
                        .is_some_and(|h| py_trampolines::is_arena(&h))
                {
                    mapped.file = FileKey::PyTrampolines;
                }
                self.ensure_table(pid, &path, &mapped);
                let maps = self.processes.entry(pid).or_default();
                // A new mapping replaces what it overlaps.
                maps.retain(|m| m.end <= mapped.start || m.start >= mapped.end);
                maps.push(mapped);
                changed.insert(pid);
            }
            Job::Fork { pid, ppid } => {
                let parent = self.processes.get(&ppid).cloned().unwrap_or_default();
                self.processes.insert(pid, parent);
                changed.insert(pid);
            }
            Job::Exec { pid } => {
                self.processes.insert(pid, Vec::new());
                changed.insert(pid);
            }
            Job::Exit { pid } => {
                self.processes.remove(&pid);
                changed.remove(&pid);
                if self.installed.remove(&pid) {
                    self.tables.forget_process(pid);
                }
            }
        }
    }

    /// Builds the table of the file `mapped` maps, once.
    fn ensure_table(&mut self, pid: u32, path: &str, mapped: &Mapped) {
        if self.files.contains_key(&mapped.file) {
            return;
        }
        let started = Instant::now();
        let built = match &mapped.file {
            FileKey::Jit => {
                // Addresses are their own SVMAs: one segment, bias 0 (see `install`).
                let t = FileTable::default();
                let entry = Some((bpf::UnwindTables::frame_pointers(), t));
                self.files.insert(FileKey::Jit, entry);
                return;
            }
            FileKey::PyTrampolines => Ok(py_trampolines::table()),
            FileKey::Special(_) => vdso_image().and_then(|b| tables::build(&b)),
            // The mapped file itself (whatever mount namespace it is in, even if replaced
            // on disk since), else its path.
            FileKey::Inode { .. } => std::fs::read(format!(
                "/proc/{pid}/map_files/{:x}-{:x}",
                mapped.start, mapped.end
            ))
            .or_else(|_| std::fs::read(path))
            .map_err(|e| e.to_string())
            .and_then(|b| tables::build(&b)),
        };
        let entry = match built {
            Ok(t) => {
                let table = if t.rows.is_empty() {
                    Some(bpf::UnwindTables::frame_pointers())
                } else {
                    self.tables.add(&t.rows, &t.pages, t.base_page)
                };
                match table {
                    Some(table) => {
                        self.stats.files += 1;
                        self.stats.rows += t.rows.len() as u64;
                        Some((table, t))
                    }
                    None => {
                        self.stats
                            .failed
                            .push(format!("{path}: the unwind tables are full"));
                        None
                    }
                }
            }
            Err(e) => {
                self.stats.failed.push(format!("{path}: {e}"));
                None
            }
        };
        self.stats.build_ms += started.elapsed().as_secs_f64() * 1e3;
        self.files.insert(mapped.file.clone(), entry);
    }

    /// Installs the mappings of `pid` that have tables.
    fn install(&mut self, pid: u32) {
        let Some(maps) = self.processes.get(&pid) else {
            return;
        };
        let mut entries: Vec<bpf::UnwindMapping> = maps
            .iter()
            .filter_map(|m| {
                let (table, file) = self.files.get(&m.file)?.as_ref()?;
                let bias = match m.file {
                    FileKey::Jit => 0,
                    FileKey::PyTrampolines => m.start,
                    _ => file.bias(m.start, m.end, m.pgoff)?,
                };
                Some(bpf::UnwindMapping {
                    start: m.start,
                    end: m.end,
                    bias,
                    table: *table,
                })
            })
            .collect();
        entries.sort_by_key(|m| m.start);
        entries.truncate(bpf::UNWIND_MAPPINGS);
        if entries.is_empty() {
            if self.installed.remove(&pid) {
                self.tables.forget_process(pid);
            }
            return;
        }
        if self.tables.set_process(pid, &entries).is_ok() && self.installed.insert(pid) {
            self.stats.processes += 1;
        }
    }
}

/// The `[vdso]` image of this process: the same kernel's as every other process's.
fn vdso_image() -> Result<Vec<u8>, String> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
    let line = maps
        .lines()
        .find(|l| l.ends_with("[vdso]"))
        .ok_or("no [vdso] in this process")?;
    let (a, b) = line
        .split_whitespace()
        .next()
        .and_then(|r| r.split_once('-'))
        .ok_or("odd /proc/self/maps")?;
    let start = u64::from_str_radix(a, 16).map_err(|e| e.to_string())?;
    let end = u64::from_str_radix(b, 16).map_err(|e| e.to_string())?;
    use std::io::{Read, Seek, SeekFrom};
    let mut mem = std::fs::File::open("/proc/self/mem").map_err(|e| e.to_string())?;
    mem.seek(SeekFrom::Start(start))
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0; (end - start) as usize];
    mem.read_exact(&mut buf).map_err(|e| e.to_string())?;
    Ok(buf)
}
