//! Page faults that waited: a program that maps a file dropped from the page cache and
//! touches every page (readahead off) must show one fault-time sample per major fault the
//! kernel counted for it, with the time under the touching function, in both call-graph
//! modes; perf reads the event; analyze cache counts the pages read in as misses.

use crate::common::*;

fn check_faults(name: &str, mode: &str) {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("faults");
    let file = dir.path(&format!("{name}.data"));
    // On a disk-backed filesystem: a tmpfs page never has to be read.
    let scratch =
        std::path::Path::new("/var/tmp").join(format!("bpfperf-faulter-{}", std::process::id()));
    // Every default event, and cachestat (named: it is not among them).
    let events = "cpu-clock,offcpu,wakeup,runq,fault,io,cache";
    let out = record(
        &[
            "-o",
            file.to_str().unwrap(),
            "--call-graph",
            mode,
            "-e",
            events,
        ],
        &[
            fixture(name).to_str().unwrap(),
            scratch.to_str().unwrap(),
            "64",
        ],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let majflt: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("majflt "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no majflt line: {stdout}"));
    assert!(
        majflt > 10_000,
        "64 MiB with readahead off: a major fault per page, got {majflt}"
    );

    let stacks = analyze_folded(&file, &["--event", "fault"]);
    let total: u64 = stacks.values().sum();
    let touching: u64 = stacks
        .iter()
        .filter(|(k, _)| k.contains("touch_pages"))
        .map(|(_, v)| *v)
        .sum();
    // One sample per fault that waited: count them in perf's view of the file.
    let script = perf_script_clean(&file);
    let faults = parse_script(&script)
        .iter()
        .filter(|s| s.event == "fault-time")
        .count() as u64;
    let ratio = faults as f64 / majflt as f64;
    eprintln!(
        "{name} ({mode}): {faults} fault-time samples, getrusage {majflt} major faults (ratio {ratio:.3}); {:.1} ms waited, {:.1}% under touch_pages",
        total as f64 / 1e6,
        100.0 * touching as f64 / total.max(1) as f64
    );
    assert!(
        (0.9..=1.1).contains(&ratio),
        "{faults} fault-time samples vs {majflt} major faults"
    );

    // analyze cache: the pages read in are its misses (cachestat's count, in the kernel).
    let out = analyze(&["cache"], &file);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let misses: u64 = text
        .lines()
        .next()
        .and_then(|l| l.split(", ").find_map(|part| part.strip_suffix(" misses")))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no misses in analyze cache:\n{text}"));
    eprintln!("{name} ({mode}): analyze cache: {misses} misses");
    assert!(
        (0.9..=1.1).contains(&(misses as f64 / majflt as f64)),
        "{misses} page-cache misses vs {majflt} major faults:\n{text}"
    );
    assert!(text.contains(name), "the process is named: {text}");
    assert!(
        touching as f64 >= 0.8 * total as f64,
        "{touching} of {total} ns under touch_pages"
    );
}

#[test]
fn major_faults_frame_pointers() {
    check_faults("faulter-fp", "fp");
}

#[test]
fn major_faults_dwarf() {
    check_faults("faulter-nofp", "dwarf");
}
