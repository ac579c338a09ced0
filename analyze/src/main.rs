//! `analyze`: reports from perf.data files, ours and perf's own.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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

#[derive(Subcommand)]
enum Command {
    /// What the file holds: events, counts, lost events, time span, features.
    Info {
        /// The recording (`-` reads a pipe-mode stream from standard input).
        #[arg(short, long, default_value = "perf.data")]
        input: PathBuf,
    },
}

fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Info { input } => {
            let summary = analyze::info::summarize(&input)?;
            for n in &summary.notes {
                eprintln!("analyze: warning: {n}");
            }
            print!("{}", summary.to_text());
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
