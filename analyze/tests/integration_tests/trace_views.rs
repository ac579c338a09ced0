//! The views of traced events (#24: `analyze trace`, `hist`, `count`, and `--weight` for the
//! stack views), each against an oracle:
//!
//! - bpftrace attached to the same run as `record`: counts per command and process, hist()
//!   and lhist() bucket by bucket, sum() of a field as `--weight`, a uprobe's calls and user
//!   stacks, a uretprobe's latency;
//! - perf script reading the same file, ours and perf's own recording: every event's time,
//!   command, pid/tid, CPU, fields, latency (perf's period) and stack;
//! - tracee.c's known totals: counts per event, command, process and stack, histograms of
//!   its USDT probe's arguments, nap()'s latency in folded stacks, heatmaps and pprof.
//!
//! Commands other than tracee's own (perf, bpftrace, go) are oracles: under CI they must be
//! there; elsewhere a test without one is skipped, saying so.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::common::{can_record, fixture, have, mount_tracefs, perf_record, record_bin, Tmp};
use crate::folded::{frame_name, parse_folded, run_ok, Folded};

/// One traced run at a time: each of these tests runs a workload under BPF and times it
/// (latencies within 2%); two at once on a small machine slow each other down.
fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// How each test of a traced run begins: `None` (skipped) where perf and record cannot
/// record here, else this test's turn to run alone, with tracefs mounted, and a fresh
/// directory named after `tag`.
fn traced_run(tag: &str) -> Option<(MutexGuard<'static, ()>, Tmp)> {
    if !can_record() {
        return None;
    }
    let turn = exclusive();
    mount_tracefs();
    Some((turn, Tmp::new(tag)))
}

/// `record -q ARGS -o FILE -- CMD`, which must succeed. Without cargo's LD_LIBRARY_PATH: with
/// it, getaddrinfo's dlopen of the NSS modules tries (and fails to open) each of its
/// directories first, and tracee's counts of openat are no longer its own.
fn record_traced(file: &Path, args: &[&str], cmd: &[&str]) {
    let out = Command::new(record_bin())
        .env_remove("LD_LIBRARY_PATH")
        .arg("-q")
        .args(args)
        .arg("-o")
        .arg(file)
        .arg("--")
        .args(cmd)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record {args:?} -- {cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---------------------------------------------------------------------------------------
// bpftrace

/// Whether bpftrace runs here; under CI it must.
fn bpftrace_ok() -> bool {
    let ok = Command::new("bpftrace")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    have(ok, "bpftrace")
}

/// A bpftrace program running in the background until [`Bpftrace::stop`].
struct Bpftrace {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

impl Bpftrace {
    /// Starts `program` and returns once every probe is attached. bpftrace prints
    /// "Attaching N probes..." before it attaches them (and runs BEGIN before them too), so
    /// neither says that the probes are in place: bpftrace 0.17 says it on standard error
    /// when `__BPFTRACE_NOTIFY_PROBES_ATTACHED` is set (its own runtime tests wait for it).
    fn start(program: &str) -> Bpftrace {
        let mut child = Command::new("bpftrace")
            .args(["-B", "none", "-e", program])
            .env("__BPFTRACE_NOTIFY_PROBES_ATTACHED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        let stderr = child.stderr.take().unwrap();
        let (attached, wait) = mpsc::channel();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line == "__BPFTRACE_NOTIFY_PROBES_ATTACHED" {
                    let _ = attached.send(());
                } else {
                    text.push_str(&line);
                    text.push('\n');
                }
            }
            text
        });
        let mut bt = Bpftrace {
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
        };
        if wait.recv_timeout(Duration::from_secs(120)).is_err() {
            bt.kill();
            let err = bt.stderr.take().unwrap().join().unwrap();
            panic!("bpftrace did not attach its probes:\n{err}\nprogram:\n{program}");
        }
        bt
    }

    /// Interrupts bpftrace (as Ctrl-C does) and returns what it printed: "Attaching N
    /// probes...", then its maps.
    ///
    /// bpftrace 0.17 can miss a SIGINT that comes just before it blocks waiting for events
    /// (seen here: it slept in epoll_wait for 13 minutes, and a second SIGINT ended it): the
    /// signal is sent again every few seconds until it exits.
    fn stop(mut self) -> String {
        let status = 'exited: {
            for _ in 0..6 {
                // SAFETY: a signal to the child this test started (not yet waited for).
                let r = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
                assert_eq!(r, 0, "kill -INT bpftrace");
                let asked = std::time::Instant::now();
                while asked.elapsed() < Duration::from_secs(5) {
                    if let Some(status) = self.child.try_wait().unwrap() {
                        break 'exited status;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            self.kill();
            panic!("bpftrace did not exit on SIGINT in 30 s");
        };
        let out = self.stdout.take().unwrap().join().unwrap();
        let err = self.stderr.take().unwrap().join().unwrap();
        assert!(status.success(), "bpftrace: {status}\n{err}\n{out}");
        out
    }

    fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Drop for Bpftrace {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A map's value as bpftrace prints it (and `analyze hist`, which prints its histograms the
/// same way).
#[derive(Debug, Clone, PartialEq, Eq)]
enum MapValue {
    Number(i64),
    /// Each row: the bucket, its count and its bar of `@`s.
    Rows(Vec<(String, u64, String)>),
}

/// Maps by name (`@reads`, `@`), each with its entries in the order printed (bpftrace's and
/// analyze's: smallest count or total first), keyed by what the brackets hold (`bv1-dd`,
/// `bv1-dd, 4242`, a stack's frames a line each; empty for a map without a key).
type Maps = BTreeMap<String, Vec<(String, MapValue)>>;

/// bpftrace's printed maps: `@name[key]: N` for a number, `@name[key]: ` then a row per bucket
/// and a blank line for a histogram; a stack key is `@name[`, a frame a line, `]: ...`.
fn parse_maps(text: &str) -> Maps {
    let mut maps = Maps::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with('@') {
            continue;
        }
        let (name, key, value) = if let Some(name) = line.strip_suffix('[') {
            let mut frames = Vec::new();
            let value = loop {
                let l = lines
                    .next()
                    .unwrap_or_else(|| panic!("{name}: a stack cut short"));
                match l.strip_prefix("]:") {
                    Some(value) => break value,
                    None => frames.push(l.trim()),
                }
            };
            (name, frames.join("\n"), value)
        } else {
            let (head, value) = line
                .rsplit_once(": ")
                .or_else(|| line.strip_suffix(':').map(|h| (h, "")))
                .unwrap_or_else(|| panic!("a map's line without ': ': {line}"));
            match head.split_once('[') {
                Some((name, key)) => (name, key.strip_suffix(']').unwrap().to_string(), value),
                None => (head, String::new(), value),
            }
        };
        let value = if value.trim().is_empty() {
            let mut rows = Vec::new();
            for row in lines.by_ref() {
                if row.trim().is_empty() {
                    break;
                }
                // "[2, 4)                 0 |@@@        |"
                let (left, bar) = row.split_once('|').unwrap();
                let (bucket, count) = left.trim_end().rsplit_once(' ').unwrap();
                rows.push((
                    bucket.trim().to_string(),
                    count.parse().unwrap(),
                    bar.trim_end_matches('|').to_string(),
                ));
            }
            MapValue::Rows(rows)
        } else {
            MapValue::Number(value.trim().parse().unwrap())
        };
        maps.entry(name.to_string()).or_default().push((key, value));
    }
    maps
}

/// `analyze count`'s table (funccount's): keys and counts, in their order.
fn parse_counts(text: &str) -> Vec<(String, i64)> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    assert!(header.ends_with("COUNT"), "{text}");
    lines
        .map(|l| {
            let (key, n) = l.trim_end().rsplit_once(' ').unwrap();
            (key.trim_end().to_string(), n.parse().unwrap())
        })
        .collect()
}

/// The entries whose keys start with `prefix`, in their order.
fn keys_from(entries: &[(String, MapValue)], prefix: &str) -> Vec<(String, MapValue)> {
    entries
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .cloned()
        .collect()
}

/// Entries by key (where the order of equal counts is not bpftrace's to give).
fn by_key(entries: &[(String, MapValue)]) -> BTreeMap<String, MapValue> {
    entries.iter().cloned().collect()
}

/// A program of the search path, by name.
fn in_path(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no {name} in PATH"))
}

/// `analyze count --by stack`'s stacks (stackcount's: a frame a line, then the count) and
/// their counts, in their order.
fn parse_stack_counts(text: &str) -> Vec<(Vec<String>, i64)> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let (frames, n) = block.trim_end().rsplit_once('\n').unwrap();
            let frames = frames.lines().map(|l| l.trim().to_string()).collect();
            (frames, n.trim().parse().unwrap())
        })
        .collect()
}

/// The user stacks of `analyze trace -g`'s events as bpftrace prints `ustack` keys of a
/// process that has exited (addresses, leaf first, a line each), counted.
fn stack_addresses(trace: &str) -> BTreeMap<String, MapValue> {
    let mut stacks: Vec<Vec<String>> = Vec::new();
    for line in trace.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            let (w, _) = words(line, 1);
            stacks.last_mut().unwrap().push(format!("0x{}", w[0]));
        } else {
            stacks.push(Vec::new());
        }
    }
    let mut counted = BTreeMap::new();
    for s in stacks {
        let n = counted.entry(s.join("\n")).or_insert(MapValue::Number(0));
        if let MapValue::Number(n) = n {
            *n += 1;
        }
    }
    counted
}

