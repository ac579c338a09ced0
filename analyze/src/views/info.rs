//! `analyze info`: what a perf.data file holds, counted.

use std::fmt::Write as _;
use std::path::Path;

use format::linux_perf_data::linux_perf_event_reader::{EventRecord, RecordType};
use format::linux_perf_data::PerfFileRecord;

/// One event of the file and what its records add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSummary {
    pub name: String,
    pub attr_type: u32,
    pub config: u64,
    pub sample_type: u64,
    pub samples: u64,
    /// The bytes its sample records take in the file (headers included; uncompressed).
    pub bytes: u64,
    /// A traced event's own fields (from its format in TRACING_DATA); `None` for others.
    pub fields: Option<Vec<String>>,
    /// Whether its period is a latency in ns.
    pub latency: bool,
    /// For samples counted in the kernel (`record --aggregate`: each period is a count of
    /// samples), the samples they stand for.
    pub counted: Option<u64>,
    /// For a traced event counted in the kernel (its format has `bpfperf_count`): the events
    /// its samples stand for, and how many were written alone, by why (its stack copied;
    /// no room in the kernel's maps).
    pub counted_events: Option<CountedEvents>,
    /// Its events lost while recording: LOST records that name it by id (as perf counts
    /// them; a file of one event: all of them).
    pub lost: u64,
}

/// What the samples of a traced event counted in the kernel stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CountedEvents {
    pub events: u64,
    /// Whether its format says why a sample was written alone (`record --aggregate`'s
    /// events); without, the samples stand for events skipped before them (record's
    /// bpfperf:net_send, followed at a rate).
    pub aggregated: bool,
    pub alone_stack_copy: u64,
    pub alone_no_room: u64,
}

/// The contents of a perf.data file, counted.
#[derive(Debug, Clone, Default)]
pub struct FileSummary {
    pub path: String,
    pub bytes: u64,
    pub pipe_mode: bool,
    pub events: Vec<EventSummary>,
    pub samples: u64,
    /// Events the kernel (or the recorder) reported as lost, from LOST and LOST_SAMPLES records.
    pub lost: u64,
    pub lost_records: u64,
    pub records: u64,
    /// Records by type, as `perf report --stats` counts them.
    pub record_types: std::collections::BTreeMap<u32, u64>,
    pub compressed_records: bool,
    /// First and last sample timestamp, in ns.
    pub time_span: Option<(u64, u64)>,
    pub hostname: Option<String>,
    pub os_release: Option<String>,
    pub arch: Option<String>,
    pub perf_version: Option<String>,
    pub nr_cpus: Option<(u32, u32)>,
    pub cmdline: Option<Vec<String>>,
    pub build_ids: Vec<(String, String)>,
    /// Which source serves each file of `build_ids` (path -> source or `missing`), once
    /// [`FileSummary::find_sources`] asked.
    pub sources: std::collections::BTreeMap<String, String>,
    pub features: Vec<String>,
    pub notes: Vec<String>,
}

impl FileSummary {
    /// Asks `loader` for every file the recording lists and its debug file, so that the
    /// summary says which source serves each (the archive, --symfs, a build-id cache, its
    /// path, debuginfod; and its debug file's) and which stayed missing.
    pub fn find_sources(&mut self, loader: &crate::files::Loader) {
        let ids: std::collections::HashMap<String, Vec<u8>> = self
            .build_ids
            .iter()
            .filter(|(_, path)| path.starts_with('/') || path == "[vdso]")
            .map(|(id, path)| (path.clone(), crate::files::unhex(id).unwrap_or_default()))
            .collect();
        // What debuginfod has (when the user named servers): missing files, and the debug
        // files of stripped ones.
        loader.fetch_missing(&ids);
        for (path, id) in &ids {
            if let Some(elf) = loader.elf(path, Some(id)) {
                loader.debug_file(&elf);
            }
        }
        self.sources = loader.served();
        if let Some((id, _)) = self
            .build_ids
            .iter()
            .find(|(_, p)| p == "[kernel.kallsyms]")
        {
            let recorded = crate::files::unhex(id);
            let other = loader.other_kernel(recorded.as_deref(), self.os_release.as_deref());
            let from = match (other, loader.kallsyms_origin()) {
                (Some(why), _) => format!("missing: the recording's kernel is another ({why})"),
                (None, crate::files::KallsymsOrigin::Running) => {
                    "this machine's /proc/kallsyms".into()
                }
                (None, crate::files::KallsymsOrigin::Archive(_)) => "archive".into(),
                (None, crate::files::KallsymsOrigin::File(p)) => p.display().to_string(),
            };
            self.sources.insert("[kernel.kallsyms]".into(), from);
        }
    }
}

