//! Fuzz target: elf (see harness.rs). Built and run by scripts/fuzz with cargo-afl.

#[path = "harness.rs"]
#[allow(dead_code)]
mod harness;

fn main() {
    let scratch = std::env::temp_dir().join(format!("bpfperf-fuzz-elf-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    afl::fuzz!(|data: &[u8]| {
        harness::elf(data, &scratch);
    });
}
