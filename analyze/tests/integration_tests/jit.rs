//! JIT code named from what the runtime wrote, read directly (no `perf inject`): a perf map
//! in both address styles, and a jitdump file (fixtures/programs/jit.c).

use std::path::Path;

use crate::common::{can_record, fixture, perf_record, record_ours, Tmp};
use crate::folded::{parse_folded, run_ok};

/// The share of the samples whose leaf is `name`.
fn leaf_share(file: &Path, name: &str) -> f64 {
    let folded = parse_folded(&run_ok(&[
        "report",
        "--folded",
        "-i",
        file.to_str().unwrap(),
    ]));
    let total: u64 = folded.values().sum();
    let hit: u64 = folded
        .iter()
        .filter(|(k, _)| k.rsplit(';').next() == Some(name))
        .map(|(_, v)| v)
        .sum();
    hit as f64 / total.max(1) as f64
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
        let share = leaf_share(&perf, name);
        assert!(
            share > 0.8,
            "{mode}, perf -g: {name} is the leaf of {share:.2}"
        );
        let ours = dir.0.join(format!("record-{mode}.data"));
        record_ours(
            &ours,
            &["--no-off-cpu", "--no-io", "--no-wakeups"],
            &program,
            &[mode, "0.5", d],
        );
        let share = leaf_share(&ours, name);
        assert!(
            share > 0.8,
            "{mode}, record: {name} is the leaf of {share:.2}"
        );
    }
    remove_maps_naming("jitted_sum");
}
