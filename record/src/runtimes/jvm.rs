//! Names for the JIT code of the JVMs a recording saw: their perf maps (`/tmp/perf-PID.map`,
//! HotSpot's own format: `START SIZE name` for every nmethod, stub and the interpreter),
//! which analyze reads beside the recording and `analyze archive` keeps.
//!
//! A map describes the code cache at the moment it is written, and the code cache is gone
//! once its JVM exits, so the map is asked for while each JVM still runs:
//! - JVMs the workload starts inherit `JAVA_TOOL_OPTIONS` with `-XX:+DumpPerfMapAtExit`
//!   (JDK 17+): HotSpot writes the map itself on its way out (`before_exit`). Nothing races:
//!   the flag is there from the JVM's first instruction, however short its life.
//! - Other JVMs (running before the recording with `-p`, `-a`, or started later by such a
//!   process) cannot take a new option, but the flag is a plain byte in libjvm.so's `.bss`,
//!   read only at exit: record sets it through `/proc/PID/mem` (the same right jcmd's attach
//!   needs), found by its `.symtab` symbol ([`Flagger`]). A JVM that exits before the
//!   recording ends then writes its map as above.
//! - Every JVM still alive at the end is asked with `jcmd PID Compiler.perfmap` (JDK 17+),
//!   which covers the code compiled up to the end (and JVMs whose libjvm.so has no symbols).
//!
//! Not covered: a JVM that exits within [`SETTLE`] of mapping libjvm.so without having been
//! started by the workload, JVMs killed by a signal, and JVMs in another PID namespace.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use object::{Object, ObjectSegment, ObjectSymbol};

/// The options JVMs started by the workload get. `IgnoreUnrecognizedVMOptions` first: a JDK
/// older than 17 (no `DumpPerfMapAtExit`) must still start.
pub const TOOL_OPTIONS: &str =
    "-XX:+IgnoreUnrecognizedVMOptions -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit";

/// How long one `jcmd` may take (it starts a JVM of its own: ~0.7 s here).
const JCMD_TIMEOUT: Duration = Duration::from_secs(20);

/// libjvm.so is tens of MB; anything far larger is not one.
const MAX_LIBJVM_BYTES: u64 = 512 << 20;

/// How long after a JVM is first seen its flag is set: the loader has finished mapping
/// libjvm.so by then (a byte written into a mapping the loader then replaces would be lost).
/// It is read again [`RECHECK`] later and set again if it was.
pub const SETTLE: Duration = Duration::from_millis(200);
const RECHECK: Duration = Duration::from_secs(1);

/// Whether a mapped file is HotSpot's VM library.
pub fn is_libjvm(path: &str) -> bool {
    path.ends_with("/libjvm.so")
}

/// `JAVA_TOOL_OPTIONS` for the workload: the user's own, then ours.
pub fn workload_env() -> (String, String) {
    let value = match std::env::var("JAVA_TOOL_OPTIONS") {
        Ok(v) if !v.trim().is_empty() => format!("{v} {TOOL_OPTIONS}"),
        _ => TOOL_OPTIONS.to_string(),
    };
    ("JAVA_TOOL_OPTIONS".into(), value)
}

/// The perf map process `pid` writes (its own /tmp, seen through its root).
pub fn map_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/perf-{pid}.map"))
}

/// Sets `DumpPerfMapAtExit` in the JVMs a recording sees, once each has settled, and checks
/// it again a second later; the flag's offset is read once per libjvm.so.
#[derive(Default)]
pub struct Flagger {
    /// Offset of the flag from the load base, per libjvm.so path.
    offsets: HashMap<String, Result<u64, String>>,
    /// JVMs seen, and when each is next due (`None`: done).
    due: BTreeMap<u32, (Option<Instant>, u8)>,
    /// Where record turned the flag on (it read 0), to turn it off again at the end.
    set: BTreeMap<u32, u64>,
}