/// bpftrace and record attached to the same run: a shell script that runs tracee (frame
/// pointers), then dd reading blocks of 1, 100, 5000 and 70000 bytes, a directory (EISDIR)
/// and an empty file. Each program is a copy named PREFIX-NAME, so that bpftrace counts this
/// run's commands (and no other test's dd) by name. bpftrace's maps and analyze's views, key
/// by key, in the same order, and bucket by bucket: openat per command (`count --by comm`)
/// and per process (`--comm C --by pid`); read's return values (`hist`, `hist --linear`);
/// the bytes read (`report --weight ret`, as sum()); nap()'s calls and latency and
/// getaddrinfo's calls per command, and their user stacks (`trace -g`, `count --by stack`).
#[test]
fn counts_and_histograms_are_bpftraces_on_the_same_run() {
    let Some((_turn, dir)) = traced_run("trace-bpftrace").filter(|_| bpftrace_ok()) else {
        return;
    };
    // Commands are 15 bytes at most: "bv12345-tracee".
    let prefix = format!("bv{}-", std::process::id() % 100_000);
    let copy = |from: &Path, name: &str| -> PathBuf {
        let to = dir.0.join(format!("{prefix}{name}"));
        std::fs::copy(from, &to).unwrap();
        to
    };
    let tracee = copy(&fixture("tracee-fp"), "tracee");
    let dd = copy(&in_path("dd"), "dd");
    let (tracee, dd) = (path_str(&tracee), path_str(&dd));
    let script = dir.0.join(format!("{prefix}drv"));
    let mut text = format!("#!/bin/sh\n{tracee} 40 10 7 13 3 20\n");
    for (bs, count) in [(1, 50), (100, 30), (5000, 20), (70000, 10)] {
        text += &format!("{dd} if=/dev/zero of=/dev/null bs={bs} count={count} 2>/dev/null\n");
    }
    text += &format!("{dd} if={} of=/dev/null 2>/dev/null\n", dir.0.display());
    text += &format!("{dd} if=/dev/null of=/dev/null 2>/dev/null\nexit 0\n");
    std::fs::write(&script, text).unwrap();
    let st = Command::new("chmod")
        .arg("755")
        .arg(&script)
        .status()
        .unwrap();
    assert!(st.success());

    let ours = format!("strncmp(comm, \"{prefix}\", {}) == 0", prefix.len());
    let program = r#"
tracepoint:syscalls:sys_enter_openat /OURS/ {
    @opens[comm] = count();
    @open_pids[comm, pid] = count();
}
tracepoint:syscalls:sys_exit_read /OURS/ {
    @reads[comm] = hist(args->ret);
    @linear_reads[comm] = lhist(args->ret, 0, 131072, 2048);
}
tracepoint:syscalls:sys_exit_read /OURS && args->ret > 0/ {
    @read_bytes[comm] = sum(args->ret);
}
uprobe:TRACEE:nap /OURS/ {
    @naps[comm] = count();
    @nap_stacks[ustack] = count();
    @nap_start[tid] = nsecs;
}
uretprobe:TRACEE:nap /OURS && @nap_start[tid]/ {
    @nap_ns[comm] = hist(nsecs - @nap_start[tid]);
    delete(@nap_start[tid]);
}
uprobe:libc:getaddrinfo /OURS/ {
    @lookups[comm] = count();
    @lookup_stacks[ustack] = count();
}
"#
    .replace("OURS", &ours)
    .replace("TRACEE", tracee);
    let bt = Bpftrace::start(&program);
    let file = dir.0.join("run.data");
    let (nap, nap_return) = (
        format!("uprobe:{tracee}:nap"),
        format!("uretprobe:{tracee}:nap"),
    );
    record_traced(
        &file,
        &[
            "--call-graph",
            "fp",
            "-e",
            "syscalls:sys_enter_openat",
            "-e",
            "syscalls:sys_exit_read",
            "-e",
            &nap,
            "-e",
            &nap_return,
            "-e",
            "uprobe:libc:getaddrinfo",
        ],
        &[path_str(&script)],
    );
    let printed = bt.stop();
    assert!(printed.starts_with("Attaching 6 probes...\n"), "{printed}");
    let theirs = parse_maps(&printed);
    let map = |name: &str| theirs.get(name).cloned().unwrap_or_default();
    let input = path_str(&file);
    let run = |args: &[&str]| {
        let mut all = vec![args[0], "-i", input];
        all.extend_from_slice(&args[1..]);
        run_ok(&all)
    };
    let count = |args: &[&str]| -> Vec<(String, MapValue)> {
        let mut all = vec!["count"];
        all.extend_from_slice(args);
        parse_counts(&run(&all))
            .into_iter()
            .map(|(k, n)| (k, MapValue::Number(n)))
            .collect()
    };
    let hist = |args: &[&str]| -> Vec<(String, MapValue)> {
        let mut all = vec!["hist", "--by", "comm"];
        all.extend_from_slice(args);
        parse_maps(&run(&all)).remove("@").unwrap_or_default()
    };

    // openat per command: the script, tracee, dd (record's child before it runs the script
    // is named by its pid, as perf names it: not one of ours).
    let opens = count(&["--event", "syscalls:sys_enter_openat", "--by", "comm"]);
    assert_eq!(keys_from(&opens, &prefix), map("@opens"), "\n{printed}");
    let tracee_comm = format!("{prefix}tracee");
    assert!(
        matches!(by_key(&map("@opens")).get(&tracee_comm), Some(MapValue::Number(n)) if *n >= 40),
        "{printed}"
    );
    assert_eq!(map("@opens").len(), 3, "{printed}");
    // ... and per process of each command (`--comm C --by pid`).
    let mut open_pids = BTreeMap::new();
    for (comm, _) in map("@opens") {
        let args = ["--event", "syscalls:sys_enter_openat", "--comm", &comm];
        for (pid, n) in count(&[&args[..], &["--by", "pid"]].concat()) {
            open_pids.insert(format!("{comm}, {pid}"), n);
        }
    }
    assert_eq!(open_pids, by_key(&map("@open_pids")));
    // dd ran 6 times.
    let dds = open_pids
        .keys()
        .filter(|k| k.starts_with(&format!("{prefix}dd,")))
        .count();
    assert_eq!(dds, 6, "{open_pids:?}");

    // The uprobes: nap() 3 times, getaddrinfo 7 times (names as perf's: probe_ + the file's
    // name up to its first '-' or '.').
    let probe = format!("probe_{}", prefix.trim_end_matches('-'));
    let naps = count(&["--event", &format!("{probe}:nap"), "--by", "comm"]);
    assert_eq!(naps, map("@naps"));
    assert_eq!(naps, [(tracee_comm.clone(), MapValue::Number(3))]);
    let lookups = count(&["--event", "probe_libc:getaddrinfo", "--by", "comm"]);
    assert_eq!(lookups, map("@lookups"));
    assert_eq!(lookups, [(tracee_comm.clone(), MapValue::Number(7))]);
    // Their stacks: the same addresses as bpftrace's ustack (the kernel's frame-pointer
    // walk), and as many stacks, as many times, in count --by stack.
    for (event, stacks, leaf) in [
        (format!("{probe}:nap"), "@nap_stacks", "nap"),
        (
            "probe_libc:getaddrinfo".into(),
            "@lookup_stacks",
            "getaddrinfo",
        ),
    ] {
        let theirs = by_key(&map(stacks));
        assert!(
            theirs
                .keys()
                .all(|k| k.lines().all(|f| f.starts_with("0x"))),
            "bpftrace named the frames of an exited process: {theirs:?}"
        );
        let trace = run(&["trace", "-g", "--event", &event]);
        assert_eq!(stack_addresses(&trace), theirs, "{event}:\n{trace}");
        let counted = parse_stack_counts(&run(&["count", "--by", "stack", "--event", &event]));
        let mut ns: Vec<i64> = counted.iter().map(|(_, n)| *n).collect();
        let mut theirs_ns: Vec<i64> = theirs
            .values()
            .map(|v| match v {
                MapValue::Number(n) => *n,
                v => panic!("{v:?}"),
            })
            .collect();
        ns.sort();
        theirs_ns.sort();
        assert_eq!(ns, theirs_ns, "{event}: {counted:?}");
        for (frames, _) in &counted {
            assert_eq!(frames[0], leaf, "{frames:?}");
            assert!(frames.iter().any(|f| f == "main"), "{frames:?}");
        }
    }

    // read's return values: hist() and lhist() rows, bars and all.
    let reads = hist(&["--event", "syscalls:sys_exit_read", "ret"]);
    assert_eq!(keys_from(&reads, &prefix), map("@reads"), "\n{printed}");
    let dd_reads = &by_key(&map("@reads"))[&format!("{prefix}dd")];
    let MapValue::Rows(rows) = dd_reads else {
        panic!("{dd_reads:?}")
    };
    let row = |bucket: &str| rows.iter().find(|r| r.0 == bucket).map(|r| r.1);
    // The blocks read (reads at EOF, ld.so's and the locale's reads come on top).
    assert_eq!(row("(..., 0)"), Some(1), "{rows:?}");
    assert!(
        row("[1]") >= Some(50) && row("[64K, 128K)") >= Some(10),
        "{rows:?}"
    );
    let linear = hist(&[
        "--event",
        "syscalls:sys_exit_read",
        "ret",
        "--linear",
        "2048",
    ]);
    assert_eq!(keys_from(&linear, &prefix), map("@linear_reads"));
    // The bytes read per command: the folded stacks weighed by ret (the failed read, a
    // negative weight, is left out; sum() is asked for positive values only).
    let folded = parse_folded(&run(&[
        "report",
        "--folded",
        "--event",
        "syscalls:sys_exit_read",
        "--weight",
        "ret",
    ]));
    let mut bytes: BTreeMap<String, MapValue> = BTreeMap::new();
    for (stack, n) in folded {
        let comm = stack.split(';').next().unwrap().to_string();
        if comm.starts_with(&prefix) {
            let e = bytes.entry(comm).or_insert(MapValue::Number(0));
            if let MapValue::Number(sum) = e {
                *sum += n as i64;
            }
        }
    }
    assert_eq!(bytes, by_key(&map("@read_bytes")));

    // nap()'s latency (20 ms: [16M, 32M), whichever side times it; a busy machine may make
    // it longer, but the same for both).
    let nap_ns = hist(&["--event", &format!("{probe}:nap__return"), "latency"]);
    assert_eq!(nap_ns, map("@nap_ns"));
    let MapValue::Rows(rows) = &by_key(&nap_ns)[&tracee_comm] else {
        panic!("{nap_ns:?}")
    };
    assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 3, "{rows:?}");
}

