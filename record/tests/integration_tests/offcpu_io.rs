//! Off-CPU time and block I/O, recorded with stacks; perf script shows both by name.

use crate::common::*;

#[test]
fn offcpu_time_matches_known_sleep_and_io_is_attributed() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("offcpu");
    let file = dir.path("sleep.data");
    let sleeper = fixture("sleeper-fp");
    // 2 threads x 40 sleeps of 10 ms: 800 ms of requested sleep; then 6 files written+fsynced.
    let (threads, iters, usecs) = (2u64, 40u64, 10_000u64);
    let io_dir = std::env::var("TMPDIR").unwrap_or_else(|_| "/var/tmp".into());
    let out = record(
        &["-o", file.to_str().unwrap()],
        &[
            sleeper.to_str().unwrap(),
            &threads.to_string(),
            &iters.to_string(),
            &usecs.to_string(),
            "6",
            &io_dir,
        ],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = perf_script_clean(&file);
    let samples = parse_script(&text);

    let offcpu: Vec<&ScriptSample> = samples
        .iter()
        .filter(|s| s.event == "offcpu-time")
        .collect();
    assert!(!offcpu.is_empty(), "no offcpu-time samples");
    // The kernel stacks start where the thread left the CPU: nothing of the tracepoint
    // program or the glue that ran it (bpf_trace_runN, __traceiter_sched_switch) is left.
    // Below an interrupt's or exception's entry (asm_*) lies the code it interrupted, which
    // may be any program's glue (a wakeup from a timer interrupt that came while a task's
    // sched_process_exit program ran: once in CI).
    for s in samples.iter().filter(|s| {
        matches!(
            s.event.as_str(),
            "offcpu-time" | "runq-time" | "bpfperf:wakeup" | "bpfperf:block_io"
        )
    }) {
        let mut above_entry = s.frames.iter().take_while(|(f, _)| !f.starts_with("asm_"));
        let glue = above_entry.find(|(f, _)| {
            f.starts_with("__traceiter_")
                || f.starts_with("bpf_trace_run")
                || f.starts_with("bpf_prog_")
        });
        assert!(
            glue.is_none(),
            "{} stack holds {glue:?}: {:?}",
            s.event,
            s.frames
        );
    }
    assert!(
        offcpu
            .iter()
            .all(|s| s.frames.first().is_some_and(|(f, _)| f == "__schedule")),
        "off-CPU stacks start in __schedule: {:?}",
        offcpu
            .iter()
            .find(|s| s.frames.first().is_none_or(|(f, _)| f != "__schedule"))
    );
    // The usleep stacks: clock_nanosleep under sleeper_thread (frame pointers skip usleep and
    // sleep_step, whose caller frames libc's frame-pointer-less code hides).
    let in_sleep: u64 = offcpu
        .iter()
        .filter(|s| {
            s.frames.iter().any(|(f, _)| f == "sleeper_thread")
                && s.frames.iter().any(|(f, _)| f.contains("nanosleep"))
        })
        .map(|s| s.period)
        .sum();
    let requested = threads * iters * usecs * 1000;
    let ratio = in_sleep as f64 / requested as f64;
    eprintln!(
        "off-CPU in the usleep stacks: {in_sleep} ns, requested {requested} ns (ratio {ratio:.3})"
    );
    assert!(
        (0.7..=1.3).contains(&ratio),
        "off-CPU in the usleep stacks {in_sleep} ns vs requested {requested} ns"
    );

    // Block I/O: the program's fsyncs, with its name and its issuing stack, fields by name.
    let io: Vec<&ScriptSample> = samples
        .iter()
        .filter(|s| s.event == "bpfperf:block_io")
        .collect();
    assert!(!io.is_empty(), "no block I/O recorded");
    assert!(
        text.contains("comm=sleeper-fp tracked=1"),
        "the program issues I/O:\n{}",
        &text[..4000.min(text.len())]
    );
    let writes = text
        .lines()
        .filter(|l| {
            l.contains("bpfperf:block_io:") && l.contains(" W") && l.contains("comm=sleeper-fp")
        })
        .count();
    assert!(
        writes >= 6,
        "one write per fsynced file at least, got {writes}"
    );
}

