//! Python frames (Debian's CPython 3.11; other versions in python_versions.rs): named in place of the eval frames that ran them, against
//! py-spy (from PyPI, installed by scripts/setup into target/pyspy) and the split the
//! program measures itself (thread CPU time around each call).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;

const PYTHON: &str = "/usr/bin/python3.11";
/// The functions the workload times, by thread: each thread's are disjoint.
const THREADS: [[&str; 2]; 2] = [["outer", "recurse"], ["hash_work", "compress_work"]];

fn workload() -> String {
    root()
        .join("fixtures/python/workload.py")
        .display()
        .to_string()
}

fn py_spy() -> PathBuf {
    let p = root().join("target/pyspy/bin/py-spy");
    assert!(
        p.exists(),
        "{} missing: run scripts/setup (py-spy from PyPI)",
        p.display()
    );
    p
}

/// A frame's function: `name (file.py:line)` -> name.
fn function(frame: &str) -> &str {
    frame.split(" (").next().unwrap_or(frame)
}

/// Each function's share (percent) of its thread's weight under the thread's timed functions
/// (and that weight, per thread), from folded stacks (frames `;`-separated, root first).
/// Shares within a thread: how the threads' time splits depends on how long each waited
/// for a CPU on this shared machine, which py-spy counts (a runnable thread is active to it)
/// and CPU time does not; within a thread such waits fall evenly on its functions.
fn shares<'a>(stacks: impl Iterator<Item = (&'a str, u64)>) -> (BTreeMap<String, f64>, [u64; 2]) {
    let mut under: BTreeMap<String, u64> = BTreeMap::new();
    let mut totals = [0u64; 2];
    for (stack, n) in stacks {
        let names: std::collections::BTreeSet<&str> = stack.split(';').map(function).collect();
        let Some(t) = THREADS
            .iter()
            .position(|fs| fs.iter().any(|f| names.contains(f)))
        else {
            continue;
        };
        totals[t] += n;
        for name in names {
            *under.entry(format!("{t}:{name}")).or_default() += n;
        }
    }
    let mut pct = BTreeMap::new();
    for (k, v) in under {
        let (t, name) = k.split_once(':').unwrap();
        let total = totals[t.parse::<usize>().unwrap()];
        pct.insert(name.to_string(), 100.0 * v as f64 / total.max(1) as f64);
    }
    (pct, totals)
}

/// The thread (index into [`THREADS`]) that times function `f`.
fn thread_of(f: &str) -> usize {
    THREADS.iter().position(|fs| fs.contains(&f)).unwrap()
}

/// How far (points) a share measured from `n` samples may stray from a true `percent`: 3
/// points, or three standard errors of a share of `n` samples where they are fewer (under CI's
/// load the worker thread got 270-920 samples: one standard error of a 40% share is 1.6-3
/// points there).
fn sampling_tolerance(percent: f64, n: u64) -> f64 {
    let p = percent / 100.0;
    let standard_error = 100.0 * (p * (1.0 - p) / n.max(1) as f64).sqrt();
    (3.0 * standard_error).max(3.0)
}

/// The workload's own split: CPU seconds per timed function, from its last line.
fn known_split(stdout: &str) -> BTreeMap<String, f64> {
    let line = stdout
        .lines()
        .rfind(|l| l.contains("\"cpu\""))
        .unwrap_or_else(|| panic!("no split printed: {stdout}"));
    let cpu = line.split("\"cpu\": {").nth(1).unwrap();
    let mut v: BTreeMap<String, f64> = BTreeMap::new();
    for part in cpu.trim_end_matches(['}', ' ']).split(", ") {
        let (k, s) = part.split_once(": ").unwrap();
        v.insert(k.trim_matches('"').to_string(), s.parse().unwrap());
    }
    let mut pct = BTreeMap::new();
    for fs in THREADS {
        let total: f64 = fs.iter().map(|f| v[*f]).sum();
        for f in fs {
            pct.insert(f.to_string(), 100.0 * v[f] / total);
        }
    }
    pct
}

fn folded_of(file: &Path) -> BTreeMap<String, u64> {
    analyze_folded(file, &["--event", "cpu"])
}

#[test]
fn python_function_shares_match_the_known_split() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    shares_match_the_known_split(PYTHON);
}

/// The workload recorded from its start under `python`: each function's share of its thread
/// within 3 points of the program's own split, native frames kept around the Python ones.
pub fn shares_match_the_known_split(python: &str) {
    shares_match_the_known_split_under(&[], python);
}

/// The same with `python` started by the command `prefix` (`unshare ...`).
pub fn shares_match_the_known_split_under(prefix: &[&str], python: &str) {
    shares_match_the_known_split_with(&[], prefix, python);
}

