//! Any event: tracepoints, uprobes, USDT probes, filters in the kernel and latency, against
//! perf recording the same run, and on programs whose totals are known (tracee.c, a Python
//! script under Debian's python3.11).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// One sample of `perf script -F trace:comm,tid,period,event,trace,ip,sym`.
#[derive(Debug, Clone)]
struct Traced {
    comm: String,
    period: u64,
    event: String,
    /// The event's fields as perf prints them.
    fields: String,
    /// Symbols, leaf first.
    frames: Vec<String>,
}

impl Traced {
    /// A field's number from perf's `name=value` text.
    fn field(&self, name: &str) -> i64 {
        let at = format!("{name}=");
        let v = self
            .fields
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&at))
            .unwrap_or_else(|| panic!("no {name} in {}", self.fields));
        match v.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16).unwrap(),
            None => v.parse().unwrap(),
        }
    }

    fn has_frame(&self, f: &str) -> bool {
        self.frames.iter().any(|x| x == f)
    }
}

/// perf script's samples of tracepoint events, with their stacks if `stacks` (perf prints a
/// sample without a callchain with its ip and symbol on the header line: not asked for then).
fn perf_script_traced(file: &Path, stacks: bool) -> Vec<Traced> {
    let fields = if stacks {
        "trace:comm,tid,period,event,trace,ip,sym"
    } else {
        "trace:comm,tid,period,event,trace"
    };
    let out = Command::new("perf")
        .args(["script", "-F", fields, "-i"])
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "perf script: {stderr}");
    assert!(
        stderr.trim().is_empty(),
        "perf script wrote to stderr: {stderr}"
    );
    let mut all: Vec<Traced> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with('\t') {
            // "\t addr sym+0xoff"
            let sym = line.split_whitespace().nth(1).unwrap_or("");
            let sym = sym.rsplit_once("+0x").map_or(sym, |(s, _)| s);
            if let Some(t) = all.last_mut() {
                t.frames.push(sym.to_string());
            }
            continue;
        }
        // "comm tid period event: fields"
        let (head, fields) = line.split_once(": ").unwrap_or((line, ""));
        let words: Vec<&str> = head.split_whitespace().collect();
        let n = words.len();
        all.push(Traced {
            comm: words[..n - 3].join(" "),
            period: words[n - 2].parse().unwrap(),
            event: words[n - 1].to_string(),
            fields: fields.trim().to_string(),
            frames: Vec::new(),
        });
    }
    all
}

/// `record ARGS -- CMD` that must succeed; its stderr.
fn record_ok(args: &[&str], cmd: &[&str]) -> String {
    let out = record(args, cmd);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "record {args:?}: {stderr}");
    stderr
}

/// The milliseconds each of tracee's naps slept by its own clock (its `tracee nap ns:`
/// lines on stderr): the machine may be busy, so a latency measured in the kernel is bounded
/// by these, not by the nominal time asked for.
fn naps_slept_ms(stderr: &str) -> Vec<f64> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("tracee nap ns: "))
        .map(|n| n.trim().parse::<f64>().unwrap() / 1e6)
        .collect()
}

/// What a probe or a clock read costs beside the interval it times, at most (a busy
/// machine included): a kernel-measured latency within this of the tracee's own.
const CLOCK_SLACK_MS: f64 = 1.0;

/// tracee's calls: openat 40 times (10 failing), getaddrinfo 7 times, its USDT probe 13
/// times, nap() 3 times for 50 ms.
const TRACEE_ARGS: [&str; 6] = ["40", "10", "7", "13", "3", "50"];

#[test]
fn tracepoints_count_and_print_as_perfs_own_recording_of_the_same_run() {
    if !can_record() {
        return;
    }
    let _x = exclusive();
    let dir = TempDir::new("any-perf");
    let (ours, theirs) = (dir.path("ours.data"), dir.path("perf.data"));
    let tracee = fixture("tracee-nofp");
    // perf follows record and its child: both see every event of tracee's run. A glob, a
    // tracepoint with a string (__data_loc), syscall entries and exits.
    let events = "syscalls:sys_enter_open*,syscalls:sys_exit_openat,sched:sched_process_exec,syscalls:sys_enter_clock_nanosleep";
    let out = Command::new("perf")
        .args(["record", "-q", "-e", events, "-o"])
        .arg(&theirs)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_record"))
        .args(["-q", "-e", events, "-o"])
        .arg(&ours)
        .arg("--")
        .arg(&tracee)
        .args(TRACEE_ARGS)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let of_tracee = |file: &Path| -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for t in perf_script_traced(file, false) {
            if t.comm.starts_with("tracee") {
                *m.entry(format!("{} {}", t.event, t.fields)).or_insert(0) += 1;
            }
        }
        m
    };
    let (a, b) = (of_tracee(&ours), of_tracee(&theirs));
    let total = |m: &BTreeMap<String, usize>| m.values().sum::<usize>();
    // Every event, field text and all (pointers and pids are the same run's).
    assert!(total(&b) >= 40 + 40 + 1 + 3, "{b:#?}");
    assert_eq!(a, b, "ours {} events, perf's {}", total(&a), total(&b));
    // perf report opens ours without a word on stderr.
    let out = Command::new("perf")
        .args(["report", "--stdio", "-i"])
        .arg(&ours)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(stderr_of(&out).trim(), "", "perf report warned");
}

