//! Stage 1, read: a perf.data file (or an archive's) in, a [`Recording`] out: the records in
//! time order turned into owned samples whose frames already point at the mapping they fell
//! in (the process state at that moment), and the process and file facts; then [`select`]:
//! the samples a view asks for, each with its weight.
//!
//! The process timeline is replayed as the records come: COMM names threads, FORK copies the
//! parent's mappings and name, MMAP/MMAP2 add executable mappings (replacing what they
//! overlap; an exec keeps the old ones until then, as perf does). A sample's user addresses
//! are matched against the mappings in place at its time, so a library unmapped or a program
//! exec'd later still symbolizes right.

mod callchain;
pub mod fields;
mod parallel;
mod recording;
mod sample_head;
pub mod select;
#[cfg(test)]
pub(crate) mod testing;
mod time_order;
pub mod time_range;
mod timeline;
mod traced;
mod walk;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;

use format::linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord};
use format::linux_perf_data::PerfFileRecord;
use format::PerfFileReader;
use rustc_hash::FxHashMap;

use callchain::{same_frames, split_callchain, stack_copy};
pub use fields::Quantity;
pub use recording::{
    event_of_id, is_anonymous, same_words, BuildIds, KernelModules, Ksymbol, Ksymbols, MapId,
    Mapping, RawSample, Recording, StackBytes, StackCopy, UserFrame, UserRegs,
};
pub use select::{
    select, EventSel, Selected, Selection, Weighed, Weight, CHAIN_DEPTH, MAX_CHAIN_DEPTH,
};
use timeline::Timeline;

/// Reads `path` whole, every sample on its own (times, CPUs and periods kept).
pub fn read(path: &Path) -> Result<Recording, format::Error> {
    read_with(crate::files::input::open(path)?.reader, false, &mut |_| {})
}

/// Reads `path` whole, merging identical samples (see [`RawSample::count`]): what a profile
/// needs, at a fraction of the cost (100k samples are typically a few thousand stacks).
pub fn read_merged(path: &Path) -> Result<Recording, format::Error> {
    read_with(crate::files::input::open(path)?.reader, true, &mut |_| {})
}

/// Reads the recording `reader` opened, merging identical samples if `merge`; `files_known`
/// is told the build ids (the files perf lists as hit) before the records are read, so that
/// the caller can start loading those files meanwhile.
pub fn read_with(
    reader: PerfFileReader,
    merge: bool,
    files_known: &mut dyn FnMut(&BuildIds),
) -> Result<Recording, format::Error> {
    let parallel = std::env::var_os("BPFPERF_SEQUENTIAL_READ").is_none();
    read_on(reader, merge, parallel, files_known)
}

/// A recording with what `reader`'s header tells (no samples yet), and which events' samples
/// keep their RAW payload.
fn described(reader: &PerfFileReader) -> (Recording, Vec<bool>) {
    let mut rec = Recording {
        notes: reader.notes().to_vec(),
        os_release: reader
            .perf_file()
            .os_release()
            .ok()
            .flatten()
            .map(str::to_string),
        arch: reader.perf_file().arch().ok().flatten().map(str::to_string),
        modified: std::fs::metadata(reader.path())
            .and_then(|m| m.modified())
            .ok(),
        ..Default::default()
    };
    rec.events = (0..reader.perf_file().event_attributes().len())
        .map(|i| reader.event_name(i))
        .collect();
    rec.event_ids = event_ids(reader.perf_file());
    rec.lost_by_event = vec![0; rec.events.len()];
    let traced = traced::traced_events(reader.perf_file(), &rec.events, reader.tracing_data());
    let keeps_raw = traced.tracepoint;
    rec.formats = traced.formats;
    rec.latency = traced.latency;
    rec.counted = counted_events(reader.perf_file());
    rec.by_period = weighed_by_period(reader.perf_file());
    if let Ok(ids) = reader.perf_file().build_ids() {
        for info in ids.values() {
            rec.build_ids.insert(
                String::from_utf8_lossy(&info.path).into_owned(),
                info.build_id.clone(),
            );
        }
    }
    (rec, keeps_raw)
}

