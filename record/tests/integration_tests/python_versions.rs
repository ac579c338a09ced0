//! Python versions other than Debian's 3.11 (python.rs), pyenv's under /root/.pyenv/versions/:
//! 3.8 to 3.10, 3.12 and 3.13 read as 3.11 is; 2.7 and 3.7, which record cannot read, named
//! once each at the end with their version and why, never a silent miss.

use crate::common::*;

const PYENV: &str = "/root/.pyenv/versions";

/// A busy half second in the interpreter (what 2.7 and 3.x both run).
const SPIN: &str = "import time\nt = time.time()\nwhile time.time() - t < 0.5: pass\n";

fn not_read_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("Python frames not read"))
        .collect()
}

fn says_not_read(program: &str, version: &str) {
    let python = format!("{PYENV}/{version}/bin/{program}");
    assert!(
        std::path::Path::new(&python).exists(),
        "{python} missing (pyenv's builds are on every machine of the project's kind)"
    );
    let dir = TempDir::new("python-not-read");
    let data = dir.path("perf.data");
    let out = record(&["-o", data.to_str().unwrap()], &[&python, "-c", SPIN]);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let lines = not_read_lines(&stderr);
    let short: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
    assert_eq!(lines.len(), 1, "once per process: {stderr}");
    let line = lines[0];
    let (head, why) = line.split_once("): ").unwrap();
    assert!(
        head.starts_with(&format!("record: {program} (pid ")),
        "{line}"
    );
    let pid: u32 = head.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(pid > 0, "{line}");
    assert_eq!(
        why,
        format!("Python frames not read: no layout for {short}"),
        "{line}"
    );
    // analyze info says it too (from the file: a python mapped, sampled, no Python frames).
    let info = analyze(&["info"], &data);
    let text = String::from_utf8_lossy(&info.stdout);
    let note = format!("note:          {program} (pid {pid}): Python frames not read (");
    assert!(
        text.lines().filter(|l| l.starts_with(&note)).count() == 1,
        "analyze info: {text}"
    );
}

#[test]
fn python_2_7_is_named_as_not_read() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    says_not_read("python2.7", "2.7.18");
}

#[test]
fn python_3_7_is_named_as_not_read() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    says_not_read("python3.7", "3.7.16");
}

/// pyenv's CPython 3.12 (a shared build: libpython3.12.so), read by its own table.
const PYTHON_3_12: &str = "/root/.pyenv/versions/3.12.1/bin/python3.12";

#[test]
fn python_3_12_shares_match_the_known_split() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::shares_match_the_known_split(PYTHON_3_12);
}

#[test]
fn python_3_12_frames_with_p_match_py_spy() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::frames_with_p_match_py_spy(PYTHON_3_12);
}

/// pyenv's CPython 3.13 (shared: libpython3.13.so), read by the layout its own
/// `_Py_DebugOffsets` gives.
const PYTHON_3_13: &str = "/root/.pyenv/versions/3.13.0/bin/python3.13";

#[test]
fn python_3_13_shares_match_the_known_split() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::shares_match_the_known_split(PYTHON_3_13);
}

/// `-X perf`: CPython's trampolines are no frames of their own (python.rs).
#[test]
fn python_3_12_with_perf_support_keeps_one_frame_per_function() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::perf_support_leaves_one_frame_per_function(PYTHON_3_12);
}

/// `-X perf`, stacks copied before the tables are in: analyze unwinds through the
/// trampolines too (python.rs).
#[test]
fn python_3_12_with_perf_support_copied_stacks_reach_the_root() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::perf_support_copies_reach_the_root(PYTHON_3_12);
}

#[test]
fn python_3_13_with_perf_support_keeps_one_frame_per_function() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::perf_support_leaves_one_frame_per_function(PYTHON_3_13);
}

#[test]
fn python_3_13_frames_with_p_match_py_spy() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::frames_with_p_match_py_spy(PYTHON_3_13);
}

