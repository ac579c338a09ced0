//! Nothing recorded is lost silently: drops are counted in LOST records and the summary.

use crate::common::*;

#[test]
fn drops_under_stress_are_counted() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("loss");
    let file = dir.path("stress.data");
    let busy = fixture("busy-fp");
    // 50 kHz on every CPU with deep stacks: far more than default, to provoke drops if any.
    let out = record(
        &["-F", "50000", "-o", file.to_str().unwrap()],
        &[busy.to_str().unwrap(), "2", "4"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let (samples, lost) = summary_counts(&stderr_of(&out));
    // The file holds exactly what the summary says: the samples, and the lost total in LOST
    // records, which perf notices too.
    let out = std::process::Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cpu_samples = parse_script(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .filter(|s| s.event == "cpu-clock")
        .count();
    assert_eq!(
        cpu_samples as u64, samples,
        "on-CPU samples in the file = the summary's"
    );
    if lost > 0 {
        assert!(
            stderr.contains("lost"),
            "perf should see the LOST records: {stderr}"
        );
    } else {
        assert!(stderr.trim().is_empty(), "{stderr}");
    }
    let analyze = std::path::Path::new(env!("CARGO_BIN_EXE_record")).with_file_name("analyze");
    let info = std::process::Command::new(&analyze)
        .args(["info", "-i"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (build the analyze binary)", analyze.display()));
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        text.contains(&format!("lost events:   {lost} ")),
        "analyze info reports the lost count {lost}:\n{text}"
    );
    eprintln!("stress: {samples} samples, {lost} lost");
}
