//! `record`: capture on-CPU stacks with BPF into a perf.data file that perf reads.
//!
//! The binary: read the command line, record, print the summary, archive if asked, exit with
//! the workload's status. Everything else is the library (`bpfperf_record`).

use std::process::ExitCode;

use bpfperf_record::{cli, output, session};

fn main() -> ExitCode {
    let args = cli::parse_args();
    let want_archive = args.archive;
    let quiet = args.quiet;
    let result = args.into_config().and_then(|cfg| session::record(&cfg));
    match result {
        Ok(s) => {
            if !quiet {
                cli::print_summary(&s);
            }
            if let Some(why) = &s.stopped {
                eprintln!("record: {why}");
                return ExitCode::from(1);
            }
            if want_archive {
                if let Err(e) = output::archive(&s.path) {
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
