//! `analyze`: reports from perf.data files, ours and perf's own. Each subcommand's glue is a
//! module here; what they run is the library's pipeline and views, its command line the
//! library's `cli`.

mod annotate;
mod count;
mod diff;
mod export;
mod heatmap;
mod hist;
mod recording;
mod script;
mod top;
mod trace;

use std::io::Write;
use std::path::{Path, PathBuf};

use analyze::views;
use clap::Parser;

use analyze::cli::{Args, Command};
use recording::{loader_for, profile};

fn run(args: Args) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match args.command {
        Command::Info { input: path, symfs } => {
            let input = analyze::files::input::open(&path)?;
            let loader = loader_for(&input, symfs);
            let mut summary = analyze::views::info::summarize_reader(&path, input.reader)?;
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
                    views::report::SortKey::parse(k).ok_or_else(|| {
                        anyhow::anyhow!("--sort {k}: not one of sym, dso, comm, pid, srcline")
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let lines = !folded && keys.contains(&views::report::SortKey::Srcline);
            let p = profile(&select, lines)?;
            analyze::timing::mark("aggregate");
            let mut out = std::io::BufWriter::new(stdout);
            if folded {
                views::folded::write(&p, kernel_annotate, &mut out)?;
            } else {
                let rows = views::report::Rows {
                    percent_limit,
                    children,
                    call_graph,
                };
                write!(out, "{}", views::report::report(&p, &keys, rows))?;
            }
            out.flush()?;
            analyze::timing::mark("output");
            std::mem::forget(p);
        }
        Command::Trace(args) => trace::trace(&args, stdout)?,
        Command::Hist(args) => hist::hist(&args, stdout)?,
        Command::Count(args) => count::count(&args, stdout)?,
        Command::Script { mut select } => {
            // Every event's samples, as perf script prints them, unless --event says which.
            select.filter.event.get_or_insert_with(|| "all".into());
            script::script(&select, stdout)?;
        }
        Command::Flamegraph {
            select,
            output: out,
        } => {
            let p = profile(&select, false)?;
            // (Checked before the file is made: no empty SVG left behind.)
            if p.stacks.is_empty() {
                anyhow::bail!("{}: no {} samples to draw", select.input.display(), p.event);
            }
            let title = format!("{}: {} ({})", select.input.display(), p.event, p.unit);
            let file = std::fs::File::create(&out)
                .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
            views::flamegraph::write_svg(&p, &title, std::io::BufWriter::new(file))
                .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
            eprintln!("analyze: wrote {}", Path::new(&out).display());
        }
        Command::Export {
            select,
            format,
            output,
        } => export::export(&select, format, output)?,
        Command::Diff(args) => diff::diff(&args, &mut stdout)?,
        Command::Top(args) => top::top(&args, stdout)?,
        Command::Heatmap {
            select,
            output: out,
            rows,
        } => heatmap::heatmap(&select, &out, rows)?,
        Command::Annotate(args) => annotate::annotate(&args, &mut stdout)?,
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
            let opened = analyze::files::input::open(&input)?;
            let loader = loader_for(&opened, symfs);
            let summary = analyze::views::archive::write(opened, &output, &loader)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for w in loader.problems() {
                eprintln!("analyze: warning: {w}");
            }
            write!(stdout, "{}", summary.to_text(&output))?;
        }
        Command::Io { input, slowest } => {
            let io = analyze::views::io::read(&input)?;
            write!(stdout, "{}", analyze::views::io::report(&io, slowest))?;
        }
        Command::Net { input } => {
            let (samples, reasons) = analyze::views::net::read_samples(&input)?;
            write!(
                stdout,
                "{}",
                analyze::views::net::report(&samples, &reasons)
            )?;
        }
        Command::Cache { input } => {
            let intervals = analyze::views::cache::read_intervals(&input)?;
            write!(stdout, "{}", analyze::views::cache::report(&intervals))?;
        }
        Command::Requests { input, csv } => {
            let requests = analyze::views::requests::read_requests(&input)?;
            let text = if csv {
                analyze::views::requests::csv(&requests)
            } else {
                analyze::views::requests::report(&requests)
            };
            write!(stdout, "{text}")?;
        }
        Command::Critical {
            input,
            tid,
            folded,
            top,
            time,
            stacks,
        } => {
            let select = analyze::cli::Select {
                input,
                filter: analyze::cli::Filter {
                    event: None,
                    weight: None,
                    depth: None,
                    threads: analyze::cli::Threads {
                        pid: None,
                        tid,
                        comm: None,
                        time,
                    },
                    stacks,
                },
            };
            let options = analyze::pipeline::Options {
                event: analyze::read::EventSel::Critical,
                ..select.options(false, false)
            };
            let mut s = recording::symbolized_with(&select, &options)?;
            let Some((tid, wall)) = s.critical.take() else {
                anyhow::bail!(
                    "{}: {}",
                    select.input.display(),
                    match tid {
                        Some(t) => format!("no thread {t} with off-CPU or on-CPU samples"),
                        None => "no off-CPU samples (record them: record's default, or -e offcpu)"
                            .into(),
                    }
                );
            };
            let p = analyze::aggregate::aggregate(s);
            let mut out = std::io::BufWriter::new(stdout);
            if folded {
                views::folded::write(&p, false, &mut out)?;
            } else {
                write!(out, "{}", views::critical::table(&p, tid, wall, top))?;
            }
            out.flush()?;
        }
        Command::Sched { input, top } => {
            let rec = analyze::read::read(&input)?;
            let waits = analyze::views::sched::waits(&rec);
            write!(stdout, "{}", analyze::views::sched::report(&waits, top))?;
        }
    }
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
/// Run as the program is loaded, before the standard library's start-up allocates: from
/// `main` it came after mimalloc's first arena, whose first write zeroed a huge page (a tenth
/// of the system time of a 40 ms report).
extern "C" fn no_huge_pages() {
    // SAFETY: prctl with integer arguments only; failure leaves the default.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

#[used]
#[link_section = ".init_array"]
static NO_HUGE_PAGES_AT_LOAD: extern "C" fn() = no_huge_pages;

fn main() {
    let args = Args::parse();
    // The main thread is one of the pool's threads (RAYON_NUM_THREADS, or one per CPU): the
    // stages' parallel loops run on it, the others helping, rather than from a thread that
    // hands each over and sleeps until it is done (a tenth of a small report's time with one
    // thread). Not for `top`, whose main thread draws while another reads: with one thread
    // that reader's loops would wait for the drawing thread forever.
    if !matches!(args.command, Command::Top(_)) {
        let _ = rayon::ThreadPoolBuilder::new()
            .use_current_thread()
            .build_global();
    }
    let result = run(args);
    analyze::timing::files_resident();
    let broken_pipe = |e: &anyhow::Error| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    };
    let code = match result {
        Ok(()) => 0,
        Err(e) if broken_pipe(&e) => 0,
        Err(e) => {
            eprintln!("analyze: error: {e:#}");
            1
        }
    };
    exit_now(code);
}

/// Ends the process without the C library's exit handlers: mimalloc's gives every page
/// the run freed back to the kernel, one madvise at a time (4% of the CPU time of a 40 ms
/// report), and the kernel takes them all back anyway. What the run wrote is flushed
/// first; files it wrote are closed (their writers were dropped with `run`).
fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit ends the process; nothing after it runs.
    unsafe { libc::_exit(code) }
}