// ---------------------------------------------------------------------------------------
// perf script

/// One event as perf script or `analyze trace -g` prints it.
#[derive(Debug, Clone)]
struct Traced {
    /// "TIME COMM PID/TID [CPU] EVENT".
    head: String,
    /// The event's fields, each with its name where the line gives one (perf prints
    /// syscall exits' return value alone).
    fields: Vec<(Option<String>, String)>,
    /// perf's period; ours: the latency (a latency event's), else none.
    weight: Option<u64>,
    /// "SYMBOL (FILE)", leaf first.
    frames: Vec<String>,
}

/// The first `n` words of `line` and the rest, trimmed.
fn words(line: &str, n: usize) -> (Vec<&str>, &str) {
    let mut rest = line.trim_start();
    let mut out = Vec::new();
    for _ in 0..n {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        out.push(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    (out, rest.trim_end())
}

/// A stack line, "\tADDR SYMBOL[+0xOFF] (FILE)": "SYMBOL (FILE)".
fn frame(line: &str) -> String {
    let (_, rest) = words(line, 1);
    let (sym, file) = rest.rsplit_once(" (").unwrap_or((rest, ""));
    let sym = match sym.rfind("+0x") {
        Some(i) if sym[i + 3..].chars().all(|c| c.is_ascii_hexdigit()) => &sym[..i],
        _ => sym,
    };
    format!("{sym} ({file}")
}

/// `perf script -F trace:comm,pid,tid,cpu,time,period,event,trace,ip,sym,dso` of `file`.
fn perf_traced(file: &Path) -> Vec<Traced> {
    let out = Command::new("perf")
        .args([
            "script",
            "-F",
            "trace:comm,pid,tid,cpu,time,period,event,trace,ip,sym,dso",
            "-i",
        ])
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "perf script: {stderr}");
    let mut all: Vec<Traced> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            all.last_mut().unwrap().frames.push(frame(line));
            continue;
        }
        // "COMM PID/TID [CPU] TIME: PERIOD EVENT: FIELDS" (our fixture's command has no
        // spaces).
        let (w, rest) = words(line, 6);
        let event = w[5].strip_suffix(':').unwrap();
        // A probe's address first: "(7f18e96074e0)", "(5632256b62b6 <- 5632256b63ca)".
        let rest = match rest.strip_prefix('(') {
            Some(r) => r.split_once(')').unwrap().1.trim_start(),
            None => rest,
        };
        let fields = if rest.contains('=') {
            rest.split_whitespace()
                .map(|f| {
                    let (k, v) = f.split_once('=').unwrap();
                    (Some(k.to_string()), v.to_string())
                })
                .collect()
        } else if rest.contains(": ") {
            // The syscalls' print fmt: "dfd: 0xffffff9c, filename: 0x7ffd..., ..."
            rest.split(", ")
                .map(|f| {
                    let (k, v) = f.split_once(": ").unwrap();
                    (Some(k.to_string()), v.to_string())
                })
                .collect()
        } else {
            vec![(None, rest.to_string())]
        };
        all.push(Traced {
            head: format!(
                "{} {} {} {} {event}",
                w[3].trim_end_matches(':'),
                w[0],
                w[1],
                w[2]
            ),
            fields,
            weight: Some(w[4].parse().unwrap()),
            frames: Vec::new(),
        });
    }
    all
}

/// `analyze trace -g`'s events (`TIME COMM PID/TID [CPU] EVENT: name=value ...`).
fn our_traced(text: &str) -> Vec<Traced> {
    let mut all: Vec<Traced> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            all.last_mut().unwrap().frames.push(frame(line));
            continue;
        }
        let (w, rest) = words(line, 5);
        let mut fields = Vec::new();
        let mut weight = None;
        for f in rest.split_whitespace() {
            let (k, v) = f.split_once('=').unwrap();
            if k == "latency" {
                weight = Some(v.parse().unwrap());
            } else {
                fields.push((Some(k.to_string()), v.to_string()));
            }
        }
        all.push(Traced {
            head: format!(
                "{} {} {} {} {}",
                w[0],
                w[1],
                w[2],
                w[3],
                w[4].strip_suffix(':').unwrap()
            ),
            fields,
            weight,
            frames: Vec::new(),
        });
    }
    all
}

/// A printed number as its 64 bits: hex (perf's print fmts), or decimal, signed or not; a
/// bool as perf's print fmts spell it (sched_process_exit's group_dead: ours prints 1, as
/// bpftrace reads it).
fn bits(v: &str) -> Option<u64> {
    match v {
        "true" => return Some(1),
        "false" => return Some(0),
        _ => {}
    }
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v
            .parse::<i64>()
            .map(|n| n as u64)
            .or_else(|_| v.parse::<u64>())
            .ok(),
    }
}

/// How many events of each name.
fn events(all: &[Traced]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for t in all {
        let event = t.head.rsplit(' ').next().unwrap();
        *m.entry(event.to_string()).or_insert(0) += 1;
    }
    m
}

/// That analyze printed perf's events (`theirs`) in the same order: time, command, pid/tid,
/// CPU and event; each field's name (where perf prints one) and value (numbers by their
/// bits, text as it is); a latency as perf's period (other events' period is 1); the same
/// frames. Returns how many had a latency.
fn assert_same_events(theirs: &[Traced], ours: &[Traced]) -> usize {
    assert_eq!(theirs.len(), ours.len());
    let mut latencies = 0;
    for (p, o) in theirs.iter().zip(ours) {
        assert_eq!(o.head, p.head, "\n{o:?}\n{p:?}");
        assert_eq!(o.fields.len(), p.fields.len(), "\n{o:?}\n{p:?}");
        for ((pname, pv), (oname, ov)) in p.fields.iter().zip(&o.fields) {
            if pname.is_some() {
                assert_eq!(pname, oname, "\n{o:?}\n{p:?}");
            }
            let what = format!("{}: {oname:?} {ov} (perf: {pv})", o.head);
            match bits(pv) {
                Some(n) => assert_eq!(bits(ov), Some(n), "{what}"),
                None => assert_eq!(ov, pv, "{what}"),
            }
        }
        match o.weight {
            Some(ns) => {
                assert_eq!(Some(ns), p.weight, "{}", o.head);
                latencies += 1;
            }
            None => assert_eq!(p.weight, Some(1), "{}", o.head),
        }
        assert_eq!(o.frames, p.frames, "{}", o.head);
    }
    latencies
}