impl Flagger {
    /// Notes the JVMs in `jvms` not seen before: due at `now` (`initial`: already running
    /// when recording began, settled) or after [`SETTLE`].
    pub fn note(&mut self, jvms: &BTreeSet<u32>, initial: bool) {
        let at = Instant::now() + if initial { Duration::ZERO } else { SETTLE };
        for &pid in jvms {
            self.due.entry(pid).or_insert((Some(at), 0));
        }
    }

    /// Sets the flag in the JVMs that are due; returns the problems of those done with.
    pub fn run_due(&mut self) -> Vec<String> {
        let now = Instant::now();
        let mut problems = Vec::new();
        let due: Vec<u32> = self
            .due
            .iter()
            .filter(|(_, (at, _))| at.is_some_and(|t| t <= now))
            .map(|(&pid, _)| pid)
            .collect();
        for pid in due {
            let result = self.flag(pid);
            let (at, tries) = self.due.get_mut(&pid).unwrap();
            *tries += 1;
            *at = (*tries < 2).then(|| now + RECHECK);
            if let Err(why) = result {
                *at = None;
                if !crate::sideband::procfs::has_exited(pid) {
                    problems.push(format!("JVM {pid}: {why}"));
                }
            }
        }
        problems
    }

    fn flag(&mut self, pid: u32) -> Result<(), String> {
        let (path, base) = libjvm_of(pid).ok_or("no libjvm.so mapped at offset 0")?;
        let offset = self
            .offsets
            .entry(path.clone())
            .or_insert_with(|| flag_offset(pid, &path))
            .clone()?;
        let addr = base.wrapping_add(offset);
        if set_flag(pid, addr)? {
            self.set.insert(pid, addr);
        }
        Ok(())
    }

    /// Turns the flag off again in the JVMs still running where record turned it on: the
    /// recording is over (their maps were asked for with jcmd), and a JVM that lives on must
    /// not write a map at its exit because it was once recorded.
    pub fn restore(&self) -> Vec<String> {
        self.set
            .iter()
            .filter(|(&pid, _)| !crate::sideband::procfs::has_exited(pid))
            .filter_map(|(&pid, &addr)| {
                reset_flag(pid, addr)
                    .err()
                    .filter(|_| !crate::sideband::procfs::has_exited(pid))
                    .map(|why| format!("JVM {pid}: {why}"))
            })
            .collect()
    }
}

/// The path and load base of libjvm.so in `pid`, from /proc/PID/maps.
fn libjvm_of(pid: u32) -> Option<(String, u64)> {
    let mut maps = String::new();
    std::fs::File::open(format!("/proc/{pid}/maps"))
        .ok()?
        .take(64 << 20)
        .read_to_string(&mut maps)
        .ok()?;
    maps.lines().find_map(|l| {
        // 7f5c3e400000-7f5c3e6b1000 r--p 00000000 fe:01 1234 /usr/lib/jvm/.../libjvm.so
        let mut f = l.split_whitespace();
        let (range, _perms, off) = (f.next()?, f.next()?, f.next()?);
        let path = f.nth(2)?;
        let start = u64::from_str_radix(range.split_once('-')?.0, 16).ok()?;
        (is_libjvm(path) && u64::from_str_radix(off, 16).ok()? == 0)
            .then(|| (path.to_string(), start))
    })
}

/// The offset from libjvm.so's load base of its `DumpPerfMapAtExit` flag (the file as
/// process `pid` sees it at `path`).
fn flag_offset(pid: u32, path: &str) -> Result<u64, String> {
    let file = Path::new("/proc")
        .join(pid.to_string())
        .join("root")
        .join(path.trim_start_matches('/'));
    let len = std::fs::metadata(&file)
        .map_err(|e| format!("{path}: {e}"))?
        .len();
    if len > MAX_LIBJVM_BYTES {
        return Err(format!("{path}: {len} bytes, not a libjvm.so"));
    }
    let bytes = std::fs::read(&file).map_err(|e| format!("{path}: {e}"))?;
    let obj = object::File::parse(&*bytes).map_err(|e| format!("{path}: {e}"))?;
    let sym = obj
        .symbols()
        .find(|s| s.name() == Ok("DumpPerfMapAtExit") && s.size() == 1)
        .ok_or_else(|| format!("{path} has no DumpPerfMapAtExit symbol (stripped, or JDK < 17)"))?;
    // The mapping at file offset 0 holds the lowest segment, page-aligned.
    let lowest = obj.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
    Ok(sym.address().wrapping_sub(lowest))
}