/// Some hosts hide switches from tracing (on the machines this project is built on, every
/// switch away from their agent's threads: the kernel runs no sched_switch program for it,
/// ftrace's event included). A thread that came back on a CPU unseen still has its interval
/// recorded, ended at its wakeup, when it next leaves the CPU or exits; where no wakeup was seen
/// either, record says how many it could not end. Here about one switch back in two is
/// hidden by construction (BPFPERF_OFFCPU_UNSEEN_EVERY): every sleep is still recorded, at
/// its length.
#[test]
fn sleeps_whose_threads_came_back_unseen_are_still_recorded() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("unseen");
    let file = dir.path("sleep.data");
    let sleeper = fixture("sleeper-fp");
    let (threads, iters, usecs) = (2u64, 40u64, 10_000u64);
    let out = record_env(
        &["-e", "offcpu", "-o", file.to_str().unwrap()],
        &[
            sleeper.to_str().unwrap(),
            &threads.to_string(),
            &iters.to_string(),
            &usecs.to_string(),
            "0",
            "/var/tmp",
        ],
        &[("BPFPERF_OFFCPU_UNSEEN_EVERY", "2")],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let samples = parse_script(&perf_script_clean(&file));
    let sleeps: Vec<u64> = samples
        .iter()
        .filter(|s| s.event == "offcpu-time")
        // Blocked in the sleep itself (a preemption at the syscall's exit has usleep on its
        // user stack too).
        .filter(|s| {
            s.frames.iter().any(|(f, _)| f == "sleeper_thread")
                && s.frames.iter().any(|(f, _)| f == "do_nanosleep")
        })
        .map(|s| s.period)
        .collect();
    let (n, total) = (sleeps.len() as u64, sleeps.iter().sum::<u64>());
    let requested = threads * iters * usecs * 1000;
    eprintln!(
        "{n} sleeps of {} recorded, {total} ns of {requested} requested\n{}",
        threads * iters,
        stderr_of(&out)
    );
    // Without their end, half the sleeps were lost (the next switch away overwrote them).
    // Two either way: a sleep the host's own hidden switches took with its wakeup, or one
    // woken early that slept again.
    assert!(
        n + 2 >= threads * iters && n <= threads * iters + 2,
        "{n} sleeps"
    );
    assert!(
        total * 100 >= requested * 95 && total <= requested * 12 / 10,
        "{total} ns asleep of {requested}"
    );
}

#[test]
fn no_off_cpu_no_io_and_no_cache_turn_them_off() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("off");
    let file = dir.path("plain.data");
    let sleeper = fixture("sleeper-fp");
    let out = record(
        &[
            "--no-off-cpu",
            "--no-io",
            "--no-cache",
            // Major faults are their own event, not off-CPU time: on a fresh machine the
            // sleeper's first start faults its pages in from disk (CI saw fault-time here).
            "--no-faults",
            "-o",
            file.to_str().unwrap(),
        ],
        &[sleeper.to_str().unwrap(), "1", "5", "1000", "1", "/var/tmp"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(
            " 0 off-CPU events, 0 run-queue waits, 0 wakeups, 0 I/O events, 0 major faults"
        ),
        "{}",
        stderr_of(&out)
    );
    let samples = parse_script(&perf_script_clean(&file));
    assert!(
        samples.iter().all(|s| s.event == "cpu-clock"),
        "only on-CPU samples, got {:?}",
        samples
            .iter()
            .map(|s| s.event.as_str())
            .collect::<std::collections::BTreeSet<_>>()
    );

    // Off-CPU without its wakers.
    let out = record(
        &["--no-wakeups", "-o", file.to_str().unwrap()],
        &[sleeper.to_str().unwrap(), "1", "5", "1000", "1", "/var/tmp"],
    );
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(" 0 wakeups,"), "{stderr}");
    assert!(!stderr.contains(" 0 off-CPU events"), "{stderr}");
    let samples = parse_script(&perf_script_clean(&file));
    assert!(samples.iter().all(|s| s.event != "bpfperf:wakeup"));
}

