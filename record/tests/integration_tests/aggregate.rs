//! `record --aggregate`: samples counted in the kernel per thread and stacks give the profile
//! that sending each sample gives, in a file a fraction of the size, that perf weighs alike.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// Samples per second: enough samples in 2 s that two runs' shares differ by a point at most
/// (a share's sampling error with 10k samples is half a point).
const FREQ: &str = "4999";

/// Records `busy SECONDS 2` with `args`, with or without --aggregate; returns the summary's
/// sample count.
fn record_busy(busy: &str, file: &Path, call_graph: &str, aggregate: bool, seconds: &str) -> u64 {
    let mut args = vec![
        "--call-graph",
        call_graph,
        "-F",
        FREQ,
        "--no-off-cpu",
        "--no-io",
        "-o",
        file.to_str().unwrap(),
    ];
    if aggregate {
        args.push("--aggregate");
    }
    let out = record(&args, &[&fixture(busy).to_string_lossy(), seconds, "2"]);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    eprintln!("{}", stderr.trim());
    let (samples, lost) = summary_counts(&stderr);
    assert_eq!(lost, 0, "{stderr}");
    samples
}

/// Shares (0..100) of each leaf function, and of each whole stack, of a folded profile.
fn shares(folded: &BTreeMap<String, u64>) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
    let total: u64 = folded.values().sum();
    let mut leaves = BTreeMap::new();
    let mut stacks = BTreeMap::new();
    for (stack, &w) in folded {
        let share = 100.0 * w as f64 / total as f64;
        let leaf = stack.rsplit(';').next().unwrap_or("").to_string();
        *leaves.entry(leaf).or_insert(0.0) += share;
        *stacks.entry(stack.clone()).or_insert(0.0) += share;
    }
    (leaves, stacks)
}

/// The allowed difference (points) between two runs' shares `p` (0..100) of `n1` and `n2`
/// samples: a point, or three standard errors of the difference when sampling alone makes
/// more.
fn tolerance(p: f64, n1: u64, n2: u64) -> f64 {
    let p = p / 100.0;
    let se = (p * (1.0 - p) * (1.0 / n1 as f64 + 1.0 / n2 as f64)).sqrt() * 100.0;
    (3.0 * se).max(1.0)
}

/// Every function and stack holding at least 5% in either profile has the same share in both.
fn assert_same_shares(
    what: &str,
    each: &BTreeMap<String, u64>,
    counted: &BTreeMap<String, u64>,
    n_each: u64,
    n_counted: u64,
) {
    let (leaves_a, stacks_a) = shares(each);
    let (leaves_b, stacks_b) = shares(counted);
    for (kind, a, b) in [
        ("function", &leaves_a, &leaves_b),
        ("stack", &stacks_a, &stacks_b),
    ] {
        let big: std::collections::BTreeSet<&String> = a
            .iter()
            .chain(b.iter())
            .filter(|(_, &s)| s >= 5.0)
            .map(|(k, _)| k)
            .collect();
        assert!(!big.is_empty(), "{what}: no {kind} holds 5%");
        for k in big {
            let (x, y) = (
                a.get(k).copied().unwrap_or(0.0),
                b.get(k).copied().unwrap_or(0.0),
            );
            let tol = tolerance(x.max(y), n_each, n_counted);
            eprintln!("{what}: {kind} {k}: one by one {x:.2}%, counted {y:.2}% (within {tol:.2})");
            assert!(
                (x - y).abs() <= tol,
                "{what}: {kind} {k}: {x:.2}% one by one, {y:.2}% counted in the kernel\n\
                 one by one: {each:#?}\ncounted: {counted:#?}"
            );
        }
    }
}