/// perf script as the oracle of `analyze trace`: perf reads the same file and prints every
/// traced event; analyze prints the same events in the same order, with the same time, command,
/// pid/tid, CPU and event, each field's value (perf's print fmt shows them in hex or decimal,
/// ours name=value: the numbers are compared), a latency event's latency as perf's period,
/// and the same stack. Two syscall tracepoints in one -e, a USDT probe, a uprobe in libc, a
/// uretprobe with its latency, and a --latency pair, with frame pointers.
#[test]
fn trace_prints_what_perf_script_prints_of_the_same_file() {
    let Some((_turn, dir)) = traced_run("trace-perf") else {
        return;
    };
    let file = dir.0.join("trace.data");
    let tracee = fixture("tracee-fp");
    let t = path_str(&tracee);
    let (usdt, nap) = (
        format!("usdt:{t}:bpfperf_test:tick"),
        format!("uretprobe:{t}:nap"),
    );
    record_traced(
        &file,
        &[
            "--call-graph",
            "fp",
            "-e",
            "syscalls:sys_enter_openat,syscalls:sys_exit_openat",
            "-e",
            &usdt,
            "-e",
            "uprobe:libc:getaddrinfo",
            "-e",
            &nap,
            "--latency",
            "syscalls:sys_enter_clock_nanosleep,syscalls:sys_exit_clock_nanosleep",
        ],
        &[t, "40", "10", "7", "13", "3", "20"],
    );
    let theirs = perf_traced(&file);
    let text = run_ok(&["trace", "-g", "-i", path_str(&file)]);
    let ours = our_traced(&text);
    // tracee's own calls (ld.so's opens come on top of its 40).
    let perf_counts = events(&theirs);
    assert!(
        perf_counts["syscalls:sys_enter_openat"] >= 40,
        "{perf_counts:?}"
    );
    assert_eq!(perf_counts["sdt_bpfperf_test:tick"], 13);
    assert_eq!(perf_counts["probe_libc:getaddrinfo"], 7);
    assert_eq!(perf_counts["probe_tracee:nap__return"], 3);
    assert_eq!(
        perf_counts["syscalls:sys_enter_clock_nanosleep->sys_exit_clock_nanosleep"],
        3
    );
    assert_eq!(events(&ours), perf_counts);
    let latencies = assert_same_events(&theirs, &ours);
    assert_eq!(latencies, 6);
    // Where each kind of call was made: under its own function (tick's caller is skipped by
    // frame pointers: perf's too), all under main.
    for (event, function) in [
        ("probe_libc:getaddrinfo", "look_up"),
        ("probe_tracee:nap__return", "nap"),
        ("sdt_bpfperf_test:tick", "tick"),
    ] {
        for o in ours.iter().filter(|o| o.head.ends_with(event)) {
            let named = |f: &str| o.frames.iter().any(|x| x.starts_with(&format!("{f} (")));
            assert!(named(function), "{o:?}");
            assert!(function == "tick" || named("main"), "{o:?}");
        }
    }

    // A bcc-like format prints perf's values: the failed opens' return value (-2 from perf's
    // 0xfffffffffffffffe), the thread.
    let exits: Vec<&Traced> = theirs
        .iter()
        .filter(|p| p.head.ends_with(" syscalls:sys_exit_openat"))
        .collect();
    let text = run_ok(&[
        "trace",
        "-i",
        path_str(&file),
        "--event",
        "syscalls:sys_exit_openat",
        "--format",
        r#""%-12s ret %3d tid %d", comm, ret, tid"#,
    ]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), exits.len());
    let mut failed = 0;
    for (line, p) in lines.iter().zip(&exits) {
        let ret = bits(&p.fields[0].1).unwrap() as i64;
        let head: Vec<&str> = p.head.split(' ').collect();
        let tid = head[2].split_once('/').unwrap().1;
        let expected = format!("{}: {:<12} ret {ret:3} tid {tid}", p.head, head[1]);
        assert_eq!(*line, expected);
        failed += usize::from(ret == -2);
    }
    assert_eq!(failed, 10);
    assert_script_payloads_are_perfs(&file);
}

/// Each sample's event and the text after it on its line of `perf script` or `analyze
/// script` output (a traced event's payload; empty for others).
fn script_payloads(text: &str) -> Vec<(String, String)> {
    let is_time = |w: &str| {
        w.ends_with(':')
            && w.contains('.')
            && w.trim_end_matches(':')
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.')
    };
    let mut out = Vec::new();
    for line in text.lines() {
        // Frames start with a tab; perf right-aligns a short command with spaces.
        if line.trim().is_empty() || line.starts_with('\t') {
            continue;
        }
        let mut rest = line.trim_start();
        let mut words = Vec::new();
        while let Some(w) = rest.split_whitespace().next() {
            let at = rest.find(w).unwrap() + w.len();
            words.push(w);
            rest = &rest[at..];
            let after_time = words.len() >= 2 && is_time(words[words.len() - 2]);
            // The event follows the time, after the period where there is one.
            if (after_time && w.parse::<u64>().is_err())
                || (words.len() >= 3 && is_time(words[words.len() - 3]))
            {
                break;
            }
        }
        let event = words.last().unwrap().trim_end_matches(':').to_string();
        out.push((event, rest.trim().to_string()));
    }
    out
}

/// `analyze script` prints each traced event's payload as perf script prints it (the
/// event's print fmt evaluated): the same text for every sample of `file`.
fn assert_script_payloads_are_perfs(file: &Path) {
    assert_script_payloads_are_perfs_but(file, &|_, _| false);
}

/// [`assert_script_payloads_are_perfs`], but where a word of a payload differs from perf's
/// `theirs` and `differs_on_purpose(ours, theirs)` says so.
fn assert_script_payloads_are_perfs_but(
    file: &Path,
    differs_on_purpose: &dyn Fn(&str, &str) -> bool,
) {
    let perf = Command::new("perf")
        .args(["script", "-i"])
        .arg(file)
        .output()
        .unwrap();
    assert!(perf.status.success());
    let theirs = script_payloads(&String::from_utf8_lossy(&perf.stdout));
    let ours = script_payloads(&run_ok(&["script", "-i", path_str(file)]));
    assert!(theirs.iter().any(|(_, p)| !p.is_empty()), "{theirs:?}");
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(&theirs) {
        let (ow, tw): (Vec<&str>, Vec<&str>) = (o.1.split(' ').collect(), t.1.split(' ').collect());
        let on_purpose = o.0 == t.0
            && ow.len() == tw.len()
            && ow
                .iter()
                .zip(&tw)
                .all(|(a, b)| a == b || differs_on_purpose(a, b));
        if !on_purpose {
            assert_eq!(o, t);
        }
    }
}

