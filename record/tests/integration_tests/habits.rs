//! perf's habits at the prompt: `record CMD ARGS` without `--`, `-q`, `--duration`.

use std::process::Command;

use crate::common::*;

#[test]
fn command_without_dashes_and_quiet() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("habits");
    let file = dir.path("busy.data");
    let busy = fixture("busy-fp");
    // As `perf record ls -l`: the command's own options stay its own (`1 2` here, and an
    // -o after the command would be busy's).
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-o", file.to_str().unwrap(), "--call-graph", "fp"])
        .args([busy.to_str().unwrap(), "1", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let (samples, _) = summary_counts(&stderr_of(&out));
    assert!(samples > 500, "busy-fp 1 2 ran and was sampled: {samples}");
    let folded = analyze_folded(&file, &[]);
    assert!(
        folded.keys().any(|k| k.contains("spin_inner")),
        "{folded:?}"
    );

    // -q: nothing on stderr (nor stdout: the workload prints nothing).
    let quiet = dir.path("quiet.data");
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-q", "-o", quiet.to_str().unwrap(), "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        out.stderr.is_empty() && out.stdout.is_empty(),
        "{}",
        stderr_of(&out)
    );
    assert!(quiet.exists(), "the recording is written");
}

#[test]
fn duration_stops_the_recording() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("duration");
    // Alone: every process for that long, as `-a -- sleep 1`.
    let file = dir.path("all.data");
    let start = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["--duration", "1", "-o", file.to_str().unwrap()])
        .output()
        .unwrap();
    let took = start.elapsed().as_secs_f64();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        (0.9..5.0).contains(&took),
        "record --duration 1 took {took:.2} s"
    );
    let info = analyze(&["info"], &file);
    let text = String::from_utf8_lossy(&info.stdout);
    let span: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("time span:"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no time span:\n{text}"));
    assert!((0.5..2.0).contains(&span), "a second recorded: {span} s");

    // With a workload that runs longer: the recording stops, the workload goes on.
    // (Its output into a file: the workload, still running, holds record's stderr open.)
    let file = dir.path("sleep.data");
    let err = dir.path("record.err");
    let start = std::time::Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_record"))
        .args([
            "--duration",
            "0.5",
            "-o",
            file.to_str().unwrap(),
            "sleep",
            "30",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .status()
        .unwrap();
    let took = start.elapsed().as_secs_f64();
    let _ = Command::new("pkill")
        .args(["-x", "-f", "sleep 30"])
        .status();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(status.success(), "{stderr}");
    assert!(
        took < 5.0,
        "stopped after 0.5 s, not after sleep 30: {took:.2} s"
    );
    assert!(stderr.contains("[ record:"), "{stderr}");
}
