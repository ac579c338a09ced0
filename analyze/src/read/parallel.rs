//! The parallel path of [`super::read`], for files whose records can be walked in place
//! (file mode, little-endian, uncompressed, every record timed): record headers are walked
//! once, records timed and sorted in parallel, the process timeline replayed in time order
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

use super::sample_head::{self, Head};
use super::timeline::Timeline;
use super::{split_callchain, stack_copy, RawSample, Recording, UserFrame};

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

/// The attr of records perf defines (user types, 64 and up), which have none.
const NO_ATTR: u32 = u32::MAX;

/// One record in place (16 bytes: there are 100k of them in a 7 MB file).
#[derive(Clone, Copy)]
struct Rec {
    at: usize,
    len: u16,
    kind: u16,
    misc: u16,
}

impl Rec {
    fn data<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        &bytes[self.at..self.at + self.len as usize]
    }
}

/// Walks the record headers; `None` if a record needs more than its bytes (compressed
/// records, auxtrace data following its record).
fn walk(bytes: &[u8]) -> Option<Vec<Rec>> {
    use format::record_type::{AUXTRACE, COMPRESSED, COMPRESSED2};
    let mut recs = Vec::with_capacity(bytes.len() / 64);
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().ok()?);
        let misc = u16::from_le_bytes(bytes[at + 4..at + 6].try_into().ok()?);
        let size = u16::from_le_bytes(bytes[at + 6..at + 8].try_into().ok()?) as usize;
        if size < 8
            || at + size > bytes.len()
            || matches!(kind, AUXTRACE | COMPRESSED | COMPRESSED2)
            || kind > u16::MAX as u32
        {
            return None;
        }
        recs.push(Rec {
            at: at + 8,
            len: (size - 8) as u16,
            kind: kind as u16,
            misc,
        });
        at += size;
    }
    Some(recs)
}

