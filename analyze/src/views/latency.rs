//! Latencies as the bcc tools print them: log2 histograms in microseconds (biolatency,
//! runqlat) and nearest-rank quantiles. Shared by `analyze io` and `analyze sched`.

use std::fmt::Write as _;

/// Summary of a group of latencies (ns).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
}

/// The `q` quantile (0..=1) of sorted values, nearest rank.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub fn summary(latencies_ns: impl IntoIterator<Item = u64>) -> Summary {
    let mut lat: Vec<u64> = latencies_ns.into_iter().collect();
    lat.sort_unstable();
    Summary {
        count: lat.len() as u64,
        p50_ns: quantile(&lat, 0.5),
        p99_ns: quantile(&lat, 0.99),
        max_ns: lat.last().copied().unwrap_or(0),
        total_ns: lat.iter().sum(),
    }
}

/// The log2 bucket of a latency: bucket i holds [2^i, 2^(i+1)) us (bucket 0 also everything
/// under 1 us).
pub fn bucket_of(ns: u64) -> usize {
    let us = ns / 1000;
    if us == 0 {
        0
    } else {
        63 - us.leading_zeros() as usize
    }
}

/// The bounds in us of bucket `i`, as the histogram prints them (inclusive).
pub fn bucket_bounds_us(i: usize) -> (u64, u64) {
    let lo = if i == 0 { 0 } else { 1u64 << i };
    (lo, (1u64 << (i + 1)) - 1)
}

/// Counts per log2 bucket of microseconds, up to the highest bucket used.
pub fn histogram_us(latencies_ns: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut buckets = Vec::new();
    for ns in latencies_ns {
        let i = bucket_of(ns);
        if buckets.len() <= i {
            buckets.resize(i + 1, 0);
        }
        buckets[i] += 1;
    }
    buckets
}

/// `title`, then one line per bucket with a bar of stars, as biolatency and runqlat draw it.
pub fn render_histogram(o: &mut String, title: &str, buckets: &[u64]) {
    let _ = writeln!(o, "{title}");
    let _ = writeln!(
        o,
        "{:>22} : {:<8} |{:<40}|",
        "usecs", "count", "distribution"
    );
    let max = buckets.iter().copied().max().unwrap_or(0).max(1);
    for (i, &n) in buckets.iter().enumerate() {
        let (lo, hi) = bucket_bounds_us(i);
        let bar = "*".repeat(((n * 40).div_ceil(max)) as usize * usize::from(n > 0));
        let _ = writeln!(o, "{:>10} -> {:<10} : {:<8} |{:<40}|", lo, hi, n, bar);
    }
}

/// Nanoseconds as microseconds with one decimal.
pub fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_quantiles() {
        let ns: Vec<u64> = (1..=100).map(|i| i * 10_000).collect();
        let s = summary(ns.iter().copied());
        assert_eq!(
            (s.count, s.p50_ns, s.p99_ns, s.max_ns),
            (100, 500_000, 990_000, 1_000_000)
        );
        // 10 us lands in [8, 16), 1000 us in [512, 1024).
        let h = histogram_us(ns);
        assert_eq!((h.len(), h[3], h.iter().sum::<u64>()), (10, 1, 100));
        assert_eq!((bucket_of(999), bucket_of(1000)), (0, 0));
        assert_eq!(bucket_bounds_us(3), (8, 15));
    }
}
