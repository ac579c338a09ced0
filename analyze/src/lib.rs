//! The analysis side of bpfperf: read perf.data, unwind, symbolize, aggregate, emit.

pub mod dwarf_unwind;
pub mod info;
pub mod io;
pub mod output;
pub mod pipeline;
pub mod read;
pub mod symbolize;
