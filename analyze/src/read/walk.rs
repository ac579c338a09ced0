//! The records of a file's data section, walked in parts in parallel, each timed as it is
//! met. Records are a chain (each header gives the next one's offset), so a part other than
//! the first starts at what looks like a chain of records near its beginning; the part before
//! it, walking on, must arrive exactly there, or the part is walked again from where it did
//! arrive. A million records took a quarter of a report to walk on one thread.

use format::linux_perf_data::linux_perf_event_reader::RecordType;
use rayon::prelude::*;

use super::time_order::Timed;

/// A record in place: its header's fields and where its body lies.
#[derive(Clone, Copy)]
pub(super) struct Rec {
    /// The offset of its body (after the 8-byte header).
    pub at: usize,
    pub len: u16,
    pub kind: u16,
    pub misc: u16,
}

impl Rec {
    /// The record whose header lies at `at` in `bytes`, which the walk found whole.
    pub fn at(bytes: &[u8], at: usize) -> Rec {
        let header = |o: usize| u16::from_le_bytes([bytes[at + o], bytes[at + o + 1]]);
        Rec {
            at: at + 8,
            len: header(6) - 8,
            kind: header(0),
            misc: header(4),
        }
    }

    pub fn data<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        &bytes[self.at..self.at + self.len as usize]
    }
}

/// A record's place: its header's offset, whether it is a sample, and its attr in one
/// number, ordered as the records lie in the file (offsets below 2^48, attrs below
/// [`ATTR_LIMIT`]). The passes in time order need not touch the file to tell samples.
pub(super) fn place(at: usize, kind: u16, attr: u32) -> u64 {
    let sample = (kind as u32 == RecordType::SAMPLE.0) as u64;
    (at as u64) << 16 | sample << 15 | attr as u64
}

/// The header offset of a record's [`place`].
pub(super) fn offset(place: u64) -> usize {
    (place >> 16) as usize
}

/// Whether the record at a [`place`] is a sample.
pub(super) fn is_sample(place: u64) -> bool {
    place & 0x8000 != 0
}

/// The attr of a record's [`place`].
pub(super) fn attr(place: u64) -> u32 {
    (place & 0x7fff) as u32
}

/// Attrs are below this (a [`place`] holds 15 bits of one).
pub(super) const ATTR_LIMIT: u32 = 0x7fff;

/// The most bytes a walk takes ([`place`] holds offsets below 2^48).
pub(super) const MAX_BYTES: usize = 1 << 48;

/// Told which bytes of the input a walk is done with, as a part ends (see
/// `format::PageBudget::done_with_through`).
pub(super) type DoneWith<'a> = dyn Fn(&[u8]) + Sync + 'a;

/// What a walk needs of each record of a kernel-defined type (below 64): its time and
/// attr, `None` if it has no time.
pub(super) type TimeOf<'a> = dyn Fn(u16, &[u8]) -> Option<(u64, u32)> + Sync + 'a;