/// [`read_with`], on the parallel path where `parallel` and the file allow it.
fn read_on(
    mut reader: PerfFileReader,
    merge: bool,
    parallel: bool,
    files_known: &mut dyn FnMut(&BuildIds),
) -> Result<Recording, format::Error> {
    crate::timing::mark("read: open");
    let (mut rec, mut keeps_raw) = described(&reader);
    files_known(&rec.build_ids);
    let mut timeline = Timeline::default();
    let mut comm_ids: HashMap<String, u32> = HashMap::new();
    let mut intern = |rec: &mut Recording, s: &str| -> u32 {
        *comm_ids.entry(s.to_string()).or_insert_with(|| {
            rec.comms.push(s.to_string());
            (rec.comms.len() - 1) as u32
        })
    };
    // Samples of threads the recording never names get this, then `:TID` at the end.
    let unknown_comm = u32::MAX;
    // An unwalked reader's records are checked by the parallel walk; where it cannot take
    // them (a damaged record, compressed ones), they are walked (a damaged record ends them,
    // with a note, and drops the header's features) and tried again.
    loop {
        if parallel {
            if let Some(bytes) = reader.record_bytes() {
                if parallel::read(
                    reader.perf_file(),
                    &reader.input(),
                    bytes,
                    &mut rec,
                    &mut intern,
                    unknown_comm,
                    merge,
                ) {
                    name_threads_without_comm(&mut rec, &mut intern, unknown_comm);
                    share_stack_copies(&mut rec);
                    weigh_counted(&mut rec);
                    return Ok(rec);
                }
            }
        }
        if reader.is_walked() {
            break;
        }
        reader = reader.walked()?;
        (rec, keeps_raw) = described(&reader);
    }
    // Merging: a sample whose thread's name and mappings changed since (a new timeline
    // version) is not merged with one before.
    let mut merged: rustc_hash::FxHashMap<u64, usize> = Default::default();
    let mut sample_version: Vec<u64> = Vec::new();
    let mut chain: Vec<u64> = Vec::new();
    // Samples are most of the records: room for them up front, not by doubling and copying.
    let file_size = reader.input_len();
    rec.samples.reserve((file_size / 128).min(1 << 22) as usize);

    while let Some(record) = reader.next_record()? {
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        let Ok(parsed) = format::parse_record(&record) else {
            continue;
        };
        let version = timeline.version;
        match parsed {
            EventRecord::Sample(s) => {
                let pid = s.pid.unwrap_or(-1);
                let tid = s.tid.unwrap_or(pid);
                let starts_in_kernel = matches!(s.cpu_mode, CpuMode::Kernel);
                chain.clear();
                match &s.callchain {
                    Some(c) => chain.extend((0..c.len()).map(|i| c.get(i).unwrap_or(0))),
                    None => chain.extend(s.ip),
                }
                let period = s.period.unwrap_or(1);
                let raw = match &s.raw {
                    Some(r) if keeps_raw.get(attr_index) == Some(&true) => Some(r.as_slice()),
                    _ => None,
                };
                let mergeable = merge && s.user_regs.is_none() && s.user_stack.is_none();
                let key = mergeable.then(|| {
                    let mut h = rustc_hash::FxHasher::default();
                    (attr_index, pid, tid, version, &chain[..], raw.as_deref()).hash(&mut h);
                    h.finish()
                });
                if let Some(&i) = key.and_then(|k| merged.get(&k)) {
                    let m: &mut RawSample = &mut rec.samples[i];
                    if m.event == attr_index
                        && m.pid == pid
                        && m.tid == tid
                        && sample_version[i] == version
                        && m.raw.as_deref() == raw.as_deref()
                        && same_frames(m, &chain, starts_in_kernel)
                    {
                        m.count += 1;
                        m.period += period;
                        continue;
                    }
                }
                let (kernel, user_addrs) = split_callchain(&chain, starts_in_kernel);
                let mut finder = timeline
                    .process(pid, version)
                    .map(|p| p.finder(&rec.mappings));
                let user = user_addrs
                    .iter()
                    .map(|&addr| UserFrame {
                        addr,
                        map: finder.as_mut().and_then(|f| f.find(addr)),
                    })
                    .collect();
                let stack_copy = stack_copy(&s.user_regs, &s.user_stack, None).map(Box::new);
                if let Some(k) = key {
                    merged.insert(k, rec.samples.len());
                    sample_version.resize(rec.samples.len() + 1, 0);
                    sample_version[rec.samples.len()] = version;
                }
                rec.samples.push(RawSample {
                    event: attr_index,
                    pid,
                    tid,
                    time: s.timestamp.unwrap_or(0),
                    cpu: s.cpu.unwrap_or(0),
                    period,
                    count: 1,
                    comm: timeline.comm(tid, pid, version).unwrap_or(unknown_comm),
                    kernel,
                    user,
                    stack_copy,
                    raw: raw.map(|r| Box::from(&*r)),
                });
            }
            other => timeline.replay(&mut rec, &mut intern, attr_index, &other),
        }
    }
    timeline.finish(&mut rec);
    name_threads_without_comm(&mut rec, &mut intern, unknown_comm);
    share_stack_copies(&mut rec);
    weigh_counted(&mut rec);
    Ok(rec)
}

