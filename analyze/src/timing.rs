//! Phase timings on stderr when `BPFPERF_TIMING` is set (for finding what does not scale):
//! `mark("name")` prints the milliseconds since the previous mark of this run, the CPU time
//! all threads spent meanwhile and how many CPUs that kept busy on average (a phase at 1.0
//! on a machine of many ran on one; threads working beside the phases, such as the one
//! giving the input's pages back, count in the phase they overlap), and the process's
//! resident memory then: anonymous (what analyze allocated), file-backed (the recording's
//! pages mapped in) and the peak so far.

use std::sync::Mutex;
use std::time::Instant;

/// The previous mark: when, and the process's CPU time then.
static LAST: Mutex<Option<(Instant, f64)>> = Mutex::new(None);

/// The CPU time of all the process's threads so far, in milliseconds.
fn cpu_ms() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write; the clock id is a constant the kernel knows.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) } != 0 {
        return 0.0;
    }
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
}

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
    let (now, cpu) = (Instant::now(), cpu_ms());
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((t, was)) = *last {
        let wall = now.duration_since(t).as_secs_f64() * 1e3;
        eprintln!(
            "analyze: {wall:>7.1} ms  {phase:<28} cpu {:>6.1} ms ({:>4.1} CPUs)  {}",
            cpu - was,
            (cpu - was) / wall.max(1e-3),
            resident()
        );
    }
    *last = Some((now, cpu));
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
