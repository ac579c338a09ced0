//! perf's habits at the prompt: `record CMD ARGS` without `--`, `-q`, `--duration`, `-e`, `-C`,
//! and the status line of a long recording on a terminal.

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
fn a_mistyped_option_is_an_error_not_the_command() {
    // perf record says `unknown option` and shows its usage: the workload never starts.
    let dir = TempDir::new("mistyped");
    let marker = dir.path("ran");
    let touch = format!("touch {}", marker.display());
    for (args, unknown, closest) in [
        (&["--frequency", "99"][..], "'--frequency'", "--freq"),
        (&["-Z"][..], "'-Z'", "--compression-level"),
        (&["-o", "x.data", "--verbos"][..], "'--verbos'", "--verbose"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_record"))
            .current_dir(&dir.0)
            .args(args)
            .args(["sh", "-c", &touch])
            .output()
            .unwrap();
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: unknown option {unknown}\n")),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains(closest), "{args:?}: {stderr}");
        assert!(stderr.contains("Usage: record"), "{args:?}: {stderr}");
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!marker.exists(), "{args:?}: the workload ran");
        assert!(!dir.path("x.data").exists() && !dir.path("perf.data").exists());
    }
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    // After the command's first word every word is the command's (`sh -c ... -Z`), and
    // after `--` even a first word starting with '-' is the command, as in perf (which
    // fails to run `-weird` too).
    let file = dir.path("after.data");
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-q", "-o", file.to_str().unwrap(), "sh", "-c", &touch, "-Z"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(marker.exists(), "sh -c ... -Z ran");
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-q", "-o", file.to_str().unwrap(), "--", "-weird"])
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    assert!(stderr.contains("cannot run -weird"), "{stderr}");
}

