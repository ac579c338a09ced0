//! Heatmaps of real recordings: their cells count every event, and each cell's `--time`
//! range, given back to report, selects exactly what the cell holds.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;

/// (count, weight, --time range) of each cell of a heatmap SVG.
fn cells(svg: &str) -> Vec<(u64, u64, String)> {
    let attr = |line: &str, name: &str| -> String {
        let at = line.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        line[at..at + line[at..].find('"').unwrap()].to_string()
    };
    svg.lines()
        .filter(|l| l.starts_with("<rect class=\"c\""))
        .map(|l| {
            (
                attr(l, "data-count").parse().unwrap(),
                attr(l, "data-weight").parse().unwrap(),
                attr(l, "data-time"),
            )
        })
        .collect()
}

/// The samples of `event` in the file, as analyze info counts them.
fn samples_of(file: &Path, event: &str) -> u64 {
    let out = analyze(&["info"], file);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.first() == Some(&event) && w.get(1) == Some(&"samples"))
                .then(|| w[2].parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no {event} in analyze info:\n{text}"))
}

fn heatmap(file: &Path, event: &str, dir: &TempDir) -> Vec<(u64, u64, String)> {
    let svg = dir.path(&format!("{}.svg", event.replace(':', "_")));
    let out = analyze(
        &["heatmap", "--event", event, "-o", svg.to_str().unwrap()],
        file,
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("<svg") && text.contains("onmouseover"),
        "an interactive SVG"
    );
    cells(&text)
}

/// Sum of `analyze report --folded --event EVENT --time RANGE`.
fn report_total(file: &Path, event: &str, range: &str) -> u64 {
    analyze_folded(file, &["--event", event, "--time", range])
        .values()
        .sum()
}

fn check(file: &Path, event: &str, name: &str, dir: &TempDir) {
    let cells = heatmap(file, event, dir);
    let counted: u64 = cells.iter().map(|c| c.0).sum();
    let recorded = samples_of(file, name);
    eprintln!(
        "{event}: {} cells, {counted} events counted, {recorded} recorded",
        cells.len()
    );
    assert!(recorded > 0, "{name} recorded");
    assert_eq!(
        counted, recorded,
        "the {event} heatmap's cells hold every event"
    );
    let busiest = cells.iter().max_by_key(|c| (c.0, c.2.clone())).unwrap();
    let total = report_total(file, event, &busiest.2);
    if event == "cpu" {
        // One cell, one range: report counts the cell's samples.
        assert_eq!(total, busiest.0, "report --time {} vs the cell", busiest.2);
    } else {
        // Latency maps: the range is the cell's column; report sums the latencies there.
        let column: u64 = cells.iter().filter(|c| c.2 == busiest.2).map(|c| c.1).sum();
        assert_eq!(
            total, column,
            "report --time {} vs the column's cells",
            busiest.2
        );
    }
}

#[test]
fn heatmap_cells_hold_every_event_and_give_their_time_range() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("heatmap");
    // Sleeps, a CPU burn and fsynced files: off-CPU, cpu and block I/O.
    let sleeper = dir.path("sleeper.data");
    let io_dir = std::env::var("TMPDIR").unwrap_or_else(|_| "/var/tmp".into());
    let out = record(
        &["-o", sleeper.to_str().unwrap(), "--call-graph", "fp"],
        &[
            fixture("sleeper-fp").to_str().unwrap(),
            "2",
            "20",
            "5000",
            "6",
            &io_dir,
        ],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    // Threads waiting for a CPU: run-queue time.
    let crowd = dir.path("crowd.data");
    let out = record(
        &["-o", crowd.to_str().unwrap()],
        &[fixture("crowd-nofp").to_str().unwrap(), "1", "4"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));

    let names: BTreeMap<&str, &str> = [
        ("cpu", "cpu-clock"),
        ("offcpu", "offcpu-time"),
        ("io", "bpfperf:block_io"),
        ("runq", "runq-time"),
    ]
    .into();
    for event in ["cpu", "offcpu", "io"] {
        check(&sleeper, event, names[event], &dir);
    }
    for event in ["cpu", "runq"] {
        check(&crowd, event, names[event], &dir);
    }
}