/// Names of the sample_type bits, in the order of their fields.
const SAMPLE_TYPE_NAMES: &[(u64, &str)] = &[
    (1 << 16, "IDENTIFIER"),
    (1 << 0, "IP"),
    (1 << 1, "TID"),
    (1 << 2, "TIME"),
    (1 << 3, "ADDR"),
    (1 << 6, "ID"),
    (1 << 9, "STREAM_ID"),
    (1 << 7, "CPU"),
    (1 << 8, "PERIOD"),
    (1 << 4, "READ"),
    (1 << 5, "CALLCHAIN"),
    (1 << 10, "RAW"),
    (1 << 11, "BRANCH_STACK"),
    (1 << 12, "REGS_USER"),
    (1 << 13, "STACK_USER"),
    (1 << 14, "WEIGHT"),
    (1 << 15, "DATA_SRC"),
    (1 << 17, "TRANSACTION"),
    (1 << 18, "REGS_INTR"),
    (1 << 19, "PHYS_ADDR"),
    (1 << 20, "AUX"),
    (1 << 21, "CGROUP"),
    (1 << 22, "DATA_PAGE_SIZE"),
    (1 << 23, "CODE_PAGE_SIZE"),
    (1 << 24, "WEIGHT_STRUCT"),
];

/// `IP|TID|TIME...` for a sample_type value.
pub fn sample_type_words(sample_type: u64) -> String {
    let mut words: Vec<String> = SAMPLE_TYPE_NAMES
        .iter()
        .filter(|(bit, _)| sample_type & bit != 0)
        .map(|(_, n)| n.to_string())
        .collect();
    let known = SAMPLE_TYPE_NAMES.iter().fold(0, |acc, (b, _)| acc | b);
    if sample_type & !known != 0 {
        words.push(format!("{:#x}", sample_type & !known));
    }
    words.join("|")
}

/// perf's name for a record type (`perf report --stats`), `TYPE_N` for one it does not name.
pub fn record_type_name(t: u32) -> String {
    const KERNEL: [&str; 22] = [
        "TOTAL",
        "MMAP",
        "LOST",
        "COMM",
        "EXIT",
        "THROTTLE",
        "UNTHROTTLE",
        "FORK",
        "READ",
        "SAMPLE",
        "MMAP2",
        "AUX",
        "ITRACE_START",
        "LOST_SAMPLES",
        "SWITCH",
        "SWITCH_CPU_WIDE",
        "NAMESPACES",
        "KSYMBOL",
        "BPF_EVENT",
        "CGROUP",
        "TEXT_POKE",
        "AUX_OUTPUT_HW_ID",
    ];
    const USER: [&str; 20] = [
        "ATTR",
        "EVENT_TYPE",
        "TRACING_DATA",
        "BUILD_ID",
        "FINISHED_ROUND",
        "ID_INDEX",
        "AUXTRACE_INFO",
        "AUXTRACE",
        "AUXTRACE_ERROR",
        "THREAD_MAP",
        "CPU_MAP",
        "STAT_CONFIG",
        "STAT",
        "STAT_ROUND",
        "EVENT_UPDATE",
        "TIME_CONV",
        "FEATURE",
        "COMPRESSED",
        "FINISHED_INIT",
        "COMPRESSED2",
    ];
    let name = match t {
        1..=21 => KERNEL.get(t as usize),
        64..=83 => USER.get(t as usize - 64),
        _ => None,
    };
    name.map_or_else(|| format!("TYPE_{t}"), |n| n.to_string())
}

fn attr_type_word(t: u32) -> &'static str {
    match t {
        0 => "hardware",
        1 => "software",
        2 => "tracepoint",
        3 => "hw-cache",
        4 => "raw",
        5 => "breakpoint",
        _ => "pmu",
    }
}

/// Reads the whole file and counts what it holds.
pub fn summarize(path: &Path) -> Result<FileSummary, format::Error> {
    summarize_reader(path, crate::files::input::open(path)?.reader)
}

