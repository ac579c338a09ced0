//! `analyze top`: reads the recording again every --interval (`source.rs`) and shows it: in
//! the terminal (`terminal.rs`), as a table per reading when standard output is no terminal,
//! or as a page with a live flame graph (`serve.rs`).

mod serve;
mod source;
mod terminal;

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use analyze::pipeline;
use analyze::views::top::{self, View};

use analyze::cli::TopArgs;
use source::{heading, Snapshot, Source};

pub fn top(args: &TopArgs, mut out: impl Write) -> anyhow::Result<()> {
    let mut source = Source {
        path: args.select.input.clone(),
        symfs: args.select.filter.stacks.symfs.clone(),
        options: pipeline::Options {
            progress: false,
            ..args.select.options(false, false)
        },
        window: args.window.map(|s| (s * 1e9) as u64),
        loader: None,
    };
    let interval = Duration::from_secs_f64(args.interval);
    if let Some(addr) = &args.serve {
        return serve::serve(addr, source, interval);
    }
    if args.once {
        let snap = source.read()?;
        return Ok(write!(out, "{}", text(&snap, args.view))?);
    }
    if std::io::stdout().is_terminal() {
        return terminal::run(source, interval, args.view);
    }
    // Scriptable: a table per reading, until killed (or the reader of the pipe is gone).
    loop {
        let start = Instant::now();
        match source.read() {
            Ok(snap) => {
                writeln!(out, "{}", text(&snap, args.view))?;
                out.flush()?;
            }
            Err(e) => eprintln!("analyze: {e:#}"),
        }
        std::thread::sleep(interval.saturating_sub(start.elapsed()));
    }
}

/// The text mode's table: a heading, then the rows.
fn text(snap: &Snapshot, view: View) -> String {
    let table = top::table(&snap.profile, view, 50);
    format!(
        "# {}\n# {}\n{}",
        heading(snap, &snap.profile, None),
        view.title(),
        table.to_text()
    )
}
