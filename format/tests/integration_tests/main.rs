//! Integration tests of the format crate: one test binary (see style.md).

mod common;
mod damaged;
mod interrupted;
mod perf_interop;
mod roundtrip;
