//! --switch-output: a recording in several files, each whole and readable on its own, named
//! and kept as perf names and keeps them.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}
const SIGUSR2: i32 = 12;

/// The `[ record: Dump PATH: N samples, ... ]` lines: each file and its samples.
fn dumps(stderr: &str) -> Vec<(PathBuf, u64)> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("[ record: Dump "))
        .map(|l| {
            let (path, rest) = l.split_once(": ").unwrap();
            let samples = rest.split(' ').next().unwrap().parse().unwrap();
            (PathBuf::from(path), samples)
        })
        .collect()
}

/// The files in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// `OUTPUT.<timestamp>`, the timestamp perf's: 16 digits, YYYYMMDDHHMMSScc.
fn assert_named_after(file: &Path, output: &Path) {
    let name = file.file_name().unwrap().to_str().unwrap();
    let prefix = format!("{}.", output.file_name().unwrap().to_str().unwrap());
    let stamp = name
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{name}"));
    assert!(
        stamp.len() == 16 && stamp.bytes().all(|b| b.is_ascii_digit()),
        "{name}"
    );
}

/// Samples of busy-fp in perf script's reading of `file`: (cpu-clock samples, those whose
/// stack perf named in busy-fp's own functions).
fn perf_samples(file: &Path) -> (u64, u64) {
    let samples: Vec<ScriptSample> = parse_script(&perf_script_clean(file))
        .into_iter()
        .filter(|s| s.event == "cpu-clock")
        .collect();
    let named = samples
        .iter()
        .filter(|s| {
            s.frames.iter().any(|(sym, dso)| {
                dso.ends_with("busy-fp") && ["spin_inner", "hash_loop"].contains(&sym.as_str())
            })
        })
        .count();
    (samples.len() as u64, named as u64)
}

/// Three SIGUSR2 make four files; each opens in perf and analyze, resolves its stacks on its
/// own, and together they hold every sample of the summary.
#[test]
fn sigusr2_splits_a_recording_into_whole_files() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("switch-signal");
    let output = dir.path("perf.data");
    let busy = fixture("busy-fp");
    let child = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["--call-graph", "fp", "-F", "999", "--switch-output", "-o"])
        .arg(&output)
        .arg("--")
        .args([busy.to_str().unwrap(), "3", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The output appears once the probes are on, just before the workload is let go.
    let waiting = Instant::now();
    while !output.exists() {
        assert!(waiting.elapsed() < Duration::from_secs(30), "no output");
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(600));
        // SAFETY: signalling our own child.
        assert_eq!(unsafe { kill(child.id() as i32, SIGUSR2) }, 0);
    }
    let out = child.wait_with_output().unwrap();
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let (samples, lost) = summary_counts(&stderr);
    assert_eq!(lost, 0, "{stderr}");

    let dumped = dumps(&stderr);
    let files = files_in(&dir.0);
    assert_eq!(dumped.len(), 4, "{stderr}");
    assert_eq!(
        files,
        dumped.iter().map(|d| d.0.clone()).collect::<Vec<_>>(),
        "the dumped files, in order, and nothing else (no {}, no hidden next file)",
        output.display()
    );
    let summary = summary_line(&stderr);
    assert!(
        summary.ends_with(&format!("4 files, the last {} ]", files[3].display())),
        "{summary}"
    );
    let mut total = 0;
    for (file, dumped_samples) in &dumped {
        assert_named_after(file, &output);
        let meta = std::fs::metadata(file).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o600,
            "{}",
            file.display()
        );
        let (seen, named) = perf_samples(file);
        assert_eq!(
            seen,
            *dumped_samples,
            "perf sees what {} holds",
            file.display()
        );
        assert!(seen > 100, "{seen} samples in {}", file.display());
        // The process's mappings come again at the start of each file: perf names the
        // program's functions in every one of them, not only in the first.
        assert!(
            named as f64 > 0.9 * seen as f64,
            "{}: {named} of {seen} samples in busy-fp's functions",
            file.display()
        );
        let folded = analyze_folded(file, &[]);
        assert_eq!(
            folded.values().sum::<u64>(),
            seen,
            "analyze counts what perf counts in {}",
            file.display()
        );
        let in_busy: u64 = folded
            .iter()
            .filter(|(stack, _)| stack.contains("spin_inner") || stack.contains("hash_loop"))
            .map(|(_, n)| n)
            .sum();
        assert!(
            in_busy as f64 > 0.9 * seen as f64,
            "{}: analyze placed {in_busy} of {seen} samples in busy-fp's functions",
            file.display()
        );
        total += seen;
        eprintln!("{}: {seen} samples", file.display());
    }
    assert_eq!(total, samples, "the files hold every sample of the summary");
}

