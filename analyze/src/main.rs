//! `analyze`: reports from perf.data files, ours and perf's own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use analyze::output;
use analyze::pipeline::{self, EventKind, Profile};
use clap::{Args as ClapArgs, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "analyze",
    version,
    about = "Analyze perf.data recordings (bpfperf's and perf's own)"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Event {
    /// On-CPU samples (count of samples).
    Cpu,
    /// Off-CPU time (nanoseconds).
    Offcpu,
    /// Block I/O latency charged to the issuing stack (nanoseconds).
    Io,
    /// On-CPU and off-CPU time together (nanoseconds).
    Wall,
}

impl Event {
    fn kind(self) -> EventKind {
        match self {
            Event::Cpu => EventKind::Cpu,
            Event::Offcpu => EventKind::OffCpu,
            Event::Io => EventKind::Io,
            Event::Wall => EventKind::Wall,
        }
    }
    fn unit(self) -> &'static str {
        match self {
            Event::Cpu => "samples",
            _ => "ns",
        }
    }
}

/// What to include, shared by the stack-based subcommands.
#[derive(ClapArgs, Debug)]
struct Select {
    /// The recording.
    #[arg(short, long, default_value = "perf.data")]
    input: PathBuf,
    /// Which samples, weighted how.
    #[arg(long, value_enum, default_value_t = Event::Cpu)]
    event: Event,
    #[arg(long)]
    pid: Option<i32>,
    #[arg(long)]
    tid: Option<i32>,
    #[arg(long)]
    comm: Option<String>,
    /// User frames only.
    #[arg(short = 'U', conflicts_with = "kernel_only")]
    user_only: bool,
    /// Kernel frames only.
    #[arg(short = 'K')]
    kernel_only: bool,
    /// Leave out inlined functions.
    #[arg(long)]
    no_inline: bool,
}

impl Select {
    fn options(&self) -> pipeline::Options {
        pipeline::Options {
            event: self.event.kind(),
            inline: !self.no_inline,
            user_only: self.user_only,
            kernel_only: self.kernel_only,
            pid: self.pid,
            tid: self.tid,
            comm: self.comm.clone(),
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// What the file holds: events, counts, lost events, time span, features.
    Info {
        /// The recording (`-` reads a pipe-mode stream from standard input).
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
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
    },
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
    /// Block I/O: latency histogram, per device and process, slowest requests.
    Io {
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
        /// How many of the slowest requests to list.
        #[arg(long, default_value_t = 10)]
        slowest: usize,
    },
}

fn profile(select: &Select) -> anyhow::Result<Profile> {
    let timing = std::env::var_os("BPFPERF_TIMING").is_some();
    let t0 = std::time::Instant::now();
    let rec = analyze::read::read(&select.input)?;
    if timing {
        eprintln!("analyze: read {:.3} s", t0.elapsed().as_secs_f64());
    }
    for n in &rec.notes {
        eprintln!("analyze: warning: {n}");
    }
    let t1 = std::time::Instant::now();
    let p = pipeline::build(&rec, &select.options());
    if timing {
        eprintln!(
            "analyze: unwind + symbolize + stacks {:.3} s",
            t1.elapsed().as_secs_f64()
        );
    }
    for w in &p.stats.warnings {
        eprintln!("analyze: warning: {w}");
    }
    let s = &p.stats;
    let pct = if s.frames == 0 {
        0.0
    } else {
        100.0 * s.unknown_frames as f64 / s.frames as f64
    };
    let mut line = format!(
        "analyze: {} samples, {} frames, {} [unknown] ({pct:.1}%)",
        s.samples, s.frames, s.unknown_frames
    );
    if s.dwarf_samples > 0 {
        let ends: Vec<String> = s
            .stack_ends
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        line.push_str(&format!(
            "; DWARF-unwound {} (stack ends: {})",
            s.dwarf_samples,
            ends.join(", ")
        ));
    }
    if rec.lost > 0 {
        line.push_str(&format!("; {} events lost while recording", rec.lost));
    }
    eprintln!("{line}");
    Ok(p)
}

fn run(args: Args) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match args.command {
        Command::Info { input } => {
            let summary = analyze::info::summarize(&input)?;
            for n in &summary.notes {
                eprintln!("analyze: warning: {n}");
            }
            write!(stdout, "{}", summary.to_text())?;
        }
        Command::Report {
            select,
            folded,
            kernel_annotate,
            sort,
        } => {
            let p = profile(&select)?;
            if folded {
                for line in output::folded::folded(&p, kernel_annotate) {
                    writeln!(stdout, "{line}")?;
                }
            } else {
                let keys = sort
                    .iter()
                    .map(|k| {
                        output::report::SortKey::parse(k).ok_or_else(|| {
                            anyhow::anyhow!("--sort {k}: not one of sym, dso, comm, pid, srcline")
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                write!(
                    stdout,
                    "{}",
                    output::report::report(&p, &keys, select.event.unit())
                )?;
            }
        }
        Command::Script { select } => {
            let p = profile(&select)?;
            write!(
                stdout,
                "{}",
                output::script::script(&p, &format!("{:?}", select.event).to_lowercase())
            )?;
        }
        Command::Flamegraph {
            select,
            output: out,
        } => {
            let p = profile(&select)?;
            let lines = output::folded::folded(&p, true);
            let title = format!(
                "{} — {:?} ({})",
                select.input.display(),
                select.event,
                select.event.unit()
            )
            .replace("Cpu", "on-CPU")
            .replace("Offcpu", "off-CPU")
            .replace("Io", "block I/O")
            .replace("Wall", "wall clock");
            let file = std::fs::File::create(&out)
                .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
            output::flamegraph::write_svg(
                &lines,
                &title,
                select.event.unit(),
                std::io::BufWriter::new(file),
            )?;
            eprintln!("analyze: wrote {}", Path::new(&out).display());
        }
        Command::Io { input, slowest } => {
            let reqs = analyze::io::read_requests(&input)?;
            write!(stdout, "{}", analyze::io::report(&reqs, slowest))?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::BrokenPipe {
                    return ExitCode::SUCCESS;
                }
            }
            eprintln!("analyze: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
