//! views: what people and other tools see. Each is a consumer of the pipeline's output
//! ([`crate::symbolize::Symbolized`], or [`crate::aggregate::Profile`] made from it) or of
//! the recording read ([`crate::read::Recording`]: sched, heatmaps). Three walk the file's
//! records themselves, for what a `Recording` does not carry yet: `info` (every record
//! type, counted), `io` and `cache` (the raw fields of `bpfperf:block_io` and
//! `bpfperf:cachestat` samples). Shared helpers: [`folded::frame_name`], [`latency`]; [`stripped`]: the hint about stripped
//! binaries that every stack view gives. `top` is the live view's tables: the report's rows
//! of a recording read again as it grows.

pub mod annotate;
pub mod archive;
pub mod cache;
pub mod count;
pub mod critical;
pub mod diff;
pub mod export;
pub mod flamegraph;
pub mod folded;
pub mod heatmap;
pub mod hist;
pub mod info;
mod info_python;
pub mod io;
pub mod latency;
pub mod net;
pub mod report;
pub mod requests;
pub mod sched;
pub mod script;
pub mod stripped;
pub mod top;
pub mod trace;
