//! Bad input stops every subcommand with one error naming the file (exit 1, no panic); a
//! missing or changed binary only degrades its frames to `[unknown]`, with one warning.

use std::path::Path;

use crate::common::{analyze, fixture, perf_ok, perf_record, Tmp};

#[test]
fn damaged_input_is_a_clear_error_for_every_subcommand() {
    let dir = Tmp::new("errors");
    let text = dir.0.join("notperf.data");
    std::fs::write(&text, "hello\n".repeat(40)).unwrap();
    let empty = dir.0.join("empty.data");
    std::fs::write(&empty, "").unwrap();
    let truncated = dir.0.join("truncated.data");
    let mut head = b"PERFILE2".to_vec();
    head.extend_from_slice(&104u64.to_le_bytes());
    head.extend_from_slice(&[0; 30]);
    std::fs::write(&truncated, head).unwrap();
    let svg = dir.0.join("out.svg");
    let svg = svg.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["report"],
        &["report", "--folded"],
        &["report", "--sort", "srcline"],
        &["script"],
        &["flamegraph", "-o", svg],
    ];
    for (path, words) in [
        (text.as_path(), "magic"),
        (empty.as_path(), "empty file"),
        (truncated.as_path(), "bytes"),
        (dir.0.as_path(), "is a directory"),
        (Path::new("/nonexistent/perf.data"), "No such file"),
    ] {
        for cmd in commands {
            let mut args = cmd.to_vec();
            args.extend(["-i", path.to_str().unwrap()]);
            let out = analyze(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(
                stderr.contains(path.to_str().unwrap()) && stderr.contains(words),
                "{args:?}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
            // One line, the cause said once (not repeated as a "caused by" chain).
            assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
            assert_eq!(stderr.matches(words).count(), 1, "{args:?}: {stderr}");
            assert!(out.stdout.is_empty(), "{args:?}: no output on error");
        }
    }
    let out = analyze(&["report", "--sort", "nonsense", "-i", text.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sort nonsense"));
}

/// A flame graph of no samples (a recording of none, or a selection that keeps none) is
/// an error naming the recording, and no empty SVG is left behind: inferno's "No stack
/// counts found", said of the SVG's path, was all there was.
#[test]
fn a_flame_graph_of_no_samples_says_so_and_writes_nothing() {
    let Some(dir) = crate::common::elsewhere() else {
        return;
    };
    let file = dir.join("sleep.data");
    let out_dir = Tmp::new("flame-none");
    let svg = out_dir.0.join("none.svg");
    let args = [
        "flamegraph",
        "--pid",
        "999999999",
        "-o",
        svg.to_str().unwrap(),
        "-i",
        file.to_str().unwrap(),
    ];
    let out = analyze(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("error: {}: no cycles", file.display()))
            && stderr.contains("samples to draw"),
        "{stderr}"
    );
    assert!(!svg.exists(), "{stderr}");
    // The same recording, unfiltered, draws.
    let mut all = vec!["flamegraph"];
    all.extend(&args[3..]);
    let out = analyze(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains("warning")).collect()
}

#[test]
fn missing_or_changed_binary_degrades_to_unknown_frames() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("missing");
    let prog = dir.0.join("prog");
    std::fs::copy(fixture("busy-fp"), &prog).unwrap();
    let file = dir.0.join("fp.data");
    perf_record(&file, &["-F", "999", "-g"], &prog, &["0.3", "1"]);
    let f = file.to_str().unwrap();
    let fold = |stdout: &[u8]| String::from_utf8_lossy(stdout).into_owned();

    let before = analyze(&["report", "--folded", "-i", f]);
    assert!(fold(&before.stdout).contains(";spin_inner "));

    // Replaced by another program: its build id differs from the recording's.
    std::fs::copy(fixture("sleeper-fp"), &prog).unwrap();
    let changed = analyze(&["report", "--folded", "-i", f]);
    let stderr = String::from_utf8_lossy(&changed.stderr);
    assert_eq!(changed.status.code(), Some(0), "{stderr}");
    let w = warnings(&stderr);
    assert_eq!(w.len(), 1, "one warning: {stderr}");
    assert!(
        w[0].contains("prog") && w[0].contains("build id"),
        "{stderr}"
    );
    let text = fold(&changed.stdout);
    assert!(
        !text.contains("spin_inner") && text.contains("[prog]"),
        "{text}"
    );

    // Gone.
    std::fs::remove_file(&prog).unwrap();
    for cmd in [&["report", "--folded"][..], &["report"], &["script"]] {
        let mut args = cmd.to_vec();
        args.extend(["-i", f]);
        let out = analyze(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        let w = warnings(&stderr);
        assert_eq!(w.len(), 1, "{args:?}: one warning: {stderr}");
        assert!(w[0].contains(prog.to_str().unwrap()), "{stderr}");
        assert!(
            stderr.contains("[unknown] ("),
            "summary counts them: {stderr}"
        );
        assert!(!out.stdout.is_empty());
    }
    let text = fold(&analyze(&["report", "--folded", "-i", f]).stdout);
    // libc still symbolizes; the program's own frames are [prog].
    assert!(text.contains("start_thread;[prog]"), "{text}");
}

/// Each subcommand's help begins with what `analyze --help` says of it, and each refuses an
/// unknown option by name: its options are built only when it is run (clap's `defer`), and
/// a doc comment on an option group flattened into it would then be its help's first line.
#[test]
fn each_subcommands_help_begins_with_its_line_of_the_top_help() {
    let top = analyze(&["--help"]);
    let top = String::from_utf8_lossy(&top.stdout).into_owned();
    let listed: Vec<(&str, &str)> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.trim().split_once(char::is_whitespace))
        .map(|(name, about)| (name, about.trim()))
        .filter(|(name, _)| *name != "help")
        .collect();
    assert!(listed.len() >= 15, "{top}");
    for (name, about) in listed {
        let help = analyze(&[name, "--help"]);
        let help = String::from_utf8_lossy(&help.stdout);
        // The top help cuts a long line at its first sentence.
        let first = about.trim_end_matches('.');
        assert!(help.starts_with(first), "{name}: {first:?}, help: {help}");
        let bogus = analyze(&[name, "--no-such-option"]);
        let stderr = String::from_utf8_lossy(&bogus.stderr);
        assert_eq!(bogus.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains("'--no-such-option'"), "{name}: {stderr}");
    }
}