/// Per-sample and aggregated recordings of the same program (`seconds` long): the same
/// profile; the aggregated file at least `smaller` times smaller.
fn same_profile_smaller_file(tag: &str, busy: &str, call_graph: &str, seconds: &str, smaller: f64) {
    let dir = TempDir::new(tag);
    let each_file = dir.path("each.data");
    let counted_file = dir.path("counted.data");
    let n_each = record_busy(busy, &each_file, call_graph, false, seconds);
    let n_counted = record_busy(busy, &counted_file, call_graph, true, seconds);
    let each = analyze_folded(&each_file, &["--no-inline"]);
    let counted = analyze_folded(&counted_file, &["--no-inline"]);
    // analyze weighs the counted samples by their counts: the summary's number of samples.
    let total: u64 = counted.values().sum();
    assert_eq!(total, n_counted, "weights = samples counted");
    assert_same_shares(
        &format!("{tag} ({n_each} vs {n_counted} samples)"),
        &each,
        &counted,
        n_each,
        n_counted,
    );
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    let (a, b) = (size(&each_file), size(&counted_file));
    let ratio = a as f64 / b as f64;
    eprintln!("{tag}: one by one {a} bytes, counted {b} bytes: {ratio:.1} times smaller");
    assert!(ratio >= smaller, "{tag}: only {ratio:.1} times smaller");
}

#[test]
fn aggregated_frame_pointer_profile_is_the_per_sample_one_in_a_smaller_file() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    // 7.5k samples: 717 KB one by one, 23 KB counted (31 times smaller) here.
    same_profile_smaller_file("aggregate-fp", "busy-fp", "fp", "2", 10.0);
}

#[test]
fn aggregated_dwarf_profile_is_the_per_sample_one_in_a_smaller_file() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    // The samples taken before the kernel has the program's unwind tables carry stack
    // copies (up to 32 KB each) either way, and they are most of the counted file: in 2 s,
    // 3.0 MB one by one, 650-730 KB counted (4.2-4.7 times smaller) here, and 1.34 MB (2.2)
    // on a busy machine that took longer to build the tables. So 4 s: the copies stay, the
    // rest of the per-sample file doubles.
    same_profile_smaller_file("aggregate-dwarf", "busy-nofp", "dwarf", "4", 3.0);
}

/// `perf report --sort sym` of a file: each symbol's share (0..100), by period; asserts a
/// clean stderr.
fn perf_symbol_shares(file: &Path) -> BTreeMap<String, f64> {
    let out = Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--sort",
            "sym",
            "-g",
            "none",
        ])
        .arg("-i")
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "perf report: {stderr}");
    assert!(stderr.trim().is_empty(), "perf report wrote: {stderr}");
    let mut shares = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "    53.09%  [.] spin_inner"
        let t = line.trim();
        let Some((pct, rest)) = t.split_once("%  ") else {
            continue;
        };
        let Ok(pct) = pct.parse::<f64>() else {
            continue;
        };
        let sym = rest.split_once("] ").map_or(rest, |(_, s)| s).trim();
        *shares.entry(sym.to_string()).or_insert(0.0) += pct;
    }
    shares
}

#[test]
fn perf_reads_aggregated_files_and_weighs_them_as_analyze_does() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("aggregate-perf");
    let file = dir.path("counted.data");
    record_busy("busy-fp", &file, "fp", true, "2");
    // perf script reads it without a word on stderr.
    let script = perf_script_clean(&file);
    assert!(script.contains("spin_inner"), "{script}");
    let theirs = perf_symbol_shares(&file);
    let (mine, _) = shares(&analyze_folded(&file, &["--no-inline"]));
    let top: Vec<(&String, &f64)> = mine.iter().filter(|(_, &s)| s >= 1.0).collect();
    assert!(top.len() >= 2, "{mine:#?}");
    for (sym, &ours) in top {
        let perf = theirs.get(sym).copied().unwrap_or(0.0);
        eprintln!("{sym}: analyze {ours:.2}%, perf report {perf:.2}%");
        assert!(
            (ours - perf).abs() <= 1.0,
            "{sym}: analyze {ours:.2}%, perf {perf:.2}%\nperf: {theirs:#?}\nanalyze: {mine:#?}"
        );
    }
    // analyze info says the samples were counted, and how many they stand for.
    let out = analyze(&["info"], &file);
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(info.contains("counted in the kernel"), "{info}");
}

