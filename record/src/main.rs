//! `record`: capture on-CPU stacks with BPF into a perf.data file that perf reads.

mod buildid;
mod bursts;
mod events;
mod foreign;
mod host;
mod jvm;
mod kernel;
mod known;
mod phases;
mod procfs;
mod python;
mod recorder;
mod rotation;
mod session;
mod sideband;
mod status;
mod tracing;
mod unwinding;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};

#[derive(Parser, Debug)]
#[command(
    name = "record",
    version,
    about = "Record where programs spend their time, with BPF, into perf.data"
)]
struct Args {
    /// Output file; an existing one is renamed to FILE.old.
    #[arg(short, long, default_value = "perf.data")]
    output: PathBuf,
    /// Samples per second per CPU.
    #[arg(short = 'F', long, default_value_t = 999)]
    freq: u64,
    /// How user stacks are captured: fp (frame pointers), dwarf[,MAXBYTES] (unwound in the
    /// kernel from each file's .eh_frame once its tables are built, else copies of the stack
    /// unwound by analyze; MAXBYTES default 32768), none.
    #[arg(long, default_value = "dwarf", value_parser = parse_call_graph)]
    call_graph: CallGraph,
    /// Accepted as perf accepts it (stacks are always recorded).
    #[arg(short = 'g')]
    g: bool,
    /// DWARF mode: never unwind in the kernel; copy every user stack (as perf does).
    #[arg(long)]
    no_kernel_unwind: bool,
    /// Do not read Python frames: CPython 3.11 processes' stacks keep their
    /// _PyEval_EvalFrameDefault frames unnamed (by default each Python frame is named
    /// `function (file.py:line)` in their place).
    #[arg(long)]
    no_python: bool,
    /// What to record (comma-separated or repeated; default: record's own events but cache):
    /// cpu-clock (on-CPU samples), offcpu (off-CPU time, with run-queue waits), wakeup (who
    /// woke the blocked threads), runq, fault (every major page fault, timed, and the waits
    /// inside faults), io (block I/O), cache (cachestat counts: it hooks every read(), so
    /// only when named); wakeup, runq and fault's waits come from off-CPU intervals: they
    /// bring offcpu with them. And any event: a
    /// tracepoint SYSTEM:NAME (globs as perf takes them: syscalls:sys_enter_open*),
    /// uprobe:PATH:FUNCTION[+OFFSET], uretprobe:PATH:FUNCTION (its latency), usdt:PATH:PROVIDER:NAME,
    /// kprobe:FUNCTION, kretprobe:FUNCTION (PATH absolute, or a library or program name:
    /// libc, python3).
    #[arg(
        short = 'e',
        long = "event",
        value_delimiter = ',',
        value_name = "EVENT"
    )]
    events: Vec<String>,
    /// A filter for the -e before it, evaluated in the kernel before anything is taken, in
    /// perf's tracepoint filter language: FIELD OP VALUE (== != < <= > >= &, and ~ or ==
    /// with globs for strings) joined with && || ! and parentheses; fields of the event,
    /// arg1..arg6 and ret of probes, and comm, pid, tid, cpu. `--filter 'ret < 0'`.
    #[arg(long = "filter", value_name = "EXPR")]
    filters: Vec<String>,
    /// The latency of each call between two tracepoints, measured in the kernel: one sample
    /// per call at EXIT, with ENTRY's fields and stacks, weighing the nanoseconds between
    /// (`--latency syscalls:sys_enter_read,syscalls:sys_exit_read`).
    #[arg(long = "latency", value_name = "ENTRY,EXIT")]
    latency: Vec<String>,
    /// Record on these CPUs only (perf's -C: 0,2-3): samples are taken there, and the other
    /// events that happen there are kept. cachestat counts per process: it stays off.
    #[arg(short = 'C', long = "cpu", value_name = "CPUS", value_parser = parse_cpu_list)]
    cpus: Option<CpuList>,
    /// Count on-CPU samples and traced events (-e TRACEPOINT, probes, --latency) in the
    /// kernel per thread and stacks (as bcc's profile and stackcount do) and write each stack
    /// once with its count, at the end and every --interval: a much smaller file. On-CPU
    /// samples weigh their count as their period; a traced event's sample holds it in its
    /// `bpfperf_count` field too (its period: the count, or the latencies summed). DWARF
    /// mode: stacks the kernel cannot unwind yet are written one by one, as without it.
    #[arg(long)]
    aggregate: bool,
    /// With --aggregate (or --hist): write the counts every SECS seconds (default: once, at
    /// the end).
    #[arg(long, value_name = "SECS")]
    interval: Option<f64>,
    /// A power-of-two histogram of FIELD of the traced events (or `latency`, of --latency
    /// pairs and return probes), counted in the kernel as bpftrace's hist() (implies
    /// --aggregate): each bucket is written as a sample whose FIELD holds the bucket's lower
    /// bound (`analyze hist FIELD` prints the table). `-e syscalls:sys_exit_read --hist ret`.
    #[arg(long, value_name = "FIELD")]
    hist: Option<String>,
    /// With --hist: per command (the default: no stacks taken) or per stack.
    #[arg(long, value_name = "comm|stack", requires = "hist", value_parser = ["comm", "stack"])]
    by: Option<String>,
    /// Do not record off-CPU time.
    #[arg(long)]
    no_off_cpu: bool,
    /// Shortest off-CPU interval recorded, in microseconds.
    #[arg(long, default_value_t = 1, value_name = "USECS")]
    off_cpu_min: u64,
    /// Do not record who woke the threads that were off the CPU.
    #[arg(long)]
    no_wakeups: bool,
    /// Do not record block I/O.
    #[arg(long)]
    no_io: bool,
    /// Do not count page-cache use (cachestat: accesses, misses, dirtied pages per process
    /// and second).
    #[arg(long)]
    no_cache: bool,
    /// Do not record major page faults (each one timed: fault-time; the waits inside faults:
    /// fault-wait).
    #[arg(long)]
    no_faults: bool,
    /// With -e net: follow at most this many skbs of each socket a second to the device
    /// (in bursts of up to a tenth of that), each standing for the skbs of its socket not
    /// followed since the last one (the sample's count, tx bytes and period are theirs too:
    /// counts, bytes and the latency distribution stay whole); 0: every skb.
    #[arg(long, default_value_t = 1000, value_name = "SKBS")]
    net_send_rate: u64,
    /// With -e net and a --net-send-rate: follow at most this many skbs a second on the
    /// whole machine (each CPU its share), however many sockets send: the skbs past it are
    /// counted as the rate's are; 0: no cap. It bounds the file: a net_send sample is about
    /// 330 bytes.
    #[arg(long, default_value_t = 10_000, value_name = "SKBS")]
    net_send_cap: u64,
    /// With -e net: how sends are timed to the device. `calls` (the default for a command
    /// record starts, where the kernel has BPF TX timestamping, 6.15+): per send call, by the
    /// kernel's timestamps of the skb holding its last byte into the qdisc and to the driver,
    /// nothing run per skb (the rate and cap count calls; connections set up while recording
    /// only); `skbs` (the default with -p or -a): every skb through tcp_sendmsg_locked,
    /// net_dev_queue, net_dev_start_xmit and net_dev_xmit (any connection, each skb and
    /// segment counted; costs a network-bound program more: iperf3 x1.095 against x1.028).
    #[arg(long, value_enum, value_name = "HOW")]
    net_send_timing: Option<NetSendTiming>,
    /// Compress the records with zstd (level 1, or LEVEL from 1 to 22), as `perf record -z`:
    /// perf and analyze read the file as they read perf's. The level is attached (`-z5`,
    /// `--compression-level=5`), as perf takes it: in `record -z true`, `true` is the command.
    #[arg(
        short = 'z',
        long = "compression-level",
        value_name = "LEVEL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "1",
        value_parser = clap::value_parser!(i32).range(1..=22)
    )]
    compression_level: Option<i32>,
    /// Size of the BPF ring buffer in 4 KiB pages, a power of two (unlike perf's -m, one
    /// buffer for all CPUs). Default: about half a second of samples, 1 to 64 MiB.
    #[arg(short = 'm', long = "mmap-pages", value_name = "PAGES", value_parser = parse_pages)]
    mmap_pages: Option<u64>,
    /// Record these running processes (comma-separated pids) and their children.
    #[arg(short = 'p', long, value_delimiter = ',', conflicts_with = "all_cpus")]
    pid: Vec<u32>,
    /// Record every process on the system.
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    /// Say how long start-up and finishing took, phase by phase.
    #[arg(short, long)]
    verbose: bool,
    /// Also write OUTPUT.tar.zst: the recording with what analyzing it elsewhere needs of
    /// every file its samples touched (`analyze archive`, run when recording ends).
    #[arg(long, conflicts_with = "switch_output")]
    archive: bool,
    /// Write a series of files, each readable on its own, as perf's --switch-output: the
    /// file at OUTPUT is finished, moved to OUTPUT.<timestamp> (local time,
    /// YYYYMMDDHHMMSScc) and a new one begun, on SIGUSR2 (signal, the default), at a size
    /// (a number with B, K, M or G: 100M) or after a time (with s, m, h or d: 30s). The
    /// last file is moved to its timestamped name too.
    #[arg(
        long,
        value_name = "MODE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "signal",
        value_parser = rotation::parse_switch_output
    )]
    switch_output: Option<rotation::Switch>,
    /// With --switch-output: keep only the last N files, deleting older ones (0: keep all).
    #[arg(long, value_name = "N", requires = "switch_output")]
    switch_max_files: Option<usize>,
    /// Stop after SECS seconds (a workload keeps running). Without a command or -p: every
    /// process, as `-a -- sleep SECS`.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Print nothing but errors (no summary), as perf record -q.
    #[arg(short, long)]
    quiet: bool,
    /// Name the JIT code of the JVMs recorded (HotSpot, JDK 17+): JVMs the workload starts
    /// get `JAVA_TOOL_OPTIONS=... -XX:+DumpPerfMapAtExit` (they print "Picked up
    /// JAVA_TOOL_OPTIONS"), other JVMs (-p, -a) have that flag set in their memory, and
    /// those still running at the end are asked with `jcmd PID Compiler.perfmap`: each writes
    /// /tmp/perf-PID.map, which analyze reads. off: none of that.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    jvm_perfmap: String,
    /// The command to run and record, with its arguments (`--` before it is optional, as in
    /// perf record: `record ls -l` records `ls -l`). Before it, a word starting with `-` is
    /// one of record's options or an error; after it (or after `--`), every word is the
    /// command's.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
    /// The -e words that are not record's own events, each with the --filter that followed
    /// it; the --latency pairs likewise (see [`pair_filters`]).
    #[arg(skip)]
    traced: Vec<(String, Option<String>)>,
    #[arg(skip)]
    latency_pairs: Vec<(String, String, Option<String>)>,
}