#[test]
fn known_totals_filters_probes_usdt_and_latency_in_fp_and_dwarf_mode() {
    if !can_record() {
        return;
    }
    let _x = exclusive();
    let dir = TempDir::new("any-totals");
    for (mode, bin) in [("fp", "tracee-fp"), ("dwarf", "tracee-nofp")] {
        let tracee = fixture(bin);
        let t = tracee.to_str().unwrap();
        let file = dir.path(&format!("{mode}.data"));
        let (usdt, nap) = (
            format!("usdt:{t}:bpfperf_test:tick"),
            format!("uretprobe:{t}:nap"),
        );
        let stderr = record_ok(
            &[
                "-o",
                file.to_str().unwrap(),
                "--call-graph",
                mode,
                "-e",
                "syscalls:sys_exit_openat",
                "--filter",
                "ret < 0",
                "-e",
                "uprobe:libc:getaddrinfo",
                "-e",
                &usdt,
                "--filter",
                "arg1 >= 5 && !(arg2 < 10)",
                "-e",
                &nap,
            ],
            &[t, "40", "10", "7", "13", "3", "50"],
        );
        let all: Vec<Traced> = perf_script_traced(&file, true)
            .into_iter()
            .filter(|t| t.comm.starts_with("tracee"))
            .collect();
        let of =
            |event: &str| -> Vec<&Traced> { all.iter().filter(|t| t.event == event).collect() };
        // With frame pointers, the caller of a libc function without one (a leaf, or a
        // function probed at its entry) is skipped, by perf as by the kernel's walk: rbp
        // still points at the caller's caller's frame. DWARF mode names it.
        let caller = |t: &Traced, f: &str| mode == "fp" || t.has_frame(f);
        // ret < 0: the 10 failed openats, each under open_files.
        let failed = of("syscalls:sys_exit_openat");
        assert_eq!(failed.len(), 10, "{mode}: {all:#?}");
        // (sys_exit's format prints the return value alone: "0xfffffffffffffffe".)
        let ret =
            |t: &Traced| u64::from_str_radix(t.fields.trim_start_matches("0x"), 16).unwrap() as i64;
        assert!(failed.iter().all(|t| ret(t) < 0), "{failed:#?}");
        assert!(
            failed
                .iter()
                .all(|t| caller(t, "open_files") && t.has_frame("main")),
            "{mode}: {failed:#?}"
        );
        // getaddrinfo's 7 calls, under look_up.
        let lookups = of("probe_libc:getaddrinfo");
        assert_eq!(lookups.len(), 7, "{mode}");
        assert!(
            lookups
                .iter()
                .all(|t| caller(t, "look_up") && t.has_frame("main")),
            "{mode}: {lookups:#?}"
        );
        // The USDT probe's arguments from its note: ticks 5..12, the second twice the first.
        let ticks = of("sdt_bpfperf_test:tick");
        assert_eq!(ticks.len(), 8, "{mode}");
        let firsts: Vec<i64> = ticks.iter().map(|t| t.field("arg1")).collect();
        assert_eq!(firsts, (5..13).collect::<Vec<i64>>());
        assert!(ticks.iter().all(|t| t.field("arg2") == 2 * t.field("arg1")));
        assert!(
            ticks.iter().all(|t| t.has_frame("tick")),
            "{mode}: {ticks:#?}"
        );
        // nap's latency, measured in the kernel from its entry to its return: at least the
        // nanosleep the tracee timed inside it, and hardly more; its return value, the
        // entry's stack.
        let naps: Vec<&Traced> = all
            .iter()
            .filter(|t| t.event.ends_with(":nap__return"))
            .collect();
        let slept = naps_slept_ms(&stderr);
        assert_eq!((naps.len(), slept.len()), (3, 3), "{mode}: {all:#?}");
        for (n, slept) in naps.iter().zip(&slept) {
            let ms = n.period as f64 / 1e6;
            assert!(
                *slept >= 50.0 && (*slept..slept + CLOCK_SLACK_MS).contains(&ms),
                "{mode}: nap took {ms} ms in the kernel, {slept} ms by its own clock"
            );
            assert_eq!(n.field("ret"), 50);
            assert_eq!(n.field("arg1"), 50);
            assert!(n.has_frame("main"), "{mode}: {n:?}");
        }
    }
}

