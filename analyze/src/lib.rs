//! The analysis side of bpfperf: perf.data (bpfperf's and perf's own) to profiles.
//!
//! One pipeline of stages, each a folder with one job, each mapping plain owned data to plain
//! owned data, the arrows pointing down only (a test, `layers.rs`, fails on a circle or an
//! arrow up):
//!
//! ```text
//! cli.rs      analyze's command line (clap), for the binary and the manual
//!   |
//! views/      report, folded, script, flamegraph, annotate, export, diff, heatmap, info,
//!   |         io, cache, sched, archive: consumers of what the stages below give
//! pipeline/   the driver: runs the stages in parallel for a view's Options
//!   |
//! aggregate/  Symbolized -> Profile (unique stacks, summed weights); wakers joined
//! symbolize/  (file, SVMA) -> functions, inline frames, file:line; kernel; JIT maps
//! resolve/    unwound AVMA + mapping -> (file, SVMA): the one place addresses are translated
//! unwind/     RawSample -> UnwoundStack (frame pointers pass through; DWARF via framehop)
//! read/       file -> Recording (RawSample + the process/mapping timeline); select
//! files/      the one place that finds and opens files (ELF, debug files, build-id caches,
//!             archives, debuginfod, kallsyms and its cache, JIT maps)
//! ```
//!
//! Per-sample failures are counted (`[unknown]` frames), never fatal.
//!
//! ```no_run
//! let loader = analyze::files::Loader::new();
//! let rec = analyze::read::read("perf.data".as_ref()).unwrap();
//! let symbolized =
//!     analyze::pipeline::symbolize(&rec, &Default::default(), &loader).unwrap();
//! let profile = analyze::aggregate::aggregate(symbolized);
//! for line in analyze::views::folded::folded(&profile, false) {
//!     println!("{line}");
//! }
//! ```

pub mod aggregate;
pub mod cli;
pub mod files;
pub mod pipeline;
pub mod read;
pub mod resolve;
pub mod symbolize;
pub mod timing;
pub mod unwind;
pub mod views;

/// How frames nothing can name are shown, as perf shows them.
pub const UNKNOWN: &str = "[unknown]";

/// What can stop an analysis (everything per sample or per file degrades instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The recording cannot be read.
    #[error(transparent)]
    Read(#[from] format::Error),
    /// `--event NAME` names no event of the file.
    #[error("no event named {name} in the recording (it has: {available})")]
    NoSuchEvent { name: String, available: String },
    /// A field name (`--weight`, `trace -F`, `hist FIELD`) that the event does not have.
    #[error("{event} has no field {field} (its fields: {available})")]
    NoSuchField {
        event: String,
        field: String,
        available: String,
    },
    /// A field of text or bytes where a number is needed (`--weight`, `hist`).
    #[error("{field} of {event} is {type_name}, not a number")]
    NotANumber {
        event: String,
        field: String,
        type_name: String,
    },
    /// `--weight` with a selection that is not one event (`--event NAME`).
    #[error("--weight {weight} weighs the samples of one event: name it with --event (traced events: {traced})")]
    WeightNeedsEvent { weight: String, traced: String },
    /// `trace --format` that cannot be used: a bad format string, or arguments that do not
    /// fit it.
    #[error("--format {format}: {why}")]
    BadFormat { format: String, why: String },
    /// `hist --linear STEP` over values that span too many buckets of STEP to print.
    #[error(
        "the values span {buckets} buckets of {step}, more than {max}: take a larger --linear step"
    )]
    TooManyBuckets { buckets: u64, step: u64, max: u64 },
    /// A view of traced events over a recording that has none.
    #[error("the recording has no traced events (tracepoints, probes) with their formats (it has: {available})")]
    NoTracedEvents { available: String },
}
