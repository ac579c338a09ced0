//! BPF programs in the recording, as perf records them: a KSYMBOL record per JIT-ed function
//! and a BPF_EVENT per program, for the programs loaded when recording starts (record's own
//! among them) and those loaded while it runs, so that kernel frames in them have names.

use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// The `[bpf]` lines of /proc/kallsyms: (address, name).
fn bpf_kallsyms() -> Vec<(u64, String)> {
    std::fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .filter(|l| l.ends_with("[bpf]"))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            Some((addr, f.nth(1)?.to_string()))
        })
        .collect()
}

/// Waits (10 s at most) until kallsyms lists an `on_cpu_sample` program that `known` does
/// not: a recording's programs are loaded. Returns kallsyms' programs then.
fn wait_for_new_programs(known: &[(u64, String)]) -> Vec<(u64, String)> {
    let start = std::time::Instant::now();
    loop {
        let now = bpf_kallsyms();
        let new = now
            .iter()
            .any(|p| p.1.ends_with("_on_cpu_sample") && !known.contains(p));
        if new || start.elapsed() > Duration::from_secs(10) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bpf_programs_are_recorded_as_perf_records_them() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("bpfprogs");
    let file = dir.path("bpf.data");
    let marker = dir.path("go");
    let started = dir.path("started");
    // Programs of processes that ran before (an earlier test's recording going away) may
    // unload before the first recording starts: only those loaded from its start on count.
    let before = bpf_kallsyms();
    // The workload says it runs (record releases it once its side-band events, which see
    // programs load, are open), waits until a second recording (its own programs loaded
    // while the first one runs) has started, then lets it finish.
    let mut first = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-q", "-o", file.to_str().unwrap(), "--", "sh", "-c"])
        .arg(format!(
            "touch {s}; while [ ! -e {m} ]; do sleep 0.05; done; sleep 0.3",
            s = started.display(),
            m = marker.display()
        ))
        .spawn()
        .unwrap();
    // Its programs, loaded before it records.
    let at_start = wait_for_new_programs(&before);
    // The second recording starts once the first records: a program loaded and unloaded
    // between the first's programs and its side-band events (libbpf's feature probes, in a
    // few ms, under load) would be in neither its listing nor its events.
    let waiting = std::time::Instant::now();
    while !started.exists() && waiting.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(started.exists(), "the first recording's workload never ran");
    let second = dir.path("second.data");
    let mut later = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-q", "-o", second.to_str().unwrap(), "--", "sleep", "0.5"])
        .spawn()
        .unwrap();
    let during = wait_for_new_programs(&at_start);
    std::fs::write(&marker, b"").unwrap();
    assert!(later.wait().unwrap().success());
    assert!(first.wait().unwrap().success());

    let out = Command::new("perf")
        .args(["script", "--show-bpf-events", "-i", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    // "PERF_RECORD_KSYMBOL addr ffffffffc0025b8c len 169 type 1 flags 0x0 name bpf_prog_..."
    let ksymbols: Vec<(u64, String)> = text
        .lines()
        .filter_map(|l| {
            let rest = l.split_once("PERF_RECORD_KSYMBOL addr ")?.1;
            let (addr, rest) = rest.split_once(' ')?;
            let name = rest.split_once(" name ")?.1;
            Some((u64::from_str_radix(addr, 16).ok()?, name.to_string()))
        })
        .collect();
    let loads = text
        .lines()
        .filter(|l| l.contains("PERF_RECORD_BPF_EVENT type 1,"))
        .count();
    // Every program the first recording loaded (its own: on_cpu_sample...) and those the
    // second one loaded while it ran, at the addresses kallsyms gives them.
    let of_first: Vec<&(u64, String)> = at_start.iter().filter(|p| !before.contains(p)).collect();
    let of_second: Vec<&(u64, String)> = during.iter().filter(|p| !at_start.contains(p)).collect();
    assert!(
        of_first.iter().any(|p| p.1.ends_with("_on_cpu_sample"))
            && of_second.iter().any(|p| p.1.ends_with("_on_cpu_sample")),
        "{at_start:?}\n{during:?}"
    );
    // Not the feature probes of a loader (unnamed, `bpf_prog_TAG`, or libbpf's
    // `..._libbpf_nametest`, at each start, here or in a test beside): one lives for microseconds, and its
    // kallsyms line outlasts it by the kernel's deferred free, so a listing may show one that
    // neither the first recording's listing of programs nor its side-band events could see
    // (seen twice in three fresh runs on kernel 6.18.44, the named ones all recorded).
    let named = |p: &&(u64, String)| {
        p.1.len() > "bpf_prog_".len() + 16 && !p.1.ends_with("_libbpf_nametest")
    };
    for p in of_first
        .iter()
        .chain(of_second.iter())
        .copied()
        .filter(named)
    {
        assert!(ksymbols.contains(p), "{p:?} not recorded: {ksymbols:?}");
    }
    // One per program at least: the second recording's programs (on_*; their subprograms,
    // the unwinder's bpf_loop callbacks, are functions of the same programs).
    let programs = of_second.iter().filter(|p| p.1.contains("_on_")).count();
    assert!(
        loads >= programs,
        "{loads} BPF_EVENT load records for {programs} programs"
    );
}

/// The verifier's work at record's defaults, program by program (`BPFPERF_DEBUG=verifier`:
/// "processed N insns"), stays bounded: it is most of record's start-up. The unwinder's step
/// inlined in each program that unwinds (samples, faults, wakers, block requests) took the
/// kernel (6.18.44) 20-31k instructions a program, 190k in all and 0.34 s of start-up; the
/// step is two global functions now (`unwind_frame`, `unwind_caller`), checked once per
/// program, and on_switch's stack copies and socket-wait scan, and the Python walk's zeroed
/// span, are gone from what is checked: 26.8k in all, on_switch 5.4k (46.4k and 13.9k before).
#[test]
fn the_verifier_checks_each_program_in_bounded_work() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    let dir = TempDir::new("verifier");
    let out = record_env(
        &["-q", "-o", dir.path("v.data").to_str().unwrap()],
        &["true"],
        &[("BPFPERF_DEBUG", "verifier")],
    );
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let mut program = None;
    let mut processed = Vec::new();
    for line in stderr.lines() {
        if let Some(rest) = line.split("prog '").nth(1) {
            if line.contains("BEGIN PROG LOAD LOG") {
                program = rest.split('\'').next().map(str::to_string);
            }
        }
        if let Some(n) = line
            .strip_prefix("processed ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
        {
            processed.push((program.take().unwrap_or_default(), n));
        }
    }
    let names: Vec<&str> = processed.iter().map(|(p, _)| p.as_str()).collect();
    for p in ["on_cpu_sample", "on_switch", "on_block_issue"] {
        assert!(names.contains(&p), "{p} not verified: {processed:?}");
    }
    let total: u64 = processed.iter().map(|(_, n)| n).sum();
    eprintln!("verified at the defaults: {total} instructions, {processed:?}");
    for (p, n) in &processed {
        assert!(*n <= 8_000, "{p}: {n} instructions verified; {processed:?}");
    }
    assert!(
        total <= 40_000,
        "{total} instructions verified: {processed:?}"
    );
}