/// As [`shares_match_the_known_split`], with record's `options` (`-a`) and the workload run
/// under `prefix` (`unshare ...`).
pub fn shares_match_the_known_split_with(options: &[&str], prefix: &[&str], python: &str) {
    let dir = TempDir::new("python");
    let data = dir.path("perf.data");
    let script = workload();
    let out = record(
        &[&["-v", "-o", data.to_str().unwrap()], options].concat(),
        &[prefix, &[python, &script, "4"]].concat(),
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let ours_known = known_split(&String::from_utf8_lossy(&out.stdout));
    let folded = folded_of(&data);
    let (ours, per_thread) = shares(folded.iter().map(|(k, v)| (k.as_str(), *v)));
    let n = per_thread[0] + per_thread[1];
    assert!(
        n >= 300,
        "only {n} samples under the timed functions; record: {}; {} stacks, e.g. {:?}",
        stderr_of(&out),
        folded.len(),
        folded.keys().last()
    );

    for f in THREADS.concat() {
        let (o, k) = (ours.get(f).copied().unwrap_or(0.0), ours_known[f]);
        let samples = per_thread[thread_of(f)];
        let within = sampling_tolerance(k, samples);
        eprintln!("{f}: ours {o:.1}%, known {k:.1}% ({samples} samples: within {within:.1})");
        assert!(
            (o - k).abs() <= within,
            "{f}: {o:.1}% vs the known {k:.1}% ({samples} samples of its thread)"
        );
    }

    // Native frames kept around them: the interpreter's entry below, the C code above.
    fn under<'a>(
        folded: &'a BTreeMap<String, u64>,
        f: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a u64)> + 'a {
        folded
            .iter()
            .filter(move |(k, _)| k.split(';').any(|x| function(x) == f))
    }
    let stacks_with = |f: &'static str| under(&folded, f);
    let total = |it: &mut dyn Iterator<Item = (&String, &u64)>| it.map(|(_, v)| *v).sum::<u64>();
    let main = total(&mut stacks_with("main_loop"));
    let rooted = total(&mut stacks_with("main_loop").filter(|(k, _)| {
        k.contains(";_start;") && k.contains("Py_BytesMain") && k.contains("Py_RunMain")
    }));
    assert!(
        rooted * 100 >= main * 95,
        "{rooted} of {main} main_loop samples under _start/Py_BytesMain/Py_RunMain"
    );
    let worker = total(&mut stacks_with("worker_loop"));
    let threaded =
        total(&mut stacks_with("worker_loop").filter(|(k, _)| k.contains("start_thread;")));
    assert!(
        threaded * 100 >= worker * 95,
        "{threaded} of {worker} worker_loop samples under start_thread"
    );
    // Above: zlib's deflate under compress_work, libcrypto's SHA-256 under hash_work.
    let after = |f: &'static str, pat: &str| {
        total(&mut stacks_with(f).filter(|(k, _)| {
            let at = k.find(&format!(";{f} (")).unwrap();
            k[at..].to_lowercase().contains(pat)
        }))
    };
    let deflate = after("compress_work", "deflate");
    let sha = after("hash_work", "sha256");
    eprintln!(
        "compress_work: {deflate} of {} in deflate; hash_work: {sha} of {} in sha256",
        total(&mut stacks_with("compress_work")),
        total(&mut stacks_with("hash_work"))
    );
    assert!(
        deflate * 2 >= total(&mut stacks_with("compress_work")),
        "deflate under compress_work: {deflate}"
    );
    assert!(
        sha * 2 >= total(&mut stacks_with("hash_work")),
        "sha256 under hash_work: {sha}"
    );
    // No eval frame left where Python frames were placed (but in samples taken while an
    // eval call was entered or left, between the native call and the frame's link: a few
    // in thousands), and perf names them too.
    let evals =
        total(&mut folded.iter().filter(|(k, _)| {
            k.contains("main_loop (") && k.contains(";_PyEval_EvalFrameDefault;")
        }));
    eprintln!("eval frames left in {evals} of {main} main_loop samples");
    assert!(
        evals * 100 <= main,
        "eval frames left in {evals} of {main} main_loop samples"
    );
    // Off-CPU stacks too (GIL waits, the threads' joins): named where they blocked.
    // (The prefix's process, `unshare` waiting for python, is none of python's.) The time
    // they blocked: off-CPU less the run queue's part, which grows with the machine's load
    // wherever the interpreter was preempted (its start, its imports: a busy machine's run
    // had 20% of its off-CPU time there).
    // Recorded with -a: only the workload's Python process (by its host pid, the one whose
    // samples pass through main_loop).
    let python_pid = options.contains(&"-a").then(|| {
        let table = analyze(&["report", "--sort", "pid,sym", "--children"], &data);
        let table = String::from_utf8_lossy(&table.stdout).to_string();
        let row = table.lines().find(|l| l.contains("main_loop (")).unwrap();
        let pid = row.split_whitespace().nth(2).unwrap().split(':').next();
        pid.unwrap().to_string()
    });
    let only = match &python_pid {
        Some(pid) => vec!["--pid", pid.as_str()],
        None => vec![],
    };
    let blocked = |event_offcpu: bool| -> (u64, u64) {
        let folded = analyze_folded(
            &data,
            &[
                &["--event", if event_offcpu { "offcpu" } else { "runq" }][..],
                &only,
            ]
            .concat(),
        );
        let all: u64 = folded
            .iter()
            .filter(|(k, _)| prefix.is_empty() || !k.starts_with(&format!("{};", prefix[0])))
            .map(|(_, v)| *v)
            .sum();
        let named: u64 = folded
            .iter()
            .filter(|(k, _)| k.contains("main_loop (") || k.contains("worker_loop ("))
            .map(|(_, v)| *v)
            .sum();
        (all, named)
    };
    let ((all_off, named_off), (all_runq, named_runq)) = (blocked(true), blocked(false));
    let (all, named) = (
        all_off.saturating_sub(all_runq),
        named_off.saturating_sub(named_runq),
    );
    eprintln!("off-CPU, blocked: {named} of {all} ns under main_loop or worker_loop");
    if named * 100 < all * 80 {
        let folded = analyze_folded(&data, &[&["--event", "offcpu"][..], &only].concat());
        let mut unnamed: Vec<(&String, &u64)> = folded
            .iter()
            .filter(|(k, _)| !k.contains("main_loop (") && !k.contains("worker_loop ("))
            .collect();
        unnamed.sort_by_key(|(_, v)| std::cmp::Reverse(**v));
        panic!(
            "off-CPU: {named} of {all} ns under Python frames; the heaviest others: {unnamed:#?}",
            unnamed = &unnamed[..unnamed.len().min(6)]
        );
    }
    // (Only the workload's samples under -a: perf unwinds every copied stack it shows.
    // There, a loaded machine's other processes may overflow the ring: perf warns of the
    // lost events the file counts.)
    let script_out = if only.is_empty() {
        perf_script_clean(&data)
    } else {
        let out = Command::new("perf")
            .args(["script", "-i"])
            .arg(&data)
            .args(&only)
            .output()
            .unwrap();
        let warned = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "perf script: {warned}");
        let lost_only = warned
            .lines()
            .filter(|l| !l.trim().is_empty())
            .all(|l| l.contains("lost") || l.contains("Warning:") || l.contains("overload"));
        assert!(lost_only, "perf script wrote to stderr: {warned}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        script_out.contains("hot_inner ("),
        "perf script does not name hot_inner"
    );
    // The archive keeps the perf map: the names stay once it is gone from /tmp.
    let stderr = stderr_of(&out);
    let map = stderr
        .split("names in ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or_else(|| panic!("no perf map named: {stderr}"))
        .to_string();
    let archived = analyze(&["archive"], &data);
    assert!(archived.status.success(), "{}", stderr_of(&archived));
    std::fs::remove_file(&map).unwrap();
    let from_archive = analyze_folded(&dir.path("perf.data.tar.zst"), &[]);
    assert!(
        from_archive.keys().any(|k| k.contains(";hot_inner (")),
        "no Python names from the archive"
    );
}

/// py-spy starts the workload and samples it all along (pausing it for each sample, as it does
/// by default); record attaches
/// with `-p` a second in, for six seconds (of eight): each function's share within 3 points of py-spy's
/// and of the known split.
#[test]
fn python_frames_with_p_match_py_spy() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    frames_with_p_match_py_spy(PYTHON);
}

