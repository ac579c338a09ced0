//! DWARF call graphs: stack copies that perf's unwinder and analyze's both unwind, in files
//! less than half the size of perf's own.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// Folds perf script's view of a file (user frames only, which is what DWARF unwinding makes).
fn perf_folded_user(file: &Path) -> BTreeMap<String, u64> {
    let samples = parse_script(&perf_script_clean(file));
    let cpu: Vec<ScriptSample> = samples
        .into_iter()
        .filter(|s| s.event.starts_with("cpu-clock"))
        .collect();
    fold_user(&cpu, |dso| dso != "[kernel.kallsyms]")
}

fn analyze_folded_user(file: &Path) -> BTreeMap<String, u64> {
    analyze_folded(file, &["--no-inline", "-U"])
}

fn reaches_root(stack: &str) -> bool {
    let root = stack.split(';').nth(1).unwrap_or("");
    root == "clone3"
        || root == "_start"
        || root == "__libc_start_call_main"
        || root == "start_thread"
}

#[test]
fn dwarf_stacks_unwind_in_perf_and_analyze_and_stay_small() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("dwarf");
    let busy = fixture("busy-nofp");
    let ours = dir.path("ours.data");
    let out = record(
        &[
            "--call-graph",
            "dwarf",
            "--no-off-cpu",
            "--no-io",
            "-o",
            ours.to_str().unwrap(),
        ],
        &[busy.to_str().unwrap(), "1", "2"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let (samples, _) = summary_counts(&stderr_of(&out));

    // perf's own unwinder on our file: most samples reach the thread's root.
    let theirs = perf_folded_user(&ours);
    let total: u64 = theirs.values().sum();
    let rooted: u64 = theirs
        .iter()
        .filter(|(k, _)| reaches_root(k))
        .map(|(_, v)| v)
        .sum();
    eprintln!("perf unwinds {rooted} of {total} samples of our file to the root");
    assert!(
        rooted * 100 >= total * 85,
        "perf reached the root in {rooted} of {total}"
    );

    // analyze gives the same user stacks as perf's unwinding of the same file.
    let mine = analyze_folded_user(&ours);
    let same: u64 = theirs
        .iter()
        .map(|(k, v)| mine.get(k).copied().unwrap_or(0).min(*v))
        .sum();
    eprintln!("analyze agrees with perf on {same} of {total} samples");
    assert!(
        same * 100 >= total * 95,
        "analyze and perf agree on {same} of {total}:\nperf {theirs:#?}\nours {mine:#?}"
    );

    // Size: at most half of perf record --call-graph dwarf's bytes per sample, unwinding as well.
    let perf_file = dir.path("perf.data");
    let st = Command::new("perf")
        .args(["record", "-q", "-F", "999", "--call-graph", "dwarf", "-o"])
        .arg(&perf_file)
        .arg("--")
        .arg(&busy)
        .args(["1", "2"])
        .output()
        .unwrap();
    assert!(st.status.success());
    let perf_folded = perf_folded_user(&perf_file);
    let perf_samples: u64 = perf_folded.values().sum();
    let perf_rooted: u64 = perf_folded
        .iter()
        .filter(|(k, _)| reaches_root(k))
        .map(|(_, v)| v)
        .sum();
    let ours_per = std::fs::metadata(&ours).unwrap().len() as f64 / samples as f64;
    let perf_per = std::fs::metadata(&perf_file).unwrap().len() as f64 / perf_samples as f64;
    eprintln!("bytes per sample: ours {ours_per:.0}, perf {perf_per:.0} (ratio {:.2}); perf's own file reaches the root in {perf_rooted} of {perf_samples}", ours_per / perf_per);
    assert!(
        ours_per <= perf_per / 2.0,
        "ours {ours_per:.0} B/sample vs perf {perf_per:.0}"
    );
    assert!(
        rooted as f64 / total as f64 >= perf_rooted as f64 / perf_samples as f64 - 0.02,
        "unwinding at least as complete as perf's"
    );
}

#[test]
fn tar_stacks_reach_main_through_libc() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("dwarf-tar");
    let src = dir.path("src.tar.xz");
    let st = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "tar -cf - -C /usr include | xz -0 -T1 > {}",
            src.display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let out_dir = dir.path("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let file = dir.path("tar.data");
    let out = record(
        &["--call-graph", "dwarf", "-o", file.to_str().unwrap()],
        &[
            "tar",
            "-xJf",
            src.to_str().unwrap(),
            "-C",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let folded = analyze_folded_user(&file);
    let tar: Vec<(&String, &u64)> = folded
        .iter()
        .filter(|(k, _)| k.starts_with("tar;"))
        .collect();
    let total: u64 = tar.iter().map(|(_, v)| **v).sum();
    // tar is stripped, so its own frames may be [unknown]; the depth must reach libc's
    // __libc_start_call_main (main's caller) through libc.
    let deep: u64 = tar
        .iter()
        .filter(|(k, _)| k.contains("__libc_start_call_main;"))
        .map(|(_, v)| **v)
        .sum();
    eprintln!("tar: {deep} of {total} on-CPU samples reach main's caller");
    assert!(
        total > 0 && deep * 100 >= total * 70,
        "{deep} of {total}: {tar:#?}"
    );
}
