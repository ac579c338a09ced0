//! Tests only: what the modules' tests share (a made-up tracefs, scratch directories, and
//! skipping a test whose system file is missing, unless CI is set).

use std::path::{Path, PathBuf};

use super::tracepoints::Tracefs;

/// Skips a test that reads this system when `what` is missing here; fails under CI.
pub fn skip_or_fail(what: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} (CI is set: this must not be missing)"
    );
    eprintln!("skipped: {what}");
}

/// A tracefs of its own: two systems, and a format file per event.
pub fn fake_tracefs(dir: &Path) -> Tracefs {
    let fmt = |name: &str, id: u64, fields: &str| {
        format!(
            "name: {name}\nID: {id}\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n{fields}\n\
print fmt: \"x\"\n"
        )
    };
    let read = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:size_t count;\toffset:32;\tsize:8;\tsigned:0;\n";
    let exit = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n";
    let exec = "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n";
    for (sys, name, id, fields) in [
        ("syscalls", "sys_enter_read", 700, read),
        ("syscalls", "sys_exit_read", 701, exit),
        ("syscalls", "sys_enter_openat", 702, read),
        ("syscalls", "sys_enter_openat2", 703, read),
        ("sched", "sched_process_exec", 300, exec),
        ("ftrace", "function", 1, ""),
    ] {
        let d = dir.join("events").join(sys).join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("format"), fmt(name, id, fields)).unwrap();
    }
    std::fs::write(dir.join("events/header_page"), "x").unwrap();
    Tracefs { root: dir.into() }
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bpfperf-tracing-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// This machine, but with `tracefs` and without kprobes.
pub fn host(tracefs: Tracefs) -> super::Host {
    super::Host {
        tracefs,
        kprobes: false,
        kallsyms: "/nonexistent".into(),
        debug_root: "/usr/lib/debug".into(),
        places: super::libraries::Places::host(&[], None),
    }
}