/// `analyze trace` of perf's own recording (perf record -g of tracepoints, kernel stacks
/// too): what perf script prints of it, text fields (a __data_loc file name, a comm array)
/// included.
#[test]
fn trace_prints_what_perf_script_prints_of_perfs_own_recording() {
    let Some((_turn, dir)) = traced_run("trace-perf-own") else {
        return;
    };
    let file = dir.0.join("perf.data");
    let tracee = fixture("tracee-fp");
    let tracepoints =
        "sched:sched_process_exec,sched:sched_process_exit,syscalls:sys_enter_openat,\
                  syscalls:sys_exit_openat,syscalls:sys_enter_clock_nanosleep";
    let out = Command::new("perf")
        .env_remove("LD_LIBRARY_PATH")
        .args(["record", "-q", "-g", "-e", tracepoints, "-o"])
        .arg(&file)
        .arg("--")
        .arg(&tracee)
        .args(tracee_args("1"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = perf_traced(&file);
    let ours = our_traced(&run_ok(&["trace", "-g", "-i", path_str(&file)]));
    let counts = events(&theirs);
    assert_eq!(counts["sched:sched_process_exec"], 1, "{counts:?}");
    assert_eq!(counts["sched:sched_process_exit"], 1, "{counts:?}");
    assert!(counts["syscalls:sys_exit_openat"] >= 40, "{counts:?}");
    assert_eq!(
        counts["syscalls:sys_enter_clock_nanosleep"], 3,
        "{counts:?}"
    );
    assert_eq!(assert_same_events(&theirs, &ours), 0);
    let exec = &ours[0];
    assert_eq!(
        exec.fields[0],
        (Some("filename".into()), path_str(&tracee).into())
    );
    assert!(
        exec.frames
            .iter()
            .any(|f| f.ends_with("([kernel.kallsyms])")),
        "{exec:?}"
    );
    assert_script_payloads_are_perfs(&file);
}

// ---------------------------------------------------------------------------------------
// Known totals

/// tracee.c's run: openat 40 times (10 failing), getaddrinfo 7 times, its USDT probe 13
/// times (arguments i and 2i), nap() 3 times for NAP_MS.
fn tracee_args(nap_ms: &str) -> [&str; 6] {
    ["40", "10", "7", "13", "3", nap_ms]
}

/// `analyze count` per event, command, process and stack, `hist` of a probe's arguments and
/// `trace --format` of them on tracee's known calls, recorded with DWARF stacks: failed
/// openat (`--filter 'ret < 0'`), getaddrinfo in libc, the USDT probe, nap()'s entry and
/// return, and clock_nanosleep's --latency pair.
#[test]
fn counts_and_histograms_are_tracees_known_totals() {
    let Some((_turn, dir)) = traced_run("trace-totals") else {
        return;
    };
    let file = dir.0.join("totals.data");
    let tracee = fixture("tracee-nofp");
    let t = path_str(&tracee);
    let (usdt, nap, nap_return) = (
        format!("usdt:{t}:bpfperf_test:tick"),
        format!("uprobe:{t}:nap"),
        format!("uretprobe:{t}:nap"),
    );
    let mut cmd = vec![t];
    cmd.extend(tracee_args("20"));
    record_traced(
        &file,
        &[
            "-e",
            "syscalls:sys_exit_openat",
            "--filter",
            "ret < 0",
            "-e",
            "uprobe:libc:getaddrinfo",
            "-e",
            &usdt,
            "-e",
            &nap,
            "-e",
            &nap_return,
            "--latency",
            "syscalls:sys_enter_clock_nanosleep,syscalls:sys_exit_clock_nanosleep",
        ],
        &cmd,
    );
    let input = path_str(&file);
    let run = |args: &[&str]| {
        let mut all = vec![args[0], "-i", input];
        all.extend_from_slice(&args[1..]);
        run_ok(&all)
    };
    // Per event: funccount's table, smallest count first, ties by name.
    assert_eq!(
        run(&["count"]),
        "EVENT                                   COUNT\n\
         probe_tracee:nap                            3\n\
         probe_tracee:nap__return                    3\n\
         syscalls:sys_enter_clock_nanosleep->sys_exit_clock_nanosleep        3\n\
         probe_libc:getaddrinfo                      7\n\
         syscalls:sys_exit_openat                   10\n\
         sdt_bpfperf_test:tick                      13\n"
    );
    // Per command and process: one of each, 39 events.
    assert_eq!(
        parse_counts(&run(&["count", "--by", "comm"])),
        [("tracee-nofp".to_string(), 39)]
    );
    let pids = parse_counts(&run(&["count", "--by", "pid"]));
    assert_eq!(pids.len(), 1, "{pids:?}");
    assert_eq!(pids[0].1, 39, "{pids:?}");
    // Per stack (stackcount's): getaddrinfo's 7 calls from look_up, the 13 ticks from tick,
    // both under main.
    for (event, n, function) in [
        ("probe_libc:getaddrinfo", 7, "look_up"),
        ("sdt_bpfperf_test:tick", 13, "tick"),
    ] {
        let text = run(&["count", "--by", "stack", "--event", event]);
        let stacks = parse_stack_counts(&text);
        assert_eq!(stacks.iter().map(|s| s.1).sum::<i64>(), n, "{text}");
        for (frames, _) in &stacks {
            let at = |f: &str| frames.iter().position(|x| x == f);
            assert!(
                at(function).is_some() && at(function) < at("main"),
                "{text}"
            );
        }
    }

    // The USDT probe's arguments: 0..12 a linear bucket each, twice them in powers of two.
    let linear = run(&[
        "hist",
        "--event",
        "sdt_bpfperf_test:tick",
        "arg1",
        "--linear",
        "1",
    ]);
    let rows: Vec<(String, u64)> = match &parse_maps(&linear)["@"][0].1 {
        MapValue::Rows(rows) => rows.iter().map(|r| (r.0.clone(), r.1)).collect(),
        v => panic!("{v:?}"),
    };
    let expected: Vec<(String, u64)> = (0..13).map(|i| (format!("[{i}, {})", i + 1), 1)).collect();
    assert_eq!(rows, expected, "{linear}");
    assert_eq!(
        run(&["hist", "--event", "sdt_bpfperf_test:tick", "arg2"]),
        "@: \n\
         [0]                    1 |@@@@@@@@@@                                          |\n\
         [1]                    0 |                                                    |\n\
         [2, 4)                 1 |@@@@@@@@@@                                          |\n\
         [4, 8)                 2 |@@@@@@@@@@@@@@@@@@@@                                |\n\
         [8, 16)                4 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@           |\n\
         [16, 32)               5 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\
         \n"
    );
    // The failed opens: all ENOENT.
    assert_eq!(
        run(&[
            "hist",
            "--event",
            "syscalls:sys_exit_openat",
            "ret",
            "--linear",
            "10"
        ]),
        "@: \n(..., 0)              10 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\n"
    );
    let text = run(&[
        "trace",
        "--event",
        "sdt_bpfperf_test:tick",
        "--format",
        r#""tick %d twice %d", arg1, arg2"#,
    ]);
    let printed: Vec<&str> = text
        .lines()
        .map(|l| l.split_once(": ").unwrap().1)
        .collect();
    let expected: Vec<String> = (0..13)
        .map(|i| format!("tick {i} twice {}", 2 * i))
        .collect();
    assert_eq!(printed, expected);
}

/// nap()'s latency as the weight of the stack views: `report --folded --weight latency` of
/// its return probe sums the three naps' latencies (perf script's periods of the same
/// samples; 3 × 50 ms, each bounded by the run's own times of its sleep and of the nap
/// before), every stack nap under main, the same stacks as perf's with frame pointers;
/// `hist latency` puts them in [32M, 64M); heatmaps (latency and sub-second) hold the three
/// events, each latency cell's --time range reporting its own weight; pprof holds the same
/// total. Frame pointers and DWARF.
#[test]
fn latency_weighs_folded_stacks_heatmaps_and_pprof() {
    let Some((_turn, dir)) = traced_run("trace-latency") else {
        return;
    };
    for (mode, bin) in [("fp", "tracee-fp"), ("dwarf", "tracee-nofp")] {
        let file = dir.0.join(format!("{mode}.data"));
        let tracee = fixture(bin);
        let t = path_str(&tracee);
        let nap = format!("uretprobe:{t}:nap");
        // The sleeps themselves, timed in the kernel too: what each nap is held to.
        let sleep = "syscalls:sys_enter_clock_nanosleep,syscalls:sys_exit_clock_nanosleep";
        record_traced(
            &file,
            &["--call-graph", mode, "-e", &nap, "--latency", sleep],
            &[t, "0", "0", "0", "0", "3", "50"],
        );
        let input = path_str(&file);
        let event = "probe_tracee:nap__return";
        let select = ["--event", event, "--weight", "latency"];
        let run = |args: &[&str], more: &[&str]| {
            let mut all = vec![args[0], "-i", input];
            all.extend_from_slice(&args[1..]);
            all.extend_from_slice(more);
            run_ok(&all)
        };
        let ours = parse_folded(&run(&["report", "--folded"], &select));
        let total: u64 = ours.values().sum();
        // perf's periods of the same samples, folded as stackcollapse-perf folds them.
        let mut theirs = Folded::new();
        let mut periods = 0;
        let traced = perf_traced(&file);
        let of =
            |e: &str| -> Vec<&Traced> { traced.iter().filter(|p| p.head.ends_with(e)).collect() };
        let (naps, sleeps) = (of(event), of("->sys_exit_clock_nanosleep"));
        for p in &naps {
            let comm = p.head.split(' ').nth(1).unwrap();
            let mut key = comm.to_string();
            for f in p.frames.iter().rev() {
                let (sym, file) = f.rsplit_once(" (").unwrap();
                key += ";";
                key += &frame_name(sym, file.trim_end_matches(')'));
            }
            *theirs.entry(key).or_insert(0) += p.weight.unwrap();
            periods += 1;
        }
        assert_eq!(periods, 3, "{mode}");
        assert_eq!(
            total,
            theirs.values().sum::<u64>(),
            "{mode}: {ours:#?} {theirs:#?}"
        );
        // 3 naps of 50 ms, each held to the run's own clock (perf script's times, to the
        // microsecond: 2 us of slack), not to the machine's load: at least from its sleep's
        // entry to its return, at most since the previous nap returned.
        assert_eq!(sleeps.len(), 3, "{mode}");
        assert!(
            total >= 150_000_000,
            "{mode}: 3 naps of 50 ms took {total} ns"
        );
        let ns = |p: &Traced| -> i64 {
            let (s, us) = p.head.split(' ').next().unwrap().split_once('.').unwrap();
            s.parse::<i64>().unwrap() * 1_000_000_000 + us.parse::<i64>().unwrap() * 1000
        };
        let weight = |p: &Traced| p.weight.unwrap() as i64;
        for (i, (n, s)) in naps.iter().zip(&sleeps).enumerate() {
            let at_least = ns(n) - ns(s) + weight(s);
            assert!(weight(n) >= at_least - 2_000, "{mode}: {n:?} slept {s:?}");
            if i > 0 {
                let at_most = ns(n) - ns(naps[i - 1]);
                assert!(
                    weight(n) <= at_most + 2_000,
                    "{mode}: {n:?} after {:?}",
                    naps[i - 1]
                );
            }
        }
        assert!(
            ours.keys().all(|k| k.ends_with(";main;nap")),
            "{mode}: {ours:#?}"
        );
        if mode == "fp" {
            // DWARF mode's stacks are copies that perf 6.1 unwinds its own way.
            assert_eq!(ours, theirs, "{mode}");
        }
        // Each latency in its power-of-two bucket (at 50 ms, [32M, 64M) unless the machine
        // is busy enough to make a nap last 67).
        let text = run(&["hist", "--event", event, "latency"], &[]);
        let MapValue::Rows(rows) = &parse_maps(&text)["@"][0].1 else {
            panic!("{text}")
        };
        for (bucket, n, _) in rows {
            let (low, high) = bucket_bounds(bucket);
            let within = naps
                .iter()
                .filter(|p| (low..high).contains(&p.weight.unwrap()));
            assert_eq!(within.count() as u64, *n, "{mode}: {bucket}\n{text}");
        }
        assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 3, "{mode}: {text}");

        // Heatmaps: latency up (--weight latency), sub-second offsets (each event weighs 1).
        for weighed in [true, false] {
            let svg = dir.0.join(format!("{mode}-{weighed}.svg"));
            let mut args = vec!["heatmap", "-o", path_str(&svg), "--event", event];
            if weighed {
                args.extend_from_slice(&["--weight", "latency"]);
            }
            run(&args, &[]);
            let svg = std::fs::read_to_string(&svg).unwrap();
            let cells = attrs(
                &svg,
                &["data-count", "data-weight", "data-time", "data-text"],
            );
            let count: u64 = cells.iter().map(|c| c[0].parse::<u64>().unwrap()).sum();
            assert_eq!(count, 3, "{mode}: {svg}");
            if !weighed {
                continue;
            }
            let weight: u64 = cells.iter().map(|c| c[1].parse::<u64>().unwrap()).sum();
            assert_eq!(weight, total, "{mode}: {svg}");
            for c in &cells {
                // "latency 32768-65535 us": what its events took, on average, is in its row.
                let (_, row) = c[3].split_once("latency ").unwrap();
                let (low, high) = row.split_once(" us").unwrap().0.split_once('-').unwrap();
                let (low, high): (u64, u64) = (low.parse().unwrap(), high.parse().unwrap());
                let mean = c[1].parse::<u64>().unwrap() / c[0].parse::<u64>().unwrap() / 1000;
                assert!((low..=high).contains(&mean), "{mode}: {}", c[3]);
                // The cell's --time reports its own weight.
                let folded = run(&["report", "--folded", "--time", &c[2]], &select);
                let sum: u64 = parse_folded(&folded).values().sum();
                assert_eq!(sum.to_string(), c[1], "{mode}: {}", c[3]);
            }
        }

        // pprof: the events and their latency, the total of the folded stacks.
        let pb = dir.0.join(format!("{mode}.pb.gz"));
        run(
            &["export", "--format", "pprof", "-o", path_str(&pb)],
            &select,
        );
        let bytes = std::fs::read(&pb).unwrap();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "{mode}: gzip");
        let go = Command::new("go")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success());
        if have(go, "go") {
            let out = Command::new("go")
                .args(["tool", "pprof", "-raw"])
                .arg(&pb)
                .env("HOME", std::env::temp_dir())
                .output()
                .unwrap();
            let raw = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                raw.contains("events/count latency/nanoseconds"),
                "{mode}: {raw}"
            );
            // Sample lines: "COUNT NS: LOCATIONS".
            let (mut events, mut ns) = (0, 0);
            for l in raw.lines() {
                let Some((values, _)) = l.split_once(':') else {
                    continue;
                };
                let v: Vec<u64> = values
                    .split_whitespace()
                    .map_while(|w| w.parse().ok())
                    .collect();
                if v.len() == 2 && values.split_whitespace().count() == 2 {
                    events += v[0];
                    ns += v[1];
                }
            }
            assert_eq!((events, ns), (3, total), "{mode}: {raw}");
        }
    }
}