/// The same attached with `-p` to `python` running the workload under py-spy.
pub fn frames_with_p_match_py_spy(python: &str) {
    let dir = TempDir::new("python-p");
    let data = dir.path("perf.data");
    let raw = dir.path("pyspy.txt");
    let spy = Command::new(py_spy())
        // (--nonblocking reads frames while they change: a tenth of its samples were errors
        // here, most of them the main thread's, which skewed its shares by 8 points.)
        .args(["record", "--format", "raw", "-r", "200", "-o"])
        .arg(&raw)
        .args(["--", python, &workload(), "8"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The workload: py-spy's child, once it has exec'd python (imports done a second in).
    let exe_name = python.rsplit('/').next().unwrap();
    let children = format!("/proc/{0}/task/{0}/children", spy.id());
    let mut pid = String::new();
    for _ in 0..200 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        pid = std::fs::read_to_string(&children)
            .unwrap_or_default()
            .trim()
            .to_string();
        if !pid.is_empty()
            && std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|e| e.to_string_lossy().contains(exe_name))
        {
            break;
        }
    }
    assert!(!pid.is_empty(), "py-spy started no workload");
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-o", data.to_str().unwrap(), "-p", &pid, "--duration", "6"])
        .output()
        .unwrap();
    let spy = spy.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    // py-spy 0.4.1 at times ends with "No child process (os error 10)" (its wait for the
    // workload races its own reaping) after writing its whole file: that is no failure.
    let spy_err = String::from_utf8_lossy(&spy.stderr);
    assert!(
        spy.status.success() || spy_err.contains("No child process"),
        "py-spy: {spy_err}"
    );
    let known = known_split(&String::from_utf8_lossy(&spy.stdout));
    let folded = folded_of(&data);
    let all: u64 = folded.values().sum();
    let (ours, per_thread) = shares(folded.iter().map(|(k, v)| (k.as_str(), *v)));
    let n = per_thread[0] + per_thread[1];
    assert!(
        n * 100 >= all * 80,
        "only {n} of {all} samples under named Python functions"
    );
    let text = std::fs::read_to_string(&raw).unwrap();
    let (theirs, theirs_per_thread) = shares(text.lines().filter_map(|l| {
        let (k, v) = l.rsplit_once(' ')?;
        Some((k, v.parse().ok()?))
    }));
    let m = theirs_per_thread[0] + theirs_per_thread[1];
    eprintln!("samples under the timed functions: ours {n}, py-spy {m}");
    assert!(n >= 600 && m >= 600, "samples: ours {n}, py-spy {m}");
    for f in THREADS.concat().iter().chain(&["hot_inner"]) {
        let (o, t) = (
            ours.get(*f).copied().unwrap_or(0.0),
            theirs.get(*f).copied().unwrap_or(0.0),
        );
        let k = known.get(*f).copied();
        eprintln!("{f}: ours {o:.1}%, py-spy {t:.1}%, known {k:?}");
        // Within 3 points of py-spy, or closer than py-spy to what the program measured of
        // itself: on this loaded machine py-spy strayed up to 6 points from it (hash_work,
        // whose thread waits for the GIL inside the C call that released it), where ours
        // stayed within 2. And within 3.5 points of that split (not 3, as without py-spy
        // in python_function_shares_match_the_known_split): with py-spy pausing the program
        // 200 times a second, ours came 3.03 points from it once on a fresh CI machine
        // (hash_work 39.5% vs 36.5%; py-spy 31.9%).
        // Or within a point of py-spy, sampling the same run on its own, or closer to the
        // program's measure than py-spy: then what strayed is that measure (thread_time under
        // this VM's load; in CI runs hash_work was 41.4% by it, 46.4% ours, 47.1% py-spy's;
        // and 40.6%, 45.2%, 49.4%).
        match k {
            Some(k) => {
                assert!(
                    (o - k).abs() <= 3.5 || (o - t).abs() <= 1.0 || (o - k).abs() < (t - k).abs(),
                    "{f}: {o:.1}% vs the known {k:.1}% (py-spy {t:.1}%)"
                );
                assert!(
                    (o - t).abs() <= 3.0 || (o - k).abs() < (t - k).abs(),
                    "{f}: {o:.1}% vs py-spy's {t:.1}% (known {k:.1}%)"
                );
            }
            None => assert!((o - t).abs() <= 3.0, "{f}: {o:.1}% vs py-spy's {t:.1}%"),
        }
    }
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
}

