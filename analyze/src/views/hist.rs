//! `analyze hist`: the distribution of a field or of the latency of traced events, as
//! bpftrace 0.17 prints `hist()` (power-of-two buckets) and `lhist()` (linear), per key:
//!
//! ```text
//! @[dd]:
//! [1]                    1 |                                                    |
//! [2, 4)                 0 |                                                    |
//! ...
//! [64, 128)           1000 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
//!
//! ```
//!
//! A key line `@:` (no key), `@[comm]`, `@[pid]` or `@[` + the stack, a frame a line, leaf
//! first + `]` (the key line ends with `: `); then a row per bucket from the first to the
//! last that holds values: the bucket (`(..., 0)` for negative values, `[0]`, `[1]`,
//! `[2, 4)`, ... `[1K, 2K)`, powers of 1024 as K, M, G, T), the count, and a bar of up to 52
//! `@`s scaled to the largest count; a blank line after each key. Keys come in the order of
//! their totals, smallest first (the last printed is the largest, as bpftrace prints them).
//! Linear buckets are `[0, STEP)`, `[STEP, 2*STEP)`, ... from 0 (lhist with min 0 and no
//! max: every value above 0 has its bucket).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use crate::read::{Quantity, RawSample, Recording, Weighed};
use crate::symbolize::{Symbolized, SymbolizedStack};
use crate::Error;

/// How values fall into buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Powers of two (`hist()`).
    Log2,
    /// `[k*step, (k+1)*step)` (`lhist(v, 0, ..., step)`).
    Linear { step: u64 },
}

/// What the histograms are per.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// One histogram.
    All,
    Comm,
    Pid,
    /// The sample's symbolized stack.
    Stack,
}

/// A linear histogram whose values span more buckets than this is refused: its rows would
/// be as many (bpftrace's lhist allows 1000 too).
pub const MAX_LINEAR_BUCKETS: u64 = 1000;

/// One histogram: counts by bucket index (0: negative values; log2: 1 is `[0]`, 2 is `[1]`,
/// i is `[2^(i-2), 2^(i-1))`; linear: k+1 is `[k*step, (k+1)*step)`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    buckets: BTreeMap<u64, u64>,
    total: u64,
}

impl Histogram {
    /// Counts `n` values `v`.
    pub fn add(&mut self, v: i128, n: u64, scale: Scale) {
        *self.buckets.entry(index(v, scale)).or_insert(0) += n;
        self.total += n;
    }

    /// How many values it counts.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Its rows, as bpftrace prints them; an error for a linear histogram wider than
    /// [`MAX_LINEAR_BUCKETS`].
    pub fn rows(&self, scale: Scale) -> Result<String, Error> {
        let (Some((&first, _)), Some((&last, _))) = (
            self.buckets.iter().find(|(_, &n)| n > 0),
            self.buckets.iter().rev().find(|(_, &n)| n > 0),
        ) else {
            return Ok(String::new());
        };
        if let Scale::Linear { step } = scale {
            if last - first >= MAX_LINEAR_BUCKETS {
                return Err(Error::TooManyBuckets {
                    buckets: last - first + 1,
                    step,
                    max: MAX_LINEAR_BUCKETS,
                });
            }
        }
        let max = self.buckets.values().copied().max().unwrap_or(0);
        let mut out = String::new();
        for i in first..=last {
            let n = self.buckets.get(&i).copied().unwrap_or(0);
            // bpftrace's arithmetic: a float ratio, truncated.
            let bar = (n as f32 / max as f32 * 52.0) as usize;
            let _ = writeln!(
                out,
                "{:<16}{n:>8} |{:<52}|",
                label(i, scale),
                "@".repeat(bar)
            );
        }
        Ok(out)
    }
}

fn index(v: i128, scale: Scale) -> u64 {
    if v < 0 {
        return 0;
    }
    match scale {
        Scale::Log2 if v == 0 => 1,
        Scale::Log2 => 2 + (127 - v.leading_zeros()) as u64,
        Scale::Linear { step } => (v / step.max(1) as i128).min(u64::MAX as i128 - 1) as u64 + 1,
    }
}

/// A bucket's name.
fn label(i: u64, scale: Scale) -> String {
    match (scale, i) {
        (_, 0) => "(..., 0)".into(),
        (Scale::Log2, 1) => "[0]".into(),
        (Scale::Log2, 2) => "[1]".into(),
        (Scale::Log2, i) => format!("[{}, {})", power_label(i - 2), power_label(i - 1)),
        (Scale::Linear { step }, i) => {
            let low = u128::from(i - 1) * u128::from(step);
            format!(
                "[{}, {})",
                linear_label(low),
                linear_label(low + u128::from(step))
            )
        }
    }
}

