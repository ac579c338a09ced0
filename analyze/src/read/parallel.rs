//! The parallel path of reading (`read_with`), for files whose records can be walked in place
//! (file mode, little-endian, uncompressed, every record timed): records walked and timed in
//! parallel parts ([`super::walk`]), put in time order, the process timeline replayed in time order
//! (versioned), then samples parsed, merged and placed in their processes' mappings in
//! parallel. It gives what the sequential path gives: the order of records is time, then
//! file offset, as linux-perf-data's round-by-round sort yields it when rounds do not overlap
//! (perf's guarantee). `BPFPERF_SEQUENTIAL_READ=1` takes the sequential path instead (tests
//! compare the two).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use format::linux_perf_data::linux_perf_event_reader::{
    get_record_id, get_record_identifier, get_record_timestamp, AttrFlags, CpuMode, Endianness,
    EventRecord, RawData, RawEventRecord, RecordIdParseInfo, RecordParseInfo, RecordType,
    SampleFormat, SampleRecord,
};
use format::linux_perf_data::PerfFile;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHasher};

use super::callchain::{mapped_stack_copy, split_callchain_with, stack_copy};
use super::recording::{RawSample, Recording, StackBytes, UserFrame, UserRegs};
use super::sample_head::{self, Head};
use super::timeline::Timeline;
use super::traced::keeps_raw;
use super::walk::{self, Rec, ATTR_LIMIT};

type LE = byteorder::LittleEndian;

/// How a record's attr is found.
enum AttrOf {
    One,
    Id(RecordIdParseInfo),
    Identifier(bool),
}

/// The file's events, as the parallel path needs them; `None` if it cannot take this file.
struct Events {
    parse: Vec<RecordParseInfo>,
    format: Vec<SampleFormat>,
    /// Each attr's `sample_regs_user`.
    regs_mask: Vec<u64>,
    /// Whether samples of each attr keep their RAW payload (tracepoints').
    keeps_raw: Vec<bool>,
    attr_of: AttrOf,
    by_id: HashMap<u64, usize>,
}

impl Events {
    fn of(file: &PerfFile) -> Option<Events> {
        if file.endian() != Endianness::LittleEndian {
            return None;
        }
        let attrs = file.event_attributes();
        if attrs.is_empty()
            || attrs.len() >= ATTR_LIMIT as usize
            || !attrs.iter().all(|a| {
                a.attr.flags.contains(AttrFlags::SAMPLE_ID_ALL)
                    && a.attr.sample_format.contains(SampleFormat::TIME)
            })
        {
            return None;
        }
        let format: Vec<SampleFormat> = attrs.iter().map(|a| a.attr.sample_format).collect();
        if !format.iter().all(|&f| sample_head::readable(f)) {
            return None;
        }
        let parse: Vec<RecordParseInfo> = attrs
            .iter()
            .map(|a| RecordParseInfo::new(&a.attr, Endianness::LittleEndian))
            .collect();
        let attr_of = if attrs.len() == 1 {
            AttrOf::One
        } else if parse
            .iter()
            .all(|p| p.id_parse_info == parse[0].id_parse_info)
        {
            AttrOf::Id(parse[0].id_parse_info)
        } else if attrs
            .iter()
            .all(|a| a.attr.sample_format.contains(SampleFormat::IDENTIFIER))
        {
            AttrOf::Identifier(true)
        } else {
            return None;
        };
        let by_id = attrs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.event_ids.iter().map(move |&id| (id, i)))
            .collect();
        Some(Events {
            parse,
            format,
            regs_mask: attrs.iter().map(|a| a.attr.sample_regs_user).collect(),
            keeps_raw: attrs.iter().map(|a| keeps_raw(&a.attr)).collect(),
            attr_of,
            by_id,
        })
    }

    fn attr(&self, kind: RecordType, data: &[u8]) -> usize {
        let id = match &self.attr_of {
            AttrOf::One => return 0,
            AttrOf::Id(info) => get_record_id::<LE>(kind, RawData::Single(data), info),
            AttrOf::Identifier(all) => {
                get_record_identifier::<LE>(kind, RawData::Single(data), *all)
            }
        };
        id.and_then(|id| self.by_id.get(&id).copied()).unwrap_or(0)
    }
}