/// record's own events (the rest of -e is any event: tracepoints, probes).
const OWN_EVENTS: &[&str] = &[
    "cpu-clock",
    "cpu",
    "offcpu",
    "wakeup",
    "runq",
    "fault",
    "io",
    "cache",
    "net",
];

/// Gives each --filter to the -e or --latency right before it on the command line (perf's
/// rule), and sorts -e words into record's own events and any event. Errors: a filter with
/// no event before it, or after one of record's own events; a word that is neither.
fn pair_filters(args: &mut Args, m: &clap::ArgMatches) -> Result<(), String> {
    let indexed = |id: &str| -> Vec<(usize, String)> {
        match (m.indices_of(id), m.get_many::<String>(id)) {
            (Some(i), Some(v)) => i.zip(v.cloned()).collect(),
            _ => Vec::new(),
        }
    };
    let events = indexed("events");
    let latency = indexed("latency");
    let mut filters = indexed("filters");
    filters.reverse();
    // Which filter follows an event: the first after it, if no other event comes between.
    let mut all: Vec<(usize, bool, String)> = events
        .iter()
        .map(|(i, e)| (*i, false, e.clone()))
        .chain(latency.iter().map(|(i, l)| (*i, true, l.clone())))
        .collect();
    all.sort();
    let mut taken = vec![false; filters.len()];
    let mut filter_after = |at: usize, next: usize| -> Option<String> {
        let k = filters
            .iter()
            .enumerate()
            .rev()
            .find(|(k, (i, _))| !taken[*k] && *i > at && *i < next)?
            .0;
        taken[k] = true;
        Some(filters[k].1.clone())
    };
    let own = |e: &str| OWN_EVENTS.contains(&e);
    for (n, (at, is_latency, word)) in all.iter().enumerate() {
        let next = all.get(n + 1).map_or(usize::MAX, |x| x.0);
        let filter = filter_after(*at, next);
        if *is_latency {
            let Some((entry, exit)) = word.split_once(',') else {
                return Err(format!(
                    "--latency {word}: expected ENTRY,EXIT (two tracepoints: \
                     syscalls:sys_enter_read,syscalls:sys_exit_read)"
                ));
            };
            args.latency_pairs
                .push((entry.trim().into(), exit.trim().into(), filter));
        } else if own(word) {
            if let Some(f) = filter {
                return Err(format!(
                    "--filter '{f}': {word} is one of record's own events, which take no \
                     filter (filters are for tracepoints and probes)"
                ));
            }
        } else if word.contains(':') {
            args.traced.push((word.clone(), filter));
        } else {
            return Err(format!(
                "-e {word}: no such event (record's own: {}; or a tracepoint SYSTEM:NAME, \
                 uprobe:PATH:FUNCTION, uretprobe:PATH:FUNCTION, usdt:PATH:PROVIDER:NAME, \
                 kprobe:FUNCTION)",
                OWN_EVENTS.join(", ")
            ));
        }
    }
    if let Some(k) = taken.iter().position(|t| !t) {
        return Err(format!(
            "--filter '{}': a filter goes after the -e (or --latency) it is for",
            filters[k].1
        ));
    }
    args.events.retain(|e| own(e));
    Ok(())
}

