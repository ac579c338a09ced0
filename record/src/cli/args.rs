//! record's command line: every option, its help text, and the parsers of their values.

use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "record",
    version,
    about = "Record where programs spend their time, with BPF, into perf.data"
)]
pub struct Args {
    /// Output file; an existing one is renamed to FILE.old.
    #[arg(short, long, default_value = "perf.data")]
    pub output: PathBuf,
    /// Samples per second per CPU.
    #[arg(short = 'F', long, default_value_t = 999)]
    pub freq: u64,
    /// How user stacks are captured: fp (frame pointers), dwarf[,MAXBYTES] (unwound in the
    /// kernel from each file's .eh_frame once its tables are built, else copies of the stack
    /// unwound by analyze; MAXBYTES default 32768), none.
    #[arg(long, default_value = "dwarf", value_parser = parse_call_graph)]
    pub call_graph: CallGraph,
    /// Accepted as perf accepts it (stacks are always recorded).
    #[arg(short = 'g')]
    pub g: bool,
    /// DWARF mode: never unwind in the kernel; copy every user stack (as perf does).
    #[arg(long)]
    pub no_kernel_unwind: bool,
    /// Do not read Python frames: CPython 3.11 processes' stacks keep their
    /// _PyEval_EvalFrameDefault frames unnamed (by default each Python frame is named
    /// `function (file.py:line)` in their place).
    #[arg(long)]
    pub no_python: bool,
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
    pub events: Vec<String>,
    /// A filter for the -e before it, evaluated in the kernel before anything is taken, in
    /// perf's tracepoint filter language: FIELD OP VALUE (== != < <= > >= &, and ~ or ==
    /// with globs for strings) joined with && || ! and parentheses; fields of the event,
    /// arg1..arg6 and ret of probes, and comm, pid, tid, cpu. `--filter 'ret < 0'`.
    #[arg(long = "filter", value_name = "EXPR")]
    pub filters: Vec<String>,
    /// The latency of each call between two tracepoints, measured in the kernel: one sample
    /// per call at EXIT, with ENTRY's fields and stacks, weighing the nanoseconds between
    /// (`--latency syscalls:sys_enter_read,syscalls:sys_exit_read`).
    #[arg(long = "latency", value_name = "ENTRY,EXIT")]
    pub latency: Vec<String>,
    /// Record on these CPUs only (perf's -C: 0,2-3): samples are taken there, and the other
    /// events that happen there are kept. cachestat counts per process: it stays off.
    #[arg(short = 'C', long = "cpu", value_name = "CPUS", value_parser = parse_cpu_list)]
    pub cpus: Option<CpuList>,
    /// Count on-CPU samples and traced events (-e TRACEPOINT, probes, --latency) in the
    /// kernel per thread and stacks (as bcc's profile and stackcount do) and write each stack
    /// once with its count, at the end and every --interval: a much smaller file. On-CPU
    /// samples weigh their count as their period; a traced event's sample holds it in its
    /// `bpfperf_count` field too (its period: the count, or the latencies summed). DWARF
    /// mode: stacks the kernel cannot unwind yet are written one by one, as without it.
    #[arg(long)]
    pub aggregate: bool,
    /// With --aggregate (or --hist): write the counts every SECS seconds (default: once, at
    /// the end).
    #[arg(long, value_name = "SECS")]
    pub interval: Option<f64>,
    /// A power-of-two histogram of FIELD of the traced events (or `latency`, of --latency
    /// pairs and return probes), counted in the kernel as bpftrace's hist() (implies
    /// --aggregate): each bucket is written as a sample whose FIELD holds the bucket's lower
    /// bound (`analyze hist FIELD` prints the table). `-e syscalls:sys_exit_read --hist ret`.
    #[arg(long, value_name = "FIELD")]
    pub hist: Option<String>,
    /// With --hist: per command (the default: no stacks taken) or per stack.
    #[arg(long, value_name = "comm|stack", requires = "hist", value_parser = ["comm", "stack"])]
    pub by: Option<String>,
    /// Do not record off-CPU time.
    #[arg(long)]
    pub no_off_cpu: bool,
    /// Shortest off-CPU interval recorded, in microseconds.
    #[arg(long, default_value_t = 1, value_name = "USECS")]
    pub off_cpu_min: u64,
    /// Do not record who woke the threads that were off the CPU.
    #[arg(long)]
    pub no_wakeups: bool,
    /// Do not record block I/O.
    #[arg(long)]
    pub no_io: bool,
    /// Do not count page-cache use (cachestat: accesses, misses, dirtied pages per process
    /// and second).
    #[arg(long)]
    pub no_cache: bool,
    /// Do not record major page faults (each one timed: fault-time; the waits inside faults:
    /// fault-wait).
    #[arg(long)]
    pub no_faults: bool,
    /// With -e net: follow at most this many skbs of each socket a second to the device
    /// (in bursts of up to a tenth of that), each standing for the skbs of its socket not
    /// followed since the last one (the sample's count, tx bytes and period are theirs too:
    /// counts, bytes and the latency distribution stay whole); 0: every skb.
    #[arg(long, default_value_t = 1000, value_name = "SKBS")]
    pub net_send_rate: u64,
    /// With -e net and a --net-send-rate: follow at most this many skbs a second on the
    /// whole machine (each CPU its share), however many sockets send: the skbs past it are
    /// counted as the rate's are; 0: no cap. It bounds the file: a net_send sample is about
    /// 330 bytes.
    #[arg(long, default_value_t = 10_000, value_name = "SKBS")]
    pub net_send_cap: u64,
    /// Follow 1 in N calls through the layers: `write:1/N` (write, pwrite, writev on a
    /// file: page cache, writeback request, issue, completion; or the request an O_DIRECT
    /// write makes) or `send:1/N` (sendto, sendmsg, write on a socket: TCP, qdisc, driver,
    /// device). Chosen at random in the kernel; or by time, `write:R/s`: the first call at
    /// least 1/R s after the last one chosen (R a second at most, however busy). Only those
    /// calls write records (`analyze requests`). Repeat for both kinds.
    #[arg(long, value_name = "KIND:1/N|KIND:R/s", value_parser = parse_follow)]
    pub follow: Vec<Follow>,
    /// With -e net: how sends are timed to the device. `calls` (the default for a command
    /// record starts, where the kernel has BPF TX timestamping, 6.15+): per send call, by the
    /// kernel's timestamps of the skb holding its last byte into the qdisc and to the driver,
    /// nothing run per skb (the rate and cap count calls; connections set up while recording
    /// only); `skbs` (the default with -p or -a): every skb through tcp_sendmsg_locked,
    /// net_dev_queue, net_dev_start_xmit and net_dev_xmit (any connection, each skb and
    /// segment counted; costs a network-bound program more: iperf3 x1.095 against x1.028).
    #[arg(long, value_enum, value_name = "HOW")]
    pub net_send_timing: Option<NetSendTiming>,
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
    pub compression_level: Option<i32>,
    /// Size of the BPF ring buffer in 4 KiB pages, a power of two (unlike perf's -m, one
    /// buffer for all CPUs). Default: about half a second of samples, 1 to 64 MiB.
    #[arg(short = 'm', long = "mmap-pages", value_name = "PAGES", value_parser = parse_pages)]
    pub mmap_pages: Option<u64>,
    /// Record these running processes (comma-separated pids) and their children.
    #[arg(short = 'p', long, value_delimiter = ',', conflicts_with = "all_cpus")]
    pub pid: Vec<u32>,
    /// Record every process on the system.
    #[arg(short = 'a', long = "all-cpus")]
    pub all_cpus: bool,
    /// Say how long start-up and finishing took, phase by phase.
    #[arg(short, long)]
    pub verbose: bool,
    /// Also write OUTPUT.tar.zst: the recording with what analyzing it elsewhere needs of
    /// every file its samples touched (`analyze archive`, run when recording ends).
    #[arg(long, conflicts_with = "switch_output")]
    pub archive: bool,
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
        value_parser = crate::output::rotation::parse_switch_output
    )]
    pub switch_output: Option<crate::output::rotation::Switch>,
    /// With --switch-output: keep only the last N files, deleting older ones (0: keep all).
    #[arg(long, value_name = "N", requires = "switch_output")]
    pub switch_max_files: Option<usize>,
    /// Stop after SECS seconds (a workload keeps running). Without a command or -p: every
    /// process, as `-a -- sleep SECS`.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Print nothing but errors (no summary), as perf record -q.
    #[arg(short, long)]
    pub quiet: bool,
    /// Name the JIT code of the JVMs recorded (HotSpot, JDK 17+): JVMs the workload starts
    /// get `JAVA_TOOL_OPTIONS=... -XX:+DumpPerfMapAtExit` (they print "Picked up
    /// JAVA_TOOL_OPTIONS"), other JVMs (-p, -a) have that flag set in their memory, and
    /// those still running at the end are asked with `jcmd PID Compiler.perfmap`: each writes
    /// /tmp/perf-PID.map, which analyze reads. off: none of that.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    pub jvm_perfmap: String,
    /// The command to run and record, with its arguments (`--` before it is optional, as in
    /// perf record: `record ls -l` records `ls -l`). Before it, a word starting with `-` is
    /// one of record's options or an error; after it (or after `--`), every word is the
    /// command's.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// The -e words that are not record's own events, each with the --filter that followed
    /// it; the --latency pairs likewise (see [`pair_filters`]).
    #[arg(skip)]
    pub traced: Vec<(String, Option<String>)>,
    #[arg(skip)]
    pub latency_pairs: Vec<(String, String, Option<String>)>,
}