/// Whether the parallel path can take `file` (tests check that they exercise it).
#[cfg(test)]
pub(super) fn takes(file: &PerfFile) -> bool {
    Events::of(file).is_some()
}

/// Records (or samples) per chunk of a parallel pass; the pages a chunk leaves behind are
/// given back as the next begins.
const CHUNK: usize = 4096;

/// Chunks of a pass over records that may lie far apart (the samples a merge kept).
const SPARSE_CHUNK: usize = 256;

/// Where a pass over records in time order is in the input, for giving back the pages it
/// is done with: those below the first record (in the file) of the chunk it begins. Time
/// order interleaves the records of perf's per-CPU buffers, so a chunk reaches back a little
/// into the stretch the chunk before read, not further (where it does, the pages are mapped
/// again). Each run of chunks (one task's) keeps its own mark, from its first chunk on, and
/// gives back what it still holds when it is dropped (the task ends).
struct LowWater<'a> {
    pages: &'a format::PageBudget,
    bytes: &'a [u8],
    /// The mark: the first record of the chunk begun last.
    low: Option<usize>,
    /// The last record (in the file) of the chunks begun so far.
    high: usize,
    /// Where a sparse pass begins a chunk early ([`LowWater::far_ahead`]).
    reach: usize,
}

/// How far a sparse pass goes past where its chunk began before it begins another: the
/// samples a merge kept can be megabytes apart, and where the input's page cache holds
/// 2 MiB folios each maps 2 MiB (256 of them, a chunk, spanned a million-sample file: 35
/// MiB more at the peak).
const REACH: usize = 8 << 20;

impl<'a> LowWater<'a> {
    fn new(pages: &'a format::PageBudget, bytes: &'a [u8]) -> LowWater<'a> {
        LowWater {
            pages,
            bytes,
            low: None,
            high: 0,
            reach: 0,
        }
    }

    /// A chunk whose records are at `places` (the one it begins with first) begins: the
    /// pages between the mark and its first record in the file are given back, and the mark
    /// moves there.
    fn chunk_begins(&mut self, places: impl Iterator<Item = u64>) {
        let mut offsets = places.map(walk::offset).peekable();
        let Some(&begins_at) = offsets.peek() else {
            return;
        };
        let (first, last) =
            offsets.fold((begins_at, begins_at), |(lo, hi), o| (lo.min(o), hi.max(o)));
        self.high = self.high.max(last);
        // Counted from where the pass is, not from the chunk's first record: time order
        // interleaves the buffers of many CPUs, a round apart in the file (tens of MB on a
        // large machine), and counted from a record a round behind, every sample after it
        // would begin a chunk again.
        self.reach = begins_at.saturating_add(REACH);
        match self.low {
            Some(low) if low < first => self.pages.done_with(&self.bytes[low..first]),
            Some(_) => return,
            None => {}
        }
        self.low = Some(first);
    }

    /// Whether a record at `place` lies more than [`REACH`] past where the chunk began:
    /// a sparse pass begins the next chunk there (at most once per [`REACH`] it goes).
    fn far_ahead(&self, place: u64) -> bool {
        self.low.is_some() && walk::offset(place) >= self.reach
    }
}

impl Drop for LowWater<'_> {
    /// The task ends: what its last chunks mapped, from the mark to the block its last
    /// record begins in, is given back (left, it stayed until the pass ended: a task's
    /// worth per task, and a busy machine's threads steal many).
    fn drop(&mut self) {
        if let Some(low) = self.low.filter(|&low| low <= self.high) {
            let end = (self.high + 1).min(self.bytes.len());
            self.pages.done_with_through(&self.bytes[low..end]);
        }
    }
}

/// Samples per chunk of the merge, of `n` samples: each chunk merges its own, then the
/// chunks' survivors merge (a chunk of a long recording holds a few hundred distinct stacks).
/// A short recording is still cut in 16 chunks or more, so that every core merges (a few
/// thousand samples of deep, mostly distinct stacks took 3 ms on one); the size depends on
/// `n` alone, so the result does not depend on the thread count.
fn merge_chunk(n: usize) -> usize {
    (n / 16).clamp(1 << 10, 1 << 16)
}