/// `--net-send-timing`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum NetSendTiming {
    Calls,
    Skbs,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum CallGraph {
    /// Frame pointers, walked in the kernel.
    Fp,
    /// Copies of the user stack (at most this many bytes), unwound by analyze with DWARF CFI.
    Dwarf(u32),
    /// No user stacks.
    None,
}

fn parse_call_graph(s: &str) -> Result<CallGraph, String> {
    match s.split_once(',') {
        None if s == "fp" => Ok(CallGraph::Fp),
        None if s == "none" => Ok(CallGraph::None),
        None if s == "dwarf" => Ok(CallGraph::Dwarf(bpf::MAX_STACK_COPY)),
        Some(("dwarf", n)) => match n.parse::<u32>() {
            Ok(n) if (8..=bpf::MAX_STACK_COPY).contains(&n) => Ok(CallGraph::Dwarf(n / 8 * 8)),
            _ => Err(format!(
                "dwarf,{n}: the stack size must be a number from 8 to {}",
                bpf::MAX_STACK_COPY
            )),
        },
        _ => Err(format!("{s}: expected fp, dwarf[,MAXBYTES] or none")),
    }
}

/// CPUs by number, sorted.
#[derive(Clone, Debug)]
struct CpuList(Vec<u32>);

/// perf's CPU list: `0,2-3`.
fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    let mut cpus = Vec::new();
    for part in s.split(',') {
        let bad = || format!("{s}: expected CPUs as perf takes them, such as 0,2-3");
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if a > b || b >= 4096 {
            return Err(bad());
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(CpuList(cpus))
}

fn parse_pages(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n.is_power_of_two() && n <= 1 << 18 => Ok(n),
        _ => Err(format!(
            "{s}: the ring buffer size must be a power of two from 1 to 262144 pages"
        )),
    }
}

