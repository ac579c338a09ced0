//! The command line of `analyze`: subcommands and their flags (clap), and what the stack views
//! share. In the library rather than the binary so that the manual (man pages, shell
//! completions: the `bpfperf-manual` crate) is generated from the same definitions.

use std::path::PathBuf;

use crate::pipeline;
use crate::read::{EventSel, Weight};
use crate::views;
use clap::{Args as ClapArgs, CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "analyze",
    version,
    about = "Analyze perf.data recordings (bpfperf's and perf's own)"
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

/// analyze's command line as clap defines it (what the man pages and completions are made of).
pub fn command() -> clap::Command {
    Args::command()
}

// The recording and what of it to include, shared by the stack-based subcommands.
#[derive(ClapArgs, Debug)]
pub struct Select {
    /// The recording.
    #[arg(short, long, default_value = "perf.data")]
    pub input: PathBuf,
    #[command(flatten)]
    pub filter: Filter,
}

// What to include (`analyze diff` applies it to both recordings).
#[derive(ClapArgs, Debug, Clone)]
pub struct Filter {
    /// Which samples, weighted how: cpu (the sampling event: samples, or for a counting
    /// event sampled at a frequency, cycles say, its periods, as perf report weighs them),
    /// offcpu (off-CPU
    /// time, ns), wakeup (off-CPU time, each blocked stack joined with its waker's: blocked;--;
    /// waker, as offwaketime folds them), chain (as wakeup, then where each waker had itself
    /// blocked and who woke it, --depth wakers deep: chain graphs), runq (time runnable but
    /// waiting for a CPU, ns, at
    /// the stack where the thread was preempted or blocked), fault (major page faults, ns
    /// each took, at the faulting stack; fault-wait: the waits inside faults), io (block I/O latency, ns), wall (on- and off-CPU
    /// time, ns), net-send (TCP sends, ns from the send call to the device of each skb a
    /// sample stands for, at its stack),
    /// tcp|retransmit|reset|drop|sock-wait (record -e net's events), all (every event's
    /// samples, one each), or the name
    /// of any event in the file (e.g. task-clock, sched:sched_switch,
    /// syscalls:sys_enter_write: one sample each, periods as for cpu, unless --weight says
    /// otherwise). With -e
    /// net recordings, offcpu and wakeup stacks blocked in a socket call start with a
    /// `peer:ADDR:PORT` frame: the connection waited on.
    /// Default: cpu (`script`: all, every event, as perf script prints them).
    #[arg(
        short,
        long,
        value_name = "cpu|offcpu|wakeup|chain|runq|fault|io|wall|all|NAME"
    )]
    pub event: Option<String>,
    /// With --event chain: how many wakers deep each chain goes (default 4). A chain also
    /// stops at an interrupt, at a waker that had not blocked since the recording began, and
    /// at a thread record did not follow (`[not followed: comm pid]`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=crate::read::MAX_CHAIN_DEPTH as i64))]
    pub depth: Option<u32>,
    /// Weigh each sample of the --event NAME by a numeric field of its payload (e.g. count
    /// for syscalls:sys_enter_write; a negative value leaves the sample out) or by its
    /// latency in ns (latency events: ENTRY->EXIT pairs, return probes recorded by bpfperf).
    #[arg(long, value_name = "FIELD|latency")]
    pub weight: Option<String>,
    #[command(flatten)]
    pub threads: Threads,
    #[command(flatten)]
    pub stacks: Stacks,
}

// Which threads, and when.
#[derive(ClapArgs, Debug, Clone)]
pub struct Threads {
    /// Only samples of this process.
    #[arg(long)]
    pub pid: Option<i32>,
    /// Only samples of this thread.
    #[arg(long)]
    pub tid: Option<i32>,
    /// Only samples of threads of this name.
    #[arg(long)]
    pub comm: Option<String>,
    /// Only samples in this time range (perf's --time): START,END in seconds, absolute as
    /// perf script prints times or from the recording's start, either side may be empty; or
    /// percent ranges of the recording: 10%-20%, 10%/2 (the second tenth), comma-separated.
    /// Includes START, leaves out END.
    #[arg(long, value_name = "START,END|A%-B%|A%/N", value_parser = crate::read::time_range::TimeRanges::parse)]
    pub time: Option<crate::read::time_range::TimeRanges>,
}

