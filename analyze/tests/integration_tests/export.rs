//! `analyze export`: pprof read by `go tool pprof`, the Firefox Profiler's processed format,
//! speedscope's file format checked against its own JSON schema and opened in a real browser
//! (speedscope from npm in headless Chromium, over a loopback HTTP server).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::*;
use crate::folded::{parse_folded, run_ok, Folded};

/// Fails under CI, skips elsewhere, when `what` is missing.
fn have(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} must be here under CI"
        );
        eprintln!("skipping: no {what}");
    }
    ok
}

fn export(file: &Path, format: &str, out: &Path, extra: &[&str]) {
    let mut args = vec!["export", "--format", format, "-i", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-o", out.to_str().unwrap()]);
    let o = analyze(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn folded(file: &Path, extra: &[&str]) -> Folded {
    let mut args = vec!["report", "--folded", "-i", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    parse_folded(&run_ok(&args))
}

/// The hottest leaf of folded stacks and its weight.
fn hottest_leaf(f: &Folded) -> (String, u64) {
    let mut leaves: std::collections::BTreeMap<&str, u64> = Default::default();
    for (k, v) in f {
        *leaves.entry(k.rsplit(';').next().unwrap()).or_insert(0) += v;
    }
    let (name, w) = leaves.into_iter().max_by_key(|(_, w)| *w).unwrap();
    (name.to_string(), w)
}

/// How many samples perf script counts in `file` (one event).
fn perf_sample_count(file: &Path) -> u64 {
    let out = Command::new("perf")
        .args(["script", "-F", "period", "-i"])
        .arg(file)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

fn go_pprof(args: &[&str], profile: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(profile)
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `-top`'s total ("... of N total") and its rows (flat, function), hottest first.
fn top(text: &str) -> (u64, Vec<(u64, String)>) {
    let total = text
        .lines()
        .find_map(|l| l.split(" of ").nth(1)?.strip_suffix(" total")?.parse().ok())
        .unwrap_or_else(|| panic!("no total in:\n{text}"));
    let header = text.lines().position(|l| l.contains("flat%")).unwrap();
    let rows = text
        .lines()
        .skip(header + 1)
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0].parse().unwrap(), w[5..].join(" "))
        })
        .collect();
    (total, rows)
}

/// The GNU build id of `binary` (Go's linker writes none).
fn build_id(binary: &Path) -> Option<String> {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(binary)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
}

/// pprof on C, C++, Rust and Go, frame pointers and DWARF: `go tool pprof -top` reads every
/// sample perf counts, the hot function first (C and Go: pprof shortens C++ and Rust names
/// past recognition, so for those the full names are checked in `-raw`), the main binary's
/// build id, inline frames as Lines of one Location (Rust, DWARF).
#[test]
fn pprof_export_reads_in_go_tool_pprof() {
    if !perf_ok() || !have(Command::new("go").arg("version").output().is_ok(), "go") {
        return;
    }
    let dir = Tmp::new("export-pprof");
    for (program, call_graph) in [
        ("busy-fp", "fp"),
        ("cxxprog-g++-fp", "fp"),
        ("rsprog-nofp", "dwarf"),
        ("goprog", "fp"),
    ] {
        let file = dir.0.join(format!("{program}.data"));
        let bin = fixture(program);
        perf_record(
            &file,
            &["-F", "499", "--call-graph", call_graph],
            &bin,
            &["0.4", "2"],
        );
        let pb = dir.0.join(format!("{program}.pb.gz"));
        export(&file, "pprof", &pb, &[]);
        let text = go_pprof(&["-top"], &pb);
        let (total, rows) = top(&text);
        let samples = perf_sample_count(&file);
        assert_eq!(
            total, samples,
            "{program}: pprof's total is perf's count\n{text}"
        );
        if let Some(id) = build_id(&bin) {
            assert!(
                text.contains(&format!("Build ID: {id}")),
                "{program}: the main binary's build id first\n{text}"
            );
        }
        let ours = folded(&file, &[]);
        let (hot, weight) = hottest_leaf(&ours);
        eprintln!(
            "{program}: {samples} samples, pprof's first {rows:?}, ours {hot} ({weight})",
            rows = rows[0]
        );
        // Ties may come in either order.
        assert_eq!(
            rows[0].0, weight,
            "{program}: the hot function's samples\n{text}"
        );
        if program == "busy-fp" || program == "goprog" {
            assert!(
                rows.iter().any(|r| r.0 == weight && r.1 == hot),
                "{program}: the hot function first\n{text}"
            );
        }
        let raw = go_pprof(&["-raw"], &pb);
        assert!(raw.contains(&hot), "{program}: {hot} in -raw");
        if program == "rsprog-nofp" {
            // A location line followed by an indented line: an inlined function's Line.
            let inlined = raw.lines().collect::<Vec<_>>().windows(2).any(|w| {
                w[0].trim_start()
                    .split(':')
                    .next()
                    .unwrap()
                    .parse::<u64>()
                    .is_ok()
                    && w[1].starts_with("             ")
                    && !w[1].trim().is_empty()
            });
            assert!(inlined, "{program}: no location with inlined Lines:\n{raw}");
            assert!(
                raw.contains(".rs:"),
                "{program}: no Rust file names and lines"
            );
        }
        // The same selection flags as report: --tid of one worker keeps its samples only.
        let tid_total = {
            let by_tid = Command::new("perf")
                .args(["script", "-F", "tid", "-i"])
                .arg(&file)
                .stderr(Stdio::null())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&by_tid.stdout).into_owned();
            let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
            for l in text.lines() {
                *counts.entry(l.trim().to_string()).or_insert(0) += 1;
            }
            counts.into_iter().max_by_key(|(_, n)| *n).unwrap()
        };
        let one = dir.0.join(format!("{program}-tid.pb.gz"));
        export(&file, "pprof", &one, &["--tid", &tid_total.0]);
        assert_eq!(
            top(&go_pprof(&["-top"], &one)).0,
            tid_total.1,
            "{program} --tid"
        );
    }
}