/// A power-of-two bucket's bounds as bpftrace names them: `[0]`, `[1]`, `[32M, 64M)`.
fn bucket_bounds(bucket: &str) -> (u64, u64) {
    let size = |s: &str| -> u64 {
        let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
        let shift = match unit {
            "" => 0,
            "K" => 10,
            "M" => 20,
            "G" => 30,
            "T" => 40,
            u => panic!("{u} in {bucket}"),
        };
        digits.parse::<u64>().unwrap() << shift
    };
    match bucket.strip_prefix('[').and_then(|b| b.strip_suffix(')')) {
        Some(range) => {
            let (low, high) = range.split_once(", ").unwrap();
            (size(low), size(high))
        }
        None => {
            let n = size(bucket.trim_matches(|c| c == '[' || c == ']'));
            (n, n + 1)
        }
    }
}

/// The values of `names` of each `<rect class="c" ...>` cell of a heatmap.
fn attrs(svg: &str, names: &[&str]) -> Vec<Vec<String>> {
    svg.lines()
        .filter(|l| l.starts_with("<rect class=\"c\""))
        .map(|l| {
            names
                .iter()
                .map(|n| {
                    let at = l.find(&format!(" {n}=\"")).unwrap() + n.len() + 3;
                    l[at..at + l[at..].find('"').unwrap()].to_string()
                })
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// histograms counted in the kernel (record --hist)

/// `record --hist FIELD|latency` counts power-of-two histograms in the kernel: `analyze hist`
/// on its file prints bpftrace 0.17's hist() of the same run, row by row (read's return
/// values per command, nap()'s return value, and nap()'s latency in a second run), and the
/// same table as a recording of every event of another run of the same reads.
#[test]
fn histograms_counted_in_the_kernel_are_bpftraces_and_the_per_event_ones() {
    let Some((_turn, dir)) = traced_run("trace-hist-kernel").filter(|_| bpftrace_ok()) else {
        return;
    };
    let prefix = format!("bk{}-", std::process::id() % 100_000);
    let copy = |from: &Path, name: &str| -> PathBuf {
        let to = dir.0.join(format!("{prefix}{name}"));
        std::fs::copy(from, &to).unwrap();
        to
    };
    let tracee = copy(&fixture("tracee-fp"), "tracee");
    let dd = copy(&in_path("dd"), "dd");
    let (tracee, dd) = (path_str(&tracee), path_str(&dd));
    let script = dir.0.join(format!("{prefix}drv"));
    let mut text = format!("#!/bin/sh\n{tracee} 0 0 0 0 5 20\n");
    for (bs, count) in [(1, 50), (100, 30), (5000, 20), (70000, 10)] {
        text += &format!("{dd} if=/dev/zero of=/dev/null bs={bs} count={count} 2>/dev/null\n");
    }
    text += &format!(
        "{dd} if={} of=/dev/null 2>/dev/null\nexit 0\n",
        dir.0.display()
    );
    std::fs::write(&script, text).unwrap();
    let st = Command::new("chmod")
        .arg("755")
        .arg(&script)
        .status()
        .unwrap();
    assert!(st.success());
    let ours = format!("strncmp(comm, \"{prefix}\", {}) == 0", prefix.len());
    let nap_return = format!("uretprobe:{tracee}:nap");
    let hist_of = |file: &Path, event: &str, field: &str| -> Vec<(String, MapValue)> {
        let out = run_ok(&[
            "hist",
            "-i",
            path_str(file),
            "--by",
            "comm",
            "--event",
            event,
            field,
        ]);
        keys_from(&parse_maps(&out).remove("@").unwrap_or_default(), &prefix)
    };

    // read's and nap()'s return values, counted in the kernel with bpftrace beside.
    let program = r#"
tracepoint:syscalls:sys_exit_read /OURS/ { @reads[comm] = hist(args->ret); }
uretprobe:TRACEE:nap /OURS/ { @naps[comm] = hist(retval); }
"#
    .replace("OURS", &ours)
    .replace("TRACEE", tracee);
    let bt = Bpftrace::start(&program);
    let counted = dir.0.join("counted.data");
    record_traced(
        &counted,
        &[
            "-e",
            "syscalls:sys_exit_read",
            "-e",
            &nap_return,
            "--hist",
            "ret",
        ],
        &[path_str(&script)],
    );
    let printed = bt.stop();
    let theirs = parse_maps(&printed);
    let map = |name: &str| theirs.get(name).cloned().unwrap_or_default();
    let reads = hist_of(&counted, "syscalls:sys_exit_read", "ret");
    // The counts are per thread: the one read the script's process made before its exec
    // (record's signal to start the workload, which bpftrace sees under record's name and a
    // recording of every event under the pid alone) is counted under the name it has at
    // the end.
    let reads = without_start_signal(reads, &format!("{prefix}drv"));
    assert_eq!(reads, map("@reads"), "\n{printed}");
    let dd_reads = &by_key(&reads)[&format!("{prefix}dd")];
    let MapValue::Rows(rows) = dd_reads else {
        panic!("{dd_reads:?}")
    };
    let row = |bucket: &str| rows.iter().find(|r| r.0 == bucket).map(|r| r.1);
    assert_eq!(row("(..., 0)"), Some(1), "{rows:?}");
    assert!(
        row("[1]") >= Some(50) && row("[64K, 128K)") >= Some(10),
        "{rows:?}"
    );
    // Probes are named as perf names them: probe_ + the file's name up to its first '-'.
    let probe = format!("probe_{}", prefix.trim_end_matches('-'));
    let naps = hist_of(&counted, &format!("{probe}:nap__return"), "ret");
    assert_eq!(naps, map("@naps"), "\n{printed}");
    // The file holds a sample per command and bucket, not per event.
    let out = run_ok(&["info", "-i", path_str(&counted)]);
    assert!(
        out.contains("counted in the kernel (record --aggregate)"),
        "{out}"
    );

    // The same reads recorded one by one (another run: the same sizes read).
    let each = dir.0.join("each.data");
    record_traced(
        &each,
        &["-e", "syscalls:sys_exit_read"],
        &[path_str(&script)],
    );
    assert_eq!(hist_of(&each, "syscalls:sys_exit_read", "ret"), reads);

    // nap()'s latency (20 ms: [16M, 32M) whichever side times it).
    let program = r#"
uprobe:TRACEE:nap /OURS/ { @start[tid] = nsecs; }
uretprobe:TRACEE:nap /OURS && @start[tid]/ { @nap_ns[comm] = hist(nsecs - @start[tid]); delete(@start[tid]); }
"#
    .replace("OURS", &ours)
    .replace("TRACEE", tracee);
    let bt = Bpftrace::start(&program);
    let latency = dir.0.join("latency.data");
    record_traced(
        &latency,
        &["-e", &nap_return, "--hist", "latency"],
        &[tracee, "0", "0", "0", "0", "5", "20"],
    );
    let printed = bt.stop();
    let theirs = parse_maps(&printed);
    let nap_ns = hist_of(&latency, &format!("{probe}:nap__return"), "latency");
    assert_eq!(
        nap_ns,
        theirs.get("@nap_ns").cloned().unwrap_or_default(),
        "\n{printed}"
    );
    let MapValue::Rows(rows) = &by_key(&nap_ns)[&format!("{prefix}tracee")] else {
        panic!("{nap_ns:?}")
    };
    assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 5, "{rows:?}");
}

/// The histograms with `key`'s first row taken out where it is `[1]` counted once (the read
/// of record's start signal), with the empty rows up to the next that counts.
fn without_start_signal(
    mut entries: Vec<(String, MapValue)>,
    key: &str,
) -> Vec<(String, MapValue)> {
    for (k, v) in &mut entries {
        let MapValue::Rows(rows) = v else { continue };
        if k != key || rows.first().map(|r| (r.0.as_str(), r.1)) != Some(("[1]", 1)) {
            continue;
        }
        let next = rows
            .iter()
            .skip(1)
            .position(|r| r.1 > 0)
            .map_or(rows.len(), |i| i + 1);
        rows.drain(..next);
    }
    entries
}

/// Every print format of this kernel's tracepoints (2,300 here) is either evaluated or
/// refused (analyze script then prints the event's fields), never a panic or a hang, on a
/// zeroed record and on one cut short; the everyday ones are evaluated (what perf script
/// prints of them is checked above). On this 6.18 kernel 2,296 of 2,323 are evaluated; the
/// rest use `__print_array`, `%*pbl`, `__get_cpumask`, statement expressions, the kernel's
/// functions or strings broken over lines (perf 6.1 reads neither `__get_cpumask` nor jbd2's
/// `jiffies_to_msecs`).
#[test]
fn every_print_format_of_this_kernel_is_evaluated_or_refused() {
    use analyze::views::trace::print_fmt::PrintFmt;
    if !can_record() {
        return;
    }
    mount_tracefs();
    let events = Path::new("/sys/kernel/tracing/events");
    let (mut all, mut taken) = (0, Vec::new());
    let zeroed = vec![0u8; 4096];
    for system in std::fs::read_dir(events).unwrap().flatten() {
        let Ok(list) = std::fs::read_dir(system.path()) else {
            continue;
        };
        for event in list.flatten() {
            let Ok(text) = std::fs::read_to_string(event.path().join("format")) else {
                continue;
            };
            let format = format::TraceFormat::parse(&text).unwrap();
            all += 1;
            if let Some(p) = PrintFmt::of(&format) {
                p.render(&zeroed, &|_| None);
                p.render(&zeroed[..12], &|_| None);
                taken.push(format.name);
            }
        }
    }
    assert!(all > 1000, "{all} formats");
    assert!(taken.len() * 2 > all, "{} of {all} evaluated", taken.len());
    eprintln!("{} of {all} formats evaluated", taken.len());
    for name in [
        "sched_switch",
        "sched_wakeup",
        "sched_process_exec",
        "sys_enter_openat",
        "sys_exit_openat",
        "sched_process_exit",
        "kfree_skb",
        "inet_sock_set_state",
        "tcp_retransmit_skb",
        "tcp_send_reset",
        "tcp_probe",
        "block_rq_issue",
        "block_rq_complete",
        "softirq_entry",
        "mm_filemap_add_to_page_cache",
        "btrfs_inode_new",
        "xfs_attr_sf_add",
        "xfs_ail_push",
        "mm_page_alloc",
        "vm_unmapped_area",
        "neigh_update",
    ] {
        assert!(taken.iter().any(|t| t == name), "{name} not evaluated");
    }
}

/// Network tracepoints print as perf script prints them: addresses the kernel's way (`%pI4`,
/// `%pI6c`: `::ffff:127.0.0.1`), a kernel code address by its symbol (`%pS`: kfree_skb's
/// `location=tcp_v4_rcv+0x91`), a NULL pointer as `(nil)`. perf's recording of a connection
/// refused and one made, sent on and closed over loopback.
#[test]
fn script_prints_network_tracepoints_as_perf_script_does() {
    let Some((_turn, dir)) = traced_run("script-net") else {
        return;
    };
    let file = dir.0.join("net.data");
    // Over IPv4 and IPv6: a refused connection (a reset from no socket), then one that
    // carries a byte each way (tcp_probe at each ACK) and ends in a reset (SO_LINGER 0).
    let program = "import socket, struct\n\
        for fam, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):\n\
        \x20   s = socket.socket(fam)\n\
        \x20   try:\n        s.connect((host, 1))\n    except OSError:\n        pass\n\
        \x20   l = socket.socket(fam); l.bind((host, 0)); l.listen()\n\
        \x20   c = socket.create_connection(l.getsockname()[:2]); a, _ = l.accept()\n\
        \x20   c.send(b'x'); a.recv(1); a.send(b'y'); c.recv(1)\n\
        \x20   c.setblocking(False)\n\
        \x20   try:\n        c.recv(1)\n    except BlockingIOError:\n        pass\n\
        \x20   c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))\n\
        \x20   c.close(); a.close()\n";
    let events = "skb:kfree_skb,sock:inet_sock_set_state,tcp:tcp_destroy_sock,\
                  tcp:tcp_send_reset,tcp:tcp_probe,sock:sock_recv_length";
    perf_record(
        &file,
        &["-e", events],
        Path::new("python3"),
        &["-c", program],
    );
    // A difference: sock_recv_length prints `length = %d, error = %d` of `ret > 0 ? ret : 0`
    // and `ret < 0 ? ret : 0`. libtraceevent compares in unsigned 64 bits, so perf prints a
    // recv that failed with EAGAIN as `length = -11, error = 0`; analyze compares as the
    // kernel does: `length = 0, error = -11`.
    let sign_compared = |ours: &str, theirs: &str| {
        (ours == "0," && theirs.starts_with('-')) || (ours.starts_with('-') && theirs == "0,")
    };
    assert_script_payloads_are_perfs_but(&file, &sign_compared);
    let text = run_ok(&["script", "-i", path_str(&file)]);
    assert_shows(
        &text,
        &[
            "saddr=127.0.0.1 daddr=127.0.0.1 saddrv6=::ffff:127.0.0.1",
            "newstate=TCP_ESTABLISHED",
            "rx_sk=(nil)",
            "reason: NO_SOCKET",
            // %pISpc: a sockaddr with its port, IPv6 compressed in brackets.
            "skaddr=(nil) src=127.0.0.1:1 dest=127.0.0.1:",
            "skaddr=(nil) src=[::1]:1 dest=[::1]:",
            "tcp_probe: family=AF_INET6 src=[::1]:",
            "protocol = IPPROTO_TCP, length = 0, error = -11, flags = 0x40",
        ],
    );
    // The refused SYN's drop, where the kernel dropped it, by name.
    let location = text
        .lines()
        .find_map(|l| l.split_once("location=").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no kfree_skb:\n{text}"));
    assert!(!location.starts_with("0x"), "{location}");
    // trace's bcc-like format prints the same addresses: %pISpc of the sockaddr arrays,
    // %pS of kfree_skb's location by the recording's kernel symbols.
    let resets = words_after(&text, "tcp:tcp_send_reset:", &[" src=", " dest="]);
    assert_eq!(resets.len(), 4, "{text}");
    let format = r#""%pISpc > %pISpc", saddr, daddr"#;
    assert_eq!(trace_formatted(&file, "tcp:tcp_send_reset", format), resets);
    let locations = words_after(&text, "skb:kfree_skb:", &["location="]);
    assert!(!locations.is_empty());
    let format = r#""%pS", location"#;
    assert_eq!(trace_formatted(&file, "skb:kfree_skb", format), locations);
}

/// Asserts that `text` holds each of `shown` (the failure shows its first 4,000 characters).
fn assert_shows(text: &str, shown: &[&str]) {
    for s in shown {
        let start = || text.chars().take(4000).collect::<String>();
        assert!(text.contains(s), "{s}:\n{}", start());
    }
}

/// Of each line of script's `text` with `event` on it, the word after each of `keys`,
/// joined by " > ".
fn words_after(text: &str, event: &str, keys: &[&str]) -> Vec<String> {
    let after = |line: &str, key: &str| {
        let rest = line.split_once(key)?.1;
        Some(rest.split(' ').next()?.to_string())
    };
    text.lines()
        .filter(|l| l.contains(event))
        .map(|l| {
            let parts: Vec<String> = keys.iter().map(|k| after(l, k).unwrap()).collect();
            parts.join(" > ")
        })
        .collect()
}

/// What `analyze trace --event EVENT --format FORMAT` prints of `file` after each line's
/// event name.
fn trace_formatted(file: &Path, event: &str, format: &str) -> Vec<String> {
    let args = [
        "trace",
        "-i",
        path_str(file),
        "--event",
        event,
        "--format",
        format,
    ];
    run_ok(&args)
        .lines()
        .map(|l| l.split_once(": ").unwrap().1.to_string())
        .collect()
}

/// Memory tracepoints print as perf script prints them: page allocations' GFP flags by name,
/// their page by a kernel global no recording holds (`vmemmap_base`, which libtraceevent
/// reads as 0, so the page is its pfn), and mmap's address checks through
/// `__builtin_expect`; writeback's inodes with their age. perf's recordings of dd writing, a
/// sync and the file removed.
#[test]
fn script_prints_memory_tracepoints_as_perf_script_does() {
    let Some((_turn, dir)) = traced_run("script-mem") else {
        return;
    };
    let file = dir.0.join("mem.data");
    let scratch = dir.0.join("scratch");
    let command = format!(
        "dd if=/dev/zero of={0} bs=1M count=4 2>/dev/null; sync; rm {0}",
        scratch.display()
    );
    perf_record(
        &file,
        &[
            "-e",
            "kmem:mm_page_alloc,kmem:mm_page_free,mmap:vm_unmapped_area",
        ],
        Path::new("sh"),
        &["-c", &command],
    );
    assert_script_payloads_are_perfs(&file);
    let text = run_ok(&["script", "-i", path_str(&file)]);
    assert_shows(
        &text,
        &[
            "kmem:mm_page_alloc: page=0x",
            " gfp_flags=GFP_",
            "mmap:vm_unmapped_area: addr=0x",
        ],
    );
    // Writeback, done by the kernel's flusher threads (so the whole machine recorded): an
    // inode's age from `jiffies`, a global read as 0, divided in 64 unsigned bits as
    // libtraceevent divides.
    let file = dir.0.join("writeback.data");
    let events = "writeback:writeback_single_inode,writeback:writeback_single_inode_start";
    perf_record(
        &file,
        &["-a", "-e", events],
        Path::new("sh"),
        &["-c", &command],
    );
    assert_script_payloads_are_perfs(&file);
    let text = run_ok(&["script", "-i", path_str(&file)]);
    assert!(
        text.contains("writeback:writeback_single_inode: bdi "),
        "{text}"
    );
}

/// Neighbour tracepoints print as perf script prints them: link-layer addresses by
/// `__print_hex_str` (as many bytes as the length field says), states by their names. perf's
/// recording of `ip` adding, replacing and flushing IPv4 and IPv6 neighbours of a veth in a
/// network namespace the test makes, then removing the veth.
#[test]
fn script_prints_neighbour_tracepoints_as_perf_script_does() {
    let Some((_turn, dir)) = traced_run("script-neigh") else {
        return;
    };
    let ns = format!("bpfperf-neigh-{}", std::process::id());
    let made = Command::new("ip")
        .args(["netns", "add", &ns])
        .status()
        .is_ok_and(|s| s.success());
    assert!(made, "ip netns add {ns}");
    struct Gone<'a>(&'a str);
    impl Drop for Gone<'_> {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", self.0]).status();
        }
    }
    let _gone = Gone(&ns);
    let script = "set -e\n\
        ip link add v0 type veth peer name v1\n\
        ip addr add 10.77.0.1/24 dev v0\n\
        ip -6 addr add fd77::1/64 dev v0 nodad\n\
        ip link set v0 up; ip link set v1 up\n\
        ip neigh replace 10.77.0.2 lladdr 02:00:00:00:00:02 dev v0\n\
        ip neigh replace 10.77.0.3 lladdr 02:00:00:00:00:03 dev v0 nud stale\n\
        ip -6 neigh replace fd77::2 lladdr 02:00:00:00:00:04 dev v0\n\
        ip neigh del 10.77.0.2 dev v0\n\
        ip neigh flush dev v0\n\
        ip link del v0\n";
    let file = dir.0.join("neigh.data");
    perf_record(
        &file,
        &["-e", "neigh:*"],
        Path::new("ip"),
        &["netns", "exec", &ns, "sh", "-c", script],
    );
    assert_script_payloads_are_perfs(&file);
    let text = run_ok(&["script", "-i", path_str(&file)]);
    assert_shows(
        &text,
        &[
            "new_lladdr 020000000002 new_state permanent",
            "lladdr 020000000003 flags 00 nud_state stale",
            "primary_key6 fd77::2 confirmed",
            "neigh_cleanup_and_release: family 10 dev v0 lladdr 020000000004",
        ],
    );
}