// How stacks are looked up and shown.
#[derive(ClapArgs, Debug, Clone)]
pub struct Stacks {
    /// User frames only.
    #[arg(short = 'U', conflicts_with = "kernel_only")]
    pub user_only: bool,
    /// Kernel frames only.
    #[arg(short = 'K')]
    pub kernel_only: bool,
    /// Leave out inlined functions.
    #[arg(long)]
    pub no_inline: bool,
    /// Look for every file under DIR first (perf's --symfs: DIR/usr/bin/tar for /usr/bin/tar).
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<PathBuf>,
    /// Name code that no symbol covers `[unknown]`, as perf does. By default such a frame is
    /// named by the function its file's unwind tables delimit, FILE!0xSTART
    /// (liblzma.so.5.4.1!0x12ab0): one box per function of a stripped binary, not one per file.
    #[arg(long)]
    pub no_unknown_names: bool,
}

impl Select {
    pub fn options(&self, addresses: bool, lines: bool) -> pipeline::Options {
        self.filter.options(addresses, lines)
    }
}

impl Filter {
    pub fn options(&self, addresses: bool, lines: bool) -> pipeline::Options {
        let event = match EventSel::parse(self.event.as_deref().unwrap_or("cpu")) {
            EventSel::Chain(depth) => EventSel::Chain(self.depth.unwrap_or(depth)),
            event => event,
        };
        let options = pipeline::Options {
            event,
            weight: self.weight.as_deref().map(Weight::parse),
            ..self.stacks.options(addresses, lines)
        };
        self.threads.apply(options)
    }
}

impl Threads {
    /// `options` with these threads and times.
    pub fn apply(&self, options: pipeline::Options) -> pipeline::Options {
        pipeline::Options {
            pid: self.pid,
            tid: self.tid,
            comm: self.comm.clone(),
            time: self.time.clone(),
            ..options
        }
    }
}

impl Stacks {
    /// The pipeline's options for these flags (every sample of the sampling event, every
    /// thread).
    pub fn options(&self, addresses: bool, lines: bool) -> pipeline::Options {
        pipeline::Options {
            inline: !self.no_inline,
            user_only: self.user_only,
            kernel_only: self.kernel_only,
            lines,
            addresses,
            progress: true,
            address_names: !self.no_unknown_names,
            ..Default::default()
        }
    }
}

// The traced events to show (views of tracepoints and probes: trace, hist, count).
#[derive(ClapArgs, Debug)]
pub struct Traced {
    /// The recording.
    #[arg(short, long, default_value = "perf.data")]
    pub input: PathBuf,
    /// Only the samples of this event (default: every traced event of the file).
    #[arg(short, long, value_name = "NAME")]
    pub event: Option<String>,
    #[command(flatten)]
    pub threads: Threads,
    #[command(flatten)]
    pub stacks: Stacks,
}

impl Traced {
    /// The pipeline's options for these flags.
    pub fn options(&self, addresses: bool) -> pipeline::Options {
        let options = pipeline::Options {
            event: match &self.event {
                Some(e) => EventSel::parse(e),
                None => EventSel::Traced,
            },
            ..self.stacks.options(addresses, false)
        };
        self.threads.apply(options)
    }
}

