//! Nothing recorded is lost silently: drops are counted in LOST records and the summary.

use crate::common::*;

#[test]
fn drops_under_stress_are_counted() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("loss");
    let file = dir.path("stress.data");
    let busy = fixture("busy-fp");
    // 50 kHz on every CPU with deep stacks: far more than default, to provoke drops if any.
    let out = record(
        &["-F", "50000", "-o", file.to_str().unwrap()],
        &[busy.to_str().unwrap(), "2", "4"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let (samples, lost) = summary_counts(&stderr_of(&out));
    // The file holds exactly what the summary says: the samples, and the lost total in LOST
    // records, which perf notices too.
    let out = std::process::Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cpu_samples = parse_script(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .filter(|s| s.event == "cpu-clock")
        .count();
    assert_eq!(
        cpu_samples as u64, samples,
        "on-CPU samples in the file = the summary's"
    );
    if lost > 0 {
        assert!(
            stderr.contains("lost"),
            "perf should see the LOST records: {stderr}"
        );
    } else {
        assert!(stderr.trim().is_empty(), "{stderr}");
    }
    assert_info_reports_lost(&file, lost);
    eprintln!("stress: {samples} samples, {lost} lost");
}

#[test]
fn a_small_ring_buffer_loses_samples_and_says_how_many() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("loss-small");
    let file = dir.path("small.data");
    let busy = fixture("busy-fp");
    // -m 1: one page holds one sample, so the reader cannot keep up at 5 kHz on every CPU.
    let out = record(
        &[
            "-m",
            "1",
            "-F",
            "5000",
            "--call-graph",
            "fp",
            "--no-off-cpu",
            "--no-io",
            "-o",
            file.to_str().unwrap(),
        ],
        &[busy.to_str().unwrap(), "1", "2"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let (samples, lost) = summary_counts(&stderr_of(&out));
    eprintln!("-m 1: {samples} samples, {lost} lost");
    assert!(lost > 0, "a one-page ring buffer at 5 kHz loses samples");
    assert_info_reports_lost(&file, lost);
    let out = std::process::Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(&file)
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&out.stdout);
    assert!(
        stats
            .lines()
            .any(|l| l.trim_start().starts_with("LOST events:")),
        "perf counts LOST records:\n{stats}"
    );
}

/// A scheduler storm at 10 kHz with every event on: the reader is short of CPU and the ring
/// stays full. It takes the ring a batch at a time, writing each before the next, so its own
/// memory stays small (it held 390 MB of events at once when it drained the ring whole), and
/// what it could not take is counted.
#[test]
fn a_scheduler_storm_keeps_records_memory_bounded() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("storm");
    let file = dir.path("storm.data");
    let storm =
        "timeout -s INT 10 perf bench sched messaging -p -g 10 -l 1000000 >/dev/null 2>&1; true";
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_record"))
        .args([
            "-F",
            "10000",
            "-o",
            file.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            storm,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak_anon_kib = 0u64;
    while let Ok(text) = std::fs::read_to_string(&status) {
        let anon = text
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
        let Some(anon) = anon else { break }; // a zombie: it has exited
        peak_anon_kib = peak_anon_kib.max(anon);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let (samples, lost) = summary_counts(&stderr_of(&out));
    eprintln!(
        "storm: {samples} samples, {lost} lost, record's anonymous memory peaked at {} MiB",
        peak_anon_kib >> 10
    );
    assert!(
        peak_anon_kib < 64 << 10,
        "record's anonymous memory peaked at {} MiB",
        peak_anon_kib >> 10
    );
    assert_info_reports_lost(&file, lost);
}

/// `analyze info` on `file` reports `lost` events: the file's LOST records add up to the
/// summary's count.
fn assert_info_reports_lost(file: &std::path::Path, lost: u64) {
    let info = analyze(&["info"], file);
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        text.contains(&format!("lost events:   {lost} ")),
        "analyze info reports the summary's lost count {lost}:\n{text}"
    );
}

/// Block I/O lost in a small ring buffer is counted against the block I/O event (the LOST
/// records name its id): `analyze io` says how many were lost beside the requests it shows,
/// and perf reads the file.
#[test]
fn lost_block_io_is_counted_against_it_and_analyze_io_says_so() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("loss-io");
    let file = dir.path("io.data");
    let target = dir.path("written");
    // -m 1: one page holds one block I/O event; 64 MiB leave in a burst of 4 MiB requests.
    let command = format!(
        "{} {} 64 && sync",
        fixture("writer-fp").display(),
        target.display()
    );
    let out = record(
        &["-m", "1", "-e", "io", "-o", file.to_str().unwrap()],
        &["sh", "-c", &command],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let (_, lost) = summary_counts(&stderr_of(&out));
    let io = analyze(&["io"], &file);
    let text = String::from_utf8_lossy(&io.stdout);
    let io_lost: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("lost while recording: "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    eprintln!("-m 1 -e io: {lost} lost, {io_lost} of them block I/O");
    assert!(
        io_lost > 0,
        "a one-page ring loses block I/O events:\n{text}"
    );
    // Only I/O is recorded: what else can be lost is a process's exit.
    assert!(
        io_lost <= lost && lost - io_lost <= 3,
        "{io_lost} of {lost}:\n{text}"
    );
    // record says so too.
    let said = stderr_of(&out);
    assert!(
        said.contains(&format!("record: lost {io_lost} block I/O events")),
        "{said}"
    );
    assert_info_reports_lost(&file, lost);
    let perf = std::process::Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        perf.status.success(),
        "{}",
        String::from_utf8_lossy(&perf.stderr)
    );
}
