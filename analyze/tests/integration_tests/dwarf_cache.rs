//! Inflated DWARF is cached by build id: a debug file's compressed sections (Debian's libc6-dbg)
//! are inflated once and mapped from the cache afterwards, also for a file the recording does
//! not list (perf's DWARF recordings leave libc out), and lines and inline frames come out the
//! same either way.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::archive::build_id_of;
use crate::common::{analyze_env, have, perf_ok, perf_record_libc_unlisted, Tmp};

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

fn report(file: &Path, cache: &Path) -> String {
    let (file, cache) = (file.to_str().unwrap(), cache.to_str().unwrap());
    let out = analyze_env(
        &["report", "--folded", "--sort", "srcline", "-i", file],
        &[("BPFPERF_CACHE_DIR", cache)],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn libc_met_only_in_call_chains_is_inflated_once_and_cached() {
    if !perf_ok() {
        return;
    }
    let id = build_id_of(Path::new(LIBC));
    let debug = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
    if !have(Path::new(&debug).is_file(), "libc6-dbg") {
        return;
    }
    let dir = Tmp::new("dwarfcache");
    let file = dir.0.join("dwarf.data");
    perf_record_libc_unlisted(&file);
    let cache = dir.0.join("cache");

    let first = report(&file, &cache);
    assert!(first.contains("start_thread"), "{first}");
    let cached = cache.join("dwarf").join(&id);
    let mode = std::fs::metadata(&cached)
        .unwrap_or_else(|e| panic!("{}: {e}", cached.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let second = report(&file, &cache);
    assert_eq!(first, second, "from the cache");
}
