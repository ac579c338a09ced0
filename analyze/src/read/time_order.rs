//! Records put in time order, in place. perf writes each CPU's ring buffer out in turn, so a
//! recording's records come as runs already in time order, each overlapping in time only the
//! few runs written just before it: merging each run into the ordered records before it, from
//! the first record it precedes, is linear work with a buffer of one run. A parallel sort of a
//! million records from scratch was a fifth of a report's CPU time; a merge into a second
//! vector cost that vector's memory.

use rayon::prelude::*;

/// A record's time, and a number that grows with its offset in the file (its place, see
/// `walk::place`). Records are ordered as these pairs are: by time, then place, which makes
/// every pair unique, so the order is the one a stable sort by time gives.
pub(super) type Timed = (u64, u64);

/// Records moved per record, at most, before the merging gives way to a sort (records not
/// written as a few CPUs' runs: each run reaching far back into those before it).
const MOVES_PER_RECORD: usize = 8;

/// The most records the merge buffers (the shorter side of a merge); longer: a sort.
const MAX_BUFFERED: usize = 1 << 16;

/// Records a part holds at least: below that, one thread merges faster than several start.
const MIN_PART: usize = 1 << 14;

/// Puts `timed` in (time, place) order: cut into a part per thread, each part's runs merged on
/// its own thread, then each part merged into the ordered parts before it, which it overlaps
/// only near the seam as runs overlap only the runs just before them.
pub(super) fn put_in_time_order(timed: &mut [Timed]) {
    put_in_time_order_in(timed, rayon::current_num_threads());
}

fn put_in_time_order_in(timed: &mut [Timed], parts: usize) {
    let part = timed.len().div_ceil(parts.max(1)).max(MIN_PART);
    let merged = if timed.len() > part {
        let each: Vec<bool> = timed.par_chunks_mut(part).map(merge_runs).collect();
        each.iter().all(|&m| m) && merge_seams(timed, part)
    } else {
        merge_runs(timed)
    };
    if !merged {
        timed.par_sort_unstable();
    }
}

/// Merges each `part`-long part of `timed`, in order, into the ordered parts before it;
/// `false` where one would buffer more than [`MAX_BUFFERED`] (parts reaching far back).
fn merge_seams(timed: &mut [Timed], part: usize) -> bool {
    let mut buffer: Vec<Timed> = Vec::new();
    let mut seam = part;
    while seam < timed.len() {
        let end = (seam + part).min(timed.len());
        let first = timed[seam];
        let from = timed[..seam].partition_point(|t| *t < first);
        if (seam - from).min(end - seam) > MAX_BUFFERED {
            return false;
        }
        merge_adjacent(&mut timed[from..end], seam - from, &mut buffer);
        seam = end;
    }
    true
}

/// Merges each run of `timed` into the ordered records before it; `false` (the records
/// reordered but not all in order) where that would move more than [`MOVES_PER_RECORD`] per
/// record or buffer more than [`MAX_BUFFERED`].
fn merge_runs(timed: &mut [Timed]) -> bool {
    let budget = MOVES_PER_RECORD * timed.len() + 4096;
    let mut moved = 0;
    let mut buffer: Vec<Timed> = Vec::new();
    let mut ordered = run_end(timed, 0);
    while ordered < timed.len() {
        let end = run_end(timed, ordered);
        let first = timed[ordered];
        let from = timed[..ordered].partition_point(|t| *t < first);
        let (left, right) = (ordered - from, end - ordered);
        moved += left + right;
        if moved > budget || left.min(right) > MAX_BUFFERED {
            return false;
        }
        merge_adjacent(&mut timed[from..end], left, &mut buffer);
        ordered = end;
    }
    true
}

/// Where the run of records in order starting at `start` ends.
fn run_end(timed: &[Timed], start: usize) -> usize {
    let mut end = (start + 1).min(timed.len());
    while end < timed.len() && timed[end - 1] < timed[end] {
        end += 1;
    }
    end
}

