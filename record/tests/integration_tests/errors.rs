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

#[test]
fn a_full_filesystem_stops_recording_with_every_record_that_fit() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    // 6 MiB: the file grows in 4 MiB steps until one does not fit. 3 MiB: not even the
    // first 4 MiB step fits (it left no file at all, exit 255). 1 MiB and 256 KiB: less
    // than the 1 MiB kept for the features (it left the header alone, 0 samples, while the
    // summary said 29).
    for size in ["6m", "3m", "1m", "256k"] {
        full_filesystem(size);
    }
}

fn full_filesystem(size: &str) {
    let dir = TempDir::new(&format!("fulldisk{size}"));
    let small = dir.path("small");
    std::fs::create_dir(&small).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "bpfperf-full"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(st.success(), "mount a small tmpfs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(small.clone());
    let file = small.join("full.data");
    // DWARF stack copies of a busy program fill 6 MB in well under its 6 seconds (copies:
    // stacks unwound in the kernel would take a tenth of the room; a busy machine slows
    // start-up and the filling, hence the long run).
    let busy = fixture("busy-nofp");
    let out = record(
        &["--no-kernel-unwind", "-o", file.to_str().unwrap()],
        &[busy.to_str().unwrap(), "6", "2"],
    );
    let stderr = stderr_of(&out);
    // docs/status.md's reliability section: the device named, exit status 1.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{size}: {:?}\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains("no space left on bpfperf-full (tmpfs at ")
            && stderr.contains("holds every record that fit"),
        "{size}: {stderr}"
    );
    // "[ record: ... 0 lost, 1.23 s, ..." (the workload, left running, holds the pipes
    // open until it ends: record's own account says when it stopped).
    let seconds: f64 = stderr
        .split(" lost, ")
        .nth(1)
        .and_then(|s| s.split(" s,").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        seconds < 5.8,
        "{size}: recording stopped when the disk filled, not with the workload: {seconds} s"
    );
    // The file is whole: perf and analyze read the records that fit, and perf counts the
    // samples that did not in LOST records; the summary claims what the file holds.
    let out = Command::new("perf")
        .args(["script", "-F", "event", "-i"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{size}: {}", stderr_of(&out));
    let script = String::from_utf8_lossy(&out.stdout);
    let samples = script.lines().filter(|l| l.contains("cpu-clock")).count() as u64;
    let (claimed, lost) = summary_counts(&stderr);
    assert!(samples > 0, "{size}: {samples} samples in the file");
    assert_eq!(claimed, samples, "{size}: the summary's samples\n{stderr}");
    assert!(
        lost > 0 && stderr.contains(" samples that did not fit in the file"),
        "{size}: the samples that did not fit are counted lost\n{stderr}"
    );
    let out = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(&file)
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&out.stdout);
    let lost_records: u64 = stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("LOST events:"))
        .and_then(|n| n.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{size}: no LOST events in perf's stats:\n{stats}"));
    assert!(lost_records > 0, "{size}: {stats}");
    let folded = analyze_folded(&file, &[]);
    assert!(
        folded.keys().any(|k| k.contains("spin_inner")),
        "{size}: {folded:?}"
    );
    eprintln!(
        "{size}: {} bytes, {samples} samples",
        std::fs::metadata(&file).unwrap().len()
    );
}

/// When record exits, it is done with the file and its file system: `umount` right after it
/// succeeds, even where the disk filled and the workload keeps running (a user's report: 2
/// of 4 tries said "target is busy"; not seen here in 40, so this asserts it every run).
#[test]
fn the_file_system_is_free_when_record_exits() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("umount");
    let small = dir.path("small");
    std::fs::create_dir(&small).unwrap();
    let busy = fixture("busy-nofp");
    for round in 0..5 {
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "bpfperf-umount"])
            .arg(&small)
            .status()
            .unwrap();
        assert!(st.success(), "mount a small tmpfs");
        let file = small.join("full.data");
        // Stack copies fill 1 MiB in half a second; the workload runs on for a second.
        let out = record(
            &["--no-kernel-unwind", "-o", file.to_str().unwrap()],
            &[busy.to_str().unwrap(), "1", "2"],
        );
        let umount = Command::new("umount").arg(&small).output().unwrap();
        if !umount.status.success() {
            let holders = Command::new("fuser")
                .arg("-vm")
                .arg(&small)
                .output()
                .unwrap();
            let _ = Command::new("umount").arg("-l").arg(&small).status();
            panic!(
                "round {round}: umount right after record: {}\nholders: {}{}\nrecord said: {}",
                String::from_utf8_lossy(&umount.stderr),
                String::from_utf8_lossy(&holders.stdout),
                String::from_utf8_lossy(&holders.stderr),
                stderr_of(&out)
            );
        }
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    }
}
