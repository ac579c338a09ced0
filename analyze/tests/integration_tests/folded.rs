//! `analyze report --folded --no-inline` and `analyze script` against perf's own view of the
//! same file: the stacks `perf script` prints, folded by stackcollapse-perf.pl's rules
//! (reimplemented in [`fold_perf_script`]: flamegraph.pl is not packaged for Debian 12),
//! weight for weight.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::{
    analyze, analyze_env, can_record, fixture, perf_ok, perf_record, record_ours, Tmp,
};

pub type Folded = BTreeMap<String, u64>;

/// stackcollapse-perf.pl's `tidy_generic` and `[unknown]` rules for one frame, with two
/// differences that analyze makes on purpose: a name is not cut at its first `(` (perf 6.1
/// prints names without parameters, so a `(` is part of the name, as in
/// `std::_Function_handler<double (double), main::{lambda(double)#1}>::_M_invoke`), and a file
/// already in brackets is not bracketed again (`[kernel.kallsyms]`, not `[[kernel.kallsyms]]`).
pub fn frame_name(raw: &str, module: &str) -> String {
    let mut f = if raw == "[unknown]" {
        let file = module.rsplit('/').next().unwrap();
        if file.starts_with('[') && file.ends_with(']') {
            file.to_string()
        } else {
            format!("[{file}]")
        }
    } else {
        raw.to_string()
    };
    f = f.replace(';', ":");
    f.retain(|c| c != '"' && c != '\'');
    f
}

/// The file of a frame named by its address, `FILE!0xSTART` (analyze's name for code no
/// symbol covers: the function the file's unwind tables delimit), if `name` is one.
pub fn address_named_file(name: &str) -> Option<&str> {
    let (file, start) = name.rsplit_once("!0x")?;
    (!file.is_empty() && !start.is_empty() && start.chars().all(|c| c.is_ascii_hexdigit()))
        .then_some(file)
}

/// Folded stacks with frames named by their address renamed as perf names them: perf prints
/// `[unknown]` for code no symbol covers, which stackcollapse-perf.pl folds to `[FILE]`. A
/// difference on purpose (`--no-unknown-names` gives perf's names); stacks that become equal
/// merge.
pub fn as_perf_names(f: &Folded) -> Folded {
    let mut out = Folded::new();
    for (k, v) in f {
        let key: Vec<String> = k
            .split(';')
            .map(|frame| match address_named_file(frame) {
                Some(file) if file.starts_with('[') => file.to_string(),
                Some(file) => format!("[{file}]"),
                None => frame.to_string(),
            })
            .collect();
        *out.entry(key.join(";")).or_insert(0) += v;
    }
    out
}

/// Folds perf-script text as stackcollapse-perf.pl does with its defaults: only samples of
/// the first event seen (or of `event`), the command name (spaces to `_`) then the frames
/// root first, symbol offsets cut, one count per sample.
pub fn fold_script(text: &str, event: Option<&str>) -> Folded {
    fold_script_with(text, event, false)
}

/// [`fold_script`], each sample weighing the period perf script prints before its event's
/// name where `by_period` (as stackcollapse-perf.pl weighs them when perf script prints
/// them).
pub fn fold_script_with(text: &str, event: Option<&str>, by_period: bool) -> Folded {
    let mut folded = BTreeMap::new();
    let mut weight: u64 = 1;
    let mut filter: Option<String> = event.map(str::to_string);
    let mut pname: Option<String> = None;
    let mut stack: Vec<String> = Vec::new();
    let mut flush = |pname: &mut Option<String>, stack: &mut Vec<String>, weight: u64| {
        if let Some(p) = pname.take() {
            let mut key = p;
            for f in stack.iter().rev() {
                key.push(';');
                key.push_str(f);
            }
            *folded.entry(key).or_insert(0) += weight;
        }
        stack.clear();
    };
    for line in text.lines() {
        if line.trim().is_empty() {
            flush(&mut pname, &mut stack, weight);
        } else if !line.starts_with(char::is_whitespace) {
            // "comm pid/tid ... [cpu] time: period event:" ; comm may hold spaces.
            let fields: Vec<&str> = line.split_whitespace().collect();
            let at = fields
                .iter()
                .position(|f| f.split('/').next().unwrap().parse::<u32>().is_ok())
                .expect("a pid after the command");
            let comm = fields[..at].join(" ");
            let ev = line
                .trim_end()
                .strip_suffix(':')
                .and_then(|l| l.split_whitespace().last());
            stack.clear();
            pname = None;
            if let Some(ev) = ev {
                let f = filter.get_or_insert_with(|| ev.to_string());
                if f != ev {
                    continue;
                }
            }
            pname = Some(comm.replace(' ', "_"));
            if by_period {
                // "... time: PERIOD event:"
                let words: Vec<&str> = line.split_whitespace().collect();
                weight = words[words.len() - 2]
                    .parse()
                    .expect("a period before the event");
            }
        } else if pname.is_some() {
            // "\taddr symbol+0xoff (module)"
            let t = line.trim();
            let Some((_, rest)) = t.split_once(char::is_whitespace) else {
                continue;
            };
            let rest = rest.trim_start();
            let Some(open) = rest.rfind(" (") else {
                continue;
            };
            let module = rest[open + 2..].trim_end_matches(')');
            let raw = &rest[..open];
            let raw = match raw.rfind("+0x") {
                Some(i) if raw[i + 3..].chars().all(|c| c.is_ascii_hexdigit()) => &raw[..i],
                _ => raw,
            };
            if raw.starts_with('(') && !raw.starts_with("(anonymous namespace)") {
                continue;
            }
            stack.push(frame_name(raw, module));
        }
    }
    flush(&mut pname, &mut stack, weight);
    folded
}