/// A copy of 3.13's libpython whose `_Py_DebugOffsets` cookie is damaged (found first on
/// LD_LIBRARY_PATH, before the executable's RUNPATH): named, not guessed at.
#[test]
fn python_3_13_with_a_damaged_cookie_is_named_as_not_read() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    let dir = TempDir::new("python-cookie");
    let lib = "libpython3.13.so.1.0";
    let mut bytes = std::fs::read(format!("{PYENV}/3.13.0/lib/{lib}")).unwrap();
    let mut damaged = 0;
    for i in 0..bytes.len() - 8 {
        if &bytes[i..i + 8] == b"xdebugpy" {
            bytes[i] = b'y';
            damaged += 1;
        }
    }
    assert!(damaged >= 1, "no cookie in 3.13's libpython");
    std::fs::write(dir.path(lib), &bytes).unwrap();
    let data = dir.path("perf.data");
    let libs = dir.0.display().to_string();
    let out = record_env(
        &["-o", data.to_str().unwrap()],
        &[PYTHON_3_13, "-c", SPIN],
        &[("LD_LIBRARY_PATH", &libs)],
    );
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let lines = not_read_lines(&stderr);
    assert_eq!(lines.len(), 1, "once per process: {stderr}");
    assert!(
        lines[0].starts_with("record: python3.13 (pid ")
            && lines[0].ends_with(
                "Python frames not read: its _Py_DebugOffsets cookie (xdebugpy) is not there"
            ),
        "{}",
        lines[0]
    );
}

/// pyenv's CPython 3.8 to 3.10: frame objects, threads by pthread_t (frame_objects.rs).
const PYTHON_3_8: &str = "/root/.pyenv/versions/3.8.18/bin/python3.8";
const PYTHON_3_9: &str = "/root/.pyenv/versions/3.9.18/bin/python3.9";
const PYTHON_3_10: &str = "/root/.pyenv/versions/3.10.13/bin/python3.10";

#[test]
fn python_3_8_shares_match_the_known_split() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::shares_match_the_known_split(PYTHON_3_8);
}

#[test]
fn python_3_8_frames_with_p_match_py_spy() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::frames_with_p_match_py_spy(PYTHON_3_8);
}

#[test]
fn python_3_9_shares_match_the_known_split() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::shares_match_the_known_split(PYTHON_3_9);
}

#[test]
fn python_3_9_frames_with_p_match_py_spy() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::frames_with_p_match_py_spy(PYTHON_3_9);
}

#[test]
fn python_3_10_shares_match_the_known_split() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::shares_match_the_known_split(PYTHON_3_10);
}

#[test]
fn python_3_10_frames_with_p_match_py_spy() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::frames_with_p_match_py_spy(PYTHON_3_10);
}

/// In a PID namespace of its own (`unshare --pid --fork --mount-proc`), where a thread's id
/// is not the host's: 3.11 on match thread states by the namespace's thread id, 3.8-3.10 by
/// pthread_t.
#[test]
fn python_in_a_pid_namespace_shares_match_the_known_split() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    let unshare = ["unshare", "--pid", "--fork", "--mount-proc"];
    for python in ["/usr/bin/python3.11", PYTHON_3_12, PYTHON_3_13, PYTHON_3_10] {
        eprintln!("{python} in a PID namespace");
        crate::python::shares_match_the_known_split_under(&unshare, python);
    }
}

/// A container's Python seen from the host recording every CPU: its threads are matched to
/// their interpreter state by host thread ids, as with `-p`.
#[test]
fn python_in_a_pid_namespace_recorded_system_wide_shares_match_the_known_split() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    let unshare = ["unshare", "--pid", "--fork", "--mount-proc"];
    for python in [PYTHON_3_13, "/usr/bin/python3.11", PYTHON_3_9] {
        eprintln!("{python} in a PID namespace, recorded with -a");
        crate::python::shares_match_the_known_split_with(&["-a"], &unshare, python);
    }
}

#[test]
fn python_3_12_aggregated_shares_match_per_sample() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::aggregated_shares_match_per_sample(PYTHON_3_12);
}

#[test]
fn python_3_13_aggregated_shares_match_per_sample() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    crate::python::aggregated_shares_match_per_sample(PYTHON_3_13);
}

#[test]
fn python_3_12_and_3_13_wakers_are_named_in_waker_stacks() {
    if !can_record() {
        return;
    }
    let _g = exclusive();
    for python in [PYTHON_3_12, PYTHON_3_13] {
        crate::python::python_wakers_are_named(python, "dwarf");
    }
}