/// The records of `bytes` in file order, each with its time and [`place`], but perf's own
/// (user types, 64 and up: rounds, ids), which have neither time nor attr and would each end
/// a run of records in time order; `None` if one needs more than its bytes
/// (compressed records, auxtrace data following its record, pipe-mode tracing data), does
/// not fit in them, or has no time.
pub(super) fn walk(bytes: &[u8], done_with: &DoneWith, time_of: &TimeOf) -> Option<Vec<Timed>> {
    // Each part's start is searched for in parallel (a search reads within SEARCH bytes of
    // its part's beginning, so the starts come out increasing; one that would not is left
    // out): 64 searches took 1 ms on one CPU for a 256 MB file, each mapping its pages.
    //
    // Each search touches its part's start, and a touch maps 2 MiB of a file whose page cache
    // holds huge folios (record's own, and any read from disk by this reader): each search
    // gives its 2 MiB back as it ends, else half of the input was mapped at once before the
    // walk began (a 267 MB recording peaked at 130 MiB; 36-38 MiB so).
    let found: Vec<Option<usize>> = (1..bytes.len().div_ceil(PART))
        .into_par_iter()
        .map(|k| {
            let at = chain_near(bytes, k * PART);
            done_with(&bytes[k * PART..(k * PART + format::HUGE_PAGE).min(bytes.len())]);
            at
        })
        .collect();
    let mut starts = vec![0];
    for at in found.into_iter().flatten() {
        if at >= starts[starts.len() - 1] + 8 {
            starts.push(at);
        }
    }
    let limit = |k: usize| starts.get(k + 1).copied().unwrap_or(bytes.len());
    let walked: Vec<Part> = (0..starts.len())
        .into_par_iter()
        .map(|k| walk_part(bytes, starts[k], limit(k), done_with, time_of))
        .collect();
    // Each part's start checked against where the walk before it arrived.
    let mut arrived = 0;
    let mut parts = Vec::with_capacity(walked.len());
    for (k, part) in walked.into_iter().enumerate() {
        let part = if part.start == arrived {
            part
        } else if arrived < limit(k) {
            walk_part(bytes, arrived, limit(k), done_with, time_of)
        } else {
            continue;
        };
        arrived = part.end;
        parts.push(part.timed?);
    }
    Some(joined(parts))
}

/// Bytes of records per part of the walk.
const PART: usize = 4 << 20;

/// Records in a row that must look whole from an offset for a part to start there.
const CHAIN: usize = 16;

/// How far past its beginning a part's start is looked for.
const SEARCH: usize = 64 << 10;

/// Records walked from `start` up to the first at or past `limit`.
struct Part {
    start: usize,
    /// Where the walk stopped: the first record at or past `limit`.
    end: usize,
    /// The records walked, timed; `None` if one of them could not be taken.
    timed: Option<Vec<Timed>>,
}

fn walk_part(
    bytes: &[u8],
    start: usize,
    limit: usize,
    done_with: &DoneWith,
    time_of: &TimeOf,
) -> Part {
    // Room for records of 64 bytes (untouched room costs no memory); more grow the vector.
    let mut timed = Vec::with_capacity((limit - start) / 64 + 1);
    let mut at = start;
    let taken = loop {
        if at >= limit {
            break true;
        }
        let Some((kind, size)) = header(bytes, at) else {
            break false;
        };
        if kind < 64 {
            match time_of(kind, &bytes[at + 8..at + size]) {
                Some((time, attr)) => timed.push((time, place(at, kind, attr))),
                None => break false,
            }
        }
        at += size;
    };
    // The part's pages given back as it ends: a part per thread mapped at most.
    done_with(&bytes[start..at]);
    Part {
        start,
        end: at,
        timed: taken.then_some(timed),
    }
}

/// The type and size of the record at `at`, if it lies whole in `bytes` and needs nothing
/// past its own size (see [`walk`]).
fn header(bytes: &[u8], at: usize) -> Option<(u16, usize)> {
    use format::record_type::{AUXTRACE, COMPRESSED, COMPRESSED2, HEADER_TRACING_DATA};
    let h = bytes.get(at..at.checked_add(8)?)?;
    let kind = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let size = u16::from_le_bytes([h[6], h[7]]) as usize;
    let whole = size >= 8 && at + size <= bytes.len();
    let alone = !matches!(
        kind,
        AUXTRACE | COMPRESSED | COMPRESSED2 | HEADER_TRACING_DATA
    );
    (whole && alone && kind <= u16::MAX as u32).then_some((kind as u16, size))
}

/// The first offset at or after `from` (in steps of 8, as perf aligns records) from which
/// [`CHAIN`] records in a row (or all up to the end) look whole, of known types and sizes
/// in steps of 8; within [`SEARCH`] bytes.
fn chain_near(bytes: &[u8], from: usize) -> Option<usize> {
    let known = |kind: u16| matches!(kind, 1..=21 | 64..=90);
    let looks_whole = |start: usize| {
        let mut at = start;
        for _ in 0..CHAIN {
            if at == bytes.len() {
                return true;
            }
            match header(bytes, at) {
                Some((kind, size)) if known(kind) && size % 8 == 0 => at += size,
                _ => return false,
            }
        }
        true
    };
    let first = from.next_multiple_of(8);
    (first..bytes.len().min(first + SEARCH))
        .step_by(8)
        .find(|&at| looks_whole(at))
}

