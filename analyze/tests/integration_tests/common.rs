//! Helpers shared by analyze's integration tests: fixtures, perf, temp dirs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A fixture program, built once (see fixtures/build.sh).
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

/// perf.data files from other machines (`../shared/fixtures/elsewhere`, beside the checkout:
/// not in the repository). Under CI they must be there; elsewhere (a clone with nothing beside
/// it) a test that needs them is skipped, with one line saying so.
pub fn elsewhere() -> Option<PathBuf> {
    let dir = root().parent().unwrap().join("shared/fixtures/elsewhere");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing (perf.data files from other machines)",
        dir.display()
    );
    eprintln!(
        "skipping: {} is missing (perf.data files from other machines, beside the checkout)",
        dir.display()
    );
    None
}

/// perf must be usable; under CI its absence fails the test, elsewhere the test is skipped.
pub fn perf_ok() -> bool {
    let ok = Command::new("perf")
        .args(["record", "-q", "-o", "/dev/null", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "perf record must work under CI"
        );
        eprintln!("skipping: perf cannot record here");
    }
    ok
}

/// Mounts tracefs where perf and the tests read tracepoints' formats (a new machine has it
/// unmounted; mounting it again fails harmlessly).
pub fn mount_tracefs() {
    let _ = Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .stderr(Stdio::null())
        .status();
}

/// Whether a tool a test needs is here (`ok`); under CI its absence fails the test, elsewhere
/// the test is skipped with one line saying so.
pub fn have(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} must be here under CI"
        );
        eprintln!("skipping: no {what}");
    }
    ok
}

/// Runs analyze with `args`; the environment's debuginfod servers are not asked (tests that
/// want one say so with [`analyze_env`]).
pub fn analyze(args: &[&str]) -> std::process::Output {
    analyze_env(args, &[])
}

/// Runs analyze with `args` and the environment variables `env`.
pub fn analyze_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// A directory removed when dropped.
pub struct Tmp(pub PathBuf);
impl Tmp {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("bpfperf-analyze-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
}
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Records `program args` with perf into `file`.
pub fn perf_record(file: &Path, perf_args: &[&str], program: &Path, args: &[&str]) {
    let st = Command::new("perf")
        .arg("record")
        .arg("-q")
        .args(perf_args)
        .arg("-o")
        .arg(file)
        .arg("--")
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "perf record {perf_args:?} failed");
}

/// Records busy-nofp's threads with `perf record --call-graph dwarf` into `file` with a
/// build-id list that leaves libc out, as most such recordings do (perf lists only the files
/// its samples' own addresses hit; libc is met in unwound call chains, `start_thread`).
pub fn perf_record_libc_unlisted(file: &Path) {
    // No build id at all (-B): libc is unlisted by construction (perf lists a file's only when
    // a sample's own address hits it, which a loaded machine made happen three times in a row).
    let busy = fixture("busy-nofp");
    perf_record(
        file,
        &["-F", "999", "--call-graph", "dwarf", "-B"],
        &busy,
        &["0.5", "1"],
    );
    assert!(!libc_listed(file), "perf record -B listed libc");
}

/// `record`, built beside analyze by the workspace build (scripts/test builds every target).
pub fn record_bin() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_analyze")).with_file_name("record")
}

/// Records `program args` with `record` into `file`; what record said on stderr.
pub fn record_ours(file: &Path, record_args: &[&str], program: &Path, args: &[&str]) -> String {
    record_ours_env(file, record_args, program, args, &[])
}

/// [`record_ours`] with the environment variables `env`.
pub fn record_ours_env(
    file: &Path,
    record_args: &[&str],
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> String {
    let out = Command::new(record_bin())
        .envs(env.iter().copied())
        .args(record_args)
        .arg("-o")
        .arg(file)
        .arg("--")
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record {record_args:?} {}: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether both perf and record (BPF, as root) can record here; under CI they must.
pub fn can_record() -> bool {
    if !perf_ok() {
        return false;
    }
    // SAFETY: no preconditions.
    let root = unsafe { geteuid() } == 0;
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    let bin = record_bin().exists();
    if root && btf && bin {
        return true;
    }
    let why = format!(
        "root: {root}, BTF: {btf}, {}: {bin}",
        record_bin().display()
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "these tests need root, BTF and the record binary under CI ({why})"
    );
    eprintln!("skipping: {why}");
    false
}

extern "C" {
    fn geteuid() -> u32;
}

/// Whether libc is in `file`'s build-id list (perf lists only the files its samples' own
/// addresses hit).
pub fn libc_listed(file: &Path) -> bool {
    let out = Command::new("perf")
        .args(["buildid-list", "-i"])
        .arg(file)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    // (Without a build-id list, perf prints the files hit with a blank id: not listed.)
    String::from_utf8_lossy(&out.stdout).lines().any(|l| {
        let mut w = l.split_whitespace();
        let id = w.next().unwrap_or("");
        l.contains("libc.so.6") && id.len() >= 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
    })
}
