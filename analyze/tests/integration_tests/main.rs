//! analyze's integration tests: one test binary (see style.md).

mod annotate;
mod archive;
mod bpf_programs;
mod common;
mod damaged;
mod diff;
mod dwarf;
mod dwarf_cache;
mod errors;
mod export;
mod fidelity;
mod folded;
mod formats;
mod fuzz_inputs;
mod heatmap;
mod hygiene;
mod info;
mod inline;
mod jit;
mod kallsyms_cache;
mod layers;
mod live;
mod names;
mod outside_code;
#[path = "../../../fixtures/record_said.rs"]
mod record_said;
mod report;
mod scale;
mod stripped;
mod trace_views;