impl Args {
    fn into_config(self) -> anyhow::Result<session::Config> {
        let duration = match self.duration {
            Some(d) if !(d > 0.0 && d.is_finite()) => {
                anyhow::bail!("--duration {d}: expected a number of seconds above 0")
            }
            d => d.map(std::time::Duration::from_secs_f64),
        };
        let aggregate = self.aggregate || self.hist.is_some();
        if self.interval.is_some() && !aggregate {
            anyhow::bail!(
                "--interval: only with --aggregate or --hist (counts written every SECS)"
            );
        }
        if self.hist.is_some() && self.traced.is_empty() && self.latency_pairs.is_empty() {
            anyhow::bail!(
                "--hist: no traced event to count (give -e TRACEPOINT, a probe, or --latency ENTRY,EXIT)"
            );
        }
        // A histogram per command needs no stacks.
        let stacks = self.call_graph != CallGraph::None
            && (self.hist.is_none() || self.by.as_deref() == Some("stack"));
        let interval = match self.interval {
            Some(i) if !(i > 0.0 && i.is_finite()) => {
                anyhow::bail!("--interval {i}: expected a number of seconds above 0")
            }
            i => i.map(std::time::Duration::from_secs_f64),
        };
        // A duration alone records every process, as `-a -- sleep SECS` does.
        let all_cpus =
            self.all_cpus || (duration.is_some() && self.command.is_empty() && self.pid.is_empty());
        if self.command.is_empty() && self.pid.is_empty() && !all_cpus {
            anyhow::bail!(
                "nothing to record: give a command (record ls, or record -- ls), or -p PID, or -a"
            );
        }
        // A hash lookup per socket state change and per freed skb of the whole machine: only
        // when asked for by name.
        let net = self.events.iter().any(|e| e == "net");
        // Whether the kernel can time send calls is asked only when there are sends to time
        // (it reads the kernel's BTF).
        let net_send_calls = match self.net_send_timing {
            _ if !net => false,
            Some(NetSendTiming::Skbs) => false,
            Some(NetSendTiming::Calls) if !bpf::tx_timestamping() => anyhow::bail!(
                "--net-send-timing calls: no BPF TX timestamping here (it needs kernel 6.15+ \
                 and a cgroup v2 hierarchy mounted); use --net-send-timing skbs"
            ),
            Some(NetSendTiming::Calls) => true,
            // Only connections set up while recording are timed by call: where record starts
            // the command, all of them; with -p or -a, connections already open would go
            // unseen, so each skb is followed there.
            None => self.pid.is_empty() && !all_cpus && bpf::tx_timestamping(),
        };
        if self.freq == 0 || self.freq > 100_000 {
            anyhow::bail!(
                "-F {}: the frequency must be between 1 and 100000 Hz",
                self.freq
            );
        }
        // -e: only what it names (--no-* flags still take things away); any event alone
        // records only that.
        let any_event = !self.traced.is_empty() || !self.latency_pairs.is_empty();
        let chosen = |names: &[&str]| {
            (self.events.is_empty() && !any_event)
                || self.events.iter().any(|e| names.contains(&e.as_str()))
        };
        let off_cpu = chosen(&["offcpu", "wakeup", "runq", "fault"]) && !self.no_off_cpu;
        if let Some(CpuList(cpus)) = &self.cpus {
            let online = bpf::perf_event::online_cpus()?;
            if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
                anyhow::bail!("-C: CPU {c} is not online (online: {online:?})");
            }
        }
        let first_word = self.command.first().map(PathBuf::from);
        let target = if all_cpus {
            session::Target::SystemWide
        } else if !self.pid.is_empty() {
            session::Target::Pids(self.pid.clone())
        } else {
            session::Target::Workload
        };
        Ok(session::Config {
            output: self.output,
            frequency: self.freq,
            target,
            command: self.command,
            cmdline: std::env::args().collect(),
            sampling: chosen(&["cpu-clock", "cpu"]),
            cpus: self.cpus.clone().map(|l| l.0),
            off_cpu_min_ns: off_cpu.then_some(self.off_cpu_min * 1000),
            wakeups: !self.no_wakeups && chosen(&["wakeup"]),
            compression_level: self.compression_level,
            block_io: !self.no_io && chosen(&["io"]),
            // cachestat hooks every read() of the followed programs (about 2% of a
            // read-heavy one's CPU): only when asked for by name.
            cache: !self.no_cache
                && self.events.iter().any(|e| e == "cache")
                && self.cpus.is_none(),
            faults: !self.no_faults && chosen(&["fault"]),
            net,
            net_send_rate: self.net_send_rate,
            net_send_cap: self.net_send_cap,
            net_send_calls,
            verbose: self.verbose,
            status_line: !self.quiet,
            duration,
            ring_pages: self.mmap_pages,
            stack_copy_bytes: match self.call_graph {
                CallGraph::Dwarf(n) => n,
                _ => 0,
            },
            unwind_in_kernel: !self.no_kernel_unwind,
            python: !self.no_python,
            aggregate,
            interval,
            hist: self.hist,
            trace: tracing::Request {
                events: self.traced,
                latency: self.latency_pairs,
                stacks,
                pids: self.pid,
                command: first_word,
            },
            switch_output: self.switch_output.map(|switch| rotation::Options {
                switch,
                max_files: self.switch_max_files.unwrap_or(0),
            }),
            jvm_perfmap: self.jvm_perfmap == "on",
        })
    }
}