/// A sample kept by the merge, and the identical ones merged into it.
struct Kept {
    sample: usize,
    /// What makes samples identical ([`identity`]); empty: it stands alone (it carries a
    /// stack copy, or merging is off).
    key: Box<[u8]>,
    /// The key's hash (0 for an empty key).
    hash: u64,
    count: u64,
    period: u64,
}

/// What makes two samples identical, as bytes: event, timeline version (the thread's name
/// and mappings), pid, tid, whether it was taken in the kernel, the RAW payload it keeps
/// (`raw`: a traced event's fields) and the callchain. Kept samples hold theirs, so that
/// merging compares in memory, not in pages of the input spread over the whole file.
fn identity(
    out: &mut Vec<u8>,
    attr: u32,
    version: u64,
    head: &Head,
    in_kernel: bool,
    raw: Option<&[u8]>,
) {
    out.extend_from_slice(&attr.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&head.pid.to_le_bytes());
    out.extend_from_slice(&head.tid.to_le_bytes());
    out.push(in_kernel as u8);
    // Its length first: payload and callchain cannot trade bytes.
    let raw = raw.unwrap_or_default();
    out.extend_from_slice(&(raw.len() as u64).to_le_bytes());
    out.extend_from_slice(raw);
    out.extend_from_slice(head.chain);
}

/// Samples merged in the order they are added: each into the first identical one.
#[derive(Default)]
struct Merger {
    kept: Vec<Kept>,
    /// Kept samples by their key's hash (a collision keeps the later one).
    first: FxHashMap<u64, usize>,
}

impl Merger {
    fn with_capacity(samples: usize) -> Merger {
        Merger {
            kept: Vec::with_capacity(samples),
            first: FxHashMap::default(),
        }
    }

    /// Adds `sample`, which stands for `count` samples of `period` in all, with its `key`.
    fn add(&mut self, sample: usize, key: &[u8], count: u64, period: u64) {
        let hash = if key.is_empty() {
            0
        } else {
            let mut h = FxHasher::default();
            key.hash(&mut h);
            h.finish()
        };
        if !self.merged_into_kept(key, hash, count, period) {
            if !key.is_empty() {
                self.first.insert(hash, self.kept.len());
            }
            self.kept.push(Kept {
                sample,
                key: key.into(),
                hash,
                count,
                period,
            });
        }
    }

    /// Adds a sample another merger kept (its key moved, its hash not computed again).
    fn keep(&mut self, k: Kept) {
        if !self.merged_into_kept(&k.key, k.hash, k.count, k.period) {
            if !k.key.is_empty() {
                self.first.insert(k.hash, self.kept.len());
            }
            self.kept.push(k);
        }
    }

    /// Merges `count` samples of `period` into the kept one with `key`, if there is one.
    fn merged_into_kept(&mut self, key: &[u8], hash: u64, count: u64, period: u64) -> bool {
        if key.is_empty() {
            return false;
        }
        if let Some(&at) = self.first.get(&hash) {
            let into = &mut self.kept[at];
            if *into.key == *key {
                into.count += count;
                into.period += period;
                return true;
            }
        }
        false
    }
}