/// `--net-send-timing`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NetSendTiming {
    Calls,
    Skbs,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CallGraph {
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

/// `--follow`: which calls, how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Follow {
    pub send: bool,
    pub rate: bpf::FollowRate,
}

fn parse_follow(s: &str) -> Result<Follow, String> {
    let (kind, rate) = s
        .split_once(':')
        .ok_or_else(|| format!("{s}: expected write:1/N, send:1/N, write:R/s or send:R/s"))?;
    let send = match kind {
        "write" => false,
        "send" => true,
        _ => {
            return Err(format!(
                "{kind}: unknown kind of call (expected write or send)"
            ))
        }
    };
    let whole = |n: &str| n.parse::<u32>().ok().filter(|&n| n >= 1);
    let parsed = match rate.split_once('/') {
        Some(("1", n)) => whole(n).map(bpf::FollowRate::OneIn),
        Some((r, "s")) => whole(r).map(bpf::FollowRate::PerSecond),
        _ => None,
    };
    let rate = parsed.ok_or_else(|| {
        format!(
            "{rate}: expected 1/N (1 in N calls) or R/s (R calls a second at most), \
             N and R whole numbers from 1 to 4294967295"
        )
    })?;
    Ok(Follow { send, rate })
}

/// CPUs by number, sorted.
#[derive(Clone, Debug)]
pub struct CpuList(pub Vec<u32>);

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