/// Merges `both[..mid]` and `both[mid..]`, each in order, buffering the shorter.
fn merge_adjacent(both: &mut [Timed], mid: usize, buffer: &mut Vec<Timed>) {
    buffer.clear();
    if mid <= both.len() - mid {
        // The left side buffered; merged from the front.
        buffer.extend_from_slice(&both[..mid]);
        let (mut l, mut r, mut out) = (0, mid, 0);
        while l < buffer.len() {
            if r < both.len() && both[r] < buffer[l] {
                both[out] = both[r];
                r += 1;
            } else {
                both[out] = buffer[l];
                l += 1;
            }
            out += 1;
        }
    } else {
        // The right side buffered; merged from the back.
        buffer.extend_from_slice(&both[mid..]);
        let (mut l, mut r, mut out) = (mid, buffer.len(), both.len());
        while r > 0 {
            out -= 1;
            if l > 0 && both[l - 1] > buffer[r - 1] {
                both[out] = both[l - 1];
                l -= 1;
            } else {
                both[out] = buffer[r - 1];
                r -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut v: Vec<Timed>) -> Vec<Timed> {
        v.sort();
        v
    }

    fn in_time_order(mut v: Vec<Timed>) -> Vec<Timed> {
        put_in_time_order(&mut v);
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

    /// Records of `cpus` CPUs written a buffer at a time, as perf writes them: every few
    /// milliseconds each CPU's buffer is read, one after the other, each holding the records
    /// since its last read; times may repeat within a CPU and across CPUs.
    fn as_perf_writes(cpus: usize, n: usize, rng: &mut Rng) -> Vec<Timed> {
        let mut last_read = vec![0u64; cpus];
        let mut now = 0;
        let mut out = Vec::new();
        while out.len() < n {
            now += 1000;
            for (cpu, last) in last_read.iter_mut().enumerate() {
                let read_at = now + 10 * cpu as u64 + rng.next(10);
                let mut times: Vec<u64> = (0..rng.next(60))
                    .map(|_| *last + 1 + rng.next(read_at - *last))
                    .collect();
                times.sort();
                for time in times {
                    let i = out.len() as u64;
                    out.push((time, i));
                }
                *last = read_at;
            }
        }
        out
    }

    /// Records of CPUs whose clocks drift apart without bound: runs reach far back.
    fn drifting(cpus: usize, n: usize, rng: &mut Rng) -> Vec<Timed> {
        let mut clocks = vec![0u64; cpus];
        let mut out = Vec::new();
        while out.len() < n {
            for clock in clocks.iter_mut() {
                for _ in 0..1 + rng.next(50) {
                    *clock += rng.next(3);
                    let i = out.len() as u64;
                    out.push((*clock, i));
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
            assert!(
                merge_runs(&mut timed.clone()),
                "{cpus} CPUs: merged, no sort"
            );
            assert_eq!(in_time_order(timed.clone()), sorted(timed), "{cpus} CPUs");
            let timed = drifting(cpus, n, &mut rng);
            assert_eq!(
                in_time_order(timed.clone()),
                sorted(timed),
                "{cpus} CPUs drifting"
            );
        }
    }

    #[test]
    fn records_in_no_order_are_sorted() {
        let mut rng = Rng(12345);
        let timed: Vec<Timed> = (0..5_000).map(|i| (rng.next(1000), i)).collect();
        assert!(!merge_runs(&mut timed.clone()), "handed over to the sort");
        assert_eq!(in_time_order(timed.clone()), sorted(timed));
        let timed = as_perf_writes(64, 20_000, &mut rng);
        assert_eq!(in_time_order(timed.clone()), sorted(timed));
        // Two long runs, the second before the first: more than the merge buffers.
        let n = MAX_BUFFERED as u64 + 10;
        let timed: Vec<Timed> = (0..2 * n).map(|i| ((i + n) % (2 * n), i)).collect();
        assert!(!merge_runs(&mut timed.clone()));
        assert_eq!(in_time_order(timed.clone()), sorted(timed));
    }

    /// Parts merged on their own and then at their seams give the order one merge gives,
    /// for any number of parts, also where the parts' runs reach back past a seam.
    #[test]
    fn parts_merged_apart_then_at_their_seams_are_in_time_order() {
        let mut rng = Rng(0x2545f4914f6cdd1d);
        for parts in [2, 3, 7, 16, 64] {
            for timed in [
                as_perf_writes(2, 100_000, &mut rng),
                as_perf_writes(16, 100_000, &mut rng),
                drifting(4, 100_000, &mut rng),
            ] {
                let mut got = timed.clone();
                put_in_time_order_in(&mut got, parts);
                assert_eq!(got, sorted(timed), "{parts} parts");
            }
        }
        // A record far in the future early on: every seam reaches back to it.
        let mut timed: Vec<Timed> = (0..100_000).map(|i| (i, i)).collect();
        timed[10].0 = u64::MAX;
        let mut got = timed.clone();
        put_in_time_order_in(&mut got, 8);
        assert_eq!(got, sorted(timed));
    }

    #[test]
    fn nothing_one_and_equal_times() {
        assert_eq!(in_time_order(Vec::new()), Vec::new());
        assert_eq!(in_time_order(vec![(5, 0)]), vec![(5, 0)]);
        // Equal times keep file order.
        let timed = vec![(7, 0), (7, 1), (3, 2), (7, 3), (3, 4)];
        assert_eq!(in_time_order(timed.clone()), sorted(timed));
    }
}
