//! `analyze`: reports from perf.data files, ours and perf's own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use analyze::aggregate::{self, Profile};
use analyze::loader::Loader;
use analyze::output;
use analyze::pipeline::{self, EventSel, Symbolized};
use analyze::read::Recording;
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

/// The recording and what of it to include, shared by the stack-based subcommands.
#[derive(ClapArgs, Debug)]
struct Select {
    /// The recording.
    #[arg(short, long, default_value = "perf.data")]
    input: PathBuf,
    #[command(flatten)]
    filter: Filter,
}

/// What to include (`analyze diff` applies it to both recordings).
#[derive(ClapArgs, Debug, Clone)]
struct Filter {
    /// Which samples, weighted how: cpu (the sampling event, samples), offcpu (off-CPU
    /// time, ns), wakeup (off-CPU time, each blocked stack joined with its waker's: blocked;--;
    /// waker, as offwaketime folds them), runq (time runnable but waiting for a CPU, ns, at
    /// the stack where the thread was preempted or blocked), fault (page faults that had to
    /// read, ns, at the faulting stack), io (block I/O latency, ns), wall (on- and off-CPU
    /// time, ns), or the name of any event in the file (e.g. task-clock, sched:sched_switch).
    #[arg(
        long,
        default_value = "cpu",
        value_name = "cpu|offcpu|wakeup|runq|fault|io|wall|NAME"
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
    /// Only samples in this time range (perf's --time): START,END in seconds, absolute as
    /// perf script prints times or from the recording's start, either side may be empty; or
    /// percent ranges of the recording: 10%-20%, 10%/2 (the second tenth), comma-separated.
    /// Includes START, leaves out END.
    #[arg(long, value_name = "START,END|A%-B%|A%/N", value_parser = pipeline::time_range::TimeRanges::parse)]
    time: Option<pipeline::time_range::TimeRanges>,
    /// Look for every file under DIR first (perf's --symfs: DIR/usr/bin/tar for /usr/bin/tar).
    #[arg(long, value_name = "DIR")]
    symfs: Option<PathBuf>,
}

impl Select {
    fn options(&self, addresses: bool, lines: bool) -> pipeline::Options {
        self.filter.options(addresses, lines)
    }
}

