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

/// `record -v`'s count of samples whose user stack the kernel unwound (and of all samples).
fn unwound_in_kernel(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("unwound in the kernel"))
        .unwrap_or_else(|| panic!("no unwinding line in {stderr}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    // "record: user stacks of N of M samples unwound in the kernel, K copied (C of the L
    // taken once their process's tables were in)"
    (w[4].parse().unwrap(), w[6].parse().unwrap())
}

/// `record -v`'s samples taken once their process's tables were in, and the copied of those.
fn copied_once_tables_were_in(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("unwound in the kernel"))
        .unwrap_or_else(|| panic!("no unwinding line in {stderr}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    let at = w.iter().position(|w| w.starts_with('(')).unwrap();
    // "(C of the L taken ..."
    (w[at + 3].parse().unwrap(), w[at][1..].parse().unwrap())
}

/// [`perf_folded_user`] without inlined functions (perf shows them for the frames its own
/// unwinder found, not for callchain entries: depths compare only without them).
fn perf_folded_user_no_inline(file: &Path) -> BTreeMap<String, u64> {
    let out = Command::new("perf")
        .args(["script", "--no-inline", "-i"])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let samples = parse_script(&String::from_utf8_lossy(&out.stdout));
    let cpu: Vec<ScriptSample> = samples
        .into_iter()
        .filter(|s| s.event.starts_with("cpu-clock"))
        .collect();
    fold_user(&cpu, |dso| dso != "[kernel.kallsyms]")
}

/// The mean number of user frames per sample of folded stacks (comm excluded).
fn mean_depth(folded: &BTreeMap<String, u64>) -> f64 {
    let (frames, samples) = folded.iter().fold((0u64, 0u64), |(f, s), (k, v)| {
        (f + k.matches(';').count() as u64 * v, s + v)
    });
    frames as f64 / samples.max(1) as f64
}

/// Mean depths of two recordings of one program (ours, perf's) over the same mix of
/// samples: per leaf function both have, each side's mean depth there, weighted by perf's
/// samples at that leaf; and the share of perf's samples those leaves hold. Two runs spend
/// their time a little differently (more of it starting up under load, where stacks are
/// shallow): a whole-recording mean moved by 0.3 frames from that alone.
fn mean_depths_at_perfs_leaves(
    ours: &BTreeMap<String, u64>,
    perfs: &BTreeMap<String, u64>,
) -> (f64, f64, f64) {
    let by_leaf = |folded: &BTreeMap<String, u64>| {
        let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (k, v) in folded {
            let leaf = k.rsplit(';').next().unwrap_or(k).to_string();
            let e = m.entry(leaf).or_default();
            e.0 += k.matches(';').count() as u64 * v;
            e.1 += v;
        }
        m
    };
    let (o, p) = (by_leaf(ours), by_leaf(perfs));
    let (mut wo, mut wp, mut w) = (0.0, 0.0, 0.0);
    for (leaf, &(pf, pn)) in &p {
        if let Some(&(of, on)) = o.get(leaf) {
            wo += of as f64 / on as f64 * pn as f64;
            wp += pf as f64;
            w += pn as f64;
        }
    }
    let total: u64 = perfs.values().sum();
    (wo / w.max(1.0), wp / w.max(1.0), w / total.max(1) as f64)
}

#[test]
fn stacks_unwound_in_the_kernel_equal_the_copies_unwound_offline_in_a_tenth_of_the_bytes() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("kernel-unwind");
    // busy without frame pointers: only its CFI tells where the callers are.
    let busy = fixture("busy-nofp");
    let (kernel, copies) = (dir.path("kernel.data"), dir.path("copies.data"));
    let out = record(
        &[
            "-v",
            "--no-off-cpu",
            "--no-io",
            "-o",
            kernel.to_str().unwrap(),
        ],
        &[busy.to_str().unwrap(), "1", "2"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let (unwound, samples) = unwound_in_kernel(&stderr_of(&out));
    let (late, late_copied) = copied_once_tables_were_in(&stderr_of(&out));
    eprintln!("unwound in the kernel: {unwound} of {samples}");
    // The first samples come before the tables are built (a few tens of ms, longer on a
    // loaded machine): those after must all be unwound.
    assert!(
        unwound > 0 && late_copied * 100 <= late * 2,
        "{unwound} of {samples} unwound in the kernel, {late_copied} of the {late} taken once \
         the tables were in copied"
    );
    let out = record(
        &[
            "--no-kernel-unwind",
            "--no-off-cpu",
            "--no-io",
            "-o",
            copies.to_str().unwrap(),
        ],
        &[busy.to_str().unwrap(), "1", "2"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));

    // perf reads the kernel's stacks as callchains: they reach the threads' roots as often
    // as perf's own unwinding of the copies does, and analyze shows the same stacks.
    let by_perf = perf_folded_user(&kernel);
    let total: u64 = by_perf.values().sum();
    let rooted: u64 = by_perf
        .iter()
        .filter(|(k, _)| reaches_root(k))
        .map(|(_, v)| v)
        .sum();
    let copies_by_perf = perf_folded_user(&copies);
    let copies_total: u64 = copies_by_perf.values().sum();
    let copies_rooted: u64 = copies_by_perf
        .iter()
        .filter(|(k, _)| reaches_root(k))
        .map(|(_, v)| v)
        .sum();
    eprintln!(
        "perf reaches the root in {rooted} of {total} (kernel-unwound), {copies_rooted} of \
         {copies_total} (copies)"
    );
    assert!(rooted * 100 >= total * 95, "{by_perf:#?}");
    let by_analyze = analyze_folded_user(&kernel);
    let same: u64 = by_perf
        .iter()
        .map(|(k, v)| by_analyze.get(k).copied().unwrap_or(0).min(*v))
        .sum();
    assert!(same * 100 >= total * 98, "{by_perf:#?}\n{by_analyze:#?}");
    // Every stack the kernel gave often (1% of the samples or more) is one the offline
    // unwinding of copies gives too.
    let offline = analyze_folded_user(&copies);
    let unknown: Vec<&String> = by_analyze
        .iter()
        .filter(|(k, v)| **v * 100 >= total && !offline.contains_key(*k))
        .map(|(k, _)| k)
        .collect();
    assert!(
        unknown.is_empty(),
        "stacks the copies never give: {unknown:#?}\ncopies: {offline:#?}"
    );
    let per_sample = |f: &Path, n: u64| std::fs::metadata(f).unwrap().len() as f64 / n as f64;
    let (k, c) = (
        per_sample(&kernel, total),
        per_sample(&copies, copies_total),
    );
    eprintln!("bytes per sample: {k:.0} unwound in the kernel, {c:.0} copied");
    assert!(k * 4.0 <= c, "{k:.0} vs {c:.0} bytes per sample");
}

#[test]
fn cxx_go_and_clang_stacks_are_unwound_in_the_kernel_at_least_as_deep_as_perfs() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("kernel-unwind-langs");
    let heavy = root().join("scripts/lib/heavy.cpp");
    let object = dir.path("heavy.o");
    let cxx = fixture("cxxprog-g++-nofp");
    let go = fixture("goprog");
    // (name, command, the root its stacks reach, frames deeper than perf's at least)
    let cases: [(&str, Vec<&str>, Option<&str>, f64); 3] = [
        // g++ without frame pointers: CFI only; shallow stacks, perf's depth.
        (
            "cxxprog",
            vec![cxx.to_str().unwrap(), "1", "2"],
            Some("clone3"),
            0.0,
        ),
        // Go: its .debug_frame (perf's own unwinder makes one frame of each copy: depth 1).
        (
            "goprog",
            vec![go.to_str().unwrap(), "1", "2"],
            Some("runtime.goexit"),
            0.0,
        ),
        // clang (Debian's, no frame pointers): stacks deeper than perf's 8 KiB copies reach.
        (
            "clang",
            vec![
                "clang++",
                "-O2",
                "-c",
                heavy.to_str().unwrap(),
                "-o",
                object.to_str().unwrap(),
            ],
            None,
            5.0,
        ),
    ];
    for (name, command, root, deeper) in cases {
        // Run once first: on a fresh machine clang's libraries (libLLVM, 100 MB) are not in
        // the page cache, and their unwind tables were then built too late for a compile of a
        // few seconds (37 of 5263 samples unwound in the kernel on a fresh CI machine; all but
        // a few once the files are cached, as on a machine that has run clang before).
        let warm = Command::new(command[0])
            .args(&command[1..])
            .output()
            .unwrap();
        assert!(warm.status.success(), "{name}: {}", stderr_of(&warm));
        let ours = dir.path(&format!("{name}.data"));
        let out = record(
            &[
                "-v",
                "--no-off-cpu",
                "--no-io",
                "-o",
                ours.to_str().unwrap(),
            ],
            &command,
        );
        assert!(out.status.success(), "{}", stderr_of(&out));
        let (unwound, samples) = unwound_in_kernel(&stderr_of(&out));
        let perf_file = dir.path(&format!("{name}.perf.data"));
        let st = Command::new("perf")
            .args(["record", "-q", "-F", "999", "--call-graph", "dwarf", "-o"])
            .arg(&perf_file)
            .arg("--")
            .args(&command)
            .output()
            .unwrap();
        assert!(st.status.success());
        let (ours_folded, perfs) = (
            perf_folded_user_no_inline(&ours),
            perf_folded_user_no_inline(&perf_file),
        );
        let (d_ours, d_perf, common) = mean_depths_at_perfs_leaves(&ours_folded, &perfs);
        eprintln!(
            "{name}: {unwound} of {samples} unwound in the kernel; mean depth {:.1} (perf \
             --call-graph dwarf {:.1}); at the leaves both have ({:.0}% of perf's samples) \
             {d_ours:.1} and {d_perf:.1}",
            mean_depth(&ours_folded),
            mean_depth(&perfs),
            common * 100.0
        );
        assert!(
            common >= 0.5,
            "{name}: {:.0}% of perf's samples",
            common * 100.0
        );
        // Until a process's tables are built its stacks are copied, for as long as the machine
        // takes to build them (libLLVM's: 26% of clang's samples beside a release build on a
        // fresh CI machine, a few when idle). Once they are in, nearly every stack is unwound.
        let (late, late_copied) = copied_once_tables_were_in(&stderr_of(&out));
        assert!(
            unwound > 0 && late_copied * 100 <= late * 2,
            "{name}: {unwound} of {samples} unwound in the kernel, {late_copied} of the {late} \
             taken once the tables were in copied; record said: {}",
            stderr_of(&out)
        );
        // Equal stacks differ by a frame here and there where a sample fell: 0.2 of slack.
        assert!(
            d_ours >= d_perf + deeper - 0.2,
            "{name}: depth {d_ours:.1}, perf's {d_perf:.1}"
        );
        if let Some(root) = root {
            let total: u64 = ours_folded.values().sum();
            let rooted: u64 = ours_folded
                .iter()
                .filter(|(k, _)| k.split(';').nth(1).is_some_and(|f| f.starts_with(root)))
                .map(|(_, v)| v)
                .sum();
            // The samples taken before the tables were in are the process's first (Go's
            // runtime starting, under rt0_go, not goexit) and as many as the machine is slow:
            // those the kernel unwound are the base.
            assert!(
                rooted * 100 >= unwound.min(total) * 80,
                "{name}: {rooted} of {total} reach {root}, {unwound} unwound in the kernel: \
                 {ours_folded:#?}"
            );
        }
    }
}