/// Records the workload (4 s) under `python` with `--call-graph mode`, counted in the kernel
/// or not; returns each function's share within its thread, the thread totals, the
/// program's own split, the folded on-CPU stacks and record's stderr.
fn record_shares(python: &str, mode: &str, aggregate: bool, data: &Path) -> Recorded {
    let mut args = vec!["-v", "--call-graph", mode, "-o", data.to_str().unwrap()];
    if aggregate {
        args.push("--aggregate");
    }
    let out = record(&args, &[python, &workload(), "4"]);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let known = known_split(&String::from_utf8_lossy(&out.stdout));
    let folded = folded_of(data);
    let (shares, per_thread) = shares(folded.iter().map(|(k, v)| (k.as_str(), *v)));
    Recorded {
        shares,
        per_thread,
        known,
        folded,
        stderr,
    }
}

struct Recorded {
    shares: BTreeMap<String, f64>,
    per_thread: [u64; 2],
    known: BTreeMap<String, f64>,
    folded: BTreeMap<String, u64>,
    stderr: String,
}

/// `record --aggregate` counts samples in the kernel with their Python frames (and last
/// instructions) as part of the key: each function's share of its thread is within 3 points
/// (or three standard errors of the difference) of a per-sample recording's in the same
/// mode, each taken against its own run's split, and within the usual tolerance of that
/// split; no eval frame is left under main_loop; the counts are fewer records than samples.
pub fn aggregated_shares_match_per_sample(python: &str) {
    for mode in ["dwarf", "fp"] {
        let dir = TempDir::new("python-aggregate");
        let each = record_shares(python, mode, false, &dir.path("each.data"));
        let counted = record_shares(python, mode, true, &dir.path("counted.data"));
        let n = counted.per_thread[0] + counted.per_thread[1];
        assert!(
            n >= 300,
            "{mode}: only {n} counted samples under the timed functions; record: {}; {:#?}",
            counted.stderr,
            counted.folded
        );
        // analyze weighs the counted samples by their counts: the summary's samples.
        let (samples, _) = summary_counts(&counted.stderr);
        let weight: u64 = counted.folded.values().sum();
        assert_eq!(weight, samples, "{mode}: weights = samples counted");
        let records: u64 = counted
            .stderr
            .split("written as ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{mode}: no counted records: {}", counted.stderr));
        eprintln!("{python} {mode}: {samples} samples counted as {records} records");
        assert!(
            records * 2 <= samples,
            "{mode}: {samples} samples in {records} records"
        );
        for f in THREADS.concat() {
            let t = thread_of(f);
            let (o, k) = (
                counted.shares.get(f).copied().unwrap_or(0.0),
                counted.known[f],
            );
            let e = each.shares.get(f).copied().unwrap_or(0.0);
            let (n1, n2) = (counted.per_thread[t], each.per_thread[t]);
            let p = o.max(e) / 100.0;
            let se =
                100.0 * (p * (1.0 - p) * (1.0 / n1.max(1) as f64 + 1.0 / n2.max(1) as f64)).sqrt();
            let within = (3.0 * se).max(3.0);
            eprintln!(
                "{python} {mode}: {f}: counted {o:.1}% ({n1} samples), one by one {e:.1}% \
                 ({n2}), known {k:.1}% / {:.1}%",
                each.known[f]
            );
            // The two runs are two runs of the program: how their threads' time split may
            // differ by several points (hash_work 41.6% in one, 35.9% in the next, fp, CI's
            // load). Each is compared as its run stands against its own split.
            let ke = each.known[f];
            assert!(
                ((o - k) - (e - ke)).abs() <= within,
                "{mode}: {f}: counted {o:.1}% (its run's split {k:.1}%) vs one by one {e:.1}% \
                 (its run's {ke:.1}%), within {within:.1}"
            );
            let tolerance = sampling_tolerance(k, n1);
            assert!(
                (o - k).abs() <= tolerance,
                "{mode}: {f}: counted {o:.1}% vs the known {k:.1}% ({n1} samples)"
            );
        }
        let main: u64 = counted
            .folded
            .iter()
            .filter(|(k, _)| k.contains("main_loop ("))
            .map(|(_, v)| v)
            .sum();
        let evals: u64 = counted
            .folded
            .iter()
            .filter(|(k, _)| k.contains("main_loop (") && k.contains(";_PyEval_EvalFrameDefault;"))
            .map(|(_, v)| v)
            .sum();
        eprintln!("{python} {mode}: eval frames left in {evals} of {main} main_loop samples");
        assert!(
            evals * 100 <= main,
            "{mode}: eval frames left in {evals} of {main} main_loop samples"
        );
    }
}