impl Filter {
    fn options(&self, addresses: bool, lines: bool) -> pipeline::Options {
        pipeline::Options {
            time: self.time.clone(),
            per_sample: false,
            timeline: false,
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
        call_graph: Option<output::report::CallOrder>,
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
    /// The profile in a format other tools read: pprof (gzipped profile.proto: go tool pprof,
    /// Pyroscope, Parca), firefox (the Firefox Profiler's processed format: a track per
    /// thread, off-CPU time and block I/O as markers), speedscope (its JSON file format).
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
    /// Page-cache use (cachestat): accesses, hits, misses and dirtied pages with the hit
    /// ratio, per process and per second.
    Cache {
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
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
}

/// `-g`'s value: caller or callee, alone or among perf's comma-separated fields.
fn parse_call_order(s: &str) -> Result<output::report::CallOrder, String> {
    use output::report::CallOrder;
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
struct DiffArgs {
    /// Both recordings: -i BEFORE -i AFTER (the other flags apply to both).
    #[arg(
        short,
        long = "input",
        num_args = 1,
        required = true,
        value_name = "FILE"
    )]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    filter: Filter,
    /// Print the differential folded stacks (`stack BEFORE AFTER`) instead.
    #[arg(long)]
    folded: bool,
    /// The differential flame graph.
    #[arg(short, long, default_value = "diff.svg")]
    output: PathBuf,
    /// Compare the counts as they are, not BEFORE scaled to AFTER's total.
    #[arg(long)]
    no_normalize: bool,
    /// How many functions the table lists.
    #[arg(long, default_value_t = 20)]
    top: usize,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ExportFormat {
    Pprof,
    Firefox,
    Speedscope,
}

impl ExportFormat {
    fn default_file(self) -> &'static str {
        match self {
            ExportFormat::Pprof => "profile.pb.gz",
            ExportFormat::Firefox => "profile.json",
            ExportFormat::Speedscope => "profile.speedscope.json",
        }
    }
}

#[derive(ClapArgs, Debug)]
struct AnnotateArgs {
    /// The function: its name as reports print it, its mangled name, or a unique part of it.
    symbol: Option<String>,
    #[command(flatten)]
    select: Select,
    /// Source lines only, each once with its counts.
    #[arg(long, conflicts_with = "asm")]
    source: bool,
    /// Instructions only.
    #[arg(long)]
    asm: bool,
    /// Plain text: no colors (as when the output is not a terminal).
    #[arg(long)]
    stdio: bool,
    /// Color hot lines: auto (on a terminal), always, never.
    #[arg(long, default_value = "auto", value_name = "auto|always|never")]
    color: String,
    /// Intel syntax instead of AT&T (objdump's and perf's default).
    #[arg(long)]
    intel: bool,
    /// Where to look for source files whose recorded paths are not here (repeatable): the
    /// recorded path is tried under DIR, then with its leading directories dropped.
    #[arg(long, value_name = "DIR")]
    source_dir: Vec<PathBuf>,
    /// perf's --prefix: put before source paths, after --prefix-strip components are dropped.
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
    /// perf's --prefix-strip: how many leading components of source paths to drop.
    #[arg(long, default_value_t = 0, value_name = "N")]
    prefix_strip: usize,
    /// How many functions the list without SYMBOL shows.
    #[arg(long, default_value_t = 20)]
    limit: usize,
}

/// A loader for the files of a recording opened from `input`: its archive's first, if it
/// came from one, then `symfs` and the sources the environment names.
fn loader_for(input: &analyze::input::Input, symfs: Option<PathBuf>) -> Loader {
    Loader::with_sources(analyze::loader::Sources {
        archive: input.archive.clone(),
        symfs,
        ..analyze::loader::Sources::from_env()
    })
}

/// Reads the recording `select` names (the files it lists loading meanwhile) and runs
/// `stages` on it; the recording's notes on stderr.
fn with_recording<T>(
    select: &Select,
    options: &pipeline::Options,
    stages: impl FnOnce(&Recording, &Loader) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    with_recording_files(select, options, true, stages)
}

/// [`with_recording`], loading the files the recording lists only if `load_files` (views
/// without stacks need none).
fn with_recording_files<T>(
    select: &Select,
    options: &pipeline::Options,
    load_files: bool,
    stages: impl FnOnce(&Recording, &Loader) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    analyze::timing::mark("start");
    let input = analyze::input::open(&select.input)?;
    let loader = loader_for(&input, select.filter.symfs.clone());
    // The files the recording lists start loading while it is read (symbol tables, and
    // DWARF where inline frames or lines of user frames are wanted: libc's takes the longest
    // of anything): jobs of the thread pool, which fill the cores that reading leaves idle.
    let wants_dwarf = options.inline || options.lines;
    let (rec, out) = rayon::in_place_scope(|jobs| -> anyhow::Result<_> {
        let loader = &loader;
        let mut files_known = |ids: &analyze::read::BuildIds| {
            if options.kernel_only || !load_files {
                return;
            }
            // Files no local source has, from debuginfod (when the user named servers),
            // before anything asks for them.
            loader.fetch_missing(ids);
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
            if !select.filter.user_only && load_files {
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
            let merge = !options.reads_each_sample();
            analyze::read::read_with(input.reader, merge, &mut files_known)
        })?;
        for n in &rec.notes {
            eprintln!("analyze: warning: {n}");
        }
        let out = stages(&rec, loader)?;
        Ok((rec, out))
    })?;
    // The recording and the loaded files are not needed any more: the process exit frees
    // them at once, instead of a walk over every sample and mapping (a tenth of a run).
    std::mem::forget(rec);
    std::mem::forget(loader);
    Ok(out)
}

/// Reads, unwinds and symbolizes what `select` asks for; warnings and the summary on stderr.
fn symbolized(select: &Select, addresses: bool, lines: bool) -> anyhow::Result<Symbolized> {
    symbolized_with(select, &select.options(addresses, lines))
}

/// [`symbolized`] with every sample's time, each distinct stack (with its addresses) once.
fn symbolized_timeline(select: &Select) -> anyhow::Result<Symbolized> {
    let options = pipeline::Options {
        timeline: true,
        ..select.options(true, false)
    };
    symbolized_with(select, &options)
}

fn symbolized_with(select: &Select, options: &pipeline::Options) -> anyhow::Result<Symbolized> {
    let options = options.clone();
    with_recording(select, &options, |rec, loader| {
        let s = pipeline::symbolize(rec, &options, loader)?;
        for w in &s.stats.warnings {
            eprintln!("analyze: warning: {w}");
        }
        summary(&s, rec.lost);
        Ok(s)
    })
}

/// The summary line: samples, frames, how many unknown, how DWARF stacks ended, lost events.
fn summary(s: &Symbolized, lost: u64) {
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
    if lost > 0 {
        line.push_str(&format!("; {lost} events lost while recording"));
    }
    eprintln!("{line}");
}

fn profile(select: &Select, lines: bool) -> anyhow::Result<Profile> {
    Ok(aggregate::aggregate(symbolized(select, false, lines)?))
}

fn run(args: Args) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match args.command {
        Command::Info { input: path, symfs } => {
            let input = analyze::input::open(&path)?;
            let loader = loader_for(&input, symfs);
            let mut summary = analyze::info::summarize_reader(&path, input.reader)?;
            if path.as_os_str() != "-" {
                summary.find_sources(&loader);
            }
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
            stdio: _,
            percent_limit,
            children,
            no_children: _,
            call_graph,
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
                let rows = output::report::Rows {
                    percent_limit,
                    children,
                    call_graph,
                };
                write!(out, "{}", output::report::report(&p, &keys, rows))?;
            }
            out.flush()?;
            analyze::timing::mark("output");
            std::mem::forget(p);
        }
        Command::Script { select } => {
            let s = symbolized_timeline(&select)?;
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
        Command::Export {
            select,
            format,
            output,
        } => export(&select, format, output)?,
        Command::Diff(args) => diff(&args, &mut stdout)?,
        Command::Heatmap {
            select,
            output: out,
            rows,
        } => heatmap(&select, &out, rows)?,
        Command::Annotate(args) => annotate(&args, &mut stdout)?,
        Command::Archive {
            input,
            output,
            symfs,
        } => {
            let output = output.unwrap_or_else(|| {
                let mut o = input.clone().into_os_string();
                o.push(".tar.zst");
                PathBuf::from(o)
            });
            let opened = analyze::input::open(&input)?;
            let loader = loader_for(&opened, symfs);
            let summary = analyze::archive::write::write(opened, &output, &loader)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for w in loader.problems() {
                eprintln!("analyze: warning: {w}");
            }
            write!(stdout, "{}", summary.to_text(&output))?;
        }
        Command::Io { input, slowest } => {
            let reqs = analyze::io::read_requests(&input)?;
            write!(stdout, "{}", analyze::io::report(&reqs, slowest))?;
        }
        Command::Cache { input } => {
            let intervals = analyze::cache::read_intervals(&input)?;
            write!(stdout, "{}", analyze::cache::report(&intervals))?;
        }
        Command::Sched { input, top } => {
            let rec = analyze::read::read(&input)?;
            let waits = analyze::sched::waits(&rec);
            write!(stdout, "{}", analyze::sched::report(&waits, top))?;
        }
    }
    Ok(())
}

/// `analyze export`: the whole pipeline, then one of the exports (the Firefox Profiler's with
/// every sample apart, for their times, and the off-CPU and I/O spans beside them).
fn export(select: &Select, format: ExportFormat, output: Option<PathBuf>) -> anyhow::Result<()> {
    use output::export::{self, Context};
    let firefox = matches!(format, ExportFormat::Firefox);
    let mut options = select.options(false, true);
    // The Firefox Profiler's tracks and speedscope's Time Order are timelines.
    options.timeline = !matches!(format, ExportFormat::Pprof);
    let output = output.unwrap_or_else(|| PathBuf::from(format.default_file()));
    let requests = if firefox {
        analyze::io::read_requests(&select.input)?
    } else {
        Vec::new()
    };
    let mut bytes = Vec::new();
    with_recording(select, &options, |rec, loader| {
        let s = pipeline::symbolize(rec, &options, loader)?;
        for w in &s.stats.warnings {
            eprintln!("analyze: warning: {w}");
        }
        summary(&s, rec.lost);
        let cx = Context {
            measure: options.event.measure().to_string(),
            event: s.event.clone(),
            build_ids: rec
                .build_ids
                .iter()
                .map(|(path, id)| (path.clone(), analyze::loader::hex(id)))
                .collect(),
            span: rec.time_span().unwrap_or((0, 0)),
            lines: options.lines,
            inline: options.inline,
            name: select.input.display().to_string(),
        };
        match format {
            ExportFormat::Firefox => {
                let spans = export::firefox::spans(rec, &requests, &options);
                export::firefox::write(&s, &spans, &cx, &mut bytes)?;
            }
            ExportFormat::Pprof => export::pprof::write(&aggregate::aggregate(s), &cx, &mut bytes)?,
            ExportFormat::Speedscope => export::speedscope::write(&s, &cx, &mut bytes)?,
        }
        Ok(())
    })?;
    if output.as_os_str() == "-" {
        std::io::stdout().lock().write_all(&bytes)?;
    } else {
        std::fs::write(&output, bytes).map_err(|e| anyhow::anyhow!("{}: {e}", output.display()))?;
        eprintln!("analyze: wrote {}", output.display());
    }
    Ok(())
}

/// `analyze diff`: both recordings through the pipeline, then the differential views.
fn diff(args: &DiffArgs, stdout: &mut impl Write) -> anyhow::Result<()> {
    use output::diff;
    let [before, after] = args.inputs.as_slice() else {
        anyhow::bail!(
            "diff takes two recordings: -i BEFORE -i AFTER ({} given)",
            args.inputs.len()
        );
    };
    let profile_of = |input: &PathBuf| -> anyhow::Result<Profile> {
        let select = Select {
            input: input.clone(),
            filter: args.filter.clone(),
        };
        profile(&select, false)
    };
    let (b, a) = (profile_of(before)?, profile_of(after)?);
    let lines = diff::folded(
        &output::folded::folded(&b, false),
        &output::folded::folded(&a, false),
        !args.no_normalize,
    )?;
    if args.folded {
        let mut out = std::io::BufWriter::new(stdout);
        for l in &lines {
            writeln!(out, "{l}")?;
        }
        out.flush()?;
        return Ok(());
    }
    let title = format!(
        "{} -> {}: {} ({})",
        before.display(),
        after.display(),
        a.event,
        a.unit
    );
    let file = std::fs::File::create(&args.output)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.output.display()))?;
    diff::write_svg(&lines, &title, a.unit, std::io::BufWriter::new(file))
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.output.display()))?;
    write!(stdout, "{}", diff::table(&diff::changes(&b, &a), args.top))?;
    eprintln!("analyze: wrote {}", args.output.display());
    Ok(())
}

