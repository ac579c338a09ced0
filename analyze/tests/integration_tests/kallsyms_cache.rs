//! Kernel symbols are cached per boot: the first analysis writes the cache (private: it holds
//! kernel addresses), the next ones read it, and kernel frames come out the same either way,
//! also from a damaged cache (rebuilt).

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common::{perf_ok, perf_record, Tmp};

fn folded(file: &str, cache: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args(["report", "--folded", "-K", "-i", file])
        .env("BPFPERF_CACHE_DIR", cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn kernel_symbols_are_cached_privately_and_give_the_same_frames() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("ksymcache");
    let file = dir.0.join("k.data");
    // ls -lR spends its time in the kernel: plenty of kernel frames.
    perf_record(
        &file,
        &["-F", "2000", "-g"],
        std::path::Path::new("/bin/ls"),
        &["-lR", "/usr/share/doc"],
    );
    let f = file.to_str().unwrap();
    let cache = dir.0.join("cache");

    let first = folded(f, &cache);
    let cached = cache.join("kallsyms");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&cached), 0o600, "the cache holds kernel addresses");
    assert_eq!(mode(&cache), 0o700);
    assert!(
        first.contains(";entry_SYSCALL_64"),
        "kernel frames: {first}"
    );

    let second = folded(f, &cache);
    assert_eq!(first, second, "from the cache");

    std::fs::write(&cached, b"BPKSYMS1 damaged").unwrap();
    let third = folded(f, &cache);
    assert_eq!(first, third, "a damaged cache is rebuilt");
    assert!(std::fs::metadata(&cached).unwrap().len() > 1000);
}
