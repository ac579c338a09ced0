//! The analysis side of bpfperf: perf.data (bpfperf's and perf's own) to profiles.
//!
//! A pipeline of stages, each a module with one job, each mapping plain owned data to plain
//! owned data:
//!
//! ```text
//! read       file -> Recording (RawSample + the process/mapping timeline)
//! unwind     RawSample -> UnwoundStack (frame pointers pass through; DWARF via framehop)
//! resolve    AVMA + mapping -> (file, SVMA)
//! symbolize  (file, SVMA) -> functions, inline frames, file:line; kernel; [vdso]; JIT maps
//! symbolized SymbolizedStack: the plain data every view consumes
//! aggregate  SymbolizedStack -> Profile (unique stacks, summed weights)
//! wakeups    off-CPU stacks joined with their wakers' (--event wakeup)
//! output/    folded, report, script, flamegraph
//! ```
//!
//! [`pipeline`] drives them (rayon lives there and in the parallel reading path); [`loader`]
//! opens the files the stages need (binaries, debug files, kernel symbols, through a per-boot
//! cache). Per-sample failures are counted (`[unknown]` frames), never fatal.
//!
//! ```no_run
//! let loader = analyze::loader::Loader::new();
//! let rec = analyze::read::read("perf.data".as_ref()).unwrap();
//! let symbolized =
//!     analyze::pipeline::symbolize(&rec, &Default::default(), &loader).unwrap();
//! let profile = analyze::aggregate::aggregate(symbolized);
//! for line in analyze::output::folded::folded(&profile, false) {
//!     println!("{line}");
//! }
//! ```

pub mod aggregate;
pub mod annotate;
pub mod archive;
pub mod cache;
pub mod debuginfod;
pub mod info;
pub mod input;
pub mod io;
mod kallsyms;
mod kallsyms_cache;
pub mod latency;
pub mod loader;
pub mod output;
pub mod pipeline;
pub mod read;
pub mod resolve;
pub mod sched;
pub mod symbolize;
pub mod symbolized;
pub mod timing;
pub mod unwind;
pub mod wakeups;

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
}