#[test]
fn aggregated_counts_are_written_every_interval() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("aggregate-interval");
    let file = dir.path("counted.data");
    let started = std::time::Instant::now();
    let out = record(
        &[
            "--call-graph",
            "fp",
            "--no-off-cpu",
            "--no-io",
            "--aggregate",
            "--interval",
            "1",
            "-o",
            file.to_str().unwrap(),
        ],
        &[&fixture("busy-fp").to_string_lossy(), "3", "1"],
    );
    let wall = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let out = Command::new("perf")
        .args(["script", "-F", "time,period", "-i"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    // Counted records share their interval's end as their time and weigh what they count;
    // the samples sent one by one (the first of each new stack may be, when the kernel's
    // allocator has no room at hand) weigh 1 each and have their own.
    let mut counted_at: BTreeMap<u64, u64> = BTreeMap::new();
    let mut total = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut w = line.split_whitespace();
        let (Some(time), Some(period)) = (w.next(), w.next()) else {
            continue;
        };
        let (Some(ns), Ok(period)) = (ns_of(time), period.parse::<u64>()) else {
            continue;
        };
        total += period;
        if period > 1 {
            *counted_at.entry(ns).or_insert(0) += period;
        }
    }
    let counted: u64 = counted_at.values().sum();
    let times: Vec<u64> = counted_at.keys().copied().collect();
    eprintln!("counted by time: {counted_at:?} of {total} in {wall:.2} s");
    // busy-fp spins 3 s of CPU time: the run is at least that long however busy the machine,
    // and its counts were written once a second, not more often, and not only at the end.
    assert!(counted * 100 >= total * 95, "{counted} of {total} counted");
    assert!(
        times.len() >= 2 && times.len() as f64 <= wall.ceil() + 1.0,
        "counts written at {} times in {wall:.2} s",
        times.len()
    );
    // Each interval's counts a second after the last's; the last counts, at the end, as soon
    // as the workload exits (any time after the last interval).
    let intervals = &times[..times.len() - 1];
    for gap in intervals.windows(2).map(|t| t[1] - t[0]) {
        assert!(
            gap >= 900_000_000,
            "counts written {gap} ns apart: {times:?}"
        );
    }
}

/// A `perf script` time (`22498.079112:`) in nanoseconds.
fn ns_of(time: &str) -> Option<u64> {
    let (s, us) = time.trim_end_matches(':').split_once('.')?;
    Some(s.parse::<u64>().ok()? * 1_000_000_000 + us.parse::<u64>().ok()? * 1_000)
}

/// tracee's calls (`tracee 40 10 7 13 30 2`): 40 openat (10 failing), 7 getaddrinfo, 13
/// USDT ticks, 30 naps of 2 ms (the naps come last: by then the kernel has tracee's unwind
/// tables, so that in DWARF mode those are unwound and counted in the kernel).
const TRACEE_ARGS: [&str; 6] = ["40", "10", "7", "13", "30", "2"];

/// The traced events of the tests below, for the tracee at `t`: (event name in the file,
/// record's -e and --filter words).
fn traced_events(t: &str) -> Vec<(String, Vec<String>)> {
    let s = |v: &[&str]| v.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    vec![
        (
            "syscalls:sys_enter_openat".into(),
            s(&["-e", "syscalls:sys_enter_openat"]),
        ),
        (
            "syscalls:sys_exit_openat".into(),
            s(&["-e", "syscalls:sys_exit_openat", "--filter", "ret < 0"]),
        ),
        (
            "probe_libc:getaddrinfo__return".into(),
            s(&["-e", "uretprobe:libc:getaddrinfo"]),
        ),
        (
            "sdt_bpfperf_test:tick".into(),
            s(&["-e", &format!("usdt:{t}:bpfperf_test:tick")]),
        ),
        (
            "probe_tracee:nap__return".into(),
            s(&["-e", &format!("uretprobe:{t}:nap")]),
        ),
    ]
}

/// Records tracee's traced events (`extra`: --aggregate, ...); returns record's stderr.
fn record_tracee(
    bin: &str,
    file: &Path,
    call_graph: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> String {
    let tracee = fixture(bin);
    let t = tracee.to_str().unwrap();
    let mut args: Vec<String> = ["--call-graph", call_graph, "-o", file.to_str().unwrap()]
        .iter()
        .map(|w| w.to_string())
        .collect();
    for (_, words) in traced_events(t) {
        args.extend(words);
    }
    args.extend(extra.iter().map(|w| w.to_string()));
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .env_remove("LD_LIBRARY_PATH")
        .envs(env.iter().copied())
        .args(&args)
        .arg("--")
        .arg(t)
        .args(TRACEE_ARGS)
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "record {args:?}: {stderr}");
    stderr
}