pub fn perf_script(file: &Path) -> String {
    perf_script_with(file, &[])
}

/// `perf script ARGS -i FILE`'s output; asserts success.
pub fn perf_script_with(file: &Path, args: &[&str]) -> String {
    let out = Command::new("perf")
        .arg("script")
        .args(args)
        .arg("-i")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf script: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn parse_folded(text: &str) -> Folded {
    text.lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

/// `analyze ARGS`'s standard output; asserts success.
pub fn run_ok(args: &[&str]) -> String {
    let out = analyze(args);
    assert!(
        out.status.success(),
        "analyze {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The stacks on which `a` and `b` differ, for messages.
fn differences(a: &Folded, b: &Folded) -> String {
    let mut s = String::new();
    for (k, v) in a {
        if b.get(k) != Some(v) {
            s += &format!("  perf {v:>6} / ours {:>6}  {k}\n", b.get(k).unwrap_or(&0));
        }
    }
    for (k, v) in b {
        if !a.contains_key(k) {
            s += &format!("  perf {:>6} / ours {v:>6}  {k}\n", 0);
        }
    }
    s
}

fn assert_same(what: &str, perf: &Folded, ours: &Folded) {
    let total: u64 = perf.values().sum();
    assert!(total > 0, "{what}: perf script shows no samples");
    assert!(
        perf == ours,
        "{what}: folded stacks differ from perf script's ({total} samples):\n{}",
        differences(perf, ours)
    );
    eprintln!(
        "{what}: {total} samples in {} stacks, all equal",
        perf.len()
    );
}

/// A recording to compare: file name, perf record args, program, its args, --event values.
type Case<'a> = (
    &'a str,
    &'a [&'a str],
    &'a Path,
    &'a [&'a str],
    &'a [&'a str],
);

#[test]
fn folded_and_script_equal_perf_script_on_perf_recordings() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("folded");
    let busy = fixture("busy-fp");
    let sleeper = fixture("sleeper-fp");
    let nofp = fixture("busy-nofp");
    // (file, perf record args, program, its args, events to compare: None = --event cpu)
    let sh = Path::new("/bin/sh");
    let cases: [Case; 7] = [
        (
            "fp.data",
            &["-F", "999", "-g"],
            &busy,
            &["0.5", "2"],
            &["cpu"],
        ),
        (
            "z.data",
            &["-z", "-F", "999", "-g"],
            &busy,
            &["0.5", "2"],
            &["cpu"],
        ),
        (
            "two.data",
            &["-e", "cpu-clock", "-e", "task-clock", "-F", "499", "-g"],
            &busy,
            &["0.5", "2"],
            &["cpu", "cpu-clock", "task-clock"],
        ),
        (
            "switch.data",
            &["-e", "sched:sched_switch", "-g"],
            &sleeper,
            &[],
            &["sched:sched_switch"],
        ),
        // A program without frame pointers under -g: the chains break, with [unknown] frames.
        (
            "nofp.data",
            &["-F", "999", "-g"],
            &nofp,
            &["0.5", "2"],
            &["cpu"],
        ),
        (
            "pipe.data",
            &["-F", "999", "-g", "-o", "-"],
            &busy,
            &["0.5", "2"],
            &["cpu"],
        ),
        // System binaries: PLT stubs, libc with its debug file, exec, kernel I/O paths.
        (
            "ls.data",
            &["-F", "999", "-g"],
            sh,
            &["-c", "for i in 1 2 3; do ls -lR /usr/lib >/dev/null; done"],
            &["cpu"],
        ),
    ];
    for (name, args, program, program_args, events) in cases {
        let file = dir.0.join(name);
        if args.contains(&"-") {
            // Pipe mode: perf writes the stream to stdout.
            let out = std::fs::File::create(&file).unwrap();
            let st = Command::new("perf")
                .arg("record")
                .arg("-q")
                .args(args)
                .arg("--")
                .arg(program)
                .args(program_args)
                .stdout(out)
                .status()
                .unwrap();
            assert!(st.success());
        } else {
            perf_record(&file, args, program, program_args);
        }
        let f = file.to_str().unwrap();
        let script = perf_script(&file);
        for &event in events {
            // stackcollapse-perf.pl folds the first event it meets; name it for --event cpu
            // (the first event of the file), as perf script spells it.
            let filter = (event != "cpu").then_some(event);
            let perf = if filter.is_none() && name == "two.data" {
                fold_script(&script, Some("cpu-clock"))
            } else {
                fold_script(&script, filter)
            };
            // Stripped code (ls, libselinux) is named by address here, [unknown] by perf:
            // compared as perf names it.
            let ours = parse_folded(&run_ok(&[
                "report",
                "--folded",
                "--no-inline",
                "--event",
                event,
                "-i",
                f,
            ]));
            assert_same(
                &format!("{name} report --folded --event {event}"),
                &perf,
                &as_perf_names(&ours),
            );
            let script_ours = run_ok(&["script", "--no-inline", "--event", event, "-i", f]);
            assert_same(
                &format!("{name} script --event {event} folded"),
                &perf,
                &as_perf_names(&fold_script(&script_ours, None)),
            );
        }
    }
}

