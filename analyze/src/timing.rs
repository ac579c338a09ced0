//! Phase timings on stderr when `BPFPERF_TIMING` is set (for finding what does not scale):
//! `mark("name")` prints the milliseconds since the previous mark of this run, and the
//! process's resident memory then: anonymous (what analyze allocated), file-backed (the
//! recording's pages mapped in) and the peak so far.

use std::sync::Mutex;
use std::time::Instant;

static LAST: Mutex<Option<Instant>> = Mutex::new(None);

/// Whether `BPFPERF_TIMING` is set.
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("BPFPERF_TIMING").is_some())
}

/// Prints how long the phase that ends now took (since the previous mark, or the first call).
pub fn mark(phase: &str) {
    if !enabled() {
        return;
    }
    let now = Instant::now();
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = *last {
        eprintln!(
            "analyze: {:>7.1} ms  {phase:<28} {}",
            now.duration_since(t).as_secs_f64() * 1e3,
            resident()
        );
    }
    *last = Some(now);
}

/// `anon N MiB, file N MiB, peak N MiB` from /proc/self/status (empty where it cannot be read).
fn resident() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
    };
    match (kib("RssAnon:"), kib("RssFile:"), kib("VmHWM:")) {
        (Some(a), Some(f), Some(p)) => format!(
            "anon {:>5} MiB, file {:>5} MiB, peak {:>5} MiB",
            a / 1024,
            f / 1024,
            p / 1024
        ),
        _ => String::new(),
    }
}

/// With `BPFPERF_TIMING=files`: the resident size of each mapped file now (from
/// /proc/self/smaps), largest first, for finding where file-backed memory goes.
pub fn files_resident() {
    if std::env::var_os("BPFPERF_TIMING").is_none_or(|v| v != "files") {
        return;
    }
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut by_path: std::collections::BTreeMap<String, u64> = Default::default();
    let mut path = String::new();
    for line in smaps.lines() {
        if let Some(kib) = line.strip_prefix("Rss:") {
            let kib: u64 = kib
                .trim()
                .trim_end_matches(" kB")
                .trim()
                .parse()
                .unwrap_or(0);
            *by_path.entry(path.clone()).or_default() += kib;
        } else {
            // A mapping's first line: `start-end perms offset dev inode [path]`.
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() >= 5 && fields[0].contains('-') && fields[1].len() == 4 {
                path = fields.get(5).unwrap_or(&"[anon]").to_string();
            }
        }
    }
    let mut rows: Vec<(u64, String)> = by_path.into_iter().map(|(p, k)| (k, p)).collect();
    rows.sort_unstable_by(|a, b| b.cmp(a));
    for (kib, p) in rows.iter().take(12) {
        eprintln!("analyze: {:>7} KiB resident  {p}", kib);
    }
}