/// `analyze heatmap`: the select stage, then the cells.
fn heatmap(select: &Select, out: &Path, rows: usize) -> anyhow::Result<()> {
    use output::heatmap::{write_svg, Heatmap};
    let mut options = select.options(false, false);
    options.per_sample = true;
    let svg = with_recording_files(select, &options, false, |rec, _| {
        let (samples, label) = pipeline::select_samples(rec, &options)?;
        let span = rec.time_span().unwrap_or((0, 0));
        let (map, what) = if options.event.unit() == "ns" {
            (Heatmap::latency(&samples, span), "events")
        } else {
            (Heatmap::offsets(&samples, span, rows), "samples")
        };
        let title = format!("{}: {label}", select.input.display());
        let mut svg = Vec::new();
        write_svg(&map, &title, what, &mut svg)?;
        Ok(svg)
    })?;
    std::fs::write(out, svg).map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    eprintln!("analyze: wrote {}", out.display());
    Ok(())
}

/// `analyze annotate`: the resolve and symbolize stages (function names only), then the one
/// function's instructions and lines.
fn annotate(args: &AnnotateArgs, stdout: &mut impl Write) -> anyhow::Result<()> {
    use analyze::annotate::{self, disasm, source};
    use output::annotate::{Style, View};
    use std::io::IsTerminal;
    // Names need no DWARF; the chosen function's lines are looked up on their own.
    let options = args.select.options(false, false);
    let options = pipeline::Options {
        inline: false,
        ..options
    };
    let color = match args.color.as_str() {
        _ if args.stdio => false,
        "always" => true,
        "never" => false,
        "auto" => std::io::stdout().is_terminal(),
        other => anyhow::bail!("--color {other}: not one of auto, always, never"),
    };
    let view = if args.source {
        View::Source
    } else if args.asm {
        View::Asm
    } else {
        View::Interleaved
    };
    let syntax = if args.intel {
        disasm::Syntax::Intel
    } else {
        disasm::Syntax::Att
    };
    let mut sources = source::Sources::new(source::SourceDirs {
        dirs: args.source_dir.clone(),
        prefix: args.prefix.clone(),
        prefix_strip: args.prefix_strip,
    });
    let mut out = std::io::BufWriter::new(stdout);
    with_recording(&args.select, &options, |rec, loader| {
        let resolved = pipeline::resolve(rec, &options, loader)?;
        let symbols = pipeline::symbolize_addresses(rec, &resolved, &options, loader);
        for w in resolved.stats.warnings.iter().chain(&symbols.warnings) {
            eprintln!("analyze: warning: {w}");
        }
        if rec.lost > 0 {
            eprintln!("analyze: warning: {} events lost while recording", rec.lost);
        }
        let functions = annotate::function_costs(&resolved, &symbols);
        let style = Style {
            view,
            color,
            event: resolved.label.clone(),
            unit: options.event.unit(),
        };
        let Some(query) = &args.symbol else {
            let weight = resolved.samples.iter().map(|s| s.1).sum();
            output::annotate::write_hottest(&functions, weight, &style, args.limit, &mut out)?;
            return Ok(());
        };
        let matches = annotate::find(&functions, query).map_err(|close| {
            anyhow::anyhow!(
                "no function named {query} has {} samples in {}; closest: {}",
                resolved.label,
                args.select.input.display(),
                close.join(", ")
            )
        })?;
        // Several functions of that name (a static function in two files, one name in two
        // libraries): each, as perf annotates each. Several different names: say which.
        let names: std::collections::BTreeSet<&str> =
            matches.iter().map(|f| f.name.as_str()).collect();
        if names.len() > 1 {
            let list: Vec<String> = matches
                .iter()
                .take(20)
                .map(|f| format!("{} [{}]", f.name, f.dso))
                .collect();
            anyhow::bail!(
                "{query} matches {} functions; name one of them:\n  {}",
                names.len(),
                list.join("\n  ")
            );
        }
        for (n, function) in matches.iter().enumerate() {
            let a = annotate::annotate(&resolved, &symbols, function, annotate::Style { syntax })
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            if n > 0 {
                writeln!(out)?;
            }
            output::annotate::write_annotation(&a, &mut sources, &style, &mut out)?;
        }
        Ok(())
    })?;
    out.flush()?;
    output::annotate::report_missing_sources(&sources);
    Ok(())
}

/// The stages allocate many small vectors from several threads at once: mimalloc's per-thread
/// heaps cut the time spent in glibc's malloc and in page faults (see scripts/bench-report).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// No transparent huge pages for analyze's heap. mimalloc asks for them, and a 2 MiB page
/// costs 2 MiB of zeroing (and, in a VM that reports free pages to its host, 2 MiB of host
/// faults) however little of it is used: on a 1.1 GB DWARF recording, with them 0.58-1.09 s
/// and 0.12-0.73 s of system time, without 0.64-0.73 s and 0.19-0.27 s, peak 300 -> 255 MiB.
fn no_huge_pages() {
    // SAFETY: prctl with integer arguments only; failure leaves the default.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

fn main() -> ExitCode {
    no_huge_pages();
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
