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
    EventRecord, RawData, RawDataU64, RawEventRecord, RecordIdParseInfo, RecordParseInfo,
    RecordType, Regs, SampleFormat, SampleRecord,
};
use format::linux_perf_data::PerfFile;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHasher};

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

/// One record in place.
#[derive(Clone, Copy)]
struct Rec {
    at: usize,
    len: usize,
    kind: u32,
    misc: u16,
}

/// Walks the record headers; `None` if a record needs more than its bytes (compressed
/// records, auxtrace data following its record).
fn walk(bytes: &[u8]) -> Option<Vec<Rec>> {
    const AUXTRACE: u32 = 71;
    const COMPRESSED: u32 = 81;
    const COMPRESSED2: u32 = 83;
    let mut recs = Vec::with_capacity(bytes.len() / 64);
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().ok()?);
        let misc = u16::from_le_bytes(bytes[at + 4..at + 6].try_into().ok()?);
        let size = u16::from_le_bytes(bytes[at + 6..at + 8].try_into().ok()?) as usize;
        if size < 8
            || at + size > bytes.len()
            || matches!(kind, AUXTRACE | COMPRESSED | COMPRESSED2)
        {
            return None;
        }
        recs.push(Rec {
            at: at + 8,
            len: size - 8,
            kind,
            misc,
        });
        at += size;
    }
    Some(recs)
}

/// A sample's fields, parsed in place.
struct Parsed<'a> {
    attr: usize,
    version: u64,
    pid: i32,
    tid: i32,
    time: u64,
    cpu: u32,
    period: u64,
    kernel_mode: bool,
    chain: Option<RawDataU64<'a>>,
    ip: Option<u64>,
    regs: Option<Regs<'a>>,
    stack: Option<(RawData<'a>, u64)>,
}