/// The parts' records in one vector, copied in parallel, each part's freed once copied (so
/// that the parts and the whole are not all held at once).
fn joined(parts: Vec<Vec<Timed>>) -> Vec<Timed> {
    if parts.len() == 1 {
        return parts.into_iter().next().expect("one part");
    }
    let total = parts.iter().map(Vec::len).sum();
    // Zeroed room: fresh pages, touched only as the copies write them.
    let mut all = vec![(0u64, 0u64); total];
    let mut rest = &mut all[..];
    let mut copies = Vec::with_capacity(parts.len());
    for part in parts {
        let (slot, tail) = rest.split_at_mut(part.len());
        copies.push((slot, part));
        rest = tail;
    }
    copies
        .into_par_iter()
        .for_each(|(slot, part)| slot.copy_from_slice(&part));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records as perf lays them out: sizes in steps of 8, a time in each body's first word.
    fn records(sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            let kind: u32 = if i % 7 == 6 { 68 } else { 9 };
            out.extend_from_slice(&kind.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(&(size as u16).to_le_bytes());
            out.extend_from_slice(&(i as u64).to_le_bytes());
            // A body that looks like records: a chain must not start inside it.
            for k in 16..size {
                out.push(if k % 8 == 6 {
                    16
                } else {
                    (k % 8 == 0) as u8 * 9
                });
            }
        }
        out
    }

    fn time_of(_: u16, data: &[u8]) -> Option<(u64, u32)> {
        Some((u64::from_le_bytes(data[..8].try_into().unwrap()), 3))
    }

    fn walked_alone(bytes: &[u8]) -> Option<Vec<Timed>> {
        walk_part(bytes, 0, bytes.len(), &|_| {}, &time_of).timed
    }

    fn walked(bytes: &[u8]) -> Option<Vec<Timed>> {
        walk(bytes, &|_| {}, &time_of)
    }

    #[test]
    fn parts_walked_in_parallel_are_the_records_walked_in_a_row() {
        let mut rng = 0x2545f4914f6cdd1du64;
        let mut sizes = Vec::new();
        let mut total = 0;
        while total < 6 * PART + 12_345 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let size = 16 + 8 * (rng % 200) as usize;
            sizes.push(size);
            total += size;
        }
        let bytes = records(&sizes);
        let boundaries: Vec<usize> = sizes
            .iter()
            .scan(0, |at, &size| {
                *at += size;
                Some(*at - size)
            })
            .collect();
        let all = walked(&bytes).unwrap();
        // Every record but perf's own (every seventh), in file order.
        let kernels: Vec<usize> = (0..sizes.len())
            .filter(|i| i % 7 != 6)
            .map(|i| boundaries[i])
            .collect();
        assert_eq!(all.iter().map(|t| offset(t.1)).collect::<Vec<_>>(), kernels);
        assert_eq!(Some(all.clone()), walked_alone(&bytes));
        let first = all[0];
        assert_eq!((first.0, offset(first.1), attr(first.1)), (0, 0, 3));
        assert!(is_sample(first.1));
        // Bodies full of what looks like records: some parts started inside one, were
        // found out and walked again.
        let fooled = (1..6)
            .filter_map(|k| chain_near(&bytes, k * PART))
            .filter(|at| boundaries.binary_search(at).is_err())
            .count();
        assert!(fooled > 0, "no part started inside a record");

        // A damaged record anywhere: no walk.
        let mut damaged = bytes.clone();
        let mut at = 0;
        for &size in &sizes {
            if at > 2 * PART {
                damaged[at + 6..at + 8].copy_from_slice(&0u16.to_le_bytes());
                break;
            }
            at += size;
        }
        assert_eq!(walked(&damaged), None);
        // Bytes at the end too few for a header: no walk.
        let mut cut = bytes.clone();
        cut.extend_from_slice(&[0; 4]);
        assert_eq!(walked(&cut), None);
    }
}