/// Each subcommand's options are built only when it is the one given (or its help asked
/// for): building every subcommand's was 0.3 ms of each run. (So the option groups
/// flattened into subcommands have plain comments: a doc comment would be the help's first
/// line of each, built after the subcommand's own.)
#[derive(Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// What the file holds: events, counts, lost events, time span, features.
    Info {
        /// The recording or its archive (`-` reads a pipe-mode stream from standard input).
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
        /// Look for every file under DIR first (perf's --symfs).
        #[arg(long, value_name = "DIR")]
        symfs: Option<PathBuf>,
    },
    /// One zstd tar with the recording and what analyzing it elsewhere needs of every file its
    /// samples touched (laid out as perf's build-id cache), and the kernel's symbols.
    Archive {
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
        /// The archive [default: INPUT.tar.zst].
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Look for every file under DIR first (perf's --symfs).
        #[arg(long, value_name = "DIR")]
        symfs: Option<PathBuf>,
    },
    /// Where the time went: a top table, or folded stacks with --folded.
    Report {
        #[command(flatten)]
        select: Select,
        /// One line per unique stack, "comm;root;...;leaf COUNT" (flamegraph.pl's input).
        #[arg(long)]
        folded: bool,
        /// Suffix kernel frames with _[k] in folded output.
        #[arg(long)]
        kernel_annotate: bool,
        /// Table columns: sym, dso, comm, pid, srcline.
        #[arg(long, value_delimiter = ',', default_value = "comm,dso,sym")]
        sort: Vec<String>,
        /// Accepted as perf accepts it: the report is text.
        #[arg(long)]
        stdio: bool,
        /// Leave out rows under PCT percent (of the column the rows are sorted by).
        #[arg(long, value_name = "PCT", default_value_t = 0.0)]
        percent_limit: f64,
        /// Sort by Total (what passes through each row: callers too), as perf --children.
        #[arg(long, overrides_with = "no_children")]
        children: bool,
        /// Sort by Self (the default), as perf --no-children.
        #[arg(long)]
        no_children: bool,
        /// Draw each row's call graph: callee (the default: the function, then who called
        /// it) or caller (from the root down to the function); perf's forms such as
        /// graph,0.5,caller are taken too.
        #[arg(
            short = 'g',
            long = "call-graph",
            num_args = 0..=1,
            default_missing_value = "callee",
            value_name = "caller|callee",
            value_parser = parse_call_order
        )]
        call_graph: Option<views::report::CallOrder>,
    },
    /// Traced events (tracepoints, probes), one line each in time order: time, command,
    /// pid/tid, CPU, event and its fields (name=value), as perf script and bcc's trace print
    /// them.
    Trace(Box<TraceArgs>),
    /// Power-of-two (or linear) histograms of a field or of the latency of traced events,
    /// as bpftrace's hist() and lhist() print them (bcc's argdist, funclatency).
    Hist(Box<HistArgs>),
    /// How many times traced events fired, per event, command, process (as bcc's funccount
    /// counts) or stack (as stackcount counts).
    Count(Box<CountArgs>),
    /// Every sample with its stack, as perf script prints them.
    Script {
        #[command(flatten)]
        select: Select,
    },
    /// An interactive SVG flame graph.
    Flamegraph {
        #[command(flatten)]
        select: Select,
        #[arg(short, long, default_value = "flamegraph.svg")]
        output: PathBuf,
    },
    /// The profile in a format other tools read: pprof (gzipped profile.proto: go tool pprof,
    /// Pyroscope, Parca), firefox (the Firefox Profiler's processed format: a track per
    /// thread, off-CPU time, block I/O, TCP connections, retransmits and drops as markers),
    /// speedscope (its JSON file format).
    Export {
        #[command(flatten)]
        select: Select,
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// The file (`-`: standard output) [default: profile.pb.gz, profile.json,
        /// profile.speedscope.json].
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Differential flame graph of two recordings (inferno's differential colors: red grew,
    /// blue shrank; BEFORE normalized to AFTER's total unless --no-normalize), and a table of
    /// the functions whose share changed most.
    Diff(Box<DiffArgs>),
    /// A live view of a recording being written (by `record -o FILE`), read again every
    /// --interval: the hottest functions by self and total share, and the hottest stacks,
    /// as perf top shows them; keys switch views and processes. A finished recording is
    /// shown as it is. When standard output is no terminal, a table per refresh (or one with
    /// --once); with --serve, a page with a live flame graph instead.
    Top(Box<TopArgs>),
    /// A heatmap SVG: for latencies (--event io, offcpu, runq, fault) time across and log2 latency
    /// up; for samples (--event cpu) FlameScope's sub-second offsets, one column per second.
    /// Each cell names its --time range.
    Heatmap {
        #[command(flatten)]
        select: Select,
        #[arg(short, long, default_value = "heatmap.svg")]
        output: PathBuf,
        /// Rows per second of a sub-second offset heatmap.
        #[arg(long, default_value_t = 50)]
        rows: usize,
    },
    /// Which source lines and instructions of a function its samples fell on (without
    /// SYMBOL: the hottest functions to choose from).
    Annotate(Box<AnnotateArgs>),
    /// Block I/O: latency histogram, per device and process, slowest requests.
    Io {
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
        /// How many of the slowest requests to list.
        #[arg(long, default_value_t = 10)]
        slowest: usize,
    },
    /// TCP connections (as tcplife), retransmits, resets and drops per connection and
    /// reason, time blocked in socket calls by peer, top talkers per process (record with
    /// -e net).
    Net {
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
    },
    /// Page-cache use (cachestat): accesses, hits, misses and dirtied pages with the hit
    /// ratio, per process and per second.
    Cache {
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
    },
    /// Sampled requests (record --follow write:1/N, send:1/N) followed through the layers:
    /// one line per request with each layer's time from the call, then each layer's
    /// distribution.
    Requests {
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
        /// One row per request and layer: id,kind,pid,comm,bytes,layer,offset_ns.
        #[arg(long)]
        csv: bool,
    },
    /// Run-queue latency: a log2 histogram per process (runqlat -P) and the threads that
    /// waited most for a CPU.
    Sched {
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
        /// How many threads to list.
        #[arg(long, default_value_t = 10)]
        top: usize,
    },
    /// The critical path of a thread: each nanosecond of its wall time charged once, to its
    /// own on-CPU stacks, to what its wakers did while it was blocked (followed through their
    /// own waits), to the run queue, or to a device. A table by thread and function, or
    /// folded stacks (--folded) that sum to the thread's wall time.
    Critical {
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
        /// The thread (default: the main thread of the first process recorded).
        #[arg(long)]
        tid: Option<i32>,
        /// One line per stack, "comm;root;...;leaf NS" (flamegraph.pl's input).
        #[arg(long)]
        folded: bool,
        /// How many rows the table shows.
        #[arg(long, default_value_t = 20)]
        top: usize,
        /// Only this stretch of the thread's wall time (perf's --time: START,END in seconds,
        /// absolute as perf script prints times or from the recording's start, or percent
        /// ranges); waits that straddle it are cut at its edges.
        #[arg(long, value_parser = crate::read::time_range::TimeRanges::parse)]
        time: Option<crate::read::time_range::TimeRanges>,
        #[command(flatten)]
        stacks: Stacks,
    },
}

/// `-g`'s value: caller or callee, alone or among perf's comma-separated fields.
pub fn parse_call_order(s: &str) -> Result<views::report::CallOrder, String> {
    use views::report::CallOrder;
    let fields: Vec<&str> = s.split(',').collect();
    if fields.contains(&"caller") {
        Ok(CallOrder::Caller)
    } else if fields.contains(&"callee") || fields.iter().all(|f| !f.is_empty()) {
        Ok(CallOrder::Callee)
    } else {
        Err(format!("{s}: expected caller or callee"))
    }
}

#[derive(ClapArgs, Debug)]
pub struct TopArgs {
    #[command(flatten)]
    pub select: Select,
    /// Seconds between two readings of the file.
    #[arg(long, value_name = "SECS", default_value_t = 1.0, value_parser = positive_seconds)]
    pub interval: f64,
    /// Show only the last SECS seconds of the recording (default: all of it).
    #[arg(long, value_name = "SECS", value_parser = positive_seconds, conflicts_with = "time")]
    pub window: Option<f64>,
    /// What the table lists first: self (functions by self share), total (by total share),
    /// stacks (the hottest stacks).
    #[arg(long, value_name = "self|total|stacks", default_value = "self", value_parser = parse_view)]
    pub view: views::top::View,
    /// Print one table and exit.
    #[arg(long)]
    pub once: bool,
    /// Serve a page with a flame graph of the recording that updates every --interval at
    /// http://ADDR/ (e.g. 127.0.0.1:8080; port 0 picks a free one), and nothing else: only
    /// ADDR is bound.
    #[arg(long, value_name = "ADDR", conflicts_with = "once")]
    pub serve: Option<String>,
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s} is not a positive number of seconds")),
    }
}

