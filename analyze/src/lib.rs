//! The analysis side of bpfperf: read perf.data, unwind, symbolize, aggregate, emit.

pub mod info;
pub mod io;
pub mod dwarf_unwind;