/// `analyze count`'s table: events per event name.
fn counts(file: &Path) -> BTreeMap<String, u64> {
    let out = analyze(&["count"], file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (k, v) = l.trim().rsplit_once(' ')?;
            Some((k.trim().to_string(), v.parse().ok()?))
        })
        .collect()
}

/// What analyze info says of each event counted in the kernel: (events, written alone with a
/// copied stack, written alone for want of room).
fn counted_in_info(file: &Path) -> BTreeMap<String, (u64, u64, u64)> {
    let out = analyze(&["info"], file);
    let info = String::from_utf8_lossy(&out.stdout).to_string();
    let mut by_event = BTreeMap::new();
    for line in info.lines() {
        // "  E: counted in the kernel (record --aggregate): its 3 samples stand for 42 events
        // (bpfperf_count); written alone: 0 with a copied stack, 0 that did not fit ..."
        let Some((name, rest)) = line.trim().split_once(": counted in the kernel") else {
            continue;
        };
        let Some((_, n)) = rest.split_once("stand for ") else {
            continue;
        };
        let number = |s: &str| s.split_whitespace().next().unwrap().parse::<u64>().unwrap();
        let (_, alone) = rest.split_once("written alone: ").unwrap();
        let (copied, no_room) = alone.split_once(", ").unwrap();
        by_event.insert(
            name.to_string(),
            (number(n), number(copied), number(no_room)),
        );
    }
    by_event
}

/// Each traced event recorded one by one and counted in the kernel (two runs of tracee):
/// the same counts (known totals), and the same folded stacks, each within a point of the
/// event's weight.
fn traced_events_counted_as_written(tag: &str, bin: &str, call_graph: &str) {
    let dir = TempDir::new(tag);
    let (each, counted) = (dir.path("each.data"), dir.path("counted.data"));
    record_tracee(bin, &each, call_graph, &[], &[]);
    let stderr = record_tracee(bin, &counted, call_graph, &["--aggregate"], &[]);
    eprintln!("{}", stderr.trim());
    let (a, b) = (counts(&each), counts(&counted));
    eprintln!("one by one: {a:?}\ncounted: {b:?}");
    assert_eq!(a, b, "the same counts");
    for (name, n) in [
        ("syscalls:sys_exit_openat", 10),
        ("probe_libc:getaddrinfo__return", 7),
        ("sdt_bpfperf_test:tick", 13),
        ("probe_tracee:nap__return", 30),
    ] {
        assert_eq!(b.get(name), Some(&n), "{name}: {b:?}");
    }
    assert!(b["syscalls:sys_enter_openat"] >= 40, "{b:?}");
    for (name, _) in traced_events(bin) {
        let each = analyze_folded(&each, &["--event", &name, "--no-inline"]);
        let counted = analyze_folded(&counted, &["--event", &name, "--no-inline"]);
        let (sa, sb) = (shares(&each).1, shares(&counted).1);
        let keys: std::collections::BTreeSet<&String> = sa.keys().chain(sb.keys()).collect();
        for k in keys {
            let (x, y) = (
                sa.get(k).copied().unwrap_or(0.0),
                sb.get(k).copied().unwrap_or(0.0),
            );
            eprintln!("{tag} {name}: {k}: one by one {x:.2}%, counted {y:.2}%");
            assert!(
                (x - y).abs() <= 1.0,
                "{name}: {k}: {x:.2}% one by one, {y:.2}% counted\n{each:#?}\n{counted:#?}"
            );
        }
    }
    // The file says what its samples stand for; every event was counted in the kernel or
    // written alone for a copied stack (DWARF mode, before the kernel had the tables).
    let info = counted_in_info(&counted);
    eprintln!("analyze info: {info:?}");
    for (name, n) in &b {
        let (events, _, no_room) = info[name];
        assert_eq!((events, no_room), (*n, 0), "{name}");
    }
    let (_, copied, _) = info["probe_tracee:nap__return"];
    assert!(copied < 30, "no nap counted in the kernel: {info:?}");
}

#[test]
fn traced_events_counted_in_the_kernel_fold_as_written_one_by_one_fp() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    traced_events_counted_as_written("aggregate-traced-fp", "tracee-fp", "fp");
}

#[test]
fn traced_events_counted_in_the_kernel_fold_as_written_one_by_one_dwarf() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    traced_events_counted_as_written("aggregate-traced-dwarf", "tracee-nofp", "dwarf");
}