#[test]
fn latency_between_two_tracepoints_is_one_sample_per_call() {
    if !can_record() {
        return;
    }
    let _x = exclusive();
    let dir = TempDir::new("any-latency");
    let file = dir.path("lat.data");
    let tracee = fixture("tracee-nofp");
    // A return probe on nap too: while it is pending, nap returns to the uprobes
    // trampoline, and the stacks unwound in the kernel take the real return address from
    // the thread's return instances (as perf's frame-pointer callchains do).
    let nap_return = format!("uretprobe:{}:nap", tracee.display());
    let stderr = record_ok(
        &[
            "-o",
            file.to_str().unwrap(),
            "--latency",
            "syscalls:sys_enter_clock_nanosleep,syscalls:sys_exit_clock_nanosleep",
            "-e",
            &nap_return,
        ],
        &[tracee.to_str().unwrap(), "0", "0", "0", "0", "4", "30"],
    );
    let (all, returns): (Vec<Traced>, Vec<Traced>) = perf_script_traced(&file, true)
        .into_iter()
        .filter(|t| t.comm.starts_with("tracee"))
        .partition(|t| !t.event.ends_with("nap__return"));
    assert_eq!((all.len(), returns.len()), (4, 4), "{all:#?}");
    // The first call may come before the process's unwind tables are built (its stack is
    // then a copy, which analyze and perf unwind only up to the trampoline); the last has
    // them.
    let last = all.last().unwrap();
    assert!(
        last.has_frame("nap") && last.has_frame("main") && last.has_frame("_start"),
        "{last:?}"
    );
    // Each call's latency: the syscall inside the tracee's own timing of it, and hardly
    // shorter.
    let slept = naps_slept_ms(&stderr);
    assert_eq!(slept.len(), 4, "{stderr}");
    for (t, slept) in all.iter().zip(&slept) {
        assert_eq!(
            t.event,
            "syscalls:sys_enter_clock_nanosleep->sys_exit_clock_nanosleep"
        );
        let ms = t.period as f64 / 1e6;
        assert!(
            *slept >= 30.0 && (slept - CLOCK_SLACK_MS..=*slept).contains(&ms),
            "{ms} ms in the kernel, {slept} ms by the tracee's clock"
        );
        // The entry's fields and stack.
        assert!(t.fields.contains("rqtp"), "{}", t.fields);
        assert!(t.has_frame("nap"), "{t:?}");
    }
}

#[test]
fn python_functions_counted_by_their_usdt_probe() {
    if !can_record() {
        return;
    }
    let _x = exclusive();
    let python = Path::new("/usr/bin/python3.11");
    assert!(
        python.exists(),
        "Debian's python3.11 (scripts/setup installs it)"
    );
    let dir = TempDir::new("any-python");
    // f is defined on line 4242 (the probe's third argument is the line of the function's
    // first instruction): nothing else the interpreter runs starts there. CPython 3.11 fires
    // function__entry only while a profile or trace function is set (bpftrace 0.17 sees 5
    // entries of this script without one, none of them f's): the script sets one.
    let script = dir.path("calls.py");
    let mut text = "import sys\nsys.setprofile(lambda *a: None)\n".to_string();
    text.push_str(&"\n".repeat(4239));
    text.push_str("def f(x):\n    return x + 1\n\nfor i in range(25):\n    f(i)\n");
    std::fs::write(&script, text).unwrap();
    let file = dir.path("py.data");
    record_ok(
        &[
            "-o",
            file.to_str().unwrap(),
            "-e",
            "usdt:python3.11:python:function__entry",
            "--filter",
            "arg3 == 4242",
        ],
        &[python.to_str().unwrap(), script.to_str().unwrap()],
    );
    let all = perf_script_traced(&file, true);
    assert_eq!(all.len(), 25, "{all:#?}");
    assert!(all.iter().all(|t| t.event == "sdt_python:function__entry"));
}

/// Each refusal is one error naming what comes closest, before anything runs.
#[test]
fn unknown_events_bad_filters_and_missing_kprobes_are_refused_before_anything_runs() {
    if !can_record() {
        return;
    }
    let _x = exclusive();
    let dir = TempDir::new("any-errors");
    let marker = dir.path("ran");
    let stripped = dir.path("tracee-stripped");
    std::fs::copy(fixture("tracee-nofp"), &stripped).unwrap();
    let st = Command::new("strip").arg(&stripped).status().unwrap();
    assert!(st.success());
    let uprobe_stripped = format!("uprobe:{}:nap", stripped.display());
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["-e", "syscalls:sys_enter_opnat"],
            &["syscalls:sys_enter_openat"],
        ),
        (&["-e", "uprobe:libc:getaddrinf"], &["getaddrinfo"]),
        (
            &["-e", "syscalls:sys_enter_write", "--filter", "count >> 3"],
            &["column"],
        ),
        (&["-e", &uprobe_stripped], &["stripped"]),
        (
            &["-e", "kprobe:do_sys_openat2"],
            &["kprobes", "syscalls:sys_enter_openat2"],
        ),
    ];
    // A kernel with kprobes attaches them: only this machine's kind refuses.
    let kprobes = Path::new("/sys/bus/event_source/devices/kprobe").exists();
    for (args, words) in cases {
        if kprobes && args[1].starts_with("kprobe:") {
            continue;
        }
        let mut all = vec!["-o", "/dev/null"];
        all.extend_from_slice(args);
        let out = record(&all, &["touch", marker.to_str().unwrap()]);
        let stderr = stderr_of(&out);
        assert!(!out.status.success(), "{args:?} succeeded");
        for w in words {
            assert!(stderr.contains(w), "{args:?}: no '{w}' in: {stderr}");
        }
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!marker.exists(), "{args:?}: the command ran");
    }
}
