//! analyze's integration tests: one test binary (see style.md).

mod common;
mod dwarf;
mod errors;
mod folded;
mod info;
mod inline;
mod kallsyms_cache;
