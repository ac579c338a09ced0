//! perf's `--time`: which stretch of the recording a view covers.
//!
//! - `START,END` in seconds, either side may be empty: absolute timestamps as perf script
//!   prints them (`17804.498246419`), or, below the recording's first timestamp, seconds from
//!   its start (`2.5,3`) unless the time lies nearer the recording read as absolute: an
//!   absolute time a little before the first sample (a program's clock read as it started)
//!   stays absolute, `,1` of a half-second recording is its first second. Parsed to the nanosecond, so that a range a heatmap prints selects
//!   exactly the samples of its cell.
//! - Percent ranges of the recording's span, as perf takes them: `10%-20%`, `10%/2` (the
//!   second tenth), several separated by commas.
//!
//! Ranges include their start and leave out their end (perf includes both): adjoining cells
//! of a heatmap then never share a sample.

/// One side of a range, as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// Nanoseconds, absolute or from the start (decided against the recording).
    Ns(u64),
    /// Per million of the recording's span.
    PerMillion(u64),
    /// Nanoseconds before the recording's last timestamp (`analyze top --window`).
    BeforeEnd(u64),
}

/// Ranges as the user wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeRanges(Vec<(Option<Bound>, Option<Bound>)>);

/// Seconds with up to 9 decimals, to the nanosecond.
fn parse_seconds(s: &str) -> Option<u64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() && frac.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 9
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32)
    };
    whole.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// A percentage (`12.5`) in millionths of the span.
fn parse_percent(s: &str) -> Option<u64> {
    let p: f64 = s.parse().ok()?;
    (0.0..=100.0)
        .contains(&p)
        .then(|| (p * 10_000.0).round() as u64)
}

impl TimeRanges {
    pub fn parse(s: &str) -> Result<TimeRanges, String> {
        let bad = |why: &str| why.to_string();
        if !s.contains('%') {
            let (a, b) = s
                .split_once(',')
                .ok_or_else(|| bad("expected START,END in seconds (either may be empty), or percent ranges such as 10%-20% or 10%/2"))?;
            let side = |x: &str| -> Result<Option<Bound>, String> {
                if x.is_empty() {
                    return Ok(None);
                }
                parse_seconds(x)
                    .map(|ns| Some(Bound::Ns(ns)))
                    .ok_or_else(|| bad(&format!("{x} is not a number of seconds")))
            };
            return Ok(TimeRanges(vec![(side(a)?, side(b)?)]));
        }
        let mut ranges = Vec::new();
        for part in s.split(',') {
            let pct = |x: &str| -> Result<u64, String> {
                x.strip_suffix('%')
                    .and_then(parse_percent)
                    .ok_or_else(|| bad(&format!("{x} is not a percentage from 0% to 100%")))
            };
            if let Some((size, n)) = part.split_once('/') {
                let size = pct(size)?;
                let n: u64 = n
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1 && size * n <= 1_000_000)
                    .ok_or_else(|| bad(&format!("{part}: there is no slice {n} of that size")))?;
                ranges.push((
                    Some(Bound::PerMillion(size * (n - 1))),
                    Some(Bound::PerMillion(size * n)),
                ));
            } else if let Some((a, b)) = part.split_once('-') {
                ranges.push((
                    Some(Bound::PerMillion(pct(a)?)),
                    Some(Bound::PerMillion(pct(b)?)),
                ));
            } else {
                return Err(bad(&format!("{part}: expected A%-B% or A%/N")));
            }
        }
        Ok(TimeRanges(ranges))
    }

    /// The last `ns` nanoseconds of the recording, up to its last timestamp included (a live
    /// view's window: the recording's end moves as it is written).
    pub fn last(ns: u64) -> TimeRanges {
        TimeRanges(vec![(Some(Bound::BeforeEnd(ns)), None)])
    }

    /// The ranges in the recording's nanoseconds, each `[start, end)`, for a recording whose
    /// samples span `first..=last`.
    pub fn resolve(&self, first: u64, last: u64) -> Vec<(u64, u64)> {
        let span = last.saturating_sub(first);
        let at = |b: Bound| -> u64 {
            match b {
                // Below the first timestamp: seconds from the start, unless it lies nearer
                // the recording read as an absolute time (past the span's length).
                Bound::Ns(ns) if ns < first && (ns <= span || ns - span < first - ns) => {
                    first.saturating_add(ns)
                }
                Bound::Ns(ns) => ns,
                // The end of the span is in its last range.
                Bound::PerMillion(1_000_000) => last.saturating_add(1),
                Bound::PerMillion(m) => first + (span as u128 * m as u128 / 1_000_000) as u64,
                Bound::BeforeEnd(ns) => last.saturating_sub(ns).max(first),
            }
        };
        self.0
            .iter()
            .map(|&(a, b)| (a.map_or(0, at), b.map_or(u64::MAX, at)))
            .collect()
    }
}