fn parse_view(s: &str) -> Result<views::top::View, String> {
    views::top::View::parse(s).ok_or_else(|| format!("{s}: not one of self, total, stacks"))
}

#[derive(ClapArgs, Debug)]
pub struct DiffArgs {
    /// Both recordings: -i BEFORE -i AFTER (the other flags apply to both).
    #[arg(
        short,
        long = "input",
        num_args = 1,
        required = true,
        value_name = "FILE"
    )]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub filter: Filter,
    /// Print the differential folded stacks (`stack BEFORE AFTER`) instead.
    #[arg(long)]
    pub folded: bool,
    /// The differential flame graph.
    #[arg(short, long, default_value = "diff.svg")]
    pub output: PathBuf,
    /// Compare the counts as they are, not BEFORE scaled to AFTER's total.
    #[arg(long)]
    pub no_normalize: bool,
    /// How many functions the table lists.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ExportFormat {
    Pprof,
    Firefox,
    Speedscope,
}

impl ExportFormat {
    pub fn default_file(self) -> &'static str {
        match self {
            ExportFormat::Pprof => "profile.pb.gz",
            ExportFormat::Firefox => "profile.json",
            ExportFormat::Speedscope => "profile.speedscope.json",
        }
    }
}

#[derive(ClapArgs, Debug)]
pub struct AnnotateArgs {
    /// The function: its name as reports print it, its mangled name, or a unique part of it.
    pub symbol: Option<String>,
    #[command(flatten)]
    pub select: Select,
    /// Source lines only, each once with its counts.
    #[arg(long, conflicts_with = "asm")]
    pub source: bool,
    /// Instructions only.
    #[arg(long)]
    pub asm: bool,
    /// Plain text: no colors (as when the output is not a terminal).
    #[arg(long)]
    pub stdio: bool,
    /// Color hot lines: auto (on a terminal), always, never.
    #[arg(long, default_value = "auto", value_name = "auto|always|never")]
    pub color: String,
    /// Intel syntax instead of AT&T (objdump's and perf's default).
    #[arg(long)]
    pub intel: bool,
    /// Where to look for source files whose recorded paths are not here (repeatable): the
    /// recorded path is tried under DIR, then with its leading directories dropped.
    #[arg(long, value_name = "DIR")]
    pub source_dir: Vec<PathBuf>,
    /// perf's --prefix: put before source paths, after --prefix-strip components are dropped.
    #[arg(long, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
    /// perf's --prefix-strip: how many leading components of source paths to drop.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub prefix_strip: usize,
    /// How many functions the list without SYMBOL shows.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
}

