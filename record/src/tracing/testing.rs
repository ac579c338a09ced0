//! Tests only: what the modules' tests share (scratch directories, and skipping a test whose
//! system file is missing, unless CI is set).

use std::path::PathBuf;

/// Skips a test that reads this system when `what` is missing here; fails under CI.
pub fn skip_or_fail(what: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} (CI is set: this must not be missing)"
    );
    eprintln!("skipped: {what}");
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bpfperf-tracing-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
