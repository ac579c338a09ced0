//! `analyze info` against the real perf: the same sample counts as `perf script` on files perf
//! recorded here, files perf 6.1 cannot read, and clear errors on damaged input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::{analyze, elsewhere, fixture, mount_tracefs, perf_ok, Tmp};
use std::process::{Command, Stdio};

/// Sample counts per event name as `perf script` sees them.
fn perf_script_counts(file: &Path) -> BTreeMap<String, u64> {
    let out = Command::new("perf")
        .args(["script", "-G", "-F", "event", "-i"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf script: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = l.trim().strip_suffix(':') else {
            continue;
        };
        if !name.is_empty() {
            *m.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// Sample counts per event name from `analyze info`.
fn info_counts(file: &Path) -> (BTreeMap<String, u64>, String) {
    let out = analyze(&["info", "-i", file.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "analyze info failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut m = BTreeMap::new();
    let mut in_events = false;
    for l in text.lines() {
        if l == "events:" {
            in_events = true;
            continue;
        }
        if in_events && l.starts_with("  ") {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n: u64 = f[2].parse().unwrap();
            if n > 0 {
                m.insert(f[0].to_string(), n);
            }
        } else {
            in_events = false;
        }
    }
    (m, text)
}

fn record(dir: &Tmp, name: &str, perf_args: &[&str], seconds: &str) -> PathBuf {
    let out = dir.0.join(name);
    let mut cmd = Command::new("perf");
    cmd.arg("record").arg("-q").args(perf_args);
    if perf_args.contains(&"-") {
        cmd.stdout(std::fs::File::create(&out).unwrap());
    } else {
        cmd.arg("-o").arg(&out);
    }
    let st = cmd
        .arg("--")
        .arg(fixture("busy-fp"))
        .args([seconds, "2"])
        .stderr(Stdio::inherit())
        .status()
        .unwrap();
    assert!(st.success(), "perf record {perf_args:?} failed");
    out
}

#[test]
fn info_counts_match_perf_script_on_perf_recordings() {
    if !perf_ok() {
        return;
    }
    mount_tracefs();
    let dir = Tmp::new("info-perf");
    let cases: [(&str, &[&str]); 6] = [
        ("fp.data", &["-F", "999", "-g"]),
        ("dwarf.data", &["-F", "499", "--call-graph", "dwarf"]),
        ("switch.data", &["-e", "sched:sched_switch", "-g"]),
        (
            "two.data",
            &["-e", "cpu-clock", "-e", "task-clock", "-F", "499"],
        ),
        ("z.data", &["-z", "-F", "999", "-g"]),
        ("pipe.data", &["-F", "999", "-g", "-o", "-"]),
    ];
    for (name, args) in cases {
        let file = record(&dir, name, args, "0.4");
        let theirs = perf_script_counts(&file);
        let (ours, text) = info_counts(&file);
        assert!(!theirs.is_empty(), "{name}: perf script saw no samples");
        // perf script names events by their modifiers too (cpu-clock:ppp...): compare by base name.
        let base = |m: &BTreeMap<String, u64>| -> BTreeMap<String, u64> {
            let mut b = BTreeMap::new();
            for (k, v) in m {
                *b.entry(
                    k.split(':')
                        .take(if k.starts_with("sched:") { 2 } else { 1 })
                        .collect::<Vec<_>>()
                        .join(":"),
                )
                .or_insert(0) += v;
            }
            b
        };
        assert_eq!(base(&ours), base(&theirs), "{name}:\n{text}");
        let total: u64 = theirs.values().sum();
        assert!(
            text.contains(&format!("samples:       {total}\n")),
            "{name}: total\n{text}"
        );
        if name == "z.data" {
            assert!(text.contains("zstd-compressed"), "{text}");
        }
        if name == "pipe.data" {
            assert!(text.contains("pipe mode"), "{text}");
        }
    }
}

#[test]
fn info_reads_a_killed_perf_recording_that_perf_ignores() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("info-killed");
    let file = dir.0.join("killed.data");
    let mut perf = Command::new("perf")
        // Small buffers (-m 8) so that perf writes to the file while it runs.
        .args(["record", "-q", "-m", "8", "-F", "999", "-g", "-o"])
        .arg(&file)
        .arg("--")
        .arg(fixture("busy-fp"))
        .args(["3", "1"])
        .spawn()
        .unwrap();
    // Until perf has written what a few hundred samples take (it writes as its small
    // buffers fill), however long the machine takes: 1.5 s was once too short for 100
    // samples beside a build (busy-fp spins 3 s of CPU time: far more).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::metadata(&file).map_or(0, |m| m.len()) < 96 << 10 {
        assert!(std::time::Instant::now() < deadline, "perf wrote nothing");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // perf first: killing its workload first lets perf see it exit and finish the file.
    let children = Command::new("pgrep")
        .args(["-P", &perf.id().to_string()])
        .output()
        .unwrap();
    perf.kill().unwrap();
    perf.wait().unwrap();
    for pid in String::from_utf8_lossy(&children.stdout).split_whitespace() {
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    let header = std::fs::read(&file).unwrap();
    assert_eq!(
        &header[48..56],
        &[0; 8],
        "perf's killed file should have data size 0"
    );
    let out = analyze(&["info", "-i", file.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("data section is empty"), "{stderr}");
    let samples: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("samples:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        samples > 100,
        "expected the samples of 96 KiB written, got {samples}\n{text}"
    );
}

#[test]
fn info_reads_perf_6_16_files_that_perf_6_1_cannot() {
    let Some(dir) = elsewhere() else {
        return;
    };
    for name in [
        "sleep.data",
        "sleep.compressed.data",
        "sleep.compressed.pipe.data",
        "sleep.compressed2.data",
        "sleep.compressed2.pipe.data",
        "fibo.compressed2.pipe.data",
    ] {
        let file = dir.join(name);
        let (ours, text) = info_counts(&file);
        let samples: u64 = ours.values().sum();
        assert!(
            samples > 0 && ours.keys().all(|k| k.starts_with("cycles")),
            "{name}:\n{text}"
        );
        assert_eq!(
            text.contains("zstd-compressed"),
            name.contains("compressed"),
            "{name}:\n{text}"
        );
        assert_eq!(text.contains("pipe mode"), name.contains("pipe"), "{name}");
        // Another machine's kernel: this one's symbols are not offered for it (they named
        // its frames in `info`'s list before, where every view left them [unknown]).
        if text.contains("[kernel.kallsyms]") {
            assert!(
                text.contains("[kernel.kallsyms]  (missing: the recording's kernel is another (build ids differ))"),
                "{name}:\n{text}"
            );
        }
        assert!(
            text.contains("arch:          x86_64") || text.contains("arch:          aarch64"),
            "{name}: features read\n{text}"
        );
        if name == "sleep.compressed.pipe.data" {
            // The one perf 6.1 reads: same count.
            if Command::new("perf").arg("--version").output().is_ok() {
                let theirs: u64 = perf_script_counts(&file).values().sum();
                assert_eq!(samples, theirs);
            }
        }
    }
}

#[test]
fn damaged_input_is_a_clear_error() {
    let dir = Tmp::new("info-damaged");
    let text = dir.0.join("notperf.data");
    std::fs::write(&text, "hello\n".repeat(40)).unwrap();
    let empty = dir.0.join("empty.data");
    std::fs::write(&empty, "").unwrap();
    let truncated = dir.0.join("truncated.data");
    let mut head = b"PERFILE2".to_vec();
    head.extend_from_slice(&104u64.to_le_bytes());
    head.extend_from_slice(&[0; 30]);
    std::fs::write(&truncated, head).unwrap();
    for (path, words) in [
        (text.as_path(), "magic"),
        (empty.as_path(), "empty file"),
        (truncated.as_path(), "bytes"),
        (dir.0.as_path(), "is a directory"),
        (Path::new("/nonexistent/perf.data"), "No such file"),
    ] {
        let out = analyze(&["info", "-i", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", path.display());
        assert!(
            stderr.contains(path.to_str().unwrap()) && stderr.contains(words),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// The number after `label` in `text` (a line `label N ...`).
fn number_after(text: &str, label: &str) -> Option<u64> {
    let at = text.find(label)? + label.len();
    text[at..].split_whitespace().next()?.parse().ok()
}

/// A perf recording of two events in a one-page buffer loses samples of both, in LOST
/// records (naming the event by id) and LOST_SAMPLES records (by their sample id): `analyze
/// info` gives each event's share, and a report's summary the same total and its event's
/// share, by either reading path.
#[test]
fn lost_samples_of_perf_recordings_are_counted_by_event() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("info-lost");
    let file = record(
        &dir,
        "lost.data",
        &["-e", "cpu-clock,task-clock", "-m", "1", "-F", "20000", "-g"],
        "1",
    );
    let (_, text) = info_counts(&file);
    let total = number_after(&text, "lost events:").unwrap();
    let by_event = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("by event:"))
        .unwrap_or_else(|| panic!("both events lost samples in a one-page buffer:\n{text}"));
    let shares: BTreeMap<&str, u64> = by_event
        .split(',')
        .filter_map(|p| {
            let (name, n) = p.trim().rsplit_once(' ')?;
            Some((name, n.parse().ok()?))
        })
        .collect();
    eprintln!("lost: {total} in all, by event {shares:?}");
    assert_eq!(shares.values().sum::<u64>(), total, "{text}");
    for event in ["cpu-clock", "task-clock"] {
        let own = shares[event];
        for env in [&[][..], &[("BPFPERF_SEQUENTIAL_READ", "1")][..]] {
            let out = crate::common::analyze_env(
                &[
                    "report",
                    "--folded",
                    "--event",
                    event,
                    "-i",
                    file.to_str().unwrap(),
                ],
                env,
            );
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                said.contains(&format!(
                    "{total} events lost while recording ({own} of them {event})"
                )),
                "{event} {env:?}: {said}"
            );
        }
    }
}
