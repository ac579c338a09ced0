//! `analyze`: reports from perf.data files, ours and perf's own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use analyze::aggregate::{self, Profile};
use analyze::loader::Loader;
use analyze::output;
use analyze::pipeline::{self, EventSel, Symbolized};
use clap::{Args as ClapArgs, Parser, Subcommand};

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

/// What to include, shared by the stack-based subcommands.
#[derive(ClapArgs, Debug)]
struct Select {
    /// The recording.
    #[arg(short, long, default_value = "perf.data")]
    input: PathBuf,
    /// Which samples, weighted how: cpu (the sampling event, samples), offcpu (off-CPU
    /// time, ns), wakeup (off-CPU time, each blocked stack joined with its waker's: blocked;--;
    /// waker, as offwaketime folds them), io (block I/O latency, ns), wall (on- and off-CPU
    /// time, ns), or the name of any event in the file (e.g. task-clock, sched:sched_switch).
    #[arg(
        long,
        default_value = "cpu",
        value_name = "cpu|offcpu|wakeup|io|wall|NAME"
    )]
    event: String,
    /// Only samples of this process.
    #[arg(long)]
    pid: Option<i32>,
    /// Only samples of this thread.
    #[arg(long)]
    tid: Option<i32>,
    /// Only samples of threads of this name.
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
    fn options(&self, addresses: bool, lines: bool) -> pipeline::Options {
        pipeline::Options {
            event: EventSel::parse(&self.event),
            inline: !self.no_inline,
            user_only: self.user_only,
            kernel_only: self.kernel_only,
            pid: self.pid,
            tid: self.tid,
            comm: self.comm.clone(),
            lines,
            addresses,
            progress: true,
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

/// Reads, unwinds and symbolizes what `select` asks for; warnings and the summary on stderr.
fn symbolized(select: &Select, addresses: bool, lines: bool) -> anyhow::Result<Symbolized> {
    analyze::timing::mark("start");
    let loader = Loader::new();
    let options = select.options(addresses, lines);
    // The files the recording lists start loading while it is read (symbol tables, and
    // DWARF where inline frames or lines of user frames are wanted: libc's takes the longest
    // of anything): jobs of the thread pool, which fill the cores that reading leaves idle.
    let wants_dwarf = options.inline || options.lines;
    let (rec, s) = rayon::in_place_scope(|jobs| -> anyhow::Result<_> {
        let loader = &loader;
        let mut files_known = |ids: &analyze::read::BuildIds| {
            if options.kernel_only {
                return;
            }
            let mut files: Vec<(String, Vec<u8>)> =
                ids.iter().map(|(p, id)| (p.clone(), id.clone())).collect();
            files.sort();
            for (path, id) in files {
                jobs.spawn(move |_| loader.prepare(&path, &id, wants_dwarf));
            }
        };
        // Kernel symbols take milliseconds to read even from the cache, and reading the file
        // keeps one CPU busy: read them meanwhile (a recording without kernel frames loses
        // nothing but that).
        let rec = std::thread::scope(|scope| {
            if !select.user_only {
                scope.spawn(|| {
                    let t = std::time::Instant::now();
                    loader.kallsyms();
                    if analyze::timing::enabled() {
                        eprintln!(
                            "analyze: kernel symbols {:.1} ms (beside reading)",
                            t.elapsed().as_secs_f64() * 1e3
                        );
                    }
                });
            }
            // Per-sample output (script's times, wakeups matched by time) needs every sample.
            let merge = !(addresses || select.event == "wakeup");
            analyze::read::read_with(&select.input, merge, &mut files_known)
        })?;
        for n in &rec.notes {
            eprintln!("analyze: warning: {n}");
        }
        let s = pipeline::symbolize(&rec, &options, loader)?;
        Ok((rec, s))
    })?;
    for w in &s.stats.warnings {
        eprintln!("analyze: warning: {w}");
    }
    let st = &s.stats;
    let pct = if st.frames == 0 {
        0.0
    } else {
        100.0 * st.unknown_frames as f64 / st.frames as f64
    };
    let mut line = format!(
        "analyze: {} {} samples, {} frames, {} [unknown] ({pct:.1}%)",
        st.samples, s.event, st.frames, st.unknown_frames
    );
    if st.dwarf_samples > 0 {
        let ends: Vec<String> = st
            .stack_ends
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        line.push_str(&format!(
            "; DWARF-unwound {} (stack ends: {})",
            st.dwarf_samples,
            ends.join(", ")
        ));
    }
    if rec.lost > 0 {
        line.push_str(&format!("; {} events lost while recording", rec.lost));
    }
    eprintln!("{line}");
    // The recording and the loaded files are not needed any more: the process exit frees
    // them at once, instead of a walk over every sample and mapping (a tenth of a run).
    std::mem::forget(rec);
    std::mem::forget(loader);
    Ok(s)
}

fn profile(select: &Select, lines: bool) -> anyhow::Result<Profile> {
    Ok(aggregate::aggregate(symbolized(select, false, lines)?))
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
            let keys = sort
                .iter()
                .map(|k| {
                    output::report::SortKey::parse(k).ok_or_else(|| {
                        anyhow::anyhow!("--sort {k}: not one of sym, dso, comm, pid, srcline")
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let lines = !folded && keys.contains(&output::report::SortKey::Srcline);
            let p = profile(&select, lines)?;
            analyze::timing::mark("aggregate");
            let mut out = std::io::BufWriter::new(stdout);
            if folded {
                for line in output::folded::folded(&p, kernel_annotate) {
                    writeln!(out, "{line}")?;
                }
            } else {
                write!(out, "{}", output::report::report(&p, &keys))?;
            }
            out.flush()?;
            analyze::timing::mark("output");
            std::mem::forget(p);
        }
        Command::Script { select } => {
            let s = symbolized(&select, true, false)?;
            let mut out = std::io::BufWriter::new(stdout);
            output::script::write_script(&s, &mut out)?;
            out.flush()?;
        }
        Command::Flamegraph {
            select,
            output: out,
        } => {
            let p = profile(&select, false)?;
            let title = format!("{}: {} ({})", select.input.display(), p.event, p.unit);
            let file = std::fs::File::create(&out)
                .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
            output::flamegraph::write_svg(&p, &title, std::io::BufWriter::new(file))
                .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
            eprintln!("analyze: wrote {}", Path::new(&out).display());
        }
        Command::Io { input, slowest } => {
            let reqs = analyze::io::read_requests(&input)?;
            write!(stdout, "{}", analyze::io::report(&reqs, slowest))?;
        }
    }
    Ok(())
}

/// The stages allocate many small vectors from several threads at once: mimalloc's per-thread
/// heaps cut the time spent in glibc's malloc and in page faults (see scripts/bench-report).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