/// Fills `rec` from the records in `bytes`; `false` (and `rec` untouched) if this path cannot
/// take the file.
pub(super) fn read(
    file: &PerfFile,
    input: &format::InputBytes,
    bytes: &[u8],
    rec: &mut Recording,
    intern: &mut dyn FnMut(&mut Recording, &str) -> u32,
    unknown_comm: u32,
    merge: bool,
) -> bool {
    let Some(events) = Events::of(file) else {
        return false;
    };
    let pages = input.pages();
    if bytes.len() >= walk::MAX_BYTES {
        return false;
    }
    let time_of = |kind: u16, data: &[u8]| {
        let kind = RecordType(kind as u32);
        let attr = events.attr(kind, data);
        let time = get_record_timestamp::<LE>(kind, RawData::Single(data), &events.parse[attr])?;
        Some((time, attr as u32))
    };
    // Each part of the walk is a task of its own: its last block too.
    let done_with = |walked: &[u8]| pages.done_with_through(walked);
    let Some(mut timed) = walk::walk(bytes, &done_with, &time_of) else {
        return false;
    };
    pages.pass_done();
    crate::timing::mark("read: walk headers + time");
    // By time, then file order (perf's own records, rounds and ids, were left out by the
    // walk: each would end a run of records in time order).
    super::time_order::put_in_time_order(&mut timed);
    crate::timing::mark("read: sort");

    // The timeline, in time order; samples remember its version. The other records (mmaps,
    // comms, forks: a few thousand among a million samples) are found in parallel and
    // replayed in order; a sample's version is the one after the last of them before it,
    // worked out by the passes below as they go. `samples` is `timed` as it is, (time, place)
    // of every record, the others' skipped (a pass over a million entries to drop them, or
    // one to note each sample's version, cost as much as the rest on 16 cores).
    let others: Vec<usize> = timed
        .par_iter()
        .enumerate()
        .filter(|(_, &(_, place))| !walk::is_sample(place))
        .map(|(i, _)| i)
        .collect();
    let mut timeline = Timeline::default();
    let first_version = timeline.version;
    let mut version_after = Vec::with_capacity(others.len());
    let mut scattered = pages.scattered();
    for &i in &others {
        let place = timed[i].1;
        let r = Rec::at(bytes, walk::offset(place));
        scattered.read(&bytes[r.at - 8..r.at + r.len as usize]);
        let raw = RawEventRecord {
            record_type: RecordType(r.kind as u32),
            misc: r.misc,
            data: RawData::Single(r.data(bytes)),
            parse_info: events.parse[walk::attr(place) as usize],
        };
        if let Ok(parsed) = format::parse_record(&raw) {
            timeline.replay(rec, intern, walk::attr(place) as usize, &parsed);
        }
        version_after.push(timeline.version);
    }
    // The version of a sample after `before` other records.
    let version_after_others = |before: usize| match before {
        0 => first_version,
        n => version_after[n - 1],
    };
    // The version of the sample at `i`.
    let version_of = |i: usize| version_after_others(others.partition_point(|&o| o < i));
    let samples = timed;
    drop(scattered);
    pages.pass_done();
    crate::timing::mark("read: timeline");

    // Each sample's head, read in place, in parallel. A sample's record, from its place:
    let rec_of = |place: u64| Rec::at(bytes, walk::offset(place));
    let may_copy = |attr: u32| {
        let f = events.format[attr as usize];
        f.intersects(SampleFormat::REGS_USER | SampleFormat::STACK_USER)
    };
    let full = |place: u64, attr: u32| -> Option<SampleRecord> {
        let r = rec_of(place);
        let raw = RawEventRecord {
            record_type: RecordType::SAMPLE,
            misc: r.misc,
            data: RawData::Single(r.data(bytes)),
            parse_info: events.parse[attr as usize],
        };
        match format::parse_record(&raw) {
            Ok(EventRecord::Sample(s)) => Some(s),
            _ => None,
        }
    };
    // A sample's stack copy, read in place where its format allows (the full parse reads
    // every field: a tenth of a DWARF report's time).
    let stack_copy_of = |r: u64, attr: u32, head: &Head<'_>| {
        let format = events.format[attr as usize];
        if !sample_head::reads_stack_copies(format) {
            return full(r, attr)
                .and_then(|s| stack_copy(&s.user_regs, &s.user_stack, Some(input)));
        }
        let data = rec_of(r).data(bytes);
        let ([ip, sp, bp], stack) =
            sample_head::stack_copy(data, format, events.regs_mask[attr as usize], head)?;
        mapped_stack_copy(UserRegs { ip, sp, bp }, &data[stack], input)
    };
    let head_of = |i: usize| {
        let (_, r) = samples[i];
        sample_head::head(rec_of(r).data(bytes), events.format[walk::attr(r) as usize])
    };
    // The RAW payload a sample keeps (traced events'), read in place.
    let raw_of = |r: u64, attr: u32, head: &Head<'_>| -> Option<&[u8]> {
        if !events.keeps_raw[attr as usize] {
            return None;
        }
        sample_head::raw(rec_of(r).data(bytes), events.format[attr as usize], head)
    };
    // Identical samples merge into the first of them (in time order): each chunk of samples
    // merges its own in parallel, then the chunks' survivors merge in order. Chunks are cut
    // at fixed places, so the result does not depend on the number of threads.
    let merge_chunk = merge_chunk(samples.len());
    let merged: Vec<Vec<Kept>> = samples
        .par_chunks(merge_chunk)
        .enumerate()
        .map(|(c, chunk)| {
            // Room for the samples that will stand alone (in DWARF recordings, nearly all):
            // growing by doubling would hold up to three times them. Merged samples are few.
            let alone = chunk
                .iter()
                .filter(|&&(_, r)| walk::is_sample(r) && (!merge || may_copy(walk::attr(r))))
                .count();
            let mut kept = Merger::with_capacity(alone);
            let mut key = Vec::new();
            let mut low = LowWater::new(pages, bytes);
            let mut before = others.partition_point(|&o| o < c * merge_chunk);
            for (k, &(_, r)) in chunk.iter().enumerate() {
                let attr = walk::attr(r);
                // What the chunks before left behind is given back as a chunk begins; the
                // rest when the task ends (`low` is dropped).
                if k % CHUNK == 0 && !pages.keeps_all() {
                    // Only the samples: the other records, side-band written where their
                    // CPU's buffer lay, can be far behind in the file and would hold it.
                    let next = chunk[k..].iter().take(CHUNK).map(|&(_, r)| r);
                    low.chunk_begins(next.filter(|&r| walk::is_sample(r)));
                }
                if !walk::is_sample(r) {
                    before += 1;
                    continue;
                }
                let version = version_after_others(before);
                let sample = c * merge_chunk + k;
                // Samples of a format that may carry a stack copy stand alone here, unread
                // (most carry one; those that do not are grouped by the pipeline, which
                // groups unwound stacks too); their period is read when they are placed.
                if !merge || may_copy(attr) {
                    kept.add(sample, &[], 1, 0);
                    continue;
                }
                let rec = rec_of(r);
                let format = events.format[attr as usize];
                let Some(head) = sample_head::head(rec.data(bytes), format) else {
                    continue;
                };
                key.clear();
                let in_kernel = CpuMode::from_misc(rec.misc) == CpuMode::Kernel;
                identity(
                    &mut key,
                    attr,
                    version,
                    &head,
                    in_kernel,
                    raw_of(r, attr, &head),
                );
                kept.add(sample, &key, 1, head.period);
            }
            kept.kept.shrink_to_fit();
            kept.kept
        })
        .collect();
    let mut all = Merger::with_capacity(merged.iter().map(Vec::len).sum());
    for chunk in merged {
        for k in chunk {
            all.keep(k);
        }
    }
    let kept = all.kept;
    pages.pass_done();
    crate::timing::mark("read: merge");

    let (timeline, mappings) = (&timeline, &rec.mappings);
    // Placed by index into one vector (a filtered parallel collect would gather pieces and
    // copy them: twice the samples' memory at once), then the samples left out are dropped
    // in place.
    let placed: Vec<Option<RawSample>> = kept
        .par_iter()
        // Where pages are given back, runs of a few chunks per task, each with its mark (a
        // task of one chunk would give nothing back); else tasks as small as rayon likes (a
        // small recording's few thousand samples on every core).
        .with_min_len(if pages.keeps_all() {
            1
        } else {
            8 * SPARSE_CHUNK
        })
        .enumerate()
        .map_init(
            || LowWater::new(pages, bytes),
            |low, (k, kept_k)| {
                // Kept samples may lie far apart, and each maps the pages around it: what the
                // chunks before left behind is given back as a chunk begins; the rest when the
                // task (rayon's job) ends.
                if !pages.keeps_all()
                    && (k % SPARSE_CHUNK == 0 || low.far_ahead(samples[kept_k.sample].1))
                {
                    let next = kept[k..].iter().take(SPARSE_CHUNK);
                    low.chunk_begins(next.map(|k| samples[k.sample].1));
                }
                let (i, count) = (kept_k.sample, kept_k.count);
                let (r, version) = (samples[i].1, version_of(i));
                let attr = walk::attr(r);
                // Samples that stood alone were not read yet: one whose head is cut is left out.
                let h = &head_of(i)?;
                let period = if count == 1 { h.period } else { kept_k.period };
                let kernel_mode = CpuMode::from_misc(rec_of(r).misc) == CpuMode::Kernel;
                let mut finder = timeline
                    .process(h.pid, version)
                    .map(|pr| pr.finder(mappings));
                let (kernel, user) =
                    split_callchain_with(h.chain(), kernel_mode, |addr| UserFrame {
                        addr,
                        map: finder.as_mut().and_then(|f| f.find(addr)),
                    });
                let copy = may_copy(attr).then(|| stack_copy_of(r, attr, h)).flatten();
                Some(RawSample {
                    event: attr as usize,
                    pid: h.pid,
                    tid: h.tid,
                    time: h.time,
                    cpu: h.cpu,
                    period,
                    count,
                    comm: timeline.comm(h.tid, h.pid, version).unwrap_or(unknown_comm),
                    kernel,
                    user,
                    stack_copy: copy.map(Box::new),
                    raw: raw_of(r, attr, h).map(Box::from),
                })
            },
        )
        .collect();
    // (filter_map, not flatten: it collects in place, into the same allocation.)
    #[allow(clippy::filter_map_identity)]
    let samples = placed.into_iter().filter_map(|s| s).collect();
    rec.samples = samples;
    // The unwind stage reads the stack copies next, and gives the pages back after them.
    let copies_mapped = rec.samples.iter().any(|s| {
        (s.stack_copy.as_ref()).is_some_and(|c| matches!(c.bytes, StackBytes::Mapped(..)))
    });
    if copies_mapped {
        pages.pass_done();
    } else {
        pages.last_pass_done();
    }
    crate::timing::mark("read: place samples");
    timeline.finish(rec);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    /// A recording of one sample, then a hole up to `len` bytes: an input larger than the
    /// page budget, whose bytes past the records read as zeros.
    fn large_input(len: usize) -> format::InputBytes {
        use format::linux_perf_data::linux_perf_event_reader::constants as c;
        let path = std::env::temp_dir().join(format!("bpfperf-low-{}.data", std::process::id()));
        let attr = format::EventAttr {
            name: "cpu-clock".into(),
            type_: format::event_type::SOFTWARE,
            sample_type: c::PERF_SAMPLE_IP | c::PERF_SAMPLE_TID | c::PERF_SAMPLE_TIME,
            ..Default::default()
        };
        let mut w = format::PerfFileWriter::create(&path, vec![attr]).unwrap();
        w.write_sample(0, &format::Sample::default()).unwrap();
        w.finish(&format::Features::default()).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len as u64)
            .unwrap();
        let input = format::PerfFileReader::open(&path).unwrap().input();
        std::fs::remove_file(&path).unwrap();
        input
    }

    /// KiB of the mapping at `bytes` resident in this process (/proc/self/smaps).
    fn resident_kib(bytes: &[u8]) -> u64 {
        let start = format!("{:x}-", bytes.as_ptr() as usize);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&start));
        let rss = lines.find_map(|l| l.strip_prefix("Rss:")).unwrap();
        rss.trim().trim_end_matches("kB").trim().parse().unwrap()
    }

    /// A task's chunks give back what lies below the chunk begun last, and the task, as it
    /// ends, the rest of what it went through (the block its last record lies in too).
    #[test]
    fn a_task_gives_back_its_window_as_it_ends() {
        let input = large_input(80 * MIB);
        let bytes: &[u8] = &input;
        assert!(!input.pages().keeps_all());
        // What reading the header mapped, far below.
        let header = resident_kib(bytes);
        let touched: u64 = bytes[8 * MIB..14 * MIB]
            .iter()
            .step_by(4096)
            .map(|&b| b as u64)
            .sum();
        std::hint::black_box(touched);
        let window = || resident_kib(bytes) - header;
        assert_eq!(window(), 6 * 1024);
        let places = (8..14).map(|m| walk::place(m * MIB + 100, 9, 0));
        {
            let mut low = LowWater::new(input.pages(), bytes);
            low.chunk_begins(places.clone().take(3));
            assert_eq!(window(), 6 * 1024);
            // Below 11 MiB + 100: the blocks 8..10 MiB (10..12 is still read).
            low.chunk_begins(places.skip(3));
            assert_eq!(window(), 4 * 1024);
        }
        assert_eq!(window(), 0);
    }
}
