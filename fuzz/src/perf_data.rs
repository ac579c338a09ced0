//! Fuzz target: perf_data (see harness.rs). Built and run by scripts/fuzz with cargo-afl.

#[path = "harness.rs"]
#[allow(dead_code)]
mod harness;

fn main() {
    let scratch =
        std::env::temp_dir().join(format!("bpfperf-fuzz-perf_data-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    afl::fuzz!(|data: &[u8]| {
        harness::perf_data(data, &scratch);
    });
}