#[test]
fn python_aggregated_shares_match_per_sample() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    aggregated_shares_match_per_sample(PYTHON);
}

/// A Python thread that wakes another (`handoff.py`: `send_token` writes the pipe that
/// `wait_for_token` reads) is named in the waker stacks of `--event wakeup`: its Python
/// frames merged into its user stack as the blocked thread's are.
pub fn python_wakers_are_named(python: &str, mode: &str) {
    let dir = TempDir::new("python-waker");
    let data = dir.path("wake.data");
    let script = root().join("fixtures/python/handoff.py");
    // 200 rounds (2 s): in DWARF mode the first wakers' stacks, unwound before the
    // process's tables are in, cannot have their Python frames placed; the tables come
    // within a fraction of a second, a small part of the run even on a busy machine.
    let (rounds, pause_us) = (200u64, 10_000u64);
    let out = record(
        &["--call-graph", mode, "-o", data.to_str().unwrap()],
        &[
            python,
            script.to_str().unwrap(),
            &rounds.to_string(),
            &pause_us.to_string(),
        ],
    );
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let joined = analyze_folded(&data, &["--event", "wakeup"]);
    // Blocked stack (root first), `--`, the waker's stack (innermost first), its name.
    let by_token: u64 = joined
        .iter()
        .filter(|(stack, _)| {
            let Some((blocked, waker)) = stack.split_once(";--;") else {
                return false;
            };
            blocked.contains(";wait_for_token (") && waker.contains(";send_token (")
        })
        .map(|(_, w)| w)
        .sum();
    let expected: u64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("paused ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("handoff.py said {:?}", out.stdout));
    let ratio = by_token as f64 / expected as f64;
    eprintln!(
        "{python} {mode}: blocked in wait_for_token, woken by send_token: {by_token} ns of \
         {expected} ns ({ratio:.3})"
    );
    assert!(
        (0.7..=1.3).contains(&ratio),
        "{mode}: {by_token} ns woken by send_token: {joined:#?}"
    );
}

#[test]
fn python_wakers_are_named_in_waker_stacks() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    for mode in ["dwarf", "fp"] {
        python_wakers_are_named(PYTHON, mode);
    }
}