/// `perf report --sort sym` of each event of a file: per event, each symbol's share.
fn perf_symbol_shares_by_event(file: &Path) -> BTreeMap<String, BTreeMap<String, f64>> {
    let out = Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--sort",
            "sym",
            "-g",
            "none",
            "-i",
        ])
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "perf report: {stderr}");
    assert!(stderr.trim().is_empty(), "perf report wrote: {stderr}");
    let mut by_event: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    let mut event = String::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "# Samples: 3  of event 'syscalls:sys_enter_openat'"
        if let Some((_, e)) = line.split_once("of event '") {
            event = e.trim_end_matches('\'').to_string();
            continue;
        }
        let t = line.trim();
        let Some((pct, rest)) = t.split_once("%  ") else {
            continue;
        };
        let Ok(pct) = pct.parse::<f64>() else {
            continue;
        };
        let sym = rest.split_once("] ").map_or(rest, |(_, s)| s).trim();
        *by_event
            .entry(event.clone())
            .or_default()
            .entry(sym.to_string())
            .or_insert(0.0) += pct;
    }
    by_event
}

/// perf report weighs the samples of traced events counted in the kernel (period: the
/// count; a latency pair's: the latencies summed) as analyze does: each event's symbols
/// with the same shares.
#[test]
fn perf_weighs_traced_events_counted_in_the_kernel_as_analyze_does() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("aggregate-traced-perf");
    let file = dir.path("counted.data");
    record_tracee("tracee-fp", &file, "fp", &["--aggregate"], &[]);
    perf_script_clean(&file);
    let theirs = perf_symbol_shares_by_event(&file);
    for (name, _) in traced_events("tracee-fp") {
        let (mine, _) = shares(&analyze_folded(&file, &["--event", &name, "--no-inline"]));
        let perf = &theirs[&name];
        for (sym, &ours) in mine.iter().filter(|(_, &s)| s >= 1.0) {
            let p = perf.get(sym).copied().unwrap_or(0.0);
            eprintln!("{name}: {sym}: analyze {ours:.2}%, perf report {p:.2}%");
            // perf prints two decimals.
            assert!(
                (ours - p).abs() <= 0.006,
                "{name}: {sym}: {ours} vs {p}\n{perf:#?}"
            );
        }
    }
}

/// Aggregation maps of 2 entries (BPFPERF_AGG_ENTRIES): the events that do not fit are
/// written one by one, nothing is lost, and the file says how many did not fit (analyze
/// info: as many as record's summary).
#[test]
fn traced_events_that_do_not_fit_are_written_alone_and_said() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("aggregate-traced-full");
    let file = dir.path("full.data");
    let stderr = record_tracee(
        "tracee-fp",
        &file,
        "fp",
        &["--aggregate"],
        &[("BPFPERF_AGG_ENTRIES", "2")],
    );
    let missed: u64 = stderr
        .lines()
        .find_map(|l| l.split_once("written one by one: ")?.1.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count of what did not fit: {stderr}"));
    let info = counted_in_info(&file);
    eprintln!("record: {missed} did not fit; analyze info: {info:?}");
    let no_room: u64 = info.values().map(|&(_, _, n)| n).sum();
    assert_eq!(no_room, missed);
    // 103 events, of which 2 map entries' worth at most were counted.
    assert!(missed >= 90, "{missed}");
    let c = counts(&file);
    assert_eq!(c["sdt_bpfperf_test:tick"], 13);
    assert_eq!(c["probe_tracee:nap__return"], 30);
}

/// The pids of the processes `perf script --show-task-events --show-mmap-events` says the file
/// describes (COMM and MMAP2 records), and the sample lines of pid `pid` ("pid sym").
fn described_pids_and_samples_of(file: &Path, pid: u32) -> (Vec<u32>, Vec<String>) {
    let out = Command::new("perf")
        .args([
            "script",
            "--show-task-events",
            "--show-mmap-events",
            "--hide-call-graph",
            "-F",
            "pid,period,event,ip,sym",
            "-i",
        ])
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "perf script: {stderr}");
    assert!(stderr.trim().is_empty(), "perf script wrote: {stderr}");
    let mut described = Vec::new();
    let mut samples = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(first) = line
            .split_whitespace()
            .next()
            .and_then(|w| w.parse::<u32>().ok())
        else {
            continue;
        };
        if line.contains("PERF_RECORD_COMM") || line.contains("PERF_RECORD_MMAP2") {
            described.push(first);
        } else if first == pid && line.contains("cpu-clock") {
            samples.push(line.trim().to_string());
        }
    }
    described.sort_unstable();
    described.dedup();
    (described, samples)
}