/// Each event's ids (its attr's), for the records that name an event by id
/// ([`event_of_id`]).
pub fn event_ids(file: &format::linux_perf_data::PerfFile) -> Vec<Vec<u64>> {
    file.event_attributes()
        .iter()
        .map(|a| a.event_ids.clone())
        .collect()
}

/// Which events' periods count samples ([`Recording::counted`]): cpu-clock in period mode
/// with a period of 1. That is how `record --aggregate` writes the samples it counted in the
/// kernel (one per thread and stacks, its period the count); a file of `perf record -c 1`
/// has periods of 1, each sample standing for itself, as before.
pub fn counted_events(file: &format::linux_perf_data::PerfFile) -> Vec<bool> {
    use format::linux_perf_data::linux_perf_event_reader::{
        PerfEventType, SamplingPolicy, SoftwareCounterType,
    };
    file.event_attributes()
        .iter()
        .map(|a| {
            matches!(
                a.attr.type_,
                PerfEventType::Software(SoftwareCounterType::CpuClock)
            ) && matches!(a.attr.sampling_policy, SamplingPolicy::Period(p) if p.get() == 1)
        })
        .collect()
}

/// Which events' samples weigh their period, as perf report and stackcollapse-perf.pl weigh
/// them, rather than one each: counting events (cycles, instructions, cache misses, page
/// faults) sampled at a frequency, whose period the kernel changes sample by sample to keep
/// that rate. A short run's first samples of cycles have periods of 1 to a few thousand,
/// its later ones millions: counted one each, they made the kernel 50% of a recording
/// where perf gives it 0.08%. Clocks (cpu-clock, task-clock: periods of nearly the same
/// nanoseconds), events sampled at a fixed period (all periods equal) and traced events
/// count one a sample, their weight in `samples`.
pub fn weighed_by_period(file: &format::linux_perf_data::PerfFile) -> Vec<bool> {
    use format::linux_perf_data::linux_perf_event_reader::{
        PerfEventType, SampleFormat, SamplingPolicy, SoftwareCounterType,
    };
    file.event_attributes()
        .iter()
        .map(|a| {
            let clock = matches!(
                a.attr.type_,
                PerfEventType::Software(
                    SoftwareCounterType::CpuClock | SoftwareCounterType::TaskClock
                )
            );
            a.attr.sample_format.contains(SampleFormat::PERIOD)
                && matches!(a.attr.sampling_policy, SamplingPolicy::Frequency(_))
                && !clock
                && !matches!(a.attr.type_, PerfEventType::Tracepoint(_))
        })
        .collect()
}

/// Samples of counted events stand for as many samples as their periods say (merged ones:
/// their periods' sum); samples of traced events counted in the kernel, for as many events
/// as their `bpfperf_count` field says (merged ones: that many times each).
fn weigh_counted(rec: &mut Recording) {
    weigh_counted_events(rec);
    if !rec.counted.iter().any(|&c| c) {
        return;
    }
    let counted = std::mem::take(&mut rec.counted);
    for s in &mut rec.samples {
        if counted.get(s.event) == Some(&true) {
            s.count = s.period.max(1);
        }
    }
    rec.counted = counted;
}

/// Samples of traced events that `record --aggregate` counted in the kernel: their count is
/// the `bpfperf_count` field of their payload ([`format::events::COUNT_FIELD`]).
fn weigh_counted_events(rec: &mut Recording) {
    let fields: Vec<Option<format::Field>> = rec
        .formats
        .iter()
        .map(|f| {
            f.as_ref()
                .and_then(|f| f.field(format::events::COUNT_FIELD).cloned())
        })
        .collect();
    if fields.iter().all(Option::is_none) {
        return;
    }
    for s in &mut rec.samples {
        let (Some(Some(field)), Some(raw)) = (fields.get(s.event), s.raw.as_deref()) else {
            continue;
        };
        if let Some(format::Value::Unsigned(n)) = field.value(raw) {
            s.count = s.count.saturating_mul(n.max(1));
        }
    }
}

