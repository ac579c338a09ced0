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

/// The `q` quantile (0..=1) of (value, weight) pairs sorted by value, nearest rank: each
/// pair counts as `weight` values (never expanded into copies: a damaged file's weight is
/// any number).
fn quantile(sorted: &[(u64, u64)], total: u64, q: f64) -> u64 {
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total.max(1));
    let mut seen = 0u64;
    for &(v, w) in sorted {
        seen = seen.saturating_add(w);
        if seen >= rank {
            return v;
        }
    }
    sorted.last().map_or(0, |&(v, _)| v)
}

pub fn summary(latencies_ns: impl IntoIterator<Item = u64>) -> Summary {
    summary_weighted(latencies_ns.into_iter().map(|ns| (ns, 1)))
}

/// [`summary`] of latencies that each stand for `weight` events (a sample of several).
pub fn summary_weighted(latencies_ns: impl IntoIterator<Item = (u64, u64)>) -> Summary {
    let mut lat: Vec<(u64, u64)> = latencies_ns.into_iter().filter(|&(_, w)| w > 0).collect();
    lat.sort_unstable();
    let count = lat.iter().fold(0u64, |n, &(_, w)| n.saturating_add(w));
    Summary {
        count,
        p50_ns: quantile(&lat, count, 0.5),
        p99_ns: quantile(&lat, count, 0.99),
        max_ns: lat.last().map_or(0, |&(v, _)| v),
        total_ns: lat
            .iter()
            .fold(0u64, |t, &(v, w)| t.saturating_add(v.saturating_mul(w))),
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
    histogram_us_weighted(latencies_ns.into_iter().map(|ns| (ns, 1)))
}

/// [`histogram_us`] of latencies that each stand for `weight` events.
pub fn histogram_us_weighted(latencies_ns: impl IntoIterator<Item = (u64, u64)>) -> Vec<u64> {
    let mut buckets = Vec::new();
    for (ns, weight) in latencies_ns {
        let i = bucket_of(ns);
        if buckets.len() <= i {
            buckets.resize(i + 1, 0);
        }
        buckets[i] = u64::saturating_add(buckets[i], weight);
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

    #[test]
    fn weighted_latencies_count_as_many_events() {
        // 10 us standing for 98 events, 1 ms for 2: the median is 10 us, p99 1 ms.
        let s = summary_weighted([(1_000_000, 2), (10_000, 98)]);
        assert_eq!(
            (s.count, s.p50_ns, s.p99_ns, s.max_ns, s.total_ns),
            (100, 10_000, 1_000_000, 1_000_000, 2_980_000)
        );
        assert_eq!(summary_weighted([(5, 1)]), summary([5]));
        // A damaged file's weight is counted, not expanded.
        let s = summary_weighted([(7, 1 << 62), (9, 1 << 62), (8, u64::MAX)]);
        assert_eq!((s.count, s.p50_ns, s.total_ns), (u64::MAX, 8, u64::MAX));
        let s = summary_weighted([(7, 1 << 62), (9, 1 << 62)]);
        assert_eq!((s.count, s.p50_ns, s.p99_ns), (1 << 63, 7, 9));
        let h = histogram_us_weighted([(10_000, 98), (1_000_000, 2)]);
        assert_eq!((h[3], h[9], h.iter().sum::<u64>()), (98, 2, 100));
        assert_eq!(summary_weighted([]), Summary::default());
    }
}