/// A file system made in a file and mounted through a loop device, unmounted when dropped.
struct LoopMount(PathBuf);

impl LoopMount {
    /// `mkfs` (with `args`) of a new 300 MB image at `dir/NAME.img`, mounted at `dir/NAME`;
    /// `None` (skipped, or failed under CI) where the tool is not here.
    fn new(dir: &Path, name: &str, mkfs: &str, args: &[&str]) -> Option<LoopMount> {
        let made = Command::new(mkfs)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !have(made, mkfs) {
            return None;
        }
        let image = dir.join(format!("{name}.img"));
        std::fs::File::create(&image)
            .unwrap()
            .set_len(300 << 20)
            .unwrap();
        let out = Command::new(mkfs).args(args).arg(&image).output().unwrap();
        assert!(
            out.status.success(),
            "{mkfs}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let at = dir.join(name);
        std::fs::create_dir(&at).unwrap();
        let out = Command::new("mount")
            .arg("-o")
            .arg("loop")
            .arg(&image)
            .arg(&at)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mount {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(LoopMount(at))
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// File system tracepoints print as perf script prints them: btrfs's file system id by
/// `%pU` (the UUID its mkfs was given), xfs's names by `%.*s` (a length, then the text) and
/// its `(uint)` and `(int64_t)` casts. perf's and record's recordings of files written, synced
/// and given extended attributes on a btrfs and an xfs made for the test: every event's
/// payload is perf script's (both file systems' events print through formats analyze
/// evaluates).
#[test]
fn script_prints_file_system_tracepoints_as_perf_script_does() {
    let Some((_turn, dir)) = traced_run("script-fs") else {
        return;
    };
    const FSID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
    let Some(btrfs) = LoopMount::new(&dir.0, "btrfs", "mkfs.btrfs", &["-q", "-f", "-U", FSID])
    else {
        return;
    };
    let Some(xfs) = LoopMount::new(&dir.0, "xfs", "mkfs.xfs", &["-q", "-f"]) else {
        return;
    };
    let program = "import os, sys\n\
        for d in sys.argv[1:]:\n\
        \x20   for i in range(8):\n\
        \x20       p = os.path.join(d, f'f{i}')\n\
        \x20       with open(p, 'wb') as f:\n\
        \x20           f.write(os.urandom(8192)); os.fsync(f.fileno())\n\
        \x20       os.setxattr(p, 'user.k', b'v' * (i + 1))\n\
        \x20       os.setxattr(p, 'user.long' + 'x' * i, b'w' * 300)\n\
        \x20       os.getxattr(p, 'user.k'); os.removexattr(p, 'user.k')\n\
        \x20   os.sync()\n";
    // Every btrfs event, and xfs's of buffers, attributes, the log's items, locks and extents
    // (110 of its 633: the kernel takes about 50 ms to remove each tracepoint a recording
    // used, one at a time).
    let events: Vec<&str> = [
        "btrfs:*",
        "xfs:xfs_buf*",
        "xfs:xfs_attr*",
        "xfs:xfs_ail*",
        "xfs:xfs_ilock*",
        "xfs:xfs_iunlock*",
        "xfs:xfs_create*",
        "xfs:xfs_bmap*",
        "xfs:xfs_iext*",
    ]
    .into_iter()
    .flat_map(|e| ["-e", e])
    .collect();
    let file = dir.0.join("fs.data");
    perf_record(
        &file,
        &events,
        Path::new("python3"),
        &["-c", program, path_str(&btrfs.0), path_str(&xfs.0)],
    );
    // A difference: xfs prints its buffers' operations (`bufops`) by %pS, an address in the
    // kernel's read-only data. perf names it by the data symbol before it, which is the
    // section's start (`__start_rodata+0x67880`: it reads no symbols of read-only data);
    // analyze keeps only the kernel's text symbols and prints the address.
    let rodata = crate::bpf_programs::kallsyms("__start_rodata");
    let same_data_address = |ours: &str, theirs: &str| {
        let off = theirs
            .strip_prefix("__start_rodata+0x")
            .and_then(|o| u64::from_str_radix(o, 16).ok());
        off.is_some_and(|off| ours == format!("{:#x}", rodata + off))
    };
    assert_script_payloads_are_perfs_but(&file, &same_data_address);
    // record's recording of the same, which perf reads: the same.
    let ours = dir.0.join("ours.data");
    let (b, x) = (path_str(&btrfs.0), path_str(&xfs.0));
    record_traced(&ours, &events, &["python3", "-c", program, b, x]);
    assert_script_payloads_are_perfs_but(&ours, &same_data_address);
    let text = run_ok(&["script", "-i", path_str(&file)]);
    assert_shows(
        &text,
        &[
            // %pU: the file system's UUID, as mkfs was told.
            &format!("btrfs:btrfs_inode_new: {FSID}: root=5(FS_TREE) gen="),
            // %.*s: the attribute's name without its namespace, as long as namelen says.
            " name k namelen 1 valuelen 1 ",
            " name longxxx namelen 7 valuelen 300 ",
        ],
    );
    // trace's bcc-like format takes the same conversions: a `*` precision from a field, and
    // %pU of the id's array; each line as script has it.
    let names = words_after(&text, "xfs:xfs_attr_sf_add:", &[" name "]);
    assert!(names.len() >= 8, "{names:?}");
    let format = r#""%.*s", namelen, name"#;
    assert_eq!(trace_formatted(&file, "xfs:xfs_attr_sf_add", format), names);
    let ids = words_after(&text, "btrfs:btrfs_inode_new:", &["btrfs_inode_new: "]);
    assert!(!ids.is_empty());
    let ids: Vec<String> = ids
        .iter()
        .map(|i| i.trim_end_matches(':').to_string())
        .collect();
    assert_eq!(
        trace_formatted(&file, "btrfs:btrfs_inode_new", r#""%pU", fsid"#),
        ids
    );
}
