//! JIT code named from what the runtime wrote, read directly (no `perf inject`): a perf map
//! in both address styles, and a jitdump file (fixtures/programs/jit.c).

use std::path::Path;

use crate::common::{analyze, can_record, fixture, perf_record, record_ours, Tmp};
use crate::folded::parse_folded;

/// The share of the samples whose leaf is `name`, and analyze's standard error.
fn leaf_share(file: &Path, name: &str) -> (f64, String) {
    let out = analyze(&["report", "--folded", "-i", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let folded = parse_folded(&String::from_utf8(out.stdout).unwrap());
    let total: u64 = folded.values().sum();
    let hit: u64 = folded
        .iter()
        .filter(|(k, _)| k.rsplit(';').next() == Some(name))
        .map(|(_, v)| v)
        .sum();
    (hit as f64 / total.max(1) as f64, err)
}

/// A warning about anonymous memory in analyze's standard error, if there is one.
fn anon_warning(err: &str) -> Option<&str> {
    err.lines()
        .find(|l| l.contains("warning") && (l.contains("anon") || l.contains("perf map")))
}

/// Removes the perf maps the program wrote (it cannot: the profiler reads them after it).
fn remove_maps_naming(name: &str) {
    for e in std::fs::read_dir("/tmp").unwrap().flatten() {
        let p = e.path();
        let is_map = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("perf-") && n.ends_with(".map"));
        if is_map && std::fs::read_to_string(&p).is_ok_and(|t| t.contains(name)) {
            let _ = std::fs::remove_file(&p);
        }
    }
}

#[test]
fn perf_maps_in_both_address_styles_and_jitdump_files_name_jit_code() {
    if !can_record() {
        return;
    }
    let dir = Tmp::new("jit");
    let program = fixture("jit-fp");
    let d = dir.0.to_str().unwrap();
    for (mode, name) in [
        ("map", "jitted_sum"),
        ("map0x", "jitted_sum"),
        ("dump", "jitted_sum_dump"),
    ] {
        let perf = dir.0.join(format!("perf-{mode}.data"));
        perf_record(&perf, &["-F", "999", "-g"], &program, &[mode, "0.5", d]);
        let (share, err) = leaf_share(&perf, name);
        assert!(
            share > 0.8,
            "{mode}, perf -g: {name} is the leaf of {share:.2}"
        );
        assert_eq!(anon_warning(&err), None, "{mode}, perf -g");
        // record's stack copies (DWARF): the unwinder meets the anonymous mapping too, and
        // says nothing of it either (it used to warn `//anon: not found`).
        let ours = dir.0.join(format!("record-{mode}.data"));
        record_ours(
            &ours,
            &["--no-off-cpu", "--no-io", "--no-wakeups"],
            &program,
            &[mode, "0.5", d],
        );
        let (share, err) = leaf_share(&ours, name);
        assert!(
            share > 0.8,
            "{mode}, record: {name} is the leaf of {share:.2}"
        );
        assert_eq!(anon_warning(&err), None, "{mode}, record");
    }
    remove_maps_naming("jitted_sum");
    // Without its perf map, the JIT code is [unknown], and that is said once.
    let (_, err) = leaf_share(&dir.0.join("record-map.data"), "jitted_sum");
    let warning = anon_warning(&err).unwrap_or_else(|| panic!("{err}"));
    assert!(
        warning.contains("no perf map") && warning.contains("[unknown]"),
        "{warning}"
    );
    assert_eq!(err.matches("no perf map").count(), 1, "{err}");
}