/// Runs `analyze archive` (the binary beside this one) on the recording at `path`.
fn archive(path: &std::path::Path) -> anyhow::Result<()> {
    let analyze = std::env::current_exe()?.with_file_name("analyze");
    let mut out = path.as_os_str().to_owned();
    out.push(".tar.zst");
    let out = PathBuf::from(out);
    let status = std::process::Command::new(&analyze)
        .arg("archive")
        .arg("-i")
        .arg(path)
        .arg("-o")
        .arg(&out)
        .status()
        .map_err(|e| anyhow::anyhow!("--archive: cannot run {}: {e}", analyze.display()))?;
    anyhow::ensure!(
        status.success(),
        "--archive: analyze archive failed ({status})"
    );
    host::chown_to_invoking_user(&out);
    Ok(())
}

/// The line perf prints at the end of a recording, and what was lost.
fn print_summary(s: &session::Summary) {
    let mut traced = if s.traced > 0 {
        format!("{} traced events, ", s.traced)
    } else {
        String::new()
    };
    if s.net > 0 {
        traced += &format!("{} network events, ", s.net);
    }
    let files = match (s.files, s.kept) {
        (0, _) => String::new(),
        (n, kept) if kept < n => format!("{n} files ({kept} kept), the last "),
        (n, _) => format!("{n} files, the last "),
    };
    eprintln!(
        "[ record: {} samples, {} off-CPU events, {} run-queue waits, {} wakeups, {} I/O events, {} major faults, {traced}{} lost, {:.2} s, {} bytes written to {files}{} ]",
        s.samples,
        s.off_cpu,
        s.runq,
        s.wakeups,
        s.io,
        s.faults,
        s.lost,
        s.duration.as_secs_f64(),
        s.bytes,
        s.path.display()
    );
    if s.lost > 0 {
        eprintln!("record: lost {}", lost_words(s));
    }
    if s.aggregated > 0 {
        eprintln!(
            "record: samples counted in the kernel, written as {} records (period: the count)",
            s.aggregated
        );
    }
    if let Some(records) = s.traced_records {
        eprintln!(
            "record: traced events counted in the kernel: {}, written as {records} records (bpfperf_count: the count)",
            s.traced
        );
    }
    if s.missed_event_aggregations > 0 {
        eprintln!(
            "record: traced events that did not fit in the kernel's aggregation maps, written one by one: {}",
            s.missed_event_aggregations
        );
    }
    if s.missed_aggregations > 0 {
        eprintln!(
            "record: samples that did not fit in the kernel's aggregation maps, written one by one: {}",
            s.missed_aggregations
        );
    }
    if s.missed_wakers > 0 {
        eprintln!(
            "record: {} off-CPU intervals are recorded without their waker (it could not be kept)",
            s.missed_wakers
        );
    }
}