/// A size: files of about that size; with --switch-max-files 2, only the last two stay.
/// They are the invoking user's, as the unrotated output is.
#[test]
fn size_rotation_keeps_the_last_files() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("switch-size");
    let output = dir.path("p.data");
    let busy = fixture("busy-fp");
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["--call-graph", "fp", "-F", "999", "--switch-output=40K"])
        .args(["--switch-max-files", "2", "-o"])
        .arg(&output)
        .arg("--")
        .args([busy.to_str().unwrap(), "2", "1"])
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let (samples, _) = summary_counts(&stderr);
    let dumped = dumps(&stderr);
    assert!(
        dumped.len() >= 4,
        "2 s of samples in 40 KiB files: {stderr}"
    );
    assert_eq!(dumped.iter().map(|d| d.1).sum::<u64>(), samples, "{stderr}");
    let kept: Vec<PathBuf> = dumped[dumped.len() - 2..]
        .iter()
        .map(|d| d.0.clone())
        .collect();
    assert_eq!(files_in(&dir.0), kept, "only the last two files stay");
    let summary = summary_line(&stderr);
    assert!(
        summary.contains(&format!("{} files (2 kept), the last ", dumped.len())),
        "{summary}"
    );
    for (i, (file, dumped_samples)) in dumped[dumped.len() - 2..].iter().enumerate() {
        assert_named_after(file, &output);
        let meta = std::fs::metadata(file).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (65534, 65534),
            "{}",
            file.display()
        );
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // Switched once past the size (a round later at most); the last file ends with the
        // recording.
        if i == 0 {
            assert!(
                (40 << 10..80 << 10).contains(&meta.len()),
                "{}: {} bytes",
                file.display(),
                meta.len()
            );
        }
        // perf reads only its user's files (or root's).
        std::os::unix::fs::chown(file, Some(0), Some(0)).unwrap();
        let (seen, named) = perf_samples(file);
        assert_eq!(seen, *dumped_samples, "{}", file.display());
        assert!(named as f64 > 0.9 * seen as f64, "{named} of {seen}");
    }
}

/// A time: a file a second.
#[test]
fn time_rotation_switches_each_period() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("switch-time");
    let output = dir.path("perf.data");
    let busy = fixture("busy-fp");
    let out = record(
        &[
            "--call-graph",
            "fp",
            "--switch-output=1s",
            "-o",
            output.to_str().unwrap(),
        ],
        &[busy.to_str().unwrap(), "2.5", "1"],
    );
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let dumped = dumps(&stderr);
    // Two whole seconds and the rest (a third second when start-up is slow).
    assert!((3..=4).contains(&dumped.len()), "{stderr}");
    assert_eq!(files_in(&dir.0).len(), dumped.len());
    for (file, n) in &dumped[..2] {
        assert!(*n > 300, "{}: {n} samples in a second", file.display());
        assert_eq!(perf_samples(file).0, *n);
    }
}

/// Strict options: a size or time perf would misread is an error naming it.
#[test]
fn a_bad_switch_output_is_an_error_naming_it() {
    for (args, word) in [
        (&["--switch-output=100MB"][..], "100MB"),
        (&["--switch-output=10k"][..], "10k"),
        (&["--switch-output=0s"][..], "0s"),
        (&["--switch-max-files", "2"][..], "--switch-output"),
    ] {
        let out = record(args, &["true"]);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(word), "{args:?}: {stderr}");
    }
}