/// The workload recorded from its start under `python` with `flags` before the script and
/// `env` in record's environment: each timed function's share of its thread within 3 points
/// (or three standard errors) of the program's own split. Gives the folded on-CPU stacks,
/// the file and record's stderr (`-v`).
pub fn shares_hold(
    dir: &TempDir,
    python: &str,
    flags: &[&str],
    env: &[(&str, &str)],
) -> (BTreeMap<String, u64>, PathBuf, String) {
    let data = dir.path("perf.data");
    let script = workload();
    let out = record_env(
        &["-v", "-o", data.to_str().unwrap()],
        &[&[python], flags, &[&script, "4"]].concat(),
        env,
    );
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let known = known_split(&String::from_utf8_lossy(&out.stdout));
    let folded = folded_of(&data);
    let (ours, per_thread) = shares(folded.iter().map(|(k, v)| (k.as_str(), *v)));
    assert!(
        per_thread[0] + per_thread[1] >= 300,
        "only {per_thread:?} samples under the timed functions; record: {stderr}"
    );
    for f in THREADS.concat() {
        let (o, k) = (ours.get(f).copied().unwrap_or(0.0), known[f]);
        let samples = per_thread[thread_of(f)];
        let within = sampling_tolerance(k, samples);
        eprintln!("{f}: ours {o:.1}%, known {k:.1}% ({samples} samples: within {within:.1})");
        assert!(
            (o - k).abs() <= within,
            "{f}: {o:.1}% vs the known {k:.1}% ({samples} samples of its thread)"
        );
    }
    (folded, data, stderr)
}