/// The events of `reader` (named `names`) as [`Recording::formats`] and
/// [`Recording::latency`] give them: each traced event's format, and which events' periods
/// are latencies.
pub fn event_formats(
    reader: &PerfFileReader,
    names: &[String],
) -> (Vec<Option<format::TraceFormat>>, Vec<bool>) {
    let t = traced::traced_events(reader.perf_file(), names, reader.tracing_data());
    (t.formats, t.latency)
}

/// record writes run-queue and page-fault-wait samples beside the off-CPU sample they are part
/// of, with its registers and, in DWARF mode, no stack bytes of their own: they unwind with
/// the bytes of the off-CPU sample of the same thread at the same time.
fn share_stack_copies(rec: &mut Recording) {
    use format::events::{FAULT_EVENT, FAULT_WAIT_EVENT, OFFCPU_EVENT, RUNQ_EVENT};
    let index = |name: &str| rec.events.iter().position(|n| n == name);
    let Some(offcpu) = index(OFFCPU_EVENT) else {
        return;
    };
    // (fault-time: files of 2026-11-28 and before, where it was the waits'.)
    let sharing = [
        index(RUNQ_EVENT),
        index(FAULT_WAIT_EVENT),
        index(FAULT_EVENT),
    ];
    let shares = |s: &RawSample| {
        sharing.contains(&Some(s.event))
            && s.stack_copy.as_ref().is_some_and(|c| c.bytes.is_empty())
    };
    if !rec.samples.iter().any(shares) {
        return;
    }
    let owners: FxHashMap<(i32, u64), usize> = rec
        .samples
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.event == offcpu && s.stack_copy.as_ref().is_some_and(|c| !c.bytes.is_empty())
        })
        .map(|(i, s)| ((s.tid, s.time), i))
        .collect();
    for i in 0..rec.samples.len() {
        let s = &rec.samples[i];
        if !shares(s) {
            continue;
        }
        if let Some(&owner) = owners.get(&(s.tid, s.time)) {
            let bytes = rec.samples[owner]
                .stack_copy
                .as_ref()
                .map(|c| c.bytes.clone());
            if let (Some(copy), Some(bytes)) = (rec.samples[i].stack_copy.as_mut(), bytes) {
                copy.bytes = bytes;
            }
        }
    }
}