#[test]
fn analyze_offcpu_io_and_wall_views() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("views");
    let file = dir.path("views.data");
    // Built without frame pointers: the off-CPU stacks come from DWARF stack copies (the
    // default call graph), taken when the thread blocks.
    let sleeper = fixture("sleeper-nofp");
    let (threads, iters, usecs) = (2u64, 30u64, 10_000u64);
    // Under /usr/bin/time: the burn's CPU time in this very run bounds its wall share.
    let (threads_s, iters_s, usecs_s) = (threads.to_string(), iters.to_string(), usecs.to_string());
    let out = record(
        &["-o", file.to_str().unwrap()],
        &timed(&[
            sleeper.to_str().unwrap(),
            &threads_s,
            &iters_s,
            &usecs_s,
            "6",
            "/var/tmp",
        ]),
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let sum = |lines: &std::collections::BTreeMap<String, u64>, needle: &str| -> u64 {
        lines
            .iter()
            .filter(|(k, _)| k.contains(needle))
            .map(|(_, v)| v)
            .sum()
    };

    // Off-CPU: the usleep stacks hold the known sleep total.
    let offcpu = analyze_folded(&file, &["--event", "offcpu"]);
    let slept = sum(&offcpu, "sleeper_thread;");
    let requested = threads * iters * usecs * 1000;
    let ratio = slept as f64 / requested as f64;
    eprintln!("analyze --event offcpu: {slept} ns under sleeper_thread, requested {requested} (ratio {ratio:.3})");
    assert!((0.7..=1.3).contains(&ratio), "{slept} vs {requested}");

    // I/O: the program's fsync issues the writes of pages it dirtied: their latency is
    // charged to the write() that dirtied them (writeback to its dirtier).
    let io = analyze_folded(&file, &["--event", "io"]);
    let io_total: u64 = io.values().sum();
    let written = sum(&io, "write_and_sync;__GI___libc_write");
    eprintln!("analyze --event io: {io_total} ns in all, {written} ns under the program's write()");
    assert!(written > 0, "write() stacks carry block I/O time:\n{io:#?}");

    let report = analyze(&["io"], &file);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("sleeper-nofp"),
        "analyze io names the program as an issuer:\n{text}"
    );
    assert!(text.contains("latency histogram"), "{text}");

    // Wall: on-CPU (the burn) and off-CPU (the sleeps) together, in nanoseconds.
    // A burn preempted on a loaded machine waits for a CPU under burn too (3x its CPU time
    // beside a build): its wall time less its off-CPU time is its time on a CPU.
    let wall = analyze_folded(&file, &["--event", "wall"]);
    let burn = sum(&wall, ";burn");
    let burn_off = sum(&offcpu, ";burn");
    let sleeping = sum(&wall, "sleeper_thread;");
    let cpu_secs = cpu_seconds(&stderr_of(&out));
    let burn_ratio = burn.saturating_sub(burn_off) as f64 / (cpu_secs * 1e9);
    eprintln!("analyze --event wall: burn {burn} ns, {burn_off} of them off the CPU (time says {cpu_secs} s of CPU, ratio {burn_ratio:.2}), sleeping {sleeping} ns");
    assert!(
        burn >= burn_off && (0.6..=1.5).contains(&burn_ratio),
        "burn's wall share {burn} ns, {burn_off} off the CPU, vs {cpu_secs} s of CPU"
    );
    assert!(
        sleeping as f64 >= 0.7 * requested as f64,
        "sleeps are in the wall view"
    );
}

/// The trap of design.md: a reader woken per record preempts the workload, which makes off-CPU
/// events, which wake the reader. A CPU-bound program must stay on the CPU while recorded, and
/// record must not spend the CPU it takes from it. Other jobs on the machine may take CPU too:
/// the workers' off-CPU time must then equal what they did not get, no more.
#[test]
fn recording_off_cpu_does_not_create_its_own_off_cpu_time() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("trap");
    let file = dir.path("busy.data");
    let busy = fixture("busy-fp");
    // record's fixed cost (start-up, BPF load, finish), to tell it from the cost per event.
    let before = children_cpu_seconds();
    let out = record(&["-o", dir.path("true.data").to_str().unwrap()], &["true"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let record_fixed = children_cpu_seconds() - before;
    let started = std::time::Instant::now();
    let children_before = children_cpu_seconds();
    let out = record(
        &["-o", file.to_str().unwrap()],
        &timed(&[busy.to_str().unwrap(), "2", "2"]),
    );
    let record_and_workload = children_cpu_seconds() - children_before;
    let wall = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let workload_cpu = cpu_seconds(&stderr_of(&out));
    let record_cpu = record_and_workload - workload_cpu - record_fixed;
    let offcpu = analyze_folded(&file, &["--event", "offcpu"]);
    // The workers' own off-CPU time (preemptions), not the main thread waiting in join.
    let workers: u64 = offcpu
        .iter()
        .filter(|(k, _)| {
            k.contains(";worker;") || k.contains(";hash_loop;") || k.contains(";spin_inner;")
        })
        .map(|(_, v)| v)
        .sum();
    // Two workers, each spinning until it has had 2 s of CPU: they run as long as the
    // program does (on an idle machine 2 s; longer where other jobs take CPU).
    let elapsed = wall_seconds(&stderr_of(&out));
    let running = 2.0 * elapsed;
    let not_on_cpu = (running - workload_cpu).max(0.0);
    let workers_s = workers as f64 / 1e9;
    eprintln!(
        "workers off the CPU {workers_s:.3} s, not on the CPU by time {not_on_cpu:.3} s of \
         {running:.2} s; record used {record_fixed:.3} + {record_cpu:.3} CPU s; wall {wall:.2} s, the \
         program's {elapsed:.2} s"
    );
    assert!(
        (workers_s - not_on_cpu).abs() <= 0.05 * running,
        "off-CPU time {workers_s:.3} s vs {not_on_cpu:.3} s the workers did not run"
    );
    assert!(
        record_cpu < 0.15 * workload_cpu,
        "record took {record_cpu:.3} CPU s (beyond its fixed cost) while the workload ran {workload_cpu:.3} s"
    );
}

/// CPU seconds of this process's reaped children (and theirs), user + system.
fn children_cpu_seconds() -> f64 {
    #[repr(C)]
    struct Timeval {
        sec: i64,
        usec: i64,
    }
    #[repr(C)]
    struct Rusage {
        utime: Timeval,
        stime: Timeval,
        rest: [i64; 14],
    }
    extern "C" {
        fn getrusage(who: i32, usage: *mut Rusage) -> i32;
    }
    const RUSAGE_CHILDREN: i32 = -1;
    // SAFETY: a zeroed rusage is a valid out buffer of the C layout.
    let mut u: Rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { getrusage(RUSAGE_CHILDREN, &mut u) }, 0);
    let s = |t: &Timeval| t.sec as f64 + t.usec as f64 / 1e6;
    s(&u.utime) + s(&u.stime)
}

