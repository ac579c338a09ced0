//! Phase timings on stderr when `BPFPERF_TIMING` is set (for finding what does not scale):
//! `mark("name")` prints the milliseconds since the previous mark of this run.

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
            "analyze: {:>7.1} ms  {phase}",
            now.duration_since(t).as_secs_f64() * 1e3
        );
    }
    *last = Some(now);
}
