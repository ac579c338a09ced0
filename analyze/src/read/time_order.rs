//! Records in time order. perf writes each CPU's ring buffer out in turn, so a recording
//! holds runs of records in time order, and the runs of one CPU follow each other in time:
//! chained into a stream per CPU, they only need merging. Sorting a million records from
//! scratch was a fifth of a report's CPU time.

use std::ops::Range;

use rayon::prelude::*;

/// A record's time, its index in the file, and its attr.
pub(super) type Timed = (u64, u32, u32);

/// Streams merged at most; records that would need more are sorted instead.
const MAX_STREAMS: usize = 16;

/// What records are ordered by: time, then index (which makes every key unique).
type Key = (u64, u32);

fn key(t: &Timed) -> Key {
    (t.0, t.1)
}

/// `timed` in (time, index) order: each run in order joins the first stream whose last
/// record it follows, and the streams are merged; where more than [`MAX_STREAMS`] streams
/// would be needed (records not written as runs), sorted.
pub(super) fn in_time_order(mut timed: Vec<Timed>) -> Vec<Timed> {
    // Each stream: its runs, and the key of its last record.
    let mut streams: Vec<(Vec<Range<usize>>, Key)> = Vec::new();
    let mut start = 0;
    for end in 1..=timed.len() {
        if end < timed.len() && key(&timed[end - 1]) <= key(&timed[end]) {
            continue;
        }
        let (first, last) = (key(&timed[start]), key(&timed[end - 1]));
        match streams.iter().position(|(_, l)| *l <= first) {
            Some(s) => {
                streams[s].0.push(start..end);
                streams[s].1 = last;
            }
            None if streams.len() < MAX_STREAMS => {
                let runs: Vec<Range<usize>> = std::iter::once(start..end).collect();
                streams.push((runs, last));
            }
            None => {
                timed.par_sort_unstable_by_key(key);
                return timed;
            }
        }
        start = end;
    }
    if streams.len() <= 1 {
        return timed;
    }
    let streams: Vec<Stream> = streams
        .into_iter()
        .map(|(runs, _)| Stream::new(runs))
        .collect();
    merge(&timed, &streams)
}

/// Runs of records in order, each after the one before: one sorted sequence.
struct Stream {
    runs: Vec<Range<usize>>,
    /// The position in the stream of each run's first record.
    starts: Vec<usize>,
    len: usize,
}

impl Stream {
    fn new(runs: Vec<Range<usize>>) -> Stream {
        let mut starts = Vec::with_capacity(runs.len());
        let mut len = 0;
        for r in &runs {
            starts.push(len);
            len += r.len();
        }
        Stream { runs, starts, len }
    }

    /// The index in `timed` of the record at position `p` (< `len`).
    fn index(&self, p: usize) -> usize {
        let r = self.starts.partition_point(|&s| s <= p) - 1;
        self.runs[r].start + (p - self.starts[r])
    }

    /// How many records come before `pivot`.
    fn before(&self, timed: &[Timed], pivot: Key) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if key(&timed[self.index(mid)]) < pivot {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The indices in `timed` of the records at positions `from..to`.
    fn indices(&self, from: usize, to: usize) -> impl Iterator<Item = usize> + '_ {
        let r = self.starts.partition_point(|&s| s <= from).max(1) - 1;
        let first = self.runs.get(r).map_or(0..0, |run| {
            run.start + (from - self.starts[r]).min(run.len())..run.end
        });
        std::iter::once(first)
            .chain(self.runs.iter().skip(r + 1).cloned())
            .flatten()
            .take(to - from)
    }
}

