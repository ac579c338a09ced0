//! The recording, read again at each [`Source::read`] (the whole pipeline each time; the
//! loader, with every file it opened and symbol table it built, kept between readings), and
//! what a reading gave.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use analyze::aggregate::{self, Profile};
use analyze::files::Loader;
use analyze::pipeline;
use analyze::read::time_range::TimeRanges;
use analyze::views::top;

use crate::recording::loader_for;

/// What one reading of the recording gave.
pub struct Snapshot {
    pub profile: Profile,
    /// What the reader repaired and the pipeline could not do (warnings elsewhere).
    pub notes: Vec<String>,
    /// How long the reading took.
    pub took: Duration,
    pub path: PathBuf,
    /// The window shown, in ns (all of the recording without one).
    pub window: Option<u64>,
}

/// The recording, read again at each [`Source::read`].
pub struct Source {
    pub path: PathBuf,
    /// Where files are looked for first (--symfs).
    pub symfs: Option<PathBuf>,
    pub options: pipeline::Options,
    /// Only the last this many ns of the recording.
    pub window: Option<u64>,
    /// Made at the first reading (from the input: an archive's files first), kept after.
    pub loader: Option<Loader>,
}

impl Source {
    /// Reads the file as it is now, whole: every round `record` has finished.
    pub fn read(&mut self) -> anyhow::Result<Snapshot> {
        let start = Instant::now();
        let input = analyze::files::input::open(&self.path)?;
        let loader = self
            .loader
            .get_or_insert_with(|| loader_for(&input, self.symfs.clone()));
        // A window is chosen by time once the recording's end is known: until then every
        // sample keeps its own time (identical samples merged keep the first one's only).
        let merge = !self.options.reads_each_sample() && self.window.is_none();
        let rec = analyze::read::read_with(input.reader, merge, &mut |_| {})?;
        let options = pipeline::Options {
            time: self
                .window
                .map(TimeRanges::last)
                .or(self.options.time.clone()),
            ..self.options.clone()
        };
        let s = pipeline::symbolize(&rec, &options, loader)?;
        let mut notes = rec.notes.clone();
        notes.extend(s.stats.warnings.iter().cloned());
        Ok(Snapshot {
            profile: aggregate::aggregate(s),
            notes,
            took: start.elapsed(),
            path: self.path.clone(),
            window: self.window,
        })
    }

    /// Reads on a thread of its own, every `interval`, until the receiver is dropped: each
    /// snapshot, or why there is none (the file is not there yet, say).
    pub fn spawn(mut self, interval: Duration) -> mpsc::Receiver<Result<Snapshot, String>> {
        let (tx, rx) = mpsc::sync_channel(1);
        std::thread::spawn(move || loop {
            let start = Instant::now();
            let snap = self.read().map_err(|e| {
                if self.path.exists() {
                    format!("{e:#}")
                } else {
                    // Started before `record -o FILE`: it comes.
                    format!("waiting for {} to be written", self.path.display())
                }
            });
            if tx.send(snap).is_err() {
                return;
            }
            std::thread::sleep(interval.saturating_sub(start.elapsed()));
        });
        rx
    }
}

/// The heading of a view: file, event, samples, window, process.
pub fn heading(snap: &Snapshot, shown: &Profile, process: Option<&top::Process>) -> String {
    let p = &snap.profile;
    let window = match snap.window {
        Some(ns) => format!("last {:.1} s", ns as f64 / 1e9),
        None => "whole recording".into(),
    };
    let process = match process {
        Some(pr) => format!("process {} ({})", pr.pid, pr.comm),
        None => "all processes".into(),
    };
    format!(
        "{}: {} samples of {} ({} {}), {window}, {process}; read in {} ms",
        snap.path.display(),
        shown.stats.samples,
        p.event,
        shown.total,
        p.unit,
        snap.took.as_millis()
    )
}