/// Samples of a counting event sampled at a frequency (page faults here; cycles and
/// instructions where there is a PMU: most recordings from other machines) weigh their
/// periods, which the kernel changes sample by sample, as perf report and
/// stackcollapse-perf.pl weigh them. Counted one a sample, a short recording's first
/// samples (periods of 1) weighed as much as its later ones: a public recording of 10
/// cycles samples had its kernel at 50% where perf gives 0.08%.
#[test]
fn samples_of_a_counting_event_weigh_their_periods_as_perf_weighs_them() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("by-period");
    let file = dir.0.join("faults.data");
    // In memory (tmpfs): 16,384 faults that read nothing, each a few microseconds; at 100
    // samples a second asked for, the kernel raises the period from 1 as soon as they come
    // faster than 100 a second, however fast or busy the machine.
    let data =
        std::path::PathBuf::from(format!("/dev/shm/bpfperf-by-period-{}", std::process::id()));
    perf_record(
        &file,
        &["-e", "page-faults", "-F", "100", "-g"],
        &fixture("faulter-fp"),
        &[data.to_str().unwrap(), "64"],
    );
    let f = file.to_str().unwrap();
    let script = perf_script(&file);
    let perf = fold_script_with(&script, None, true);
    let ones = fold_script(&script, None);
    assert!(
        perf.values().sum::<u64>() > 2 * ones.values().sum::<u64>(),
        "periods all but equal: the test tells nothing\n{script}"
    );
    let ours = parse_folded(&run_ok(&["report", "--folded", "--no-inline", "-i", f]));
    assert_same("page-faults report --folded", &perf, &as_perf_names(&ours));

    // The table: each file's share and the total as perf report gives them.
    let table = |text: &str, perf: bool| -> BTreeMap<String, String> {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains('%'))
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let name = if perf { w[1] } else { w[2] };
                (
                    name.replace("[kernel.kallsyms]", "KERNEL"),
                    w[0].to_string(),
                )
            })
            .collect()
    };
    let out = Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--sort",
            "dso",
            "-g",
            "none",
            "-i",
            f,
        ])
        .output()
        .unwrap();
    let theirs = String::from_utf8_lossy(&out.stdout).into_owned();
    let mine = run_ok(&["report", "--sort", "dso", "-i", f]);
    assert_eq!(
        table(&theirs, true),
        table(&mine, false),
        "perf:\n{theirs}\nours:\n{mine}"
    );
    let total = theirs
        .lines()
        .find_map(|l| l.strip_prefix("# Event count (approx.): "))
        .expect("perf's event count");
    assert!(
        mine.contains(&format!("# Total weight: {total} page-faults")),
        "{mine}"
    );
}

#[test]
fn folded_output_is_the_same_at_any_thread_count() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("threads");
    let file = dir.0.join("fp.data");
    perf_record(
        &file,
        &["-F", "999", "-g"],
        &fixture("busy-fp"),
        &["0.3", "2"],
    );
    let f = file.to_str().unwrap();
    let run_with = |threads: &str, args: &[&str], sequential: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_analyze"));
        cmd.args(args)
            .args(["-i", f])
            .env("RAYON_NUM_THREADS", threads);
        if sequential {
            cmd.env("BPFPERF_SEQUENTIAL_READ", "1");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        out.stdout
    };
    let run = |threads: &str| run_with(threads, &["report", "--folded"], false);
    let one = run("1");
    assert!(!one.is_empty());
    assert_eq!(one, run("2"));
    assert_eq!(one, run("7"));
    // The parallel reading path gives what the sequential one (linux-perf-data's record
    // iterator) gives, for profiles and per sample.
    for args in [&["report", "--folded"][..], &["script"], &["report"]] {
        assert_eq!(
            run_with("2", args, false),
            run_with("2", args, true),
            "{args:?}"
        );
    }
}

