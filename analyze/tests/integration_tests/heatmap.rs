//! Heatmaps are bounded by the file, not by the numbers in it: a sample with an absurd time
//! (a spliced or damaged file) is left out with a warning, and a recording longer than the
//! sub-second heatmap's hour of columns shows its first hour and says so.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use format::{
    attr_flag, event_type, sample_type as st, sw_event, EventAttr, Features, PerfFileWriter,
    Sample, SampleId, SideBand,
};

use crate::common::Tmp;

/// A cpu-clock recording of one thread whose samples are at `times` (ns).
fn write_recording(path: &Path, times: &[u64]) {
    let attr = EventAttr {
        name: "cpu-clock".into(),
        type_: event_type::SOFTWARE,
        config: sw_event::CPU_CLOCK,
        sample_period_or_freq: 999,
        sample_type: st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::PERIOD,
        flags: attr_flag::FREQ | attr_flag::SAMPLE_ID_ALL | attr_flag::COMM,
        ids: vec![7],
        ..Default::default()
    };
    let mut w = PerfFileWriter::create(path, vec![attr]).unwrap();
    let sid = SampleId {
        pid: 100,
        tid: 100,
        time: times[0],
        cpu: 0,
    };
    let comm = SideBand::Comm {
        pid: 100,
        tid: 100,
        comm: "spin",
        exec: true,
    };
    w.write_side_band(0, &comm, &sid).unwrap();
    for &time in times {
        let sample = Sample {
            misc: format::misc::USER,
            ip: 0x401000,
            pid: 100,
            tid: 100,
            time,
            period: 1_001_001,
            ..Default::default()
        };
        w.write_sample(0, &sample).unwrap();
    }
    w.finish_round().unwrap();
    w.finish(&Features::default()).unwrap();
}

/// Runs `analyze heatmap` on `input`; fails past `limit`. Its standard error and the SVG.
fn heatmap(input: &Path, limit: Duration) -> (String, String) {
    let svg = input.with_extension("svg");
    let mut child = Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args(["heatmap", "--event", "cpu", "-i"])
        .arg(input)
        .arg("-o")
        .arg(&svg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut err).ok();
        err
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("analyze heatmap ran over {limit:?} on {}", input.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = reader.join().unwrap();
    assert!(status.success(), "analyze heatmap exited {status}:\n{err}");
    (err, std::fs::read_to_string(&svg).unwrap())
}

/// The `data-events` total of a heatmap SVG.
fn events_drawn(svg: &str) -> u64 {
    let at = svg.find("data-events=\"").expect("a total") + 13;
    svg[at..].split('"').next().unwrap().parse().unwrap()
}

/// The widest column index a sub-second heatmap drew (its cells' `second N` text).
fn last_second(svg: &str) -> u64 {
    svg.match_indices("second ")
        .filter_map(|(i, _)| svg[i + 7..].split(',').next()?.parse().ok())
        .max()
        .unwrap_or(0)
}

#[test]
fn a_sample_twelve_billion_seconds_late_is_left_out_with_a_warning() {
    let dir = Tmp::new("heatmap-absurd");
    let path = dir.0.join("spliced.data");
    // Two seconds of samples at 1 ms, then one 12e9 s later (a spliced file's).
    let start = 5_000_000_000u64;
    let mut times: Vec<u64> = (0..2000).map(|i| start + i * 1_000_000).collect();
    times.push(start + 12_000_000_000 * 1_000_000_000);
    write_recording(&path, &times);
    // Before the fix: 12 billion one-second columns, minutes at 100% CPU.
    let (err, svg) = heatmap(&path, Duration::from_secs(20));
    assert!(
        err.contains("1 sample(s) have times far from all the others"),
        "no warning:\n{err}"
    );
    assert_eq!(events_drawn(&svg), 2000, "the two seconds, all of them");
    assert_eq!(last_second(&svg), 1, "two columns");
    // The other views still take the file whole.
    let out = crate::common::analyze(&["report", "--folded", "-i", path.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(" 2001"));
}

#[test]
fn a_recording_longer_than_an_hour_shows_its_first_hour_and_says_so() {
    let dir = Tmp::new("heatmap-long");
    let path = dir.0.join("long.data");
    // One sample a second for two hours and a half (gaps under an hour: no strays).
    let times: Vec<u64> = (0..9000u64)
        .map(|i| 1_000_000_000 + i * 1_000_000_000)
        .collect();
    write_recording(&path, &times);
    let (err, svg) = heatmap(&path, Duration::from_secs(20));
    assert!(
        err.contains("the recording spans 9000 s; the heatmap shows its first 3600"),
        "{err}"
    );
    assert!(!err.contains("far from all the others"), "{err}");
    assert_eq!(events_drawn(&svg), 3600);
    assert_eq!(last_second(&svg), 3599);
}
