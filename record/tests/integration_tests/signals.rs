//! Ctrl-C and kill: record stops cleanly, the workload gets the signal, the file is whole.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Starts `record ARGS -- CMD`, sends `sig` to record after `after`, returns its output.
fn record_then_signal(
    args: &[&str],
    cmd: &[&str],
    sig: i32,
    after: Duration,
) -> std::process::Output {
    let child = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(args)
        .arg("--")
        .args(cmd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    // SAFETY: signalling our own child.
    unsafe { kill(child.id() as i32, sig) };
    child.wait_with_output().unwrap()
}

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}
const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

#[test]
fn sigint_stops_the_workload_and_finishes_the_file() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("sigint");
    let file = dir.path("int.data");
    let busy = fixture("busy-fp");
    let started = Instant::now();
    let out = record_then_signal(
        &["--call-graph", "fp", "-o", file.to_str().unwrap()],
        &[busy.to_str().unwrap(), "20", "1"],
        SIGINT,
        Duration::from_millis(1500),
    );
    let stderr = stderr_of(&out);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "record stopped with its workload, long before the workload's 20 s"
    );
    // The workload died of the forwarded SIGINT: 128 + 2, as a shell reports it.
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let (samples, lost) = summary_counts(&stderr);
    assert!(samples > 500, "{samples} samples in 1.5 s: {stderr}");
    assert_eq!(lost, 0);
    let text = perf_script_clean(&file);
    let seen = parse_script(&text)
        .iter()
        .filter(|s| s.event == "cpu-clock")
        .count() as u64;
    assert_eq!(seen, samples, "perf sees every sample of the summary");
}

#[test]
fn sigterm_ends_a_system_wide_recording() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("sigterm");
    let file = dir.path("all.data");
    let out = record_then_signal(
        &["-a", "--call-graph", "fp", "-o", file.to_str().unwrap()],
        &[],
        SIGTERM,
        Duration::from_millis(1000),
    );
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("[ record: "), "a summary: {stderr}");
    perf_script_clean(&file);
}

/// Runs `record --call-graph CALL_GRAPH -o FILE -- PROGRAM 20 1` and kills it, and the
/// workload it leaves behind, with SIGKILL after `delay`.
fn record_then_kill(file: &Path, call_graph: &str, program: &Path, delay: Duration) {
    const SIGKILL: i32 = 9;
    let child = Command::new(env!("CARGO_BIN_EXE_record"))
        .args([
            "--call-graph",
            call_graph,
            "-o",
            file.to_str().unwrap(),
            "--",
        ])
        .args([program.to_str().unwrap(), "20", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let workload = String::from_utf8(
        Command::new("pgrep")
            .args(["-P", &child.id().to_string()])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    // SAFETY: signalling our own child, then the workload it left behind.
    unsafe { kill(child.id() as i32, SIGKILL) };
    for pid in workload.split_whitespace() {
        unsafe { kill(pid.parse().unwrap(), SIGKILL) };
    }
    let _ = child.wait_with_output();
}

/// Killed outright at several points (while starting, in the first rounds, well into the
/// recording; frame pointers and stack copies): perf and analyze still open the file, with
/// what was finished by then.
#[test]
fn sigkill_at_any_point_leaves_a_file_perf_and_analyze_open() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("sigkill-points");
    let busy = fixture("busy-nofp");
    for (n, (delay_ms, call_graph)) in [(30, "fp"), (150, "dwarf"), (400, "fp"), (900, "dwarf")]
        .into_iter()
        .enumerate()
    {
        let file = dir.path(&format!("killed-{n}.data"));
        record_then_kill(&file, call_graph, &busy, Duration::from_millis(delay_ms));
        if !file.exists() {
            continue; // killed before it created the file
        }
        let perf = Command::new("perf")
            .args(["script", "-i"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            perf.status.success(),
            "killed after {delay_ms} ms ({call_graph}): perf script: {}",
            String::from_utf8_lossy(&perf.stderr)
        );
        let out = analyze(&["info"], &file);
        assert!(
            out.status.success(),
            "killed after {delay_ms} ms ({call_graph}): analyze info: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Killed outright (no chance to finish): the file still holds every finished round, and
/// perf reads it although block I/O, a tracepoint-style event, has no TRACING_DATA yet.
#[test]
fn sigkill_leaves_a_file_perf_and_analyze_read() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("sigkill");
    let file = dir.path("killed.data");
    let busy = fixture("busy-fp");
    // Off-CPU and block I/O are on by default.
    record_then_kill(&file, "fp", &busy, Duration::from_millis(1500));

    let text = perf_script_clean(&file);
    // Without EVENT_DESC (a feature, written at the end) perf names it "cpu-clock:HG".
    let samples = parse_script(&text)
        .iter()
        .filter(|s| s.event.starts_with("cpu-clock"))
        .count();
    assert!(samples > 500, "{samples} cpu-clock samples before the kill");
    let folded = analyze_folded(&file, &[]);
    assert!(
        folded.keys().any(|k| k.contains("spin_inner")),
        "analyze reads the killed file: {folded:?}"
    );
}