/// The parallel read walks a file in 4 MB parts, each after the first starting where records
/// seem to (see analyze's read::walk), checked against where the part before arrives. DWARF
/// stack copies are 8 KB of whatever the stacks held, the hardest bytes to guess records in:
/// a recording of several parts reads, per sample and as a profile, as the sequential path
/// (linux-perf-data's record iterator) reads it.
#[test]
fn a_recording_of_many_parts_reads_as_the_sequential_path_reads_it() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("parts");
    let file = dir.0.join("dwarf.data");
    perf_record(
        &file,
        &["-F", "999", "--call-graph", "dwarf"],
        &fixture("busy-nofp"),
        &["2", "2"],
    );
    // 33 MB when both threads get a CPU; 9.5 MB of a second's recording in a loaded CI run.
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size > 8 << 20, "{size} bytes: fewer than three parts");
    let f = file.to_str().unwrap();
    let run = |args: &[&str], sequential: bool| {
        let env: &[(&str, &str)] = if sequential {
            &[("BPFPERF_SEQUENTIAL_READ", "1")]
        } else {
            &[]
        };
        let out = analyze_env(&[args, &["-i", f]].concat(), env);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    // Not a vacuous comparison: the samples are there (2 threads at 999 Hz for 2 s).
    let folded = String::from_utf8(run(&["report", "--folded"], false)).unwrap();
    let samples: u64 = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    assert!(samples >= 500, "{samples} samples: {folded}");
    for args in [&["report", "--folded"][..], &["script"]] {
        assert!(
            run(args, false) == run(args, true),
            "{args:?}: the two paths differ"
        );
    }
}

/// Jobs that prepare files while the recording is read and the jobs that symbolize them
/// meet at OnceLocks. Filling one used to run rayon jobs; a worker that waited there could
/// pick up a job that waited on the very OnceLock it was filling: a deadlock seen once in CI
/// (debug build, tests running side by side). Many runs, three at a time at different thread
/// counts, each with a deadline: this catches hangs of that kind by chance, not every time.
#[test]
fn analysis_never_hangs_whatever_the_thread_count() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("hang");
    let file = dir.0.join("fp.data");
    perf_record(
        &file,
        &["-F", "999", "-g"],
        &fixture("busy-fp"),
        &["0.2", "2"],
    );
    for round in 0..8 {
        let children: Vec<_> = ["2", "3", "4"]
            .iter()
            .map(|threads| {
                let child = Command::new(env!("CARGO_BIN_EXE_analyze"))
                    .args(["report", "--folded", "-i", file.to_str().unwrap()])
                    .env("RAYON_NUM_THREADS", threads)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                (threads, child)
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        for (threads, mut child) in children {
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("round {round}, {threads} threads: analyze hung for 60 s");
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            };
            assert!(status.success(), "round {round}, {threads} threads");
        }
    }
}

/// Samples per event in script output (analyze's or perf's): each sample's first line names
/// its event after its time, `... 55647.845624:    1001001 cpu-clock:` (a traced event's
/// fields follow).
fn script_event_counts(script: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in script
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
    {
        let event = line
            .split_whitespace()
            .filter_map(|t| t.strip_suffix(':'))
            .find(|t| t.parse::<f64>().is_err());
        if let Some(event) = event {
            *counts.entry(event.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// `analyze script` prints every event's samples, as `perf script` does (it printed the
/// sampling event's alone: 96 of 200 lines of public two-event files); `--event` picks one.
/// On record's file of a program that runs and sleeps: cpu-clock, off-CPU and run-queue
/// samples, wakeups.
#[test]
fn script_prints_every_events_samples_as_perf_script_does() {
    if !can_record() || !perf_ok() {
        return;
    }
    let dir = Tmp::new("script-all");
    let file = dir.0.join("perf.data");
    record_ours(&file, &[], &fixture("busy-fp"), &["1", "2"]);
    let f = file.to_str().unwrap();
    let perf = script_event_counts(&perf_script(&file));
    let ours = script_event_counts(&run_ok(&["script", "-i", f]));
    assert!(perf.len() >= 3, "{perf:?}");
    assert_eq!(ours, perf);
    let cpu = script_event_counts(&run_ok(&["script", "--event", "cpu", "-i", f]));
    assert_eq!(
        cpu,
        perf.iter()
            .filter(|(e, _)| e.as_str() == "cpu-clock")
            .map(|(e, n)| (e.clone(), *n))
            .collect()
    );
}