/// System-wide and counted in the kernel, the file describes only the processes it has samples
/// of: not a sleeping process that was there all along, but a program that ran and exited
/// between two takes of the counts (its last counts come after its exit), whose samples perf
/// names.
#[test]
fn system_wide_counts_describe_only_the_processes_they_count() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("aggregate-thin");
    let file = dir.path("counted.data");
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let busy = fixture("busy-fp");
    let busy_pid = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    // The recording lasts until busy-fp (started by this test, not by record) has ended,
    // however slow the machine: its workload, one shell, reads a FIFO the starter writes then.
    let done = dir.path("busy-done");
    assert!(Command::new("mkfifo")
        .arg(&done)
        .status()
        .unwrap()
        .success());
    let starter = {
        let busy_pid = busy_pid.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(1200));
            let mut child = Command::new(busy).args(["0.6", "1"]).spawn().unwrap();
            busy_pid.store(child.id(), std::sync::atomic::Ordering::SeqCst);
            let status = child.wait().unwrap();
            std::fs::write(&done, b"done\n").unwrap();
            status
        })
    };
    let wait_for_busy = format!("read line < {}", done.display());
    let out = record(
        &[
            "-a",
            "-F",
            "499",
            "-e",
            "cpu-clock",
            "--call-graph",
            "fp",
            "--aggregate",
            "-o",
            file.to_str().unwrap(),
        ],
        &["sh", "-c", &wait_for_busy],
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(starter.join().unwrap().success());
    assert!(out.status.success(), "{}", stderr_of(&out));
    let busy_pid = busy_pid.load(std::sync::atomic::Ordering::SeqCst);
    let processes = std::fs::read_dir("/proc")
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        })
        .count();
    let (described, samples) = described_pids_and_samples_of(&file, busy_pid);
    eprintln!(
        "{} of ~{processes} processes described; busy-fp (pid {busy_pid}): {} records",
        described.len(),
        samples.len()
    );
    assert!(
        !described.contains(&sleeper.id()),
        "a sleeping process is described: {described:?}"
    );
    assert!(described.contains(&busy_pid), "{described:?}");
    assert!(
        described.len() * 2 < processes,
        "{} of {processes} processes described",
        described.len()
    );
    // busy-fp's counts, written after it exited, are named: spin_inner and hash_loop hold
    // nearly all. (Not "spin_inner leads": their split follows the machine's speed, 148 of 300
    // for spin_inner on a busy fresh CI machine.)
    let weight = |keep: &dyn Fn(&str) -> bool| -> u64 {
        samples
            .iter()
            .filter(|l| keep(l))
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let total = weight(&|_| true);
    let spin = weight(&|l| l.ends_with("spin_inner"));
    let hash = weight(&|l| l.ends_with("hash_loop"));
    let unknown = weight(&|l| l.contains("[unknown]"));
    assert!(total >= 100, "{samples:#?}");
    assert!(
        (spin + hash) * 10 >= total * 9 && spin * 4 > total,
        "spin_inner {spin}, hash_loop {hash} of {total}: {samples:#?}"
    );
    assert!(unknown * 100 <= total, "[unknown] {unknown} of {total}");
    // analyze names them too.
    let pid = busy_pid.to_string();
    let folded = analyze_folded(&file, &["--no-inline", "--pid", &pid]);
    let ours: u64 = folded
        .iter()
        .filter(|(k, _)| k.ends_with(";spin_inner"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(ours, spin, "analyze's spin_inner of busy-fp vs perf's");
    // Named as it was when it exited: all but what the process did before its exec, as the
    // test runner's fork (1 of 302 on a fresh CI machine).
    let by_name: u64 = analyze_folded(&file, &["--no-inline", "--comm", "busy-fp"])
        .values()
        .sum();
    assert!(
        by_name <= total && by_name * 100 >= total * 98,
        "busy-fp's samples by its name: {by_name} of {total}"
    );
}
