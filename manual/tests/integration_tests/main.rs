//! bpfperf-manual's integration tests: one test binary, as analyze's. Each installs bpfperf
//! with `scripts/install` into a prefix of its own (once per run, the debug build) and looks
//! at what a user would: the pages through `man -l`, the completions in a real bash in tmux.

mod common;
mod completions;
mod pages;
