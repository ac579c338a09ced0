//! The fuzz targets' harness (fuzz/src/harness.rs) over the inputs kept in fixtures/fuzz/
//! (what the fuzzers found, fixed) and over real files, so that CI runs what scripts/fuzz
//! runs.

#[path = "../../../fuzz/src/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::path::Path;

use crate::common::{elsewhere, fixture, root, Tmp};

fn kept(target: &str) -> Vec<std::path::PathBuf> {
    let dir = root().join("fixtures/fuzz").join(target);
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn kept_fuzz_inputs_and_real_files_pass_the_harness() {
    let dir = Tmp::new("fuzz-inputs");
    for input in kept("elf") {
        eprintln!("{}", input.display());
        harness::elf(&std::fs::read(&input).unwrap(), &dir.0);
    }
    for input in kept("perf_data") {
        eprintln!("{}", input.display());
        harness::perf_data(&std::fs::read(&input).unwrap(), &dir.0);
    }
    // Real files: the harness itself works (a binary with DWARF, one without).
    for program in ["inline-nofp", "rsprog-nofp"] {
        harness::elf(&std::fs::read(fixture(program)).unwrap(), &dir.0);
    }
    if let Some(Ok(entries)) = elsewhere().map(std::fs::read_dir) {
        for e in entries.flatten().take(5) {
            if let Ok(bytes) = std::fs::read(e.path()) {
                if bytes.len() < 8 << 20 {
                    harness::perf_data(&bytes, &dir.0);
                }
            }
        }
    }
    assert!(Path::new(&dir.0).exists());
}