/// What was lost, by kind: "26 block I/O events, 6 off-CPU intervals".
fn lost_words(s: &session::Summary) -> String {
    let d = &s.drops;
    let side_band = s.lost.saturating_sub(d.total() + s.unwritten);
    [
        (d.on_cpu, "on-CPU samples"),
        (d.off_cpu, "off-CPU intervals"),
        (d.block_io, "block I/O events"),
        (d.traced, "traced events"),
        (d.net, "network events"),
        (d.faults, "major faults"),
        (d.exits, "process exits"),
        (s.unwritten, "samples that did not fit in the file"),
        (side_band, "side-band records (mappings, names)"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect::<Vec<_>>()
    .join(", ")
}

/// The command line, or exit: an unknown option is an error naming it and the closest known
/// one, exit status 2, as perf refuses it (`unknown option`) rather than running it.
fn parse_args() -> Args {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let err = match Args::command().try_get_matches_from(attached_levels(std::env::args_os())) {
        Ok(m) => match Args::from_arg_matches(&m) {
            Ok(mut args) => match pair_filters(&mut args, &m) {
                Ok(()) => return args,
                Err(why) => {
                    eprintln!("record: {why}");
                    std::process::exit(2)
                }
            },
            Err(e) => e,
        },
        Err(e) => e,
    };
    let unknown = match (err.kind(), err.get(ContextKind::InvalidArg)) {
        (ErrorKind::UnknownArgument, Some(ContextValue::String(word))) => word.clone(),
        _ => err.exit(),
    };
    eprintln!("error: unknown option '{unknown}'");
    if let Some(close) = closest_option(&unknown) {
        eprintln!("  (the closest option is '{close}')");
    }
    eprintln!(
        "\n{}\nA command whose name starts with '-' goes after '--': record -- {unknown}\n\
         For more information, try '--help'.",
        Args::command().render_usage()
    );
    std::process::exit(2)
}

/// The command line with perf's attached short level, `-z5`, spelled `--compression-level=5`
/// (clap takes an optional value only after `=`), among record's own options: up to `--` or
/// the command's first word.
fn attached_levels(args: impl IntoIterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let cmd = Args::command();
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    let mut out = Vec::new();
    let mut args = args.into_iter();
    out.extend(args.next()); // the program's name
    while let Some(word) = args.next() {
        let Some(w) = word.to_str().map(str::to_string) else {
            out.push(word);
            break;
        };
        if w == "--" || !w.starts_with('-') || w == "-" {
            out.push(word);
            break;
        }
        let value_follows = if let Some(long) = w.strip_prefix("--") {
            !long.contains('=')
                && cmd
                    .get_arguments()
                    .find(|a| a.get_long() == Some(long))
                    .is_some_and(|a| {
                        takes_value(a) && a.get_num_args().is_none_or(|n| n.min_values() > 0)
                    })
        } else if let Some(level) = w
            .strip_prefix("-z")
            .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        {
            out.push(format!("--compression-level={level}").into());
            continue;
        } else {
            // A cluster of short options: a value follows if the last one takes one and
            // none is attached.
            let last = w.chars().last().unwrap_or('-');
            w.chars().count() == 2
                && cmd
                    .get_arguments()
                    .find(|a| a.get_short() == Some(last))
                    .is_some_and(|a| {
                        takes_value(a) && a.get_num_args().is_none_or(|n| n.min_values() > 0)
                    })
        };
        out.push(word);
        if value_follows {
            out.extend(args.next());
        }
    }
    out.extend(args);
    out
}

/// The option most like `word`: by edit distance among the long names (the short ones by
/// their letter in the other case, `-Z` for `-z`), with the other name of the same option.
fn closest_option(word: &str) -> Option<String> {
    let cmd = Args::command();
    let both = |a: &clap::Arg| match (a.get_short(), a.get_long()) {
        (Some(s), Some(l)) => format!("-{s}, --{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, Some(l)) => format!("--{l}"),
        (None, None) => String::new(),
    };
    let options = || cmd.get_arguments().filter(|a| !a.is_positional());
    if let Some(long) = word.strip_prefix("--") {
        let long = long.split('=').next().unwrap_or(long);
        options()
            .chain([&clap::Arg::new("help").long("help").short('h')])
            .filter_map(|a| Some((strsim::jaro_winkler(long, a.get_long()?), a)))
            .filter(|(score, _)| *score > 0.7)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, a)| both(a))
    } else {
        let c = word.strip_prefix('-')?.chars().next()?;
        let other = |s: char| s != c && s.eq_ignore_ascii_case(&c);
        options()
            .find(|a| a.get_short().is_some_and(other))
            .map(both)
    }
}

fn main() -> ExitCode {
    let args = parse_args();
    let want_archive = args.archive;
    let quiet = args.quiet;
    let result = args.into_config().and_then(|cfg| session::record(&cfg));
    match result {
        Ok(s) => {
            if !quiet {
                print_summary(&s);
            }
            if let Some(why) = &s.stopped {
                eprintln!("record: {why}");
                return ExitCode::from(1);
            }
            if want_archive {
                if let Err(e) = archive(&s.path) {
                    eprintln!("record: {e:#}");
                    return ExitCode::from(255);
                }
            }
            ExitCode::from(s.exit_status.unwrap_or(0).clamp(0, 255) as u8)
        }
        Err(e) => {
            eprintln!("record: {e:#}");
            ExitCode::from(255)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rotation::Switch;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("record").chain(args.iter().copied()))
    }

    #[test]
    fn compression_level_is_attached_as_perf_takes_it() {
        let parse = |words: &[&str]| {
            let words = std::iter::once("record")
                .chain(words.iter().copied())
                .map(std::ffi::OsString::from);
            Args::try_parse_from(attached_levels(words)).unwrap()
        };
        let a = parse(&["-z", "true"]);
        assert_eq!(
            (a.compression_level, a.command),
            (Some(1), vec!["true".into()])
        );
        let a = parse(&["-z5", "-o", "x.data", "-F", "99", "true", "-z3"]);
        assert_eq!(a.compression_level, Some(5));
        assert_eq!(a.output.to_str(), Some("x.data"));
        assert_eq!(a.command, ["true", "-z3"]);
        let a = parse(&["--compression-level=9", "--", "-z4"]);
        assert_eq!(
            (a.compression_level, a.command),
            (Some(9), vec!["-z4".into()])
        );
        let a = parse(&["--compression-level", "3"]);
        assert_eq!(
            (a.compression_level, a.command),
            (Some(1), vec!["3".into()])
        );
    }

    #[test]
    fn switch_output_alone_is_signal_and_takes_no_word_after_it() {
        let a = parse(&["--switch-output", "sleep", "1"]).unwrap();
        assert_eq!(a.switch_output, Some(Switch::Signal));
        assert_eq!(a.command, ["sleep", "1"]);
        // As perf: a mode only after '='; the word after is the command.
        let a = parse(&["--switch-output", "100M"]).unwrap();
        assert_eq!(a.switch_output, Some(Switch::Signal));
        assert_eq!(a.command, ["100M"]);
        let a = parse(&["--switch-output=100M", "true"]).unwrap();
        assert_eq!(a.switch_output, Some(Switch::Size(100 << 20)));
        let a = parse(&["--switch-output=30s", "--switch-max-files", "3", "true"]).unwrap();
        assert_eq!(
            a.switch_output,
            Some(Switch::Time(std::time::Duration::from_secs(30)))
        );
        assert_eq!(a.switch_max_files, Some(3));
        assert!(parse(&["true"]).unwrap().switch_output.is_none());
    }

    #[test]
    fn switch_options_refuse_what_perf_would_misread() {
        let e = parse(&["--switch-output=10x", "true"]).unwrap_err();
        assert!(e.to_string().contains("10x"), "{e}");
        let e = parse(&["--switch-output=", "true"]).unwrap_err();
        assert!(e.to_string().contains("--switch-output"), "{e}");
        // A limit without rotation, a count that is none.
        let e = parse(&["--switch-max-files", "2", "true"]).unwrap_err();
        assert!(e.to_string().contains("--switch-output"), "{e}");
        let e = parse(&["--switch-output", "--switch-max-files", "two", "true"]).unwrap_err();
        assert!(e.to_string().contains("two"), "{e}");
        // One archive of many files: archive each with analyze archive instead.
        let e = parse(&["--switch-output", "--archive", "true"]).unwrap_err();
        assert!(e.to_string().contains("--archive"), "{e}");
    }
}
