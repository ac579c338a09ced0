//! Shared helpers: fixtures, running record and perf, folding perf script output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

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

/// Recording tests measure sample counts: run them one at a time so they do not share CPUs.
pub fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether BPF and perf can be used here: root, BTF, perf. Under CI their absence fails.
pub fn can_record() -> bool {
    // SAFETY: no preconditions.
    let root = unsafe { libc_geteuid() } == 0;
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    let perf = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if root && btf && perf {
        return true;
    }
    let why = format!("root: {root}, BTF: {btf}, perf: {perf}");
    assert!(
        std::env::var_os("CI").is_none(),
        "record tests need root, BTF and perf under CI ({why})"
    );
    eprintln!("skipping: {why}");
    false
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

pub struct TempDir(pub PathBuf);
impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("bpfperf-record-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `record ARGS -- CMD...` and returns its output.
pub fn record(args: &[&str], cmd: &[&str]) -> Output {
    record_env(args, cmd, &[])
}

/// [`record`] with `env` set in record's environment.
pub fn record_env(args: &[&str], cmd: &[&str], env: &[(&str, &str)]) -> Output {
    // Without cargo's LD_LIBRARY_PATH, which the workload would inherit: with it, dlopen
    // (getaddrinfo's NSS modules) tries, and fails to open, each of its directories first.
    Command::new(env!("CARGO_BIN_EXE_record"))
        .env_remove("LD_LIBRARY_PATH")
        .envs(env.iter().copied())
        .args(args)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap()
}

/// `cmd` run under /usr/bin/time, which reports its CPU time on stderr (see [`cpu_seconds`]).
pub fn timed<'a>(cmd: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["/usr/bin/time", "-f", "bpfperf-cpu %U %S\nbpfperf-wall %e"];
    v.extend_from_slice(cmd);
    v
}

/// Elapsed seconds of a command run by [`timed`], from record's stderr.
pub fn wall_seconds(stderr: &str) -> f64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("bpfperf-wall "))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no elapsed time from /usr/bin/time in: {stderr}"))
}

/// User + system seconds of a command run by [`timed`], from record's stderr.
pub fn cpu_seconds(stderr: &str) -> f64 {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("bpfperf-cpu "))
        .unwrap_or_else(|| panic!("no CPU time from /usr/bin/time in: {stderr}"));
    line.split_whitespace()
        .map(|x| x.parse::<f64>().unwrap())
        .sum()
}

/// `perf script` of a file: asserts success and an empty stderr, returns stdout.
pub fn perf_script_clean(file: &Path) -> String {
    let out = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "perf script failed: {stderr}");
    assert!(
        stderr.trim().is_empty(),
        "perf script wrote to stderr:\n{stderr}"
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One sample of perf script's default output: comm and frames (leaf first) as (symbol, dso).
#[derive(Debug, Clone)]
pub struct ScriptSample {
    pub comm: String,
    pub event: String,
    /// The sample's period (nanoseconds for cpu-clock and offcpu-time), 0 if not printed.
    pub period: u64,
    pub frames: Vec<(String, String)>,
}

pub fn parse_script(text: &str) -> Vec<ScriptSample> {
    let mut out: Vec<ScriptSample> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with('\t') {
            // "comm pid [cpu] time: period event: ..." (comm may be right-aligned with spaces).
            let head = line.trim_start();
            let comm = head.split_whitespace().next().unwrap_or("").to_string();
            // After the "time:" word come the period (when printed) and the event name.
            let words: Vec<&str> = head.split_whitespace().collect();
            let t = words
                .iter()
                .position(|w| w.ends_with(':') && w[..w.len() - 1].contains('.'))
                .unwrap_or(0);
            let (period, event) = match words.get(t + 1).and_then(|w| w.parse::<u64>().ok()) {
                Some(p) => (p, words.get(t + 2)),
                None => (0, words.get(t + 1)),
            };
            let event = event.map_or("", |e| e.trim_end_matches(':')).to_string();
            out.push(ScriptSample {
                comm,
                event,
                period,
                frames: Vec::new(),
            });
        } else if let Some(s) = out.last_mut() {
            // "\t addr sym+0xoff (dso)"
            let t = line.trim();
            let mut parts = t.splitn(2, ' ');
            let _addr = parts.next();
            let rest = parts.next().unwrap_or("");
            let (sym, dso) = match rest.rfind(" (") {
                Some(i) => (&rest[..i], rest[i + 2..].trim_end_matches(')')),
                None => (rest, ""),
            };
            let sym = match sym.rfind("+0x") {
                Some(i) => &sym[..i],
                None => sym,
            };
            s.frames.push((sym.to_string(), dso.to_string()));
        }
    }
    out
}

/// Folded stacks (root first, "comm;f1;f2 count") of the user frames in `dso_filter` files.
pub fn fold_user(samples: &[ScriptSample], keep: impl Fn(&str) -> bool) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for s in samples {
        let frames: Vec<&str> = s
            .frames
            .iter()
            .rev()
            .filter(|(_, dso)| keep(dso))
            .map(|(sym, _)| sym.as_str())
            .collect();
        let key = std::iter::once(s.comm.as_str())
            .chain(frames)
            .collect::<Vec<_>>()
            .join(";");
        *m.entry(key).or_insert(0) += 1;
    }
    m
}

pub fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The summary line: "[ record: N samples, ... ]" (not a rotated file's "[ record: Dump
/// ...]").
pub fn summary_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("[ record:") && !l.starts_with("[ record: Dump "))
        .unwrap_or_else(|| panic!("no summary in {stderr}"))
}

/// The summary line's numbers: (samples, lost), from
/// "[ record: N samples, N off-CPU events, N run-queue waits, N wakeups, N I/O events, N major
/// faults, N lost, ... ]".
pub fn summary_counts(stderr: &str) -> (u64, u64) {
    let line = summary_line(stderr);
    let count_before = |word: &str| -> u64 {
        let words: Vec<&str> = line.split_whitespace().collect();
        let i = words
            .iter()
            .position(|w| w.trim_end_matches(',') == word)
            .unwrap_or_else(|| panic!("no {word} in {line}"));
        words[i - 1].parse().unwrap()
    };
    (count_before("samples"), count_before("lost"))
}

/// `analyze ARGS -i FILE`, with the analyze binary built beside record.
pub fn analyze(args: &[&str], file: &Path) -> Output {
    let analyze = Path::new(env!("CARGO_BIN_EXE_record")).with_file_name("analyze");
    Command::new(&analyze)
        .args(args)
        .arg("-i")
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (build the analyze binary)", analyze.display()))
}

/// `analyze report --folded ARGS -i FILE`, as (stack, weight) pairs.
pub fn analyze_folded(file: &Path, args: &[&str]) -> BTreeMap<String, u64> {
    let out = analyze(&[&["report", "--folded"], args].concat(), file);
    assert!(
        out.status.success(),
        "analyze report --folded {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}