/// Who woke a blocked thread: a thread blocked reading a pipe, woken by another thread's write
/// each round. `--event wakeup` joins the blocked stack and the waker's (as bcc's offwaketime
/// folds them: blocked stack, `--`, waker stack innermost first, waker name); perf script
/// shows the wakeup samples by name.
#[test]
fn wakeups_name_the_waker_and_its_stack() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("wakeup");
    let file = dir.path("wake.data");
    let handoff = fixture("handoff-fp");
    // 40 rounds: the waiter is blocked about 10 ms each, until the other thread writes.
    let (rounds, pause_us) = (40u64, 10_000u64);
    let out = record(
        &["-o", file.to_str().unwrap()],
        &[
            handoff.to_str().unwrap(),
            &rounds.to_string(),
            &pause_us.to_string(),
        ],
    );
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains(" 0 wakeups"), "{stderr}");

    let text = perf_script_clean(&file);
    let wakeups: Vec<ScriptSample> = parse_script(&text)
        .into_iter()
        .filter(|s| s.event == "bpfperf:wakeup")
        .collect();
    assert!(wakeups.len() as u64 >= rounds, "{} wakeups", wakeups.len());
    assert!(text.contains("bpfperf:wakeup: wakee="), "fields by name");

    let joined = analyze_folded(&file, &["--event", "wakeup"]);
    let by_pipe: u64 = joined
        .iter()
        .filter(|(stack, _)| {
            let Some((blocked, waker)) = stack.split_once(";--;") else {
                return false;
            };
            blocked.contains(";waiter_thread;wait_for_token;")
                && waker.contains("anon_pipe_write")
                && waker.contains(";send_tokens;")
                && waker.ends_with(";handoff-fp")
        })
        .map(|(_, w)| w)
        .sum();
    let expected = rounds * pause_us * 1000;
    let ratio = by_pipe as f64 / expected as f64;
    eprintln!("blocked in read, woken by send_token: {by_pipe} ns of {expected} ns ({ratio:.3})");
    assert!((0.7..=1.3).contains(&ratio), "{by_pipe} ns: {joined:#?}");

    // usleep's wakeup comes from the timer interrupt: named [interrupt], cut at its entry.
    let timer = joined
        .keys()
        .find(|k| k.contains(";do_nanosleep;") && k.ends_with(";[interrupt]"))
        .unwrap_or_else(|| panic!("no timer wakeup: {joined:#?}"));
    let before_name = timer.rsplit(';').nth(1).unwrap();
    assert!(before_name.starts_with("asm_"), "{timer}");

    // Every off-CPU nanosecond is there, with or without a waker.
    let total = |m: &std::collections::BTreeMap<String, u64>| m.values().sum::<u64>();
    assert_eq!(
        total(&joined),
        total(&analyze_folded(&file, &["--event", "offcpu"]))
    );
}

