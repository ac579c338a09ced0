//! Following the workload: children, threads, exec, and a real tar extraction.

use std::process::Command;

use crate::common::*;

#[test]
fn fork_and_exec_are_followed() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("forkexec");
    let file = dir.path("fe.data");
    let fe = fixture("forkexec-fp");
    let busy = fixture("busy-fp");
    let out = record(
        &["-o", file.to_str().unwrap()],
        &[fe.to_str().unwrap(), busy.to_str().unwrap(), "1"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let samples = parse_script(&perf_script_clean(&file));
    let count = |comm: &str| samples.iter().filter(|s| s.comm == comm).count();
    // Parent burns 0.5 s, then the exec'd child 1 s: both comms have samples (the child's comm
    // is the executable's name, busy-fp).
    assert!(
        count("forkexec-fp") > 200,
        "parent samples: {}",
        count("forkexec-fp")
    );
    assert!(count("busy-fp") > 500, "child samples: {}", count("busy"));
    assert!(
        samples
            .iter()
            .any(|s| s.comm == "busy-fp" && s.frames.iter().any(|(f, _)| f == "spin_inner")),
        "child stacks symbolized"
    );
    assert!(samples
        .iter()
        .any(|s| s.comm == "forkexec-fp" && s.frames.iter().any(|(f, _)| f == "parent_spin")));
}

#[test]
fn tar_extracts_correctly_and_is_recorded() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("tar");
    let src = dir.path("src.tar");
    // A real tarball: this machine's headers.
    let st = Command::new("tar")
        .arg("-cf")
        .arg(&src)
        .args(["-C", "/usr", "include"])
        .status()
        .unwrap();
    assert!(st.success());
    let out_dir = dir.path("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let file = dir.path("tar.data");
    let out = record(
        &["-o", file.to_str().unwrap()],
        &[
            "tar",
            "-xf",
            src.to_str().unwrap(),
            "-C",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let diff = Command::new("diff")
        .args(["-r", "--no-dereference"])
        .arg("/usr/include")
        .arg(out_dir.join("include"))
        .output()
        .unwrap();
    assert!(
        diff.status.success(),
        "extracted tree differs: {}",
        String::from_utf8_lossy(&diff.stdout)
    );
    let samples = parse_script(&perf_script_clean(&file));
    assert!(
        samples.iter().filter(|s| s.comm == "tar").count() >= 5,
        "tar's samples: {}",
        samples.len()
    );
}

#[test]
fn attaches_to_a_running_process_and_records_system_wide() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("attach");
    let busy = fixture("busy-fp");
    // -p: a process that runs before recording starts; recording ends when it exits.
    // (3 s: loading the BPF programs takes 0.3-0.7 s of it, more on a busy machine.)
    let mut child = Command::new(&busy)
        .args(["3", "1"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let file = dir.path("pid.data");
    let out = Command::new(env!("CARGO_BIN_EXE_record"))
        .args(["-o", file.to_str().unwrap(), "-p", &child.id().to_string()])
        .output()
        .unwrap();
    child.wait().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let samples = parse_script(&perf_script_clean(&file));
    let ours = samples
        .iter()
        .filter(|s| s.comm == "busy-fp" && s.frames.iter().any(|(f, _)| f == "worker"))
        .count();
    assert!(
        ours > 500,
        "samples of the attached process with symbolized stacks (synthesized mmaps): {ours}"
    );

    // -a: every process, here while a command runs; busy-fp is not its child.
    let mut other = Command::new(&busy)
        .args(["1.5", "1"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let file = dir.path("all.data");
    let out = record(&["-a", "-o", file.to_str().unwrap()], &["sleep", "1"]);
    other.wait().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let samples = parse_script(&perf_script_clean(&file));
    assert!(
        samples.iter().filter(|s| s.comm == "busy-fp").count() > 300,
        "system-wide sees other processes"
    );
}
