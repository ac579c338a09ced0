//! Failures: one clear line on stderr, exit status 255, and the workload never runs unrecorded.

use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::common::*;

#[test]
fn a_failed_start_never_runs_the_workload() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("failstart");
    let marker = dir.path("ran");
    let out = record(
        &["-o", "/nonexistent-dir/x.data"],
        &["sh", "-c", &format!("touch {}", marker.display())],
    );
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("/nonexistent-dir/x.data"), "{stderr}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!marker.exists(), "the workload ran although record failed");
}

#[test]
fn without_privileges_one_line_says_what_to_do() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("noroot");
    // Writable by nobody, so that a workload that ran would leave its marker.
    std::fs::set_permissions(&dir.0, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let marker = dir.path("ran");
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-o", "/tmp/bpfperf-noroot.data", "--"])
        .args(["sh", "-c", &format!("touch {}", marker.display())])
        .uid(65534)
        .gid(65534)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            eprintln!("skipping: nobody cannot execute the record binary here ({e})");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("root"), "{stderr}");
    assert!(!marker.exists(), "the workload ran although record failed");
}