/// [`summarize`] of a recording already opened (an archive's, say) from `path`.
pub fn summarize_reader(
    path: &Path,
    reader: format::PerfFileReader,
) -> Result<FileSummary, format::Error> {
    // Walked first: the notes and counts of the records are part of the summary.
    let mut reader = reader.walked()?;
    let pf = reader.perf_file();
    let mut s = FileSummary {
        path: path.display().to_string(),
        bytes: reader.input_len(),
        pipe_mode: reader.mode() == format::FileMode::Pipe,
        hostname: pf.hostname().ok().flatten().map(str::to_string),
        os_release: pf.os_release().ok().flatten().map(str::to_string),
        arch: pf.arch().ok().flatten().map(str::to_string),
        perf_version: pf.perf_version().ok().flatten().map(str::to_string),
        nr_cpus: pf
            .nr_cpus()
            .ok()
            .flatten()
            .map(|n| (n.nr_cpus_available, n.nr_cpus_online)),
        cmdline: format::cmdline(pf),
        compressed_records: pf.compression_info().ok().flatten().is_some(),
        features: pf.features().iter().map(|f| format!("{f:?}")).collect(),
        notes: reader.notes().to_vec(),
        ..Default::default()
    };
    if let Ok(ids) = pf.build_ids() {
        let mut ids: Vec<_> = ids
            .values()
            .map(|info| {
                let hex: String = info.build_id.iter().map(|b| format!("{b:02x}")).collect();
                (hex, String::from_utf8_lossy(&info.path).into_owned())
            })
            .collect();
        ids.sort();
        s.build_ids = ids;
    }
    s.events = pf
        .event_attributes()
        .iter()
        .enumerate()
        .map(|(i, desc)| EventSummary {
            name: reader.event_name(i),
            attr_type: attr_type_raw(&desc.attr),
            config: attr_config_raw(&desc.attr),
            sample_type: desc.attr.sample_format.bits(),
            samples: 0,
            bytes: 0,
            fields: None,
            latency: false,
            counted: None,
            counted_events: None,
            lost: 0,
        })
        .collect();
    let event_ids = crate::read::event_ids(pf);
    for (e, counted) in s.events.iter_mut().zip(crate::read::counted_events(pf)) {
        e.counted = counted.then_some(0);
    }
    let names: Vec<String> = s.events.iter().map(|e| e.name.clone()).collect();
    let (formats, latency) = crate::read::event_formats(&reader, &names);
    // The fields that say what a sample counted in the kernel stands for.
    let mut count_fields = Vec::new();
    for ((e, f), l) in s.events.iter_mut().zip(formats).zip(latency) {
        let field = |n| f.as_ref().and_then(|f| f.field(n).cloned());
        let (count, alone) = (
            field(format::events::COUNT_FIELD),
            field(format::events::ALONE_FIELD),
        );
        if count.is_some() {
            e.counted_events = Some(CountedEvents {
                aggregated: alone.is_some(),
                ..Default::default()
            });
        }
        count_fields.push(count.map(|c| (c, alone)));
        e.fields = f.map(|f| f.own_fields().map(|f| f.name.clone()).collect());
        e.latency = l;
    }

    let mut python = super::info_python::PythonSeen::default();
    while let Some(record) = reader.next_record()? {
        s.records += 1;
        let kind = match &record {
            PerfFileRecord::EventRecord { record, .. } => record.record_type.0,
            PerfFileRecord::UserRecord(r) => r.record_type.record_type().0,
        };
        *s.record_types.entry(kind).or_insert(0) += 1;
        match record {
            PerfFileRecord::EventRecord { attr_index, record } => match record.record_type {
                RecordType::SAMPLE => {
                    if let Some(t) = record.timestamp() {
                        s.time_span = Some(match s.time_span {
                            None => (t, t),
                            Some((a, b)) => (a.min(t), b.max(t)),
                        });
                    }
                    s.samples += 1;
                    if python.any() {
                        if let Ok(EventRecord::Sample(sample)) = format::parse_record(&record) {
                            let pid = sample.pid.unwrap_or(-1) as u32;
                            if python.wants(pid) {
                                python.sampled(pid);
                            }
                        }
                    }
                    if let Some(e) = s.events.get_mut(attr_index) {
                        e.samples += 1;
                        e.bytes += 8 + record.data.len() as u64;
                        if let Some(n) = &mut e.counted {
                            if let Ok(EventRecord::Sample(sample)) = format::parse_record(&record) {
                                *n += sample.period.unwrap_or(1);
                            }
                        }
                        if let (Some(c), Some(Some((count, alone)))) =
                            (&mut e.counted_events, count_fields.get(attr_index))
                        {
                            if let Ok(EventRecord::Sample(sample)) = format::parse_record(&record) {
                                let raw = sample.raw.as_ref().map(|r| r.as_slice().to_vec());
                                let number = |f: &format::Field| match raw
                                    .as_deref()
                                    .and_then(|r| f.value(r))
                                {
                                    Some(format::Value::Unsigned(n)) => n,
                                    _ => 0,
                                };
                                c.events += number(count).max(1);
                                match alone.as_ref().map_or(0, number) {
                                    1 => c.alone_stack_copy += 1,
                                    2 => c.alone_no_room += 1,
                                    _ => {}
                                }
                            }
                        }
                    }
                }
                RecordType::MMAP2 => {
                    if let Ok(EventRecord::Mmap2(m)) = format::parse_record(&record) {
                        let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                        python.mapped(m.pid as u32, m.address, &path);
                    }
                }
                RecordType::LOST => {
                    s.lost_records += 1;
                    if let Ok(EventRecord::Lost(l)) = format::parse_record(&record) {
                        s.lost += l.count;
                        let of = crate::read::event_of_id(&event_ids, l.id);
                        if let Some(e) = of.and_then(|e| s.events.get_mut(e)) {
                            e.lost += l.count;
                        }
                    }
                }
                RecordType::LOST_SAMPLES => {
                    s.lost_records += 1;
                    let mut data = record.data;
                    let mut b = [0u8; 8];
                    if data.read_exact(&mut b).is_ok() {
                        s.lost += u64::from_le_bytes(b);
                        if let Some(e) = s.events.get_mut(attr_index) {
                            e.lost += u64::from_le_bytes(b);
                        }
                    }
                }
                _ => {}
            },
            PerfFileRecord::UserRecord(_) => {}
        }
    }
    // Records the iterator consumes: counted as they lie in the file.
    use format::record_type as t;
    const CONSUMED: [u32; 6] = [
        t::HEADER_ATTR,
        t::HEADER_TRACING_DATA,
        t::FINISHED_ROUND,
        t::HEADER_FEATURE,
        t::COMPRESSED,
        t::COMPRESSED2,
    ];
    for (&kind, &n) in reader.record_counts() {
        if CONSUMED.contains(&kind) {
            *s.record_types.entry(kind).or_insert(0) += n;
        }
    }
    // (Only record reads Python frames, unless told not to.)
    let by_record = s
        .perf_version
        .as_deref()
        .is_some_and(|v| v.starts_with("bpfperf"));
    let no_python = s
        .cmdline
        .as_ref()
        .is_some_and(|c| c.iter().any(|a| a == "--no-python"));
    if by_record && !no_python {
        s.notes.extend(python.notes());
    }
    Ok(s)
}

