//! perf.data, read and written.
//!
//! A perf.data file is a header, the events' `perf_event_attr`s with the ids their records
//! carry, a data section of records (samples and the side-band records that say which process
//! maps which file), and feature sections with facts about the recording (names, build ids,
//! host). Pipe mode (`perf record -o -`) sends the attributes and features as records instead.
//!
//! - [`PerfFileReader`] reads any perf.data that perf writes, on top of linux-perf-data, and
//!   fills its gaps: a header left with data size 0 by an interrupted perf, files cut short in
//!   the middle of a record, pipe-mode tracing data, event names without EVENT_DESC.
//! - [`PerfFileWriter`] writes through a growing memory map, and keeps the file readable by perf
//!   and by the reader after every round, so a killed recorder loses at most one round.
//!
//! The parsed record types are linux-perf-data's, re-exported as [`linux_perf_data`].

mod constants;
mod error;
pub mod events;
pub mod python;
mod reader;
pub mod trace_format;
mod tracing_data;
mod writer;

pub use constants::{
    attr_flag, bpf_event, callchain, event_type, feature, ksymbol, misc, record_type, sample_type,
    sw_event,
};
pub use error::Error;
pub use linux_perf_data;
pub use reader::{
    cmdline, parse_record, FileMode, InputBytes, KsymbolRecord, PageBudget, PerfFileReader,
    ScatteredReads, HUGE_PAGE,
};
pub use trace_format::{Field, FieldKind, TraceFormat, Value};
pub use tracing_data::{
    formats as tracing_formats, read_tracefs_file, tracepoint_names, EventFormat, TracingData,
};
pub use writer::{
    BuildIdEntry, EventAttr, Features, Mmap2File, PerfFileWriter, Sample, SampleId, SideBand,
    UserRegs,
};
