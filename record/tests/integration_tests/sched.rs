//! Run-queue latency: four CPU-bound threads on two CPUs wait for a CPU; what record writes as
//! runq-time must match what the kernel counted (schedstat's run_delay), under the spinning
//! function, in both call-graph modes.

use std::collections::BTreeMap;

use crate::common::*;

/// Records `crowd` (4 threads, 2 s) and returns the recording's path with the threads'
/// run_delay (ns) as they printed it.
fn record_crowd(dir: &TempDir, name: &str, mode: &str) -> (std::path::PathBuf, BTreeMap<i32, u64>) {
    let file = dir.path(&format!("{name}.data"));
    let out = record(
        &["-o", file.to_str().unwrap(), "--call-graph", mode],
        &[fixture(name).to_str().unwrap(), "2", "4"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let delays: BTreeMap<i32, u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("run_delay ")?.split_whitespace();
            Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect();
    assert_eq!(
        delays.len(),
        4,
        "four threads report: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    (file, delays)
}

fn check_runq(name: &str, mode: &str) {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("runq");
    let (file, delays) = record_crowd(&dir, name, mode);
    let run_delay: u64 = delays.values().sum();
    // Only the four threads' waits (the main thread's are in execve and join). With frame
    // pointers the leaf crowd_spin keeps none, so its caller is missing there, as in perf.
    let stacks = analyze_folded(&file, &["--event", "runq"]);
    let of_threads = |keep: &dyn Fn(&str) -> bool| -> u64 {
        stacks
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(_, v)| *v)
            .sum()
    };
    let total = of_threads(&|k| k.contains("crowd_thread") || k.contains("crowd_spin"));
    let spinning = of_threads(&|k| k.contains("crowd_spin"));
    let ratio = total as f64 / run_delay as f64;
    eprintln!(
        "{name} ({mode}): runq-time of the threads {total} ns, schedstat run_delay {run_delay} ns (ratio {ratio:.3}), under crowd_spin {spinning} ns ({:.1}%)",
        100.0 * spinning as f64 / total.max(1) as f64
    );
    assert!(
        run_delay > 500_000_000,
        "4 threads on 2 CPUs for 2 s wait seconds: {run_delay} ns"
    );
    assert!(
        (0.75..=1.25).contains(&ratio),
        "runq-time {total} ns vs run_delay {run_delay} ns"
    );
    assert!(
        spinning as f64 >= 0.8 * total as f64,
        "{spinning} of {total} ns under crowd_spin"
    );

    // perf reads the event by name.
    let script = perf_script_clean(&file);
    assert!(
        parse_script(&script)
            .iter()
            .any(|s| s.event == "runq-time" && s.period > 0),
        "perf script shows runq-time samples"
    );

    // analyze sched: the process's histogram and each of the four threads, by name.
    let out = analyze(&["sched"], &file);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("run-queue latency: "), "{text}");
    assert!(
        text.contains(&format!("[{name}]: ")),
        "the process is named: {text}"
    );
    let table = &text[text.find("threads that waited most").expect(&text)..];
    for tid in delays.keys() {
        assert!(
            table
                .lines()
                .any(|l| l.contains(name) && l.split_whitespace().nth(2) == Some(&tid.to_string())),
            "thread {tid} listed:\n{table}"
        );
    }
}

#[test]
fn runq_time_matches_schedstat_frame_pointers() {
    check_runq("crowd-fp", "fp");
}

#[test]
fn runq_time_matches_schedstat_dwarf() {
    check_runq("crowd-nofp", "dwarf");
}