#[derive(ClapArgs, Debug)]
pub struct TraceArgs {
    #[command(flatten)]
    pub traced: Traced,
    /// The fields to show, comma-separated (any of the event's, common_pid and the like, and
    /// latency); by default the event's own fields but those named __*, and its latency.
    #[arg(
        short = 'F',
        long = "fields",
        value_delimiter = ',',
        value_name = "FIELD,..."
    )]
    pub fields: Vec<String>,
    /// bcc trace's format instead of the fields: a C format in double quotes, then its
    /// arguments (fields, comm, pid, tid, cpu, time, event, latency), e.g.
    /// '"%s wrote %d bytes", comm, count'. Conversions: %d %i %u %x %X %o %c %s %p, %ld %lu %lx
    /// and %lld %llu %llx, %%, with - or 0, a width and a precision (* takes either from the
    /// argument before: '"%.*s", namelen, name'); the kernel's %pI4 %pI6c %pM %pISpc %pU of
    /// an array field's bytes, %pS %ps of a kernel address (by the recording's symbols).
    #[arg(long, value_name = "'\"FORMAT\", ARG, ...'", conflicts_with = "fields")]
    pub format: Option<String>,
    /// Each event's stack under its line, as perf script prints it.
    #[arg(short = 'g')]
    pub stacks: bool,
}

#[derive(ClapArgs, Debug)]
pub struct HistArgs {
    #[command(flatten)]
    pub traced: Traced,
    /// A numeric field of the events (count, ret, ...), or latency (ns, of latency events).
    /// Without --event, every traced event that has it.
    #[arg(value_name = "FIELD|latency")]
    pub quantity: String,
    /// Linear buckets of STEP from 0 (lhist), not powers of two.
    #[arg(long, value_name = "STEP", value_parser = clap::value_parser!(u64).range(1..))]
    pub linear: Option<u64>,
    /// One histogram per command, process or stack.
    #[arg(long, value_enum, value_name = "comm|pid|stack")]
    pub by: Option<HistBy>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HistBy {
    Comm,
    Pid,
    Stack,
}

#[derive(ClapArgs, Debug)]
pub struct CountArgs {
    #[command(flatten)]
    pub traced: Traced,
    /// What to count per.
    #[arg(
        long,
        value_enum,
        default_value = "event",
        value_name = "event|comm|pid|stack"
    )]
    pub by: CountBy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CountBy {
    Event,
    Comm,
    Pid,
    Stack,
}