/// 2^power as bpftrace names it: 1, 2, ... 512, 1K ... 512K, 1M, ..., 1G, ..., 1T, ...
fn power_label(power: u64) -> String {
    let (power, suffix) = match power {
        p if p >= 40 => (p - 40, "T"),
        p if p >= 30 => (p - 30, "G"),
        p if p >= 20 => (p - 20, "M"),
        p if p >= 10 => (p - 10, "K"),
        p => (p, ""),
    };
    format!("{}{suffix}", 1u128 << power)
}

/// A linear bucket's bound as bpftrace names it: whole mebis as M, kibis as K.
fn linear_label(n: u128) -> String {
    const KILO: u128 = 1024;
    const MEGA: u128 = 1024 * 1024;
    match n {
        0 => "0".into(),
        n if n % MEGA == 0 => format!("{}M", n / MEGA),
        n if n % KILO == 0 => format!("{}K", n / KILO),
        n => n.to_string(),
    }
}

/// What `name` reads in the samples of each of `events` (aligned with the recording's
/// events: `None` for the others, and for events that lack it where several are pooled); an
/// error if none of them has it as a number.
pub fn quantities<'r>(
    rec: &'r Recording,
    events: &[usize],
    name: &str,
) -> Result<Vec<Option<Quantity<'r>>>, Error> {
    let mut out: Vec<Option<Quantity>> = vec![None; rec.events.len()];
    let mut first_error = None;
    for &e in events {
        match Quantity::number(rec, e, name) {
            Ok(q) => out[e] = Some(q),
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    match first_error {
        Some(err) if out.iter().all(Option::is_none) => Err(err),
        _ => Ok(out),
    }
}

/// The histograms of the selected samples `samples`: each sample's value is what
/// `quantities[event]` reads in it (events without one are left out); per key `by` (with
/// [`By::Stack`], `stacks` is the pipeline's symbolized timeline of the same selection).
/// Returns them keyed, and how many samples had no value (payloads too short).
pub fn histograms(
    rec: &Recording,
    samples: &[Weighed<'_>],
    quantities: &[Option<Quantity<'_>>],
    by: By,
    stacks: Option<&Symbolized>,
    scale: Scale,
) -> (Vec<(String, Histogram)>, u64) {
    let mut by_key: HashMap<String, Histogram> = HashMap::new();
    let mut stack_keys: HashMap<u32, String> = HashMap::new();
    let mut missing = 0;
    for (i, (s, _)) in samples.iter().enumerate() {
        let Some(Some(q)) = quantities.get(s.event) else {
            continue;
        };
        let Some(v) = q.number_in(s) else {
            missing += 1;
            continue;
        };
        let key = match (by, stacks.and_then(|st| Some((st, st.timeline.get(i)?)))) {
            (By::Stack, Some((sym, t))) => stack_keys
                .entry(t.stack)
                .or_insert_with(|| stack_key(sym, &sym.stacks[t.stack as usize]))
                .clone(),
            _ => key(rec, s, by),
        };
        by_key.entry(key).or_default().add(v, s.count, scale);
    }
    let mut keyed: Vec<(String, Histogram)> = by_key.into_iter().collect();
    keyed.sort_by(|(ka, a), (kb, b)| a.total.cmp(&b.total).then_with(|| ka.cmp(kb)));
    (keyed, missing)
}

/// The key of a sample: `@`, `@[comm]`, `@[pid]`.
fn key(rec: &Recording, s: &RawSample, by: By) -> String {
    match by {
        By::Comm => format!(
            "@[{}]",
            rec.comms.get(s.comm as usize).map_or("", String::as_str)
        ),
        By::Pid => format!("@[{}]", s.pid),
        By::All | By::Stack => "@".into(),
    }
}

/// The key of a stack: its frames, leaf first, one a line, as bpftrace prints a stack key.
pub fn stack_key(sym: &Symbolized, st: &SymbolizedStack) -> String {
    let mut key = String::from("@[\n");
    for &f in st.frames.iter().rev() {
        let _ = writeln!(
            key,
            "    {}",
            super::folded::frame_name(&sym.frames[f as usize])
        );
    }
    key.push(']');
    key
}

/// The histograms as bpftrace prints a map of them.
pub fn text(keyed: &[(String, Histogram)], scale: Scale) -> Result<String, Error> {
    let mut out = String::new();
    for (key, h) in keyed {
        let _ = writeln!(out, "{key}: ");
        out.push_str(&h.rows(scale)?);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bpftrace 0.17 (`@ = hist(args->count)` over `dd bs=100 count=1000` writing to
    /// /dev/null: its 1000 writes of 100 bytes and its report on stderr, 37, 61 and 1 bytes).
    const DD_HIST: &str = "\
@: 
[1]                    1 |                                                    |
[2, 4)                 0 |                                                    |
[4, 8)                 0 |                                                    |
[8, 16)                0 |                                                    |
[16, 32)               0 |                                                    |
[32, 64)               2 |                                                    |
[64, 128)           1000 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";

    fn of(values: &[i128], scale: Scale) -> Histogram {
        let mut h = Histogram::default();
        for &v in values {
            h.add(v, 1, scale);
        }
        h
    }

    #[test]
    fn log2_as_bpftrace_prints_it() {
        let mut values = vec![100; 1000];
        values.extend([37, 61, 1]);
        let h = of(&values, Scale::Log2);
        assert_eq!(text(&[("@".into(), h)], Scale::Log2).unwrap(), DD_HIST);
        // bpftrace's @big = hist(args->count * 100000) of the same run.
        let big: Vec<i128> = values.iter().map(|v| v * 100_000).collect();
        let rows = of(&big, Scale::Log2).rows(Scale::Log2).unwrap();
        assert!(rows.starts_with("[64K, 128K)            1 |"), "{rows}");
        assert!(rows.contains("\n[1M, 2M)               0 |"), "{rows}");
        assert!(rows.ends_with(
            "[8M, 16M)           1000 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
        ));
        let rows = of(&[-5, 0, 0, 1], Scale::Log2).rows(Scale::Log2).unwrap();
        assert_eq!(
            rows,
            "(..., 0)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n\
             [0]                    2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\
             [1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n"
        );
        let top = of(&[u64::MAX as i128], Scale::Log2)
            .rows(Scale::Log2)
            .unwrap();
        assert!(top.starts_with("[8388608T, 16777216T)"), "{top}");
    }

    #[test]
    fn linear_as_bpftrace_lhist_prints_it() {
        let mut values = vec![100; 1000];
        values.extend([37, 61, 1]);
        // bpftrace's lhist(args->count, 0, 200, 50) of the same run.
        assert_eq!(
            of(&values, Scale::Linear { step: 50 })
                .rows(Scale::Linear { step: 50 })
                .unwrap(),
            "[0, 50)                2 |                                                    |\n\
             [50, 100)              1 |                                                    |\n\
             [100, 150)          1000 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
        );
        let kibis = Scale::Linear { step: 1024 };
        let rows = of(&[1500, 2 << 20], kibis).rows(kibis);
        assert!(rows
            .unwrap_err()
            .to_string()
            .contains("2048 buckets of 1024"));
        let rows = of(&[-1, 1500, 3000], kibis).rows(kibis).unwrap();
        assert!(rows.starts_with("(..., 0)               1 |"), "{rows}");
        assert!(rows.contains("\n[1K, 2K)               1 |"), "{rows}");
        assert!(rows.ends_with(
            "[2K, 3K)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
        ));
        assert_eq!(linear_label(3 << 20), "3M");
    }

    #[test]
    fn keyed_by_comm_smallest_total_first() {
        use crate::read::testing::{recording, sample, write_payload};
        let mut rec = recording();
        let write = |pid, count| sample(1, pid, 1, 1, &[], Some(write_payload(pid, 1, count)));
        rec.samples = vec![write(7, 100), write(300, 5), write(7, 100), write(300, 5)];
        rec.samples.push(write(7, 1));
        // Cut short: counted as missing.
        rec.samples[3].raw = Some(write_payload(300, 1, 5)[..30].into());
        let samples: Vec<Weighed> = rec.samples.iter().map(|s| (s, 1)).collect();
        let count = Quantity::number(&rec, 1, "count").unwrap();
        let quantities = [None, Some(count), None];
        let (keyed, missing) = histograms(&rec, &samples, &quantities, By::Comm, None, Scale::Log2);
        assert_eq!(missing, 1);
        let t = text(&keyed, Scale::Log2).unwrap();
        assert_eq!(
            t,
            "@[curl]: \n\
             [4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\
             \n\
             @[dd]: \n\
             [1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n\
             [2, 4)                 0 |                                                    |\n\
             [4, 8)                 0 |                                                    |\n\
             [8, 16)                0 |                                                    |\n\
             [16, 32)               0 |                                                    |\n\
             [32, 64)               0 |                                                    |\n\
             [64, 128)              2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\
             \n"
        );
    }
}