/// The number a program printed on the line that starts with `name` (`a_wall 123`).
fn printed_ns(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in {text}"))
}

/// `analyze critical`'s `--time` for the stretch a program timed itself (CLOCK_MONOTONIC, as
/// the recording's times): from `started`, `wall` ns long. The process's start before main
/// (exec, the loader), which the program's clock misses, is left out by construction (a
/// loaded machine once took 0.6 s there).
fn program_window(started: u64, wall: u64) -> String {
    let s = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    format!("{},{}", s(started), s(started + wall))
}

/// The summed weights of the folded lines (`stack WEIGHT`) whose stack `keep` takes.
fn folded_weight(folded: &str, keep: &dyn Fn(&str) -> bool) -> u64 {
    folded
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(k, _)| keep(k))
        .map(|(_, w)| w.parse::<u64>().unwrap())
        .sum()
}

/// Chain graphs: chain-a waits on chain-b, which waits on chain-c, which spins (the
/// fixture `chain`). `--event chain` follows each wait to its waker, to where that waker had
/// itself blocked, and to its waker, `--depth` wakers deep; the chains under chain-a's wait
/// weigh chain-a's blocked time as the program measured it.
#[test]
fn chains_follow_a_wait_through_its_wakers_own_waits() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("chain");
    for mode in ["fp", "dwarf"] {
        let file = dir.path(&format!("chain-{mode}.data"));
        let program = fixture(if mode == "fp" {
            "chain-fp"
        } else {
            "chain-nofp"
        });
        let out = record(
            &[
                "-e",
                "offcpu,wakeup",
                "--call-graph",
                mode,
                "-o",
                file.to_str().unwrap(),
            ],
            // 150 rounds (0.6 s of waiting): the program's clock (wall less CPU time in
            // read) also counts what a virtual machine's host takes from A's CPU while A
            // runs (steal: not A's CPU time, not an interval off the CPU); bursts of 4-7 ms
            // were seen here, 3% of 50 rounds' waits, 1% of these.
            &[program.to_str().unwrap(), "150", "4000"],
        );
        let stderr = stderr_of(&out);
        assert!(out.status.success(), "{stderr}");
        std::fs::write(dir.path(&format!("chain-{mode}.out")), &out.stdout).unwrap();
        let a_waited = printed_ns(&String::from_utf8_lossy(&out.stdout), "a_waited ");
        let total = |m: &std::collections::BTreeMap<String, u64>| m.values().sum::<u64>();
        // A's waits in a_wait_for_b, its waker's part: what follows the blocked stack.
        let a_waits = |chains: &std::collections::BTreeMap<String, u64>| -> Vec<(String, u64)> {
            chains
                .iter()
                .filter(|(k, _)| k.starts_with("chain-a;") && k.contains(";a_round;a_wait_for_b;"))
                .map(|(k, w)| (k.split_once(";--;").map_or("", |x| x.1).to_string(), *w))
                .collect()
        };
        // What each depth must show after A's blocked stack, level by level.
        // Who wakes each wait, and where each thread waits: a chain goes from a wait to its
        // waker, from the waker to its own last wait, and so on. How far it goes depends on
        // the scheduling (a thread that never blocked between two wakeups, say C preempted
        // before its read while B asked again, ends the chain), not what each level shows.
        let waker_of = |wait: &str| match wait {
            "a_wait_for_b" => ("b_answer_a", "chain-b"),
            "b_wait_for_c" => ("c_spin_then_answer", "chain-c"),
            "c_wait_for_b" => ("b_ask_c", "chain-b"),
            _ => ("a_ask", "chain-a"),
        };
        let waits_of = |thread: &str| -> &'static [&'static str] {
            match thread {
                "chain-a" => &["a_wait_for_b"],
                "chain-b" => &["b_wait_for_a", "b_wait_for_c"],
                _ => &["c_wait_for_b"],
            }
        };
        // Whether `chain` (the parts after A's wait) is made of those steps, and how deep.
        // A thread's own code: chain-b's functions are b_*.
        let own = |part: &str, thread: &str| {
            let letter = thread.strip_prefix("chain-").unwrap_or("?");
            part.contains(&format!(";{letter}_"))
        };
        const PREEMPTED: &str = "(preempted)";
        let valid = |chain: &str| -> Option<usize> {
            let parts: Vec<&str> = chain.split(";--;").collect();
            let mut wait = "a_wait_for_b";
            for (i, part) in parts.iter().enumerate() {
                if i % 2 == 0 {
                    let thread = part.rsplit(';').next().unwrap_or("");
                    let fits = if wait == PREEMPTED {
                        thread.starts_with("chain-") && own(part, thread)
                    } else {
                        let (function, waker) = waker_of(wait);
                        part.contains(&format!(";{function};")) && thread == waker
                    };
                    if !fits {
                        return None;
                    }
                } else {
                    let thread = parts[i - 1].rsplit(';').next().unwrap_or("");
                    // A waker last left the CPU in one of its waits; or, preempted (its
                    // state already a sleeper's, as it went to wait), anywhere in its own
                    // code, woken by whichever thread ran its wait's condition.
                    wait = match waits_of(thread)
                        .iter()
                        .find(|w| part.contains(&format!(";{w};")))
                    {
                        Some(w) => w,
                        None if own(part, thread) => PREEMPTED,
                        None => return None,
                    };
                }
            }
            Some(parts.len().div_ceil(2))
        };
        for depth in 1..=4 {
            let chains = analyze_folded(
                &file,
                &[
                    "--event",
                    "chain",
                    "--depth",
                    &depth.to_string(),
                    "--comm",
                    "chain-a",
                ],
            );
            let waits = a_waits(&chains);
            let weight_of = |keep: &dyn Fn(&str) -> bool| -> u64 {
                waits.iter().filter(|(c, _)| keep(c)).map(|(_, w)| w).sum()
            };
            // Every chain is made of the program's steps, no deeper than asked.
            let chained = weight_of(&|c| valid(c).is_some_and(|d| d <= depth));
            // B blocks on C's spin in every round: unless the machine held B up for the
            // whole spin between its write and its read, the second level is C's.
            let to_c = weight_of(&|c| c.contains(";c_spin_then_answer;"));
            // DWARF mode: a waker's user stack is unwound with its process's tables, and by
            // frame pointers until they are in (the first rounds): chain-nofp's then ends in
            // libc's write. Those waits are left out of the measure (and printed).
            let early: u64 = waits
                .iter()
                .filter(|(chain, _)| {
                    let parts: Vec<&str> = chain.split(";--;").collect();
                    mode == "dwarf"
                        && parts.iter().step_by(2).any(|waker| {
                            let thread = waker.rsplit(';').next().unwrap_or("");
                            thread.starts_with("chain-") && !own(waker, thread)
                        })
                })
                .map(|(_, w)| w)
                .sum();
            let ratio = chained as f64 / (a_waited - early.min(a_waited)) as f64;
            let c_share = to_c as f64 / a_waited as f64;
            eprintln!(
                "{mode} depth {depth}: chains of the program's steps under a_wait_for_b \
                 {chained} ns, chain-a measured {a_waited} ns, {early} ns with a waker unwound \
                 before its tables were in ({ratio:.4}); through C's spin {c_share:.3}"
            );
            assert!(
                (0.98..=1.02).contains(&ratio),
                "{mode} depth {depth}: {ratio:.4} of a_waited: {waits:#?}"
            );
            assert!(depth < 2 || c_share >= 0.5, "{waits:#?}");
            // Chains weigh the blocked time: their total is chain-a's off-CPU time.
            let offcpu = analyze_folded(&file, &["--event", "offcpu", "--comm", "chain-a"]);
            assert_eq!(total(&chains), total(&offcpu), "{mode} depth {depth}");
        }
    }
    // The critical path of chain-a (the main thread of the process recorded first): its wall
    // time as the program measured it, C's spins as the program timed them. On-CPU samples
    // name the stretches on the CPU.
    let file = dir.path("critical.data");
    let out = record(
        &[
            "-e",
            "cpu-clock,offcpu,wakeup,runq",
            "--call-graph",
            "fp",
            "-o",
            file.to_str().unwrap(),
        ],
        &[fixture("chain-fp").to_str().unwrap(), "100", "4000"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    std::fs::write(dir.path("critical.out"), &out.stdout).unwrap();
    let chain_out = std::fs::read_to_string(dir.path("critical.out")).unwrap();
    let (a_wall, c_spun) = (
        printed_ns(&chain_out, "a_wall "),
        printed_ns(&chain_out, "c_spun "),
    );
    let window = program_window(printed_ns(&chain_out, "a_started "), a_wall);
    let out = analyze(&["critical", "--folded", "--time", &window], &file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folded = String::from_utf8_lossy(&out.stdout).into_owned();
    let weight = |keep: &dyn Fn(&str) -> bool| folded_weight(&folded, keep);
    let total = weight(&|_| true);
    // C's spins as they took on the clock: on the CPU, and preempted ([run queue] under the
    // spin's stack).
    let spin = weight(&|k| k.contains(";[waits on chain-c ") && k.contains(";c_spin_then_answer"));
    // What the program's clock counts as spinning the path may charge elsewhere: B waiting
    // for a CPU that C's spin holds, a stretch on the CPU no sample fell in.
    let elsewhere =
        weight(&|k| k.ends_with(";[run queue]") || k.ends_with(";[on CPU, not sampled]"));
    let table = analyze(&["critical", "--time", &window], &file);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    eprintln!("{table}");
    // The header's wall time and what was charged, to the microsecond.
    let header = table.lines().next().unwrap_or_default();
    let ms = |prefix: &str| -> f64 {
        header
            .split(prefix)
            .nth(1)
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{header}"))
    };
    assert_eq!(ms(": "), ms("("), "{header}");
    assert_eq!(
        format!("{:.3}", total as f64 / 1e6),
        format!("{:.3}", ms(": "))
    );
    let ratio = total as f64 / a_wall as f64;
    let (spin_share, spun_share, elsewhere_share) = (
        100.0 * spin as f64 / total as f64,
        100.0 * c_spun as f64 / a_wall as f64,
        100.0 * elsewhere as f64 / total as f64,
    );
    eprintln!(
        "critical path of chain-a: {total} ns, the program's wall {a_wall} ns ({ratio:.4}); \
         chain-c's spin {spin_share:.2}% (on the program's clock: {spun_share:.2}%), \
         run queues and unsampled stretches {elsewhere_share:.2}%"
    );
    assert!((0.99..=1.01).contains(&ratio), "{folded}");
    assert!(
        spin_share <= spun_share + 2.0 && spin_share + elsewhere_share >= spun_share - 2.0,
        "{folded}"
    );

    // --depth is --event chain's.
    let out = analyze(
        &["report", "--folded", "--event", "wakeup", "--depth", "2"],
        &dir.path("chain-fp.data"),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--depth is for --event chain"));
}

/// The critical path through a disk: main waits on a producer (a pipe), which reads each
/// chunk from disk with O_DIRECT (the fixture `pipeline`). The time main waited while the
/// producer was in its reads is charged under the producer's read_from_disk (on the CPU,
/// waiting for the CPU, or for the disk, named `[disk]` from the completion's stack), and
/// adds up to what the program measured of its reads.
#[test]
fn the_critical_path_goes_through_a_producer_to_the_disk() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("critical-disk");
    // On disk (not a tmpfs: O_DIRECT reads must reach a device), 64 MiB read 8 times over in
    // 256 KiB chunks; the path over the stretch main timed (`program_window`).
    let io_dir = std::env::var("TMPDIR").unwrap_or_else(|_| "/var/tmp".into());
    let data =
        std::path::Path::new(&io_dir).join(format!("bpfperf-pipeline-{}", std::process::id()));
    let dd = std::process::Command::new("dd")
        .arg("if=/dev/urandom")
        .arg(format!("of={}", data.display()))
        .args(["bs=1M", "count=64", "status=none"])
        .status()
        .unwrap();
    assert!(dd.success());
    for (mode, program) in [("fp", "pipeline-fp"), ("dwarf", "pipeline-nofp")] {
        let file = dir.path(&format!("{mode}.data"));
        let out = record(
            &[
                "-e",
                "cpu-clock,offcpu,wakeup,runq",
                "--call-graph",
                mode,
                "-o",
                file.to_str().unwrap(),
            ],
            &[
                fixture(program).to_str().unwrap(),
                data.to_str().unwrap(),
                "2048",
                "256",
            ],
        );
        assert!(out.status.success(), "{}", stderr_of(&out));
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        let (disk_read, main_wall) = (
            printed_ns(&printed, "disk_read "),
            printed_ns(&printed, "main_wall "),
        );
        let window = program_window(printed_ns(&printed, "main_started "), main_wall);
        let folded = analyze(&["critical", "--folded", "--time", &window], &file);
        assert!(
            folded.status.success(),
            "{}",
            String::from_utf8_lossy(&folded.stderr)
        );
        let folded = String::from_utf8_lossy(&folded.stdout).into_owned();
        let weight = |keep: &dyn Fn(&str) -> bool| folded_weight(&folded, keep);
        let total = weight(&|_| true);
        // (With frame pointers, read_from_disk's own frame is lost under libc's pread,
        // which keeps none.)
        let in_reads =
            weight(&|k| k.contains(";[waits on producer ") && k.contains(";__libc_pread"));
        let disk = weight(&|k| k.ends_with(";[disk]"));
        // What the program's clock counts as reading that the path may charge elsewhere:
        // main waiting for a CPU while the producer reads the next chunk, stretches on the
        // CPU no sample fell in.
        let elsewhere = weight(&|k| {
            !k.contains(";__libc_pread")
                && (k.ends_with(";[run queue]") || k.ends_with(";[on CPU, not sampled]"))
        });
        let share = |ns: u64| 100.0 * ns as f64 / total as f64;
        let read_share = 100.0 * disk_read as f64 / main_wall as f64;
        eprintln!(
            "{mode}: critical path {total} ns (the program's wall {main_wall}); under the \
             producer's reads {:.2}% (the program: {read_share:.2}%), [disk] {:.2}%, run \
             queues and unsampled stretches elsewhere {:.2}%",
            share(in_reads),
            share(disk),
            share(elsewhere)
        );
        assert!(
            (0.99..=1.01).contains(&(total as f64 / main_wall as f64)),
            "{mode}: {total} ns of {main_wall}"
        );
        assert!(
            share(in_reads) <= read_share + 2.0
                && share(in_reads) + share(elsewhere) >= read_share - 2.0,
            "{folded}"
        );
        // The disk is named (the rest of the reads: the producer on the CPU, and waiting for
        // one once its read completed).
        assert!(share(disk) >= 10.0, "{folded}");
    }
    let _ = std::fs::remove_file(&data);
}

#[test]
fn only_the_recorded_programs_io_is_kept_not_another_processes_nor_records_own() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("others-io");
    let file = dir.path("busy.data");
    // Another process, not recorded, writes 256 MiB with O_DIRECT (each request issued in its
    // own context) while the recorded program only computes.
    let io_dir = std::env::var("TMPDIR").unwrap_or_else(|_| "/var/tmp".into());
    let other = std::path::Path::new(&io_dir).join(format!("bpfperf-other-{}", std::process::id()));
    let mut dd = std::process::Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", other.display()))
        .args(["bs=1M", "count=256", "oflag=direct"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let busy = fixture("busy-fp");
    let out = record(
        &["-o", file.to_str().unwrap()],
        &[busy.to_str().unwrap(), "2", "1"],
    );
    let dd_done = dd.wait().unwrap();
    let _ = std::fs::remove_file(&other);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(dd_done.success(), "dd failed");
    let text = perf_script_clean(&file);
    // Each block_io sample's thread (perf script's second word) and the issuer its fields
    // name; the recorded program's threads are those its other samples name busy-fp (after
    // exec: record's own process is named record). Not only those with cpu-clock samples:
    // busy-fp's main thread waits for its workers (off-CPU samples), and on a fresh machine
    // the readahead of the binary it faulted in is its I/O (5 requests in CI).
    let pid_of = |l: &str| -> Option<String> {
        let w = l.split_whitespace().nth(1)?;
        Some(w.split('/').next()?.to_string())
    };
    let program: std::collections::BTreeSet<String> = text
        .lines()
        .filter(|l| l.starts_with("busy-fp ") && !l.contains("bpfperf:block_io:"))
        .filter_map(pid_of)
        .collect();
    assert!(
        text.lines()
            .any(|l| l.starts_with("busy-fp ") && l.contains(" cpu-clock")),
        "no cpu-clock samples"
    );
    let mut issuers: std::collections::BTreeMap<String, u64> = Default::default();
    let mut others = Vec::new();
    for l in text.lines().filter(|l| l.contains("bpfperf:block_io:")) {
        let comm = l
            .split("comm=")
            .nth(1)
            .and_then(|c| c.split_whitespace().next());
        *issuers.entry(comm.unwrap_or("?").to_string()).or_insert(0) += 1;
        if !pid_of(l).is_some_and(|p| program.contains(&p)) {
            others.push(l.to_string());
        }
    }
    eprintln!("block I/O by issuer: {issuers:?} (the program's processes: {program:?})");
    assert!(
        !issuers.contains_key("dd"),
        "another process's I/O was recorded: {issuers:?}"
    );
    // record's own writes (its output file) would be charged to record's process; the
    // program before its exec is named `record` too, but is its own process.
    assert!(
        others.is_empty(),
        "block I/O of processes that were not recorded:\n{}",
        others.join("\n")
    );
}
