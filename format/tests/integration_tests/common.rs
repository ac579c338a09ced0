//! Shared helpers: temp dirs, the fixture programs, perf as the oracle.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "bpfperf-format-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
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

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Builds the fixture programs once and returns the directory holding them.
pub fn fixtures() -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let root = workspace_root();
        let out = root.join("target").join("fixtures");
        let st = Command::new("bash")
            .arg(root.join("fixtures/build.sh"))
            .arg(&out)
            .output()
            .expect("run fixtures/build.sh");
        assert!(
            st.status.success(),
            "fixtures/build.sh failed: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        out
    })
    .clone()
}

/// Whether perf can be used; under CI its absence is a failure, elsewhere a skip.
pub fn perf_available() -> bool {
    let ok = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("perf is required under CI (apt-get install linux-perf)");
        }
        eprintln!("skipping: perf not installed");
    }
    ok
}

pub fn perf(args: &[&str]) -> Output {
    Command::new("perf").args(args).output().expect("run perf")
}

/// `perf script` on `file`: returns stdout, and asserts it ran cleanly with nothing on stderr.
pub fn perf_script_clean(file: &Path, extra: &[&str]) -> String {
    let mut args = vec!["script", "-i", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = perf(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "perf script failed on {}: {stderr}",
        file.display()
    );
    assert!(
        stderr.trim().is_empty(),
        "perf script warned on {}:\n{stderr}",
        file.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command and returns its stdout as text.
pub fn stdout_of(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Counts records of the file by kind through our reader: (samples per attr, other records).
pub fn count_with_reader(path: &Path) -> (Vec<u64>, u64) {
    use format::linux_perf_data::PerfFileRecord;
    let mut r = format::PerfFileReader::open(path).unwrap();
    let mut per_attr = vec![0; r.perf_file().event_attributes().len()];
    let mut other = 0;
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            PerfFileRecord::EventRecord { attr_index, record } if record.record_type.0 == 9 => {
                per_attr[attr_index] += 1
            }
            _ => other += 1,
        }
    }
    (per_attr, other)
}
