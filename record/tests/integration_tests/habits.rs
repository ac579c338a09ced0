//! perf's habits at the prompt: `record CMD ARGS` without `--`, `-q`.

use std::process::Command;

use crate::common::*;

#[test]
fn command_without_dashes_and_quiet() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("habits");
    let file = dir.path("busy.data");
    let busy = fixture("busy-fp");
    // As `perf record ls -l`: the command's own options stay its own (`1 2` here, and an
    // -o after the command would be busy's).
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-o", file.to_str().unwrap(), "--call-graph", "fp"])
        .args([busy.to_str().unwrap(), "1", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let (samples, _) = summary_counts(&stderr_of(&out));
    assert!(samples > 500, "busy-fp 1 2 ran and was sampled: {samples}");
    let folded = analyze_folded(&file, &[]);
    assert!(
        folded.keys().any(|k| k.contains("spin_inner")),
        "{folded:?}"
    );

    // -q: nothing on stderr (nor stdout: the workload prints nothing).
    let quiet = dir.path("quiet.data");
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-q", "-o", quiet.to_str().unwrap(), "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        out.stderr.is_empty() && out.stdout.is_empty(),
        "{}",
        stderr_of(&out)
    );
    assert!(quiet.exists(), "the recording is written");
}