/// `-X perf` in the first second: the stacks copied before the process's tables are in
/// (held back 2 s: the first second is copies by construction) are unwound by analyze, which
/// gives the trampolines the perf map names their rule: they reach Py_RunMain or
/// start_thread as the kernel's do.
pub fn perf_support_copies_reach_the_root(python: &str) {
    let dir = TempDir::new("python-x-perf-copied");
    let (_, data, stderr) = shares_hold(
        &dir,
        python,
        &["-X", "perf"],
        &[("BPFPERF_TABLES_AFTER_MS", "2000")],
    );
    let first = analyze_folded(&data, &["--event", "cpu", "--time", ",1"]);
    let (named, _) = eval_frames_left(&first);
    let reached: u64 = first
        .iter()
        .filter(|(k, _)| k.contains(".py:"))
        .filter(|(k, _)| {
            k.split(';')
                .any(|f| f == "Py_RunMain" || f == "start_thread")
        })
        .map(|(_, v)| *v)
        .sum();
    eprintln!(
        "first second (copies): {reached} of {named} samples with Python frames reach \
         Py_RunMain or start_thread"
    );
    if let Some(map) = stderr
        .split("names in ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
    {
        let _ = std::fs::remove_file(map);
    }
    assert!(
        named >= 50 && reached * 10 >= named * 9,
        "first second: {reached} of {named} samples with Python frames reach Py_RunMain or \
         start_thread, e.g. {:?}",
        first.keys().find(|k| k.contains(".py:")
            && !k.contains("Py_RunMain")
            && !k.contains("start_thread"))
    );
}

/// How many samples record -v says it copied (DWARF mode: "user stacks of U of N samples
/// unwound in the kernel, C copied (...)").
fn copied_samples(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.contains("unwound in the kernel,"))
        .unwrap_or_else(|| panic!("no unwinding line (DWARF mode?): {stderr}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|x| *x == "copied").unwrap();
    words[at - 1].parse().unwrap()
}

/// Stacks (and their weight) that hold a Python frame, and of those the ones still holding
/// an eval frame.
fn eval_frames_left(folded: &BTreeMap<String, u64>) -> (u64, u64) {
    let named = folded.iter().filter(|(k, _)| k.contains(".py:"));
    let all: u64 = named.clone().map(|(_, v)| *v).sum();
    let evals = named
        .filter(|(k, _)| k.split(';').any(|f| f == "_PyEval_EvalFrameDefault"))
        .map(|(_, v)| *v)
        .sum();
    (all, evals)
}

/// Issue 52, "the first second": samples taken before a process's unwind tables are in carry
/// a copy of the user stack, unwound by analyze, and their Python frames (record writes them
/// as the callchain's user part) take the place of the eval frames analyze unwinds. The
/// tables are held back 2 s here (BPFPERF_TABLES_AFTER_MS), so that the first half of the
/// run is copies by construction: the shares hold over the whole run, and the first second,
/// all copies, keeps no eval frame where a Python frame goes.
#[test]
fn python_frames_of_copied_stacks_replace_their_eval_frames() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    let dir = TempDir::new("python-copied");
    let (_, data, stderr) = shares_hold(&dir, PYTHON, &[], &[("BPFPERF_TABLES_AFTER_MS", "2000")]);
    // "user stacks of U of N samples unwound in the kernel, C copied (...)"
    let line = stderr
        .lines()
        .find(|l| l.contains("unwound in the kernel,"))
        .unwrap_or_else(|| panic!("no unwinding line: {stderr}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = |w: &str| words.iter().position(|x| *x == w).unwrap();
    let samples: u64 = words[at("of") + 1].parse().unwrap();
    let copied: u64 = words[at("copied") - 1].parse().unwrap();
    // "C for analyze to place (stack copied, ...)"
    let to_place: u64 = stderr
        .split(" for analyze to place")
        .next()
        .and_then(|t| t.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no Python line: {stderr}"));
    eprintln!("{copied} of {samples} samples copied, {to_place} with Python frames");
    assert!(
        copied * 5 >= samples && to_place * 10 >= copied,
        "{copied} of {samples} samples copied, {to_place} with Python frames: {stderr}"
    );
    // The first second: copies only.
    let first = analyze_folded(&data, &["--event", "cpu", "--time", ",1"]);
    let (named, evals) = eval_frames_left(&first);
    eprintln!("first second: {named} samples with Python frames, {evals} keep an eval frame");
    assert!(
        named >= 50,
        "first second: {named} samples named: {first:?}"
    );
    assert!(
        evals * 100 <= named,
        "first second: eval frames left in {evals} of {named} samples with Python frames"
    );
    // perf shows a copy's Python frames above the frames it unwinds from it, and says
    // nothing of the callchain.
    let script = perf_script_clean(&data);
    assert!(
        script.contains("hot_inner ("),
        "perf script names no hot_inner"
    );
}

/// Issue 52, CPython's own perf support (`python -X perf`, 3.12 on): each eval call is entered
/// through a trampoline in anonymous memory, named `py::qualname:file` in the process's own
/// `/tmp/perf-PID.map`. Stacks keep one Python frame per function (ours: the trampoline
/// frame beside it is left out), the shares hold as without `-X perf`, and the map holds
/// CPython's lines and record's, whole.
pub fn perf_support_leaves_one_frame_per_function(python: &str) {
    let dir = TempDir::new("python-x-perf");
    let (folded, _, stderr) = shares_hold(&dir, python, &["-X", "perf"], &[]);
    let (named, evals) = eval_frames_left(&folded);
    let beside: Vec<(&String, &u64)> = folded
        .iter()
        .filter(|(k, _)| k.contains(".py:") && k.split(';').any(|f| f.starts_with("py::")))
        .collect();
    let trampolines: u64 = beside.iter().map(|(_, v)| **v).sum();
    eprintln!(
        "{named} samples with Python frames: {trampolines} with a trampoline frame, {evals} with \
         an eval frame"
    );
    // A sample taken while an eval call is entered or left (its frame pushed, the eval loop
    // not yet running, or the reverse) has one eval frame more than Python entries: the
    // outermost then keeps its eval frame and trampoline. Stacks cut at the innermost
    // trampoline hid those; now that they reach Py_RunMain, 1 of 2492 showed one.
    assert!(
        trampolines * 100 <= named,
        "{trampolines} of {named} samples keep a trampoline frame, e.g. {:?}",
        beside.first()
    );
    assert!(
        evals * 100 <= named,
        "eval frames left in {evals} of {named} samples with Python frames"
    );
    // Below the innermost trampoline: the native frames to the thread's first (record's
    // tables give the trampolines' memory its rule). Samples copied before their process's
    // tables were in are unwound by analyze, which stops at a trampoline: they are left
    // out by count (record -v says how many were copied).
    let copied = copied_samples(&stderr);
    let reached: u64 = folded
        .iter()
        .filter(|(k, _)| k.contains(".py:"))
        .filter(|(k, _)| {
            k.split(';')
                .any(|f| f == "Py_RunMain" || f == "start_thread")
        })
        .map(|(_, v)| *v)
        .sum();
    let kernel = named.saturating_sub(copied);
    eprintln!(
        "{reached} of {named} samples with Python frames reach Py_RunMain or start_thread \
         ({copied} samples copied)"
    );
    assert!(
        kernel > 0 && reached * 10 >= kernel * 9,
        "{reached} of {named} samples with Python frames ({copied} copied) reach Py_RunMain \
         or start_thread, e.g. {:?}",
        folded.keys().find(|k| k.contains(".py:")
            && !k.contains("Py_RunMain")
            && !k.contains("start_thread"))
    );
    let map = stderr
        .split("names in ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or_else(|| panic!("no perf map named: {stderr}"))
        .to_string();
    let text = std::fs::read_to_string(&map).unwrap();
    std::fs::remove_file(&map).unwrap();
    let whole = |l: &&str| {
        let mut w = l.splitn(3, ' ');
        let hex = |s: Option<&str>| s.is_some_and(|s| u64::from_str_radix(s, 16).is_ok());
        hex(w.next()) && hex(w.next()) && w.next().is_some_and(|n| !n.is_empty())
    };
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.iter().all(whole), "a line cut in {map}:\n{text}");
    let cpython = lines.iter().filter(|l| l.contains(" py::")).count();
    let ours = lines.iter().filter(|l| l.ends_with(')')).count();
    eprintln!("{map}: {cpython} trampolines of CPython's, {ours} Python frames of ours");
    assert!(
        lines.iter().any(|l| l.contains(" py::main_loop:")) && ours > 0,
        "{map} lacks CPython's lines or record's:\n{text}"
    );
}

/// Two recorders following one Python process both name their slots in its one perf map:
/// each takes a region of the synthetic mapping that the other's lines do not use. The first
/// attaches while the program runs `alpha`, the second once it has moved on to `beta`, so that
/// each made its first slot for a different function: in one region, the map named that slot
/// twice, and one recording's frames took the other's names.
#[test]
fn two_recorders_of_one_python_process_keep_their_own_names() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    let dir = TempDir::new("python-two");
    let script = dir.path("phases.py");
    std::fs::write(
        &script,
        "import sys, time\n\
         def alpha():\n    end = time.time() + 2.5\n    while time.time() < end: sum(range(500))\n\
         def beta():\n    end = time.time() + 2.5\n    while time.time() < end: sum(range(500))\n\
         print('alpha', flush=True)\nalpha()\nprint('beta', flush=True)\nbeta()\n",
    )
    .unwrap();
    let mut py = Command::new(PYTHON)
        .arg(&script)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = py.id().to_string();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(py.stdout.take().unwrap()));
    let mut next_line = || lines.next().and_then(Result::ok).unwrap_or_default();
    let start = |data: &Path, secs: &str| {
        Command::new(env!("CARGO_BIN_EXE_record"))
            .args(["-o", data.to_str().unwrap(), "-p", &pid, "--duration", secs])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (dir.path("first.data"), dir.path("second.data"));
    assert_eq!(next_line(), "alpha");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let a = start(&first, "4");
    assert_eq!(next_line(), "beta");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let b = start(&second, "1.5");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(py.wait().unwrap().success());
    assert!(a.status.success(), "{}", stderr_of(&a));
    assert!(b.status.success(), "{}", stderr_of(&b));
    let under = |folded: &BTreeMap<String, u64>, f: &str| -> u64 {
        folded
            .iter()
            .filter(|(k, _)| k.split(';').any(|fr| fr.starts_with(&format!("{f} ("))))
            .map(|(_, v)| v)
            .sum()
    };
    let (fa, fb) = (folded_of(&first), folded_of(&second));
    let (a_alpha, a_beta) = (under(&fa, "alpha"), under(&fa, "beta"));
    let (b_alpha, b_beta) = (under(&fb, "alpha"), under(&fb, "beta"));
    eprintln!("first: alpha {a_alpha}, beta {a_beta}; second: alpha {b_alpha}, beta {b_beta}");
    // The first saw both phases, the second only beta.
    assert!(
        a_alpha >= 300 && a_beta >= 300,
        "first: alpha {a_alpha}, beta {a_beta}"
    );
    assert!(
        b_beta >= 300 && b_alpha == 0,
        "second: alpha {b_alpha}, beta {b_beta}"
    );
}
