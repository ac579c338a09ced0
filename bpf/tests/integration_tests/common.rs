//! Shared helpers: the fixture programs, held workloads, symbols and the kernel text range.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};

use object::{Object, ObjectSymbol};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A program from fixtures/programs, built by fixtures/build.sh into target/fixtures.
pub fn fixture(name: &str) -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let out = root().join("target/fixtures");
        let st = Command::new("bash")
            .arg(root().join("fixtures/build.sh"))
            .arg(&out)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "fixtures/build.sh failed");
        out
    })
    .join(name)
}

/// Tests count samples: run them one at a time so that they do not share the CPUs.
pub fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether BPF can be loaded here (root and BTF). Under CI their absence fails the test.
pub fn can_load_bpf() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    if root && btf {
        return true;
    }
    let why = format!("root: {root}, BTF: {btf}");
    assert!(
        std::env::var_os("CI").is_none(),
        "BPF tests need root and BTF under CI ({why})"
    );
    eprintln!("skipping: BPF tests need root and BTF ({why})");
    false
}

/// A workload started under `sh` that waits on its stdin before it execs the program, so that
/// it can be tracked before it runs (the exec keeps the pid).
pub struct Held {
    pub child: Child,
}

impl Held {
    pub fn spawn(script: &str, program: &Path, args: &[&str]) -> Held {
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("read _ && {script}"))
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Held { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn release(&mut self) {
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
    }

    /// The exit status and CPU seconds (user + system, all threads and reaped children) once
    /// it has exited; None while it runs.
    pub fn try_wait(&mut self) -> Option<(i32, f64)> {
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid out buffer; the pid is our own child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::wait4(
                self.child.id() as i32,
                &mut status,
                libc::WNOHANG,
                &mut usage,
            )
        };
        if r <= 0 {
            return None;
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Some((status, secs(usage.ru_utime) + secs(usage.ru_stime)))
    }
}

/// CLOCK_MONOTONIC now, in ns (the clock of bpf_ktime_get_ns).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The load bias of `path` in process `pid` (start of its mapping at file offset 0), if the
/// process has mapped it.
pub fn load_base(pid: u32, path: &Path) -> Option<u64> {
    let path = path.canonicalize().ok()?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 6 && Path::new(f[5]) == path && f[2] == "00000000" {
            u64::from_str_radix(f[0].split('-').next()?, 16).ok()
        } else {
            None
        }
    })
}

/// Address ranges `[start, end)` of the named functions in an ELF file (unrelocated).
pub fn function_ranges(path: &Path, names: &[&str]) -> Vec<(String, u64, u64)> {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut out = Vec::new();
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        if names.contains(&name) && sym.size() > 0 {
            out.push((name.to_string(), sym.address(), sym.address() + sym.size()));
        }
    }
    assert_eq!(
        out.len(),
        names.len(),
        "not every function found in {}: {out:?}",
        path.display()
    );
    out
}

/// The kernel's text, `[_text, _etext)`, from /proc/kallsyms.
pub fn kernel_text() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let find = |name: &str| {
        text.lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                let addr = f.next()?;
                let _kind = f.next()?;
                (f.next()? == name).then(|| u64::from_str_radix(addr, 16).ok())?
            })
            .unwrap_or_else(|| panic!("{name} not in /proc/kallsyms"))
    };
    let range = (find("_text"), find("_etext"));
    assert!(range.0 != 0, "/proc/kallsyms hides addresses");
    range
}