/// A sample's head and what merging needs to know of it.
struct Sample<'a> {
    head: Head<'a>,
    /// Identical samples may merge (the sample carries no stack copy).
    mergeable: bool,
    hash: u64,
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
    let Some(recs) = walk(bytes) else {
        return false;
    };
    crate::timing::mark("read: walk headers");
    // Time and attr of each record with a kernel-defined type (others: the end of time, and
    // no attr). Collected in place: a filter before collect() would gather pieces and copy
    // them.
    let untimed = std::sync::atomic::AtomicBool::new(false);
    let mut timed: Vec<(u64, u32, u32)> = recs
        .par_iter()
        .enumerate()
        .map(|(i, r)| {
            if r.kind >= 64 {
                return (u64::MAX, i as u32, NO_ATTR);
            }
            let data = r.data(bytes);
            let kind = RecordType(r.kind as u32);
            let attr = events.attr(kind, data);
            let time = get_record_timestamp::<LE>(kind, RawData::Single(data), &events.parse[attr]);
            if time.is_none() {
                untimed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            (time.unwrap_or(u64::MAX), i as u32, attr as u32)
        })
        .collect();
    if untimed.into_inner() {
        return false;
    }
    // Stable: records of one time keep their file order. Records come in sorted runs (one
    // per CPU buffer and round), which a merge sort takes as they are.
    timed.par_sort_by_key(|&(time, _, _)| time);
    crate::timing::mark("read: time + sort");

    // The timeline, in time order; samples remember its version.
    let mut timeline = Timeline::default();
    let mut samples: Vec<(u32, u32, u64)> = Vec::with_capacity(timed.len());
    for &(_, i, attr) in timed.iter().filter(|t| t.2 != NO_ATTR) {
        let r = recs[i as usize];
        if r.kind as u32 == RecordType::SAMPLE.0 {
            samples.push((i, attr, timeline.version));
            continue;
        }
        let raw = RawEventRecord {
            record_type: RecordType(r.kind as u32),
            misc: r.misc,
            data: RawData::Single(r.data(bytes)),
            parse_info: events.parse[attr as usize],
        };
        if let Ok(parsed) = format::parse_record(&raw) {
            timeline.replay(rec, intern, &parsed);
        }
    }
    crate::timing::mark("read: timeline");

    // Each sample's head, read in place, in parallel.
    let may_copy = |attr: u32| {
        let f = events.format[attr as usize];
        f.intersects(SampleFormat::REGS_USER | SampleFormat::STACK_USER)
    };
    let full = |i: u32, attr: u32| -> Option<SampleRecord> {
        let r = recs[i as usize];
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
    let heads: Vec<Option<Sample>> = samples
        .par_iter()
        .map(|&(i, attr, version)| {
            let r = recs[i as usize];
            let head = sample_head::head(r.data(bytes), events.format[attr as usize])?;
            // Where the format may carry a stack copy, the full parse says whether it does.
            let copies = match may_copy(attr) {
                true => full(i, attr).map(|s| s.user_regs.is_some() || s.user_stack.is_some())?,
                false => false,
            };
            let mergeable = merge && !copies;
            let hash = if mergeable {
                let mut h = FxHasher::default();
                (attr, head.pid, head.tid, version, head.chain).hash(&mut h);
                h.finish()
            } else {
                0
            };
            Some(Sample {
                head,
                mergeable,
                hash,
            })
        })
        .collect();
    crate::timing::mark("read: sample heads");

    // Identical samples merge into the first of them (in time order). The hashes are split
    // into as many shards as there are threads, each merged on its own: a hash's samples all
    // fall in one shard, so the result does not depend on the number of shards.
    let same = |a: usize, b: usize| {
        let ((ra, aa, va), (rb, ab, vb)) = (samples[a], samples[b]);
        let head = |i: usize| &heads[i].as_ref().expect("kept").head;
        let (ha, hb) = (head(a), head(b));
        let mode = |r: u32| CpuMode::from_misc(recs[r as usize].misc) == CpuMode::Kernel;
        (aa, va, ha.pid, ha.tid, ha.chain) == (ab, vb, hb.pid, hb.tid, hb.chain)
            && mode(ra) == mode(rb)
    };
    let shards = rayon::current_num_threads().max(1) as u64;
    // (sample, how many it stands for, their summed period)
    let mut kept: Vec<(usize, u64, u64)> = (0..shards)
        .into_par_iter()
        .flat_map_iter(|shard| {
            let mut first: FxHashMap<u64, usize> = FxHashMap::default();
            let mut kept: Vec<(usize, u64, u64)> = Vec::new();
            for (i, s) in heads.iter().enumerate() {
                let Some(s) = s else { continue };
                if !s.mergeable {
                    if shard == 0 {
                        kept.push((i, 1, s.head.period));
                    }
                    continue;
                }
                if s.hash % shards != shard {
                    continue;
                }
                if let Some(&k) = first.get(&s.hash) {
                    let (j, count, period) = &mut kept[k];
                    if same(*j, i) {
                        *count += 1;
                        *period += s.head.period;
                        continue;
                    }
                }
                first.insert(s.hash, kept.len());
                kept.push((i, 1, s.head.period));
            }
            kept
        })
        .collect();
    kept.par_sort_unstable_by_key(|k| k.0);
    crate::timing::mark("read: merge");

    let (timeline, mappings) = (&timeline, &rec.mappings);
    rec.samples = kept
        .par_iter()
        .map(|&(i, count, period)| {
            let (r, attr, version) = samples[i];
            let h = &heads[i].as_ref().expect("kept samples read").head;
            let chain: Vec<u64> = h.chain().collect();
            let kernel_mode = CpuMode::from_misc(recs[r as usize].misc) == CpuMode::Kernel;
            let (kernel, user_addrs) = split_callchain(&chain, kernel_mode);
            let process = timeline.process(h.pid, version);
            let user = user_addrs
                .iter()
                .map(|&addr| UserFrame {
                    addr,
                    map: process.and_then(|pr| pr.find(addr, mappings)),
                })
                .collect();
            let copy = may_copy(attr)
                .then(|| full(r, attr))
                .flatten()
                .and_then(|s| stack_copy(&s.user_regs, &s.user_stack, Some(input)));
            RawSample {
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
                stack_copy: copy,
            }
        })
        .collect();
    crate::timing::mark("read: place samples");
    timeline.finish(rec);
    true
}