#[test]
fn duration_stops_the_recording() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("duration");
    // Alone: every process for that long, as `-a -- sleep 1`. A shell that sleeps 20 ms at a
    // time gives the second events from end to end: on an idle machine the last event came
    // 0.17 s before the end once (a span of 0.832 s in CI).
    let mut ticker = Command::new("sh")
        .args(["-c", "while :; do sleep 0.02; done"])
        .spawn()
        .unwrap();
    let file = dir.path("all.data");
    let start = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-v", "--duration", "1", "-o", file.to_str().unwrap()])
        .output()
        .unwrap();
    let took = start.elapsed().as_secs_f64();
    let _ = ticker.kill();
    let _ = ticker.wait();
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    // The second is the recording's; before it the programs load and after it the build ids
    // are read, as long as the machine takes (a fresh clone's suite beside a build: 7.5 s in
    // all). What record measured of the recording itself, and a bound for a hang.
    let recorded = recording_seconds(&stderr);
    assert!(
        (0.95..2.0).contains(&recorded) && took < 60.0,
        "record --duration 1 recorded {recorded:.2} s and took {took:.2} s"
    );
    let info = analyze(&["info"], &file);
    let text = String::from_utf8_lossy(&info.stdout);
    let span: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("time span:"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no time span:\n{text}"));
    // The second counts from when recording began, not from record's start (loading the BPF
    // programs takes 0.3-0.7 s, more on a busy machine: 0.41-0.74 s were recorded then). The
    // span runs from the first event to the last, which the ticker keeps within 20 ms of the
    // ends.
    assert!((0.9..2.0).contains(&span), "a second recorded: {span} s");

    // With a workload that runs longer: the recording stops, the workload goes on.
    // (Its output into a file: the workload, still running, holds record's stderr open.)
    let file = dir.path("sleep.data");
    let err = dir.path("record.err");
    let start = std::time::Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_record"))
        .args([
            "-v",
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
    let recorded = recording_seconds(&stderr);
    assert!(
        (0.45..1.5).contains(&recorded) && took < 25.0,
        "stopped after 0.5 s, not after sleep 30: recorded {recorded:.2} s, took {took:.2} s"
    );
    assert!(stderr.contains("[ record:"), "{stderr}");
}

/// The seconds of recording `record -v` measured (`... in 1.02 s of recording`).
fn recording_seconds(stderr: &str) -> f64 {
    stderr
        .lines()
        .find_map(|l| {
            let (before, _) = l.split_once(" s of recording")?;
            before.rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no seconds of recording in {stderr}"))
}

/// Each event's name and CPU in `file`, as perf script prints them.
fn events_and_cpus(file: &std::path::Path) -> Vec<(String, u32)> {
    let out = Command::new("perf")
        .args(["script", "-F", "cpu,event", "-i"])
        .arg(file)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let cpu = w.next()?.trim_matches(['[', ']']).parse().ok()?;
            Some((w.next()?.trim_end_matches(':').to_string(), cpu))
        })
        .collect()
}

/// `-e` records what it names and nothing else; `-C` keeps what happened on those CPUs.
#[test]
fn events_and_cpus_choose_what_is_recorded() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("choose");
    let handoff = fixture("handoff-fp");
    let handoff = handoff.to_str().unwrap();
    let names = |file: &std::path::Path| -> std::collections::BTreeSet<String> {
        events_and_cpus(file).into_iter().map(|e| e.0).collect()
    };

    // -e cpu-clock: samples only.
    let file = dir.path("cpu.data");
    let out = record(
        &["-e", "cpu-clock", "-o", file.to_str().unwrap()],
        &[
            "sh",
            "-c",
            &format!("{} 0.3 2; {handoff} 20 2000", fixture("busy-fp").display()),
        ],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let got = names(&file);
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        ["cpu-clock"],
        "-e cpu-clock"
    );

    // -e offcpu,wakeup: off-CPU intervals (with their run-queue part) and wakers, no samples.
    let file = dir.path("offcpu.data");
    let out = record(
        &["-e", "offcpu", "-e", "wakeup", "-o", file.to_str().unwrap()],
        &[handoff, "20", "2000"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let got = names(&file);
    assert!(
        got.contains("offcpu-time") && got.contains("bpfperf:wakeup"),
        "{got:?}"
    );
    assert!(
        !got.contains("cpu-clock") && !got.contains("bpfperf:block_io"),
        "{got:?}"
    );
    let bad = record(
        &["-e", "cycles", "-o", dir.path("bad.data").to_str().unwrap()],
        &["true"],
    );
    assert!(!bad.status.success() && stderr_of(&bad).contains("cycles"));

    // -a -C 0 while busy keeps both CPUs busy: every event on CPU 0, a second's samples.
    let file = dir.path("cpu0.data");
    let out = record(
        &["-a", "-C", "0", "-o", file.to_str().unwrap()],
        &[fixture("busy-fp").to_str().unwrap(), "1", "2"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let events = events_and_cpus(&file);
    let samples = events.iter().filter(|e| e.0 == "cpu-clock").count();
    assert!(samples > 600, "CPU 0 sampled for a second: {samples}");
    assert!(events.iter().all(|e| e.1 == 0), "only CPU 0: {events:?}");
    let bad = record(
        &[
            "-a",
            "-C",
            "4095",
            "--duration",
            "1",
            "-o",
            dir.path("bad.data").to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        stderr_of(&bad).contains("CPU 4095 is not online"),
        "{}",
        stderr_of(&bad)
    );
}

/// On a terminal (a pty from script(1)), a recording longer than a second shows a status line
/// on the terminal's last row, below a scrolling region for the workload's output; at the end
/// the region is given back and the line cleared before the summary. -q: no line. A pipe: none.
#[test]
fn a_long_recording_on_a_terminal_shows_a_status_line() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("status");
    let run = |args: &str| -> String {
        let file = dir.path("status.data");
        let cmd = format!(
            "stty rows 24 cols 120; {} {args} -e cpu-clock -o {} {} 2.5 1",
            env!("CARGO_BIN_EXE_record"),
            file.display(),
            fixture("busy-fp").display()
        );
        let out = Command::new("script")
            .args(["-qfec", &cmd, "/dev/null"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = run("");
    let region = text
        .find("\x1b[1;23r")
        .expect("a scrolling region above the last row");
    let line = text
        .find("\x1b[24;1H\x1b[2K[ recording: 1 s, ")
        .expect("the status line");
    let status_2 = text
        .find("[ recording: 2 s, ")
        .expect("redrawn each second");
    let reset = text
        .find("\x1b[r\x1b[24;1H\x1b[2K")
        .expect("the region given back, the row cleared");
    let summary = text.find("[ record: ").expect("the summary");
    assert!(
        region < line && line < status_2 && status_2 < reset && reset < summary,
        "{text:?}"
    );
    assert!(
        text.contains("busy: done"),
        "the workload's output: {text:?}"
    );

    let quiet = run("-q");
    assert!(
        !quiet.contains('\x1b') && !quiet.contains("record"),
        "-q: {quiet:?}"
    );
    let piped_file = dir.path("piped.data");
    let piped = record(
        &["-e", "cpu-clock", "-o", piped_file.to_str().unwrap()],
        &[fixture("busy-fp").to_str().unwrap(), "1.5", "1"],
    );
    assert!(!stderr_of(&piped).contains('\x1b'), "no terminal, no line");
}