/// Sets the `DumpPerfMapAtExit` byte at `addr` in the running JVM `pid`, so that it writes its
/// perf map when it exits. The byte must read 0 or 1 first (a bool), else nothing is written.
/// Whether record turned it on (it read 0).
fn set_flag(pid: u32, addr: u64) -> Result<bool, String> {
    swap_flag(pid, addr, 0, 1)
}

/// Turns the byte at `addr` off again if it still reads 1 (what [`set_flag`] turned on).
fn reset_flag(pid: u32, addr: u64) -> Result<bool, String> {
    swap_flag(pid, addr, 1, 0)
}

/// Writes `to` over the flag byte at `addr` of `pid` if it reads `from`; `Ok(false)` if it
/// reads `to` already, an error if it reads anything else (not the bool it should be).
fn swap_flag(pid: u32, addr: u64, from: u8, to: u8) -> Result<bool, String> {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))
        .map_err(|e| format!("/proc/{pid}/mem: {e}"))?;
    let mut b = [0u8];
    mem.read_exact_at(&mut b, addr)
        .map_err(|e| format!("reading DumpPerfMapAtExit at {addr:#x}: {e}"))?;
    match b[0] {
        v if v == to => Ok(false),
        v if v == from => mem
            .write_all_at(&[to], addr)
            .map(|()| true)
            .map_err(|e| format!("writing DumpPerfMapAtExit at {addr:#x}: {e}")),
        v => Err(format!(
            "DumpPerfMapAtExit at {addr:#x} reads {v}, not a bool"
        )),
    }
}

/// The jcmd to use for `pid`: the one beside its own `java` (the same JDK), else PATH's.
fn jcmd_for(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("jcmd")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("jcmd"))
}

/// Asks each running JVM of `pids` for its perf map (`jcmd PID Compiler.perfmap`), all at
/// once, each bounded by a timeout. Returns the problems, one line per JVM.
pub fn ask_maps(pids: &[u32]) -> Vec<String> {
    let threads: Vec<_> = pids
        .iter()
        .map(|&pid| std::thread::spawn(move || ask_map(pid).err()))
        .collect();
    threads
        .into_iter()
        .filter_map(|t| t.join().ok().flatten())
        .collect()
}

fn ask_map(pid: u32) -> Result<(), String> {
    let jcmd = jcmd_for(pid);
    let mut child = Command::new(&jcmd)
        .args([&pid.to_string(), "Compiler.perfmap"])
        // jcmd is a JVM too: it must not dump a map of its own.
        .env_remove("JAVA_TOOL_OPTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("JVM {pid}: cannot run {}: {e}", jcmd.display()))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < JCMD_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "JVM {pid}: jcmd Compiler.perfmap did not answer in {} s",
                    JCMD_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("JVM {pid}: jcmd: {e}")),
        }
    };
    let mut out = String::new();
    if let Some(o) = child.stdout.as_mut() {
        let _ = o.take(4096).read_to_string(&mut out);
    }
    if let Some(e) = child.stderr.as_mut() {
        let _ = e.take(4096).read_to_string(&mut out);
    }
    let map = Path::new("/proc")
        .join(pid.to_string())
        .join("root")
        .join(map_path(pid).strip_prefix("/").unwrap_or(Path::new("")));
    if !status.success() || !map.exists() {
        return Err(format!(
            "JVM {pid}: jcmd Compiler.perfmap failed ({status}): {}",
            out.lines().last().unwrap_or("").trim()
        ));
    }
    Ok(())
}