/// Samples of threads the recording never names get perf's names: `swapper` for the idle
/// thread (tid 0), `:TID` for the others (a child sampled between fork and its first COMM).
fn name_threads_without_comm(
    rec: &mut Recording,
    intern: &mut dyn FnMut(&mut Recording, &str) -> u32,
    unknown: u32,
) {
    let unnamed: Vec<(usize, i32)> = rec
        .samples
        .iter()
        .enumerate()
        .filter(|(_, s)| s.comm == unknown)
        .map(|(i, s)| (i, s.tid))
        .collect();
    for (i, tid) in unnamed {
        let name = if tid == 0 {
            "swapper".to_string()
        } else {
            format!(":{tid}")
        };
        rec.samples[i].comm = intern(rec, &name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of a cpu-clock event and two traced ones (`sys_enter_write` and a latency
    /// pair), every sample at the same place: the cpu-clock samples and two of the writes are
    /// alike, the third write's payload differs.
    fn write_traced_file(path: &Path) {
        use format::{attr_flag, event_type, sample_type as st};
        let common = st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::PERIOD;
        let attr =
            |name: &str, type_: u32, config: u64, sample_type: u64, id: u64| format::EventAttr {
                name: name.into(),
                type_,
                config,
                sample_period_or_freq: 1,
                sample_type,
                flags: attr_flag::SAMPLE_ID_ALL,
                ids: vec![id],
                ..Default::default()
            };
        let attrs = vec![
            attr("cpu-clock", event_type::SOFTWARE, 0, common, 1),
            attr(
                "syscalls:sys_enter_write",
                event_type::TRACEPOINT,
                840,
                common | st::RAW,
                2,
            ),
            attr(
                "syscalls:sys_enter_read->sys_exit_read",
                event_type::TRACEPOINT,
                841,
                common | st::RAW,
                3,
            ),
        ];
        let mut w = format::PerfFileWriter::create(path, attrs).unwrap();
        let comm = format::SideBand::Comm {
            pid: 7,
            tid: 7,
            comm: "dd",
            exec: true,
        };
        w.write_side_band(0, &comm, &format::SampleId::default())
            .unwrap();
        let (a, b) = (
            testing::write_payload(7, 1, 100),
            testing::write_payload(7, 2, 31),
        );
        let mut read_entry = testing::write_payload(7, 0, 4096);
        read_entry[0..2].copy_from_slice(&841u16.to_le_bytes());
        let samples: [(usize, &[u8], u64); 6] = [
            (0, &[], 1),
            (0, &[], 1),
            (1, &a, 1),
            (1, &a, 1),
            (1, &b, 1),
            (2, &read_entry, 25_000),
        ];
        for (i, (attr, raw, period)) in samples.into_iter().enumerate() {
            let sample = format::Sample {
                misc: format::misc::USER,
                ip: 0x401000,
                pid: 7,
                tid: 7,
                time: 1000 + i as u64,
                period,
                raw,
                ..Default::default()
            };
            w.write_sample(attr, &sample).unwrap();
        }
        let read_format = testing::SYS_ENTER_WRITE
            .replace("sys_enter_write", "sys_enter_read")
            .replace("ID: 840", "ID: 841");
        let tracing = format::TracingData {
            page_size: 4096,
            events: [testing::SYS_ENTER_WRITE.to_string(), read_format]
                .into_iter()
                .map(|text| format::EventFormat {
                    system: "syscalls".into(),
                    text: text.into_bytes(),
                })
                .collect(),
            ..Default::default()
        };
        let features = format::Features {
            version: Some("bpfperf 0.1.0".into()),
            tracing_data: Some(tracing.to_bytes()),
            ..Default::default()
        };
        w.finish(&features).unwrap();
    }

    #[test]
    fn traced_samples_keep_their_payloads_and_merge_only_with_equal_ones() {
        let path = std::env::temp_dir().join(format!("bpfperf-read-traced-{}", std::process::id()));
        write_traced_file(&path);
        let a = testing::write_payload(7, 1, 100);
        for parallel in [false, true] {
            let reader = || format::PerfFileReader::open(&path).unwrap();
            assert!(parallel::takes(reader().perf_file()));
            let rec = read_on(reader(), true, parallel, &mut |_| {}).unwrap();
            let got: Vec<(usize, u64, Option<usize>)> = rec
                .samples
                .iter()
                .map(|s| (s.event, s.count, s.raw.as_ref().map(|r| r.len())))
                .collect();
            // The cpu-clock samples merge (and keep no payload); the writes with equal
            // payloads merge, the third stands alone. (RAW payloads are padded: u32 size
            // and data 8-aligned.)
            assert_eq!(
                got,
                [
                    (0, 2, None),
                    (1, 2, Some(44)),
                    (1, 1, Some(44)),
                    (2, 1, Some(44))
                ],
                "parallel: {parallel}"
            );
            assert_eq!(rec.samples[1].raw.as_deref().unwrap()[..40], a[..]);
            assert_eq!(rec.samples[3].period, 25_000);
            assert_eq!(
                rec.formats
                    .iter()
                    .map(|f| f.as_ref().map(|f| f.id))
                    .collect::<Vec<_>>(),
                [None, Some(840), Some(841)]
            );
            assert_eq!(rec.latency, [false, false, true]);
            let each = read_on(reader(), false, parallel, &mut |_| {}).unwrap();
            assert_eq!(each.samples.len(), 6);
            assert!(each.samples[2..].iter().all(|s| s.raw.is_some()));
        }
        let _ = std::fs::remove_file(&path);
    }

    /// `record --aggregate`'s samples (cpu-clock in period mode, period 1) stand for as many
    /// samples as their periods say, merged or not, on both reading paths; a cpu-clock in
    /// frequency mode counts each sample once.
    #[test]
    fn counted_samples_weigh_their_periods() {
        use format::{attr_flag, event_type, sample_type as st};
        for freq in [false, true] {
            let path = std::env::temp_dir().join(format!(
                "bpfperf-counted-{freq}-{}.data",
                std::process::id()
            ));
            let attr = format::EventAttr {
                name: "cpu-clock".into(),
                type_: event_type::SOFTWARE,
                config: 0,
                sample_period_or_freq: if freq { 999 } else { 1 },
                sample_type: st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::PERIOD,
                flags: attr_flag::SAMPLE_ID_ALL | if freq { attr_flag::FREQ } else { 0 },
                ids: vec![1],
                ..Default::default()
            };
            let mut w = format::PerfFileWriter::create(&path, vec![attr]).unwrap();
            for (i, (ip, period)) in [(0x401000, 5), (0x401000, 7), (0x402000, 3)]
                .into_iter()
                .enumerate()
            {
                let sample = format::Sample {
                    misc: format::misc::USER,
                    ip,
                    pid: 7,
                    tid: 7,
                    time: 1000 + i as u64,
                    period,
                    ..Default::default()
                };
                w.write_sample(0, &sample).unwrap();
            }
            w.finish(&format::Features::default()).unwrap();
            for parallel in [false, true] {
                for merge in [false, true] {
                    let reader = format::PerfFileReader::open(&path).unwrap();
                    let rec = read_on(reader, merge, parallel, &mut |_| {}).unwrap();
                    assert_eq!(rec.counted, [!freq]);
                    let counts: u64 = rec.samples.iter().map(|s| s.count).sum();
                    assert_eq!(
                        counts,
                        if freq { 3 } else { 15 },
                        "freq {freq}, parallel {parallel}, merge {merge}"
                    );
                }
            }
            let _ = std::fs::remove_file(&path);
        }
    }

    #[test]
    fn threads_without_comm_get_perfs_names() {
        let sample = |tid: i32| RawSample {
            event: 0,
            pid: tid,
            tid,
            time: 0,
            cpu: 0,
            period: 1,
            count: 1,
            comm: u32::MAX,
            kernel: Vec::new(),
            user: Vec::new(),
            stack_copy: None,
            raw: None,
        };
        let mut rec = Recording {
            samples: vec![sample(0), sample(4242), sample(4242)],
            ..Default::default()
        };
        let mut intern = |rec: &mut Recording, s: &str| -> u32 {
            match rec.comms.iter().position(|c| c == s) {
                Some(i) => i as u32,
                None => {
                    rec.comms.push(s.into());
                    (rec.comms.len() - 1) as u32
                }
            }
        };
        name_threads_without_comm(&mut rec, &mut intern, u32::MAX);
        let names: Vec<&str> = rec
            .samples
            .iter()
            .map(|s| rec.comms[s.comm as usize].as_str())
            .collect();
        assert_eq!(names, ["swapper", ":4242", ":4242"]);
    }

    /// A record that says it has size 0 ends the records, with a note, whether the reader
    /// walked them as it opened the file or leaves that to the reading (the parallel walk
    /// finds it and hands over), on both paths; an intact file read unwalked reads as walked.
    #[test]
    fn a_damaged_record_ends_the_samples_on_every_path_with_a_note() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("bpfperf-read-damaged-{}.data", std::process::id()));
        let intact = dir.join(format!("bpfperf-read-intact-{}.data", std::process::id()));
        use format::{attr_flag, event_type, sample_type as st};
        let attr = format::EventAttr {
            name: "cpu-clock".into(),
            type_: event_type::SOFTWARE,
            sample_period_or_freq: 1,
            sample_type: st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::PERIOD,
            flags: attr_flag::SAMPLE_ID_ALL,
            ids: vec![1],
            ..Default::default()
        };
        let mut w = format::PerfFileWriter::create(&path, vec![attr]).unwrap();
        for i in 0..10u64 {
            let sample = format::Sample {
                misc: format::misc::USER,
                ip: 0x401000 + i,
                pid: 7,
                tid: 7,
                time: 1000 + i,
                period: 1,
                ..Default::default()
            };
            w.write_sample(0, &sample).unwrap();
        }
        w.finish(&format::Features::default()).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        std::fs::write(&intact, &bytes).unwrap();
        // The fourth sample's size: 0 (the writer may begin with an empty round).
        let mut at = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
        let mut samples = 0;
        loop {
            let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            if kind == 9 {
                samples += 1;
                if samples == 4 {
                    break;
                }
            }
            at += u16::from_le_bytes(bytes[at + 6..at + 8].try_into().unwrap()) as usize;
        }
        bytes[at + 6..at + 8].copy_from_slice(&0u16.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let open = [
            format::PerfFileReader::open,
            format::PerfFileReader::open_unwalked,
        ];
        for (opener, parallel) in open.iter().flat_map(|o| [(o, false), (o, true)]) {
            let rec = read_on(opener(&path).unwrap(), false, parallel, &mut |_| {}).unwrap();
            assert_eq!(rec.samples.len(), 3, "parallel: {parallel}");
            assert!(
                rec.notes
                    .iter()
                    .any(|n| n.contains(&format!("end early at offset {at}"))),
                "{:?}",
                rec.notes
            );
            let rec = read_on(opener(&intact).unwrap(), false, parallel, &mut |_| {}).unwrap();
            assert_eq!(rec.samples.len(), 10);
            assert!(rec.notes.is_empty(), "{:?}", rec.notes);
        }
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&intact);
    }
}