fn attr_type_raw(attr: &format::linux_perf_data::linux_perf_event_reader::PerfEventAttr) -> u32 {
    use format::linux_perf_data::linux_perf_event_reader::PerfEventType as T;
    match attr.type_ {
        T::Hardware(..) => 0,
        T::Software(..) => 1,
        T::Tracepoint(..) => 2,
        T::HwCache(..) => 3,
        T::Breakpoint(..) => 5,
        T::DynamicPmu(t, ..) => t,
    }
}

fn attr_config_raw(attr: &format::linux_perf_data::linux_perf_event_reader::PerfEventAttr) -> u64 {
    use format::linux_perf_data::linux_perf_event_reader::PerfEventType as T;
    match attr.type_ {
        T::Hardware(id, pmu) => id as u64 | ((pmu.0 as u64) << 32),
        T::Software(id) => id as u64,
        T::Tracepoint(id) => id,
        T::DynamicPmu(_, c, ..) => c,
        _ => 0,
    }
}

/// `bytes` as people read sizes: `812 B`, `41.3 KB`, `140.9 MB`, `1.2 GB` (powers of 1000).
fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b < 1000 => format!("{b} B"),
        b if b < 1_000_000 => format!("{:.1} KB", b as f64 / 1e3),
        b if b < 1_000_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b => format!("{:.1} GB", b as f64 / 1e9),
    }
}