impl Parsed<'_> {
    fn chain(&self) -> impl Iterator<Item = u64> + '_ {
        let n = self.chain.as_ref().map_or(0, |c| c.len());
        let chain = (0..n).map(|i| self.chain.as_ref().and_then(|c| c.get(i)).unwrap_or(0));
        let ip = self.ip.filter(|_| self.chain.is_none());
        chain.chain(ip)
    }
    fn mergeable(&self) -> bool {
        self.regs.is_none() && self.stack.is_none()
    }
    fn key_hash(&self) -> u64 {
        let mut h = FxHasher::default();
        (self.attr, self.pid, self.tid, self.version).hash(&mut h);
        for a in self.chain() {
            a.hash(&mut h);
        }
        h.finish()
    }
    fn same_as(&self, o: &Parsed) -> bool {
        (
            self.attr,
            self.pid,
            self.tid,
            self.version,
            self.kernel_mode,
        ) == (o.attr, o.pid, o.tid, o.version, o.kernel_mode)
            && self.chain().eq(o.chain())
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
    let Some(recs) = walk(bytes) else {
        return false;
    };
    crate::timing::mark("read: walk headers");
    // Time and attr of each record with a kernel-defined type.
    let timed: Option<Vec<(u64, usize, u32, u32)>> = recs
        .par_iter()
        .enumerate()
        .filter(|(_, r)| r.kind < 64)
        .map(|(i, r)| {
            let data = &bytes[r.at..r.at + r.len];
            let kind = RecordType(r.kind);
            let attr = events.attr(kind, data);
            let time =
                get_record_timestamp::<LE>(kind, RawData::Single(data), &events.parse[attr])?;
            Some((time, r.at, i as u32, attr as u32))
        })
        .collect();
    let Some(mut timed) = timed else {
        return false;
    };
    timed.par_sort_unstable_by_key(|&(time, at, _, _)| (time, at));
    crate::timing::mark("read: time + sort");

    // The timeline, in time order; samples remember its version.
    let mut timeline = Timeline::default();
    let mut samples: Vec<(u32, u32, u64)> = Vec::with_capacity(timed.len());
    for &(_, _, i, attr) in &timed {
        let r = recs[i as usize];
        if r.kind == RecordType::SAMPLE.0 {
            samples.push((i, attr, timeline.version));
            continue;
        }
        let raw = RawEventRecord {
            record_type: RecordType(r.kind),
            misc: r.misc,
            data: RawData::Single(&bytes[r.at..r.at + r.len]),
            parse_info: events.parse[attr as usize],
        };
        if let Ok(parsed) = raw.parse() {
            timeline.replay(rec, intern, &parsed);
        }
    }
    crate::timing::mark("read: timeline");

    // Samples parsed in place, in parallel.
    let parsed: Vec<Option<Parsed>> = samples
        .par_iter()
        .map(|&(i, attr, version)| {
            let r = recs[i as usize];
            let raw = RawEventRecord {
                record_type: RecordType::SAMPLE,
                misc: r.misc,
                data: RawData::Single(&bytes[r.at..r.at + r.len]),
                parse_info: events.parse[attr as usize],
            };
            let Ok(EventRecord::Sample(s)) = raw.parse() else {
                return None;
            };
            let s: SampleRecord = s;
            let pid = s.pid.unwrap_or(-1);
            Some(Parsed {
                attr: attr as usize,
                version,
                pid,
                tid: s.tid.unwrap_or(pid),
                time: s.timestamp.unwrap_or(0),
                cpu: s.cpu.unwrap_or(0),
                period: s.period.unwrap_or(1),
                kernel_mode: matches!(s.cpu_mode, CpuMode::Kernel),
                chain: s.callchain,
                ip: s.ip,
                regs: s.user_regs,
                stack: s.user_stack,
            })
        })
        .collect();
    let hashes: Vec<u64> = parsed
        .par_iter()
        .map(|p| {
            p.as_ref()
                .filter(|p| merge && p.mergeable())
                .map_or(0, Parsed::key_hash)
        })
        .collect();
    crate::timing::mark("read: parse samples + hash");

    // Identical samples merge into their first, in time order (as the sequential path does).
    let mut first: FxHashMap<u64, usize> = FxHashMap::default();
    let mut kept: Vec<(usize, u64, u64)> = Vec::with_capacity(parsed.len()); // index, count, period
    for (i, p) in parsed.iter().enumerate() {
        let Some(p) = p else { continue };
        if merge && p.mergeable() {
            if let Some(&k) = first.get(&hashes[i]) {
                let (j, count, period) = &mut kept[k];
                if parsed[*j].as_ref().is_some_and(|q| q.same_as(p)) {
                    *count += 1;
                    *period += p.period;
                    continue;
                }
            }
            first.insert(hashes[i], kept.len());
        }
        kept.push((i, 1, p.period));
    }
    crate::timing::mark("read: merge");

    let (timeline, mappings) = (&timeline, &rec.mappings);
    rec.samples = kept
        .par_iter()
        .map(|&(i, count, period)| {
            let p = parsed[i].as_ref().expect("kept samples parsed");
            let chain: Vec<u64> = p.chain().collect();
            let (kernel, user_addrs) = split_callchain(&chain, p.kernel_mode);
            let process = timeline.process(p.pid, p.version);
            let user = user_addrs
                .iter()
                .map(|&addr| UserFrame {
                    addr,
                    map: process.and_then(|pr| pr.find(addr, mappings)),
                })
                .collect();
            RawSample {
                event: p.attr,
                pid: p.pid,
                tid: p.tid,
                time: p.time,
                cpu: p.cpu,
                period,
                count,
                comm: timeline
                    .comm(p.tid, p.pid, p.version)
                    .unwrap_or(unknown_comm),
                kernel,
                user,
                stack_copy: stack_copy(&p.regs, &p.stack, Some(input)),
            }
        })
        .collect();
    crate::timing::mark("read: place samples");
    timeline.finish(rec);
    true
}