/// Whether `t` falls in one of `ranges` (as [`TimeRanges::resolve`] gives them).
pub fn contains(ranges: &[(u64, u64)], t: u64) -> bool {
    ranges.iter().any(|&(a, b)| a <= t && t < b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: u64 = 17_804_000_000_000;
    const LAST: u64 = FIRST + 10_000_000_000;

    #[test]
    fn seconds_absolute_relative_and_open() {
        let r = TimeRanges::parse("17804.5,17805.000000001").unwrap();
        assert_eq!(
            r.resolve(FIRST, LAST),
            vec![(FIRST + 500_000_000, FIRST + 1_000_000_001)]
        );
        let r = TimeRanges::parse("2.5,3").unwrap();
        assert_eq!(
            r.resolve(FIRST, LAST),
            vec![(FIRST + 2_500_000_000, FIRST + 3_000_000_000)]
        );
        let r = TimeRanges::parse(",1").unwrap();
        assert_eq!(r.resolve(FIRST, LAST), vec![(0, FIRST + 1_000_000_000)]);
        let r = TimeRanges::parse("9,").unwrap().resolve(FIRST, LAST);
        assert!(contains(&r, LAST) && !contains(&r, FIRST));
        // An absolute time a little before the first sample (a program's clock read as it
        // started) is not taken for 17803.9 s after the start.
        let r = TimeRanges::parse("17803.9,17805").unwrap();
        assert_eq!(
            r.resolve(FIRST, LAST),
            vec![(FIRST - 100_000_000, FIRST + 1_000_000_000)]
        );
        // Past a short recording's length, still seconds from its start.
        let r = TimeRanges::parse(",1").unwrap();
        assert_eq!(
            r.resolve(FIRST, FIRST + 500_000_000),
            vec![(0, FIRST + 1_000_000_000)]
        );
    }

    #[test]
    fn last_seconds() {
        let r = TimeRanges::last(1_000_000_000).resolve(FIRST, LAST);
        assert_eq!(r, vec![(LAST - 1_000_000_000, u64::MAX)]);
        assert!(contains(&r, LAST) && !contains(&r, LAST - 1_000_000_001));
        let r = TimeRanges::last(60_000_000_000).resolve(FIRST, LAST);
        assert!(contains(&r, FIRST));
    }

    #[test]
    fn percent_ranges_and_slices() {
        let r = TimeRanges::parse("10%/2,90%-100%")
            .unwrap()
            .resolve(FIRST, LAST);
        assert_eq!(
            r,
            vec![
                (FIRST + 1_000_000_000, FIRST + 2_000_000_000),
                (FIRST + 9_000_000_000, LAST + 1)
            ]
        );
        assert!(contains(&r, LAST) && !contains(&r, FIRST + 2_000_000_000));
    }

    #[test]
    fn errors() {
        for bad in [
            "1",
            "a,b",
            "1.0000000001,2",
            "10%",
            "10%/11",
            "120%-130%",
            "5%-x%",
        ] {
            let e = TimeRanges::parse(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
    }
}