/// The records of `streams` merged in order. The work is cut in parts at records of the
/// longest stream (each stream's share of a part found by binary search), merged in
/// parallel into their places.
fn merge(timed: &[Timed], streams: &[Stream]) -> Vec<Timed> {
    const PARTS: usize = 16;
    let longest = streams
        .iter()
        .max_by_key(|s| s.len)
        .expect("two streams or more");
    // Part boundaries: each stream's position at each cut.
    let mut cuts: Vec<Vec<usize>> = vec![vec![0; streams.len()]];
    for k in 1..PARTS {
        let p = longest.len * k / PARTS;
        if p == 0 || p >= longest.len {
            continue;
        }
        let pivot = key(&timed[longest.index(p)]);
        cuts.push(streams.iter().map(|s| s.before(timed, pivot)).collect());
    }
    cuts.push(streams.iter().map(|s| s.len).collect());
    let total: usize = streams.iter().map(|s| s.len).sum();
    let mut merged = vec![(0u64, 0u32, 0u32); total];
    let mut rest = &mut merged[..];
    let mut parts = Vec::new();
    for w in cuts.windows(2) {
        let n: usize = w[1].iter().zip(&w[0]).map(|(b, a)| b - a).sum();
        let (part, tail) = rest.split_at_mut(n);
        parts.push((part, w[0].clone(), w[1].clone()));
        rest = tail;
    }
    parts.into_par_iter().for_each(|(out, from, to)| {
        let mut its: Vec<_> = streams
            .iter()
            .enumerate()
            .map(|(s, st)| st.indices(from[s], to[s]))
            .collect();
        let mut heads: Vec<Option<Timed>> = its
            .iter_mut()
            .map(|it| it.next().map(|i| timed[i]))
            .collect();
        for slot in out.iter_mut() {
            let (s, t) = heads
                .iter()
                .enumerate()
                .filter_map(|(s, h)| h.map(|t| (s, t)))
                .min_by_key(|(_, t)| key(t))
                .expect("as many records as the part's streams hold");
            *slot = t;
            heads[s] = its[s].next().map(|i| timed[i]);
        }
    });
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut v: Vec<Timed>) -> Vec<Timed> {
        v.sort_by_key(key);
        v
    }

    /// A small deterministic generator (xorshift), for the shapes below.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Records of `cpus` CPUs written a buffer at a time, as perf writes them: each CPU's
    /// times rise, buffers of the CPUs alternate, times may repeat across CPUs.
    fn as_perf_writes(cpus: usize, n: usize, rng: &mut Rng) -> Vec<Timed> {
        let mut clocks = vec![0u64; cpus];
        let mut out = Vec::new();
        while out.len() < n {
            for clock in clocks.iter_mut() {
                for _ in 0..1 + rng.next(50) {
                    *clock += rng.next(3);
                    let i = out.len() as u32;
                    out.push((*clock, i, (i % 3)));
                }
            }
        }
        out
    }

    #[test]
    fn runs_of_each_cpu_merge_into_time_order() {
        let mut rng = Rng(0x9e3779b97f4a7c15);
        for (cpus, n) in [
            (1, 5_000),
            (2, 5_000),
            (3, 5_000),
            (8, 5_000),
            (16, 5_000),
            (2, 3),
            (3, 60_000),
        ] {
            let timed = as_perf_writes(cpus, n, &mut rng);
            assert_eq!(in_time_order(timed.clone()), sorted(timed), "{cpus} CPUs");
        }
    }

    #[test]
    fn records_in_no_order_are_sorted() {
        let mut rng = Rng(12345);
        let timed: Vec<Timed> = (0..5_000).map(|i| (rng.next(1000), i, 0)).collect();
        assert_eq!(in_time_order(timed.clone()), sorted(timed));
        // More CPUs than streams merged.
        let timed = as_perf_writes(40, 5_000, &mut rng);
        assert_eq!(in_time_order(timed.clone()), sorted(timed));
    }

    #[test]
    fn nothing_one_and_equal_times() {
        assert_eq!(in_time_order(Vec::new()), Vec::new());
        assert_eq!(in_time_order(vec![(5, 0, 0)]), vec![(5, 0, 0)]);
        // Equal times keep file order.
        let timed = vec![(7, 0, 0), (7, 1, 1), (3, 2, 0), (7, 3, 2), (3, 4, 1)];
        assert_eq!(in_time_order(timed.clone()), sorted(timed));
    }
}