impl FileSummary {
    /// The report as people read it: one fact per line, counts as plain numbers.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let mode = if self.pipe_mode {
            "pipe mode"
        } else {
            "file mode"
        };
        let _ = writeln!(
            o,
            "file:          {} ({} bytes, {mode})",
            self.path, self.bytes
        );
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let _ = writeln!(o, "hostname:      {}", opt(&self.hostname));
        let _ = writeln!(o, "os release:    {}", opt(&self.os_release));
        let _ = writeln!(o, "arch:          {}", opt(&self.arch));
        if let Some((avail, online)) = self.nr_cpus {
            let _ = writeln!(o, "cpus:          {online} online, {avail} available");
        }
        if let Some(v) = &self.perf_version {
            let _ = writeln!(o, "written by:    {v}");
        }
        if let Some(c) = &self.cmdline {
            let _ = writeln!(o, "command line:  {}", c.join(" "));
        }
        if let Some((a, b)) = self.time_span {
            let _ = writeln!(
                o,
                "time span:     {:.6} s ({}.{:09} .. {}.{:09})",
                (b - a) as f64 / 1e9,
                a / 1_000_000_000,
                a % 1_000_000_000,
                b / 1_000_000_000,
                b % 1_000_000_000
            );
        }
        let _ = writeln!(
            o,
            "records:       {}{}",
            self.records,
            if self.compressed_records {
                " (zstd-compressed)"
            } else {
                ""
            }
        );
        let _ = writeln!(o, "samples:       {}", self.samples);
        let by_type: Vec<String> = self
            .record_types
            .iter()
            .map(|(&t, n)| format!("{} {n}", record_type_name(t)))
            .collect();
        let _ = writeln!(o, "by type:       {}", by_type.join(", "));
        let _ = writeln!(
            o,
            "lost events:   {} (in {} LOST records)",
            self.lost, self.lost_records
        );
        // Whose they were, when the records say and not all are one event's.
        let losing: Vec<String> = self
            .events
            .iter()
            .filter(|e| e.lost > 0)
            .map(|e| format!("{} {}", e.name, e.lost))
            .collect();
        if losing.len() > 1 {
            let _ = writeln!(o, "  by event:    {}", losing.join(", "));
        }
        let _ = writeln!(o, "events:");
        for e in &self.events {
            let _ = writeln!(
                o,
                "  {:<24} samples {:>10} {:>9} ({:>6} B each)   type {} ({}) config {:#x}   sample_type {}",
                e.name,
                e.samples,
                human_bytes(e.bytes),
                e.bytes.checked_div(e.samples).unwrap_or(0),
                e.attr_type,
                attr_type_word(e.attr_type),
                e.config,
                sample_type_words(e.sample_type)
            );
        }
        for e in &self.events {
            if let Some(n) = e.counted {
                let _ = writeln!(
                    o,
                    "  {}: counted in the kernel (record --aggregate): its {} samples stand \
                     for {n}, each weighing its period",
                    e.name, e.samples
                );
            }
        }
        for e in &self.events {
            let sampled = |c: &CountedEvents| !c.aggregated && c.events != e.samples;
            if let Some(c) = e.counted_events.filter(sampled) {
                let _ = writeln!(
                    o,
                    "  {}: its {} samples stand for {} events (bpfperf_count: each for \
                     those of its socket that record's rate skipped before it)",
                    e.name, e.samples, c.events
                );
            }
            if let Some(c) = e.counted_events.filter(|c| c.aggregated) {
                let _ = writeln!(
                    o,
                    "  {}: counted in the kernel (record --aggregate): its {} samples stand \
                     for {} events (bpfperf_count); written alone: {} with a copied stack, {} \
                     that did not fit in the kernel's maps",
                    e.name, e.samples, c.events, c.alone_stack_copy, c.alone_no_room
                );
            }
        }
        let traced: Vec<&EventSummary> = self
            .events
            .iter()
            .filter(|e| e.attr_type == 2 || e.fields.is_some())
            .collect();
        if !traced.is_empty() {
            let _ = writeln!(o, "traced events:");
        }
        for e in traced {
            let fields = match &e.fields {
                Some(f) if f.is_empty() => "none".to_string(),
                Some(f) => f.join(", "),
                None => format!("unknown (no format for id {} in TRACING_DATA)", e.config),
            };
            let latency = if e.latency { "; latency (ns)" } else { "" };
            let _ = writeln!(
                o,
                "  {:<40} {:>10}   fields: {fields}{latency}",
                e.name, e.samples
            );
        }
        if !self.features.is_empty() {
            let _ = writeln!(o, "features:      {}", self.features.join(" "));
        }
        if !self.build_ids.is_empty() {
            let _ = writeln!(o, "build ids:");
            for (id, path) in &self.build_ids {
                match self.sources.get(path) {
                    Some(from) => {
                        let _ = writeln!(o, "  {id}  {path}  ({from})");
                    }
                    None => {
                        let _ = writeln!(o, "  {id}  {path}");
                    }
                }
            }
            let missing: Vec<&str> = self
                .sources
                .iter()
                .filter(|(_, from)| *from == "missing")
                .map(|(p, _)| p.as_str())
                .collect();
            if !missing.is_empty() {
                let _ = writeln!(
                    o,
                    "missing: {} files: {}",
                    missing.len(),
                    missing.join(", ")
                );
            }
        }
        for n in &self.notes {
            let _ = writeln!(o, "note:          {n}");
        }
        o
    }
}
