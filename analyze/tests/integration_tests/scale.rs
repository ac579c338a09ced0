//! Large recordings: analyze keeps a window of the file mapped in, not the whole of it, and
//! groups the unwound DWARF stacks before resolving them.

use crate::common::*;

/// The last `peak N MiB` that BPFPERF_TIMING printed: the process's peak resident memory.
fn peak_mib(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| l.split("peak").nth(1))
        .filter_map(|v| v.trim().trim_end_matches("MiB").trim().parse().ok())
        .next_back()
        .unwrap_or_else(|| panic!("no peak in {stderr}"))
}

#[test]
fn a_recording_larger_than_analyzes_memory_is_read_whole() {
    if !can_record() {
        return;
    }
    let dir = Tmp::new("scale");
    let file = dir.0.join("big.data");
    // DWARF stack copies at 8000 Hz on two threads: ~35 MB a second.
    record_ours(&file, &["-F", "8000"], &fixture("busy-nofp"), &["10", "2"]);
    let size_mib = std::fs::metadata(&file).unwrap().len() >> 20;
    assert!(
        size_mib >= 250,
        "recording of {size_mib} MiB: too small to tell"
    );

    let out = analyze_env(
        &["report", "--folded", "-i", file.to_str().unwrap()],
        &[("BPFPERF_TIMING", "1")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let folded = String::from_utf8_lossy(&out.stdout);
    // Every sample is there, under its stack (the unwound stacks were grouped: a few lines).
    let samples: u64 = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    let info = analyze(&["info", "-i", file.to_str().unwrap()]);
    let recorded: u64 = String::from_utf8_lossy(&info.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("samples:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("info gives the sample count");
    assert!(
        samples * 100 >= recorded * 95,
        "folded holds {samples} of {recorded} samples"
    );
    assert!(folded.contains("worker;spin_outer;spin_inner "), "{folded}");
    assert!(
        folded.lines().count() < 2000,
        "{} stacks",
        folded.lines().count()
    );
    // Without the page budget the whole file was resident at once (plus what analyze
    // allocates): a peak above the file's size.
    let peak = peak_mib(&stderr);
    assert!(
        peak < size_mib,
        "peak {peak} MiB reading a {size_mib} MiB recording\n{stderr}"
    );
}
