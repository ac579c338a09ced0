//! The Firefox Profiler's processed format, written by fxprof-processed-profile: one track per
//! thread (grouped by process) with the selected event's samples in time order, each with
//! its CPU delta (the period of a clock event), and as markers the thread's off-CPU intervals
//! (the waker named where one was recorded), block I/O requests, TCP connections (open to
//! close, their ends and bytes) and retransmits, resets and drops (at the time, naming the
//! connection and the reason), and sampled requests, one track per layer
//! ([`super::firefox_requests`]).
//!
//! Frames are labels with the names bpfperf symbolized (inlined functions included, kernel
//! frames in their own category): the profile needs no symbolication.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use fx::{
    CategoryColor, CategoryHandle, CpuDelta, FrameFlags, MarkerFieldFlags, MarkerFieldFormat,
    MarkerTiming, ReferenceTimestamp, SamplingInterval, StaticSchemaMarker,
    StaticSchemaMarkerField, StringHandle, Timestamp,
};
use fxprof_processed_profile as fx;

use super::spans::{Span, SpanKind};
use super::Context;
use crate::symbolize::Symbolized;
use crate::views::net::{NetSample, Reasons};
use format::events::TCP_CONN_TRACEPOINT_ID;

/// What the Profiler draws for a TCP connection.
struct ConnectionMarker {
    local: StringHandle,
    remote: StringHandle,
    tx: f64,
    rx: f64,
}

impl StaticSchemaMarker for ConnectionMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "TcpConnection";
    const DESCRIPTION: Option<&'static str> =
        Some("A TCP connection, from its opening (or the recording's start) to its close.");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.remote}");
    const TOOLTIP_LABEL: Option<&'static str> = Some(
        "{marker.data.local} to {marker.data.remote}: {marker.data.tx} sent, {marker.data.rx} received",
    );
    const TABLE_LABEL: Option<&'static str> = Some(
        "{marker.data.local} to {marker.data.remote}: {marker.data.tx} sent, {marker.data.rx} received",
    );
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "local",
            label: "Local end",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "remote",
            label: "Remote end",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "tx",
            label: "Sent (acknowledged)",
            format: MarkerFieldFormat::Bytes,
            flags: MarkerFieldFlags::empty(),
        },
        StaticSchemaMarkerField {
            key: "rx",
            label: "Received",
            format: MarkerFieldFormat::Bytes,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, profile: &mut fx::Profile) -> StringHandle {
        profile.intern_string("TCP connection")
    }

    fn category(&self, profile: &mut fx::Profile) -> CategoryHandle {
        profile.add_category("Network", CategoryColor::Blue)
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.local,
            _ => self.remote,
        }
    }

    fn number_field_value(&self, field_index: u32) -> f64 {
        match field_index {
            2 => self.tx,
            _ => self.rx,
        }
    }
}

/// What the Profiler draws for a retransmit, reset or drop.
struct NetTroubleMarker {
    what: StringHandle,
    local: StringHandle,
    remote: StringHandle,
    reason: StringHandle,
}

impl StaticSchemaMarker for NetTroubleMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "NetTrouble";
    const DESCRIPTION: Option<&'static str> =
        Some("A TCP retransmit, a reset sent or received, or a dropped packet.");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.reason}");
    const TOOLTIP_LABEL: Option<&'static str> =
        Some("{marker.data.local} to {marker.data.remote}: {marker.data.reason}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.data.local} to {marker.data.remote}: {marker.data.reason}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "local",
            label: "Local end",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "remote",
            label: "Remote end",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "reason",
            label: "Reason",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
    ];

    fn name(&self, _profile: &mut fx::Profile) -> StringHandle {
        self.what
    }

    fn category(&self, profile: &mut fx::Profile) -> CategoryHandle {
        profile.add_category("Network", CategoryColor::Blue)
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.local,
            1 => self.remote,
            _ => self.reason,
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        0.0
    }
}

/// What the Profiler draws for an off-CPU interval.
struct OffCpuMarker {
    waker: StringHandle,
}

impl StaticSchemaMarker for OffCpuMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "OffCpu";
    const DESCRIPTION: Option<&'static str> = Some("The thread was off the CPU (blocked).");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.waker}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("off-CPU, woken by {marker.data.waker}");
    const TABLE_LABEL: Option<&'static str> = Some("woken by {marker.data.waker}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
        key: "waker",
        label: "Woken by",
        format: MarkerFieldFormat::String,
        flags: MarkerFieldFlags::SEARCHABLE,
    }];

    fn name(&self, profile: &mut fx::Profile) -> StringHandle {
        profile.intern_string("off-CPU")
    }

    fn category(&self, profile: &mut fx::Profile) -> CategoryHandle {
        profile.add_category("Off-CPU", CategoryColor::Blue)
    }

    fn string_field_value(&self, _field_index: u32) -> StringHandle {
        self.waker
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        0.0
    }
}

/// What the Profiler draws for a block I/O request.
struct IoMarker {
    device: StringHandle,
    op: StringHandle,
    issuer: StringHandle,
    bytes: f64,
}

impl StaticSchemaMarker for IoMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "BlockIo";
    const DESCRIPTION: Option<&'static str> = Some("A block I/O request, issue to completion.");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.op} {marker.data.bytes}");
    const TOOLTIP_LABEL: Option<&'static str> =
        Some("{marker.data.op} {marker.data.bytes} on {marker.data.device}");
    const TABLE_LABEL: Option<&'static str> = Some(
        "{marker.data.op} {marker.data.bytes} on {marker.data.device} by {marker.data.issuer}",
    );
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "device",
            label: "Device",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "op",
            label: "Operation (rwbs)",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "issuer",
            label: "Issued by",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "bytes",
            label: "Size",
            format: MarkerFieldFormat::Bytes,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, profile: &mut fx::Profile) -> StringHandle {
        profile.intern_string("block I/O")
    }

    fn category(&self, profile: &mut fx::Profile) -> CategoryHandle {
        profile.add_category("I/O", CategoryColor::Green)
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.device,
            1 => self.op,
            _ => self.issuer,
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        self.bytes
    }
}

/// Tracks by thread, made as samples and markers name them.
struct Threads {
    processes: HashMap<i32, fx::ProcessHandle>,
    threads: BTreeMap<(i32, i32), fx::ThreadHandle>,
}

impl Threads {
    fn get(
        &mut self,
        profile: &mut fx::Profile,
        (pid, tid): (i32, i32),
        name: &str,
    ) -> fx::ThreadHandle {
        if let Some(&t) = self.threads.get(&(pid, tid)) {
            return t;
        }
        let start = Timestamp::from_nanos_since_reference(0);
        let process = *self
            .processes
            .entry(pid)
            .or_insert_with(|| profile.add_process(name, pid as u32, start));
        let thread = profile.add_thread(process, tid as u32, start, pid == tid);
        profile.set_thread_name(thread, name);
        if pid == tid {
            profile.set_process_name(process, name);
        }
        self.threads.insert((pid, tid), thread);
        thread
    }
}

/// Writes the samples of `sym`'s timeline and `spans` as a processed profile.
pub fn write(sym: &Symbolized, spans: &[Span], cx: &Context, out: impl Write) -> io::Result<()> {
    let interval = sampling_interval(sym);
    let mut profile = fx::Profile::new(
        &format!("{} ({})", cx.name, cx.event),
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        interval,
    );
    profile.set_os_name("Linux");
    let user = profile.add_category("User", CategoryColor::Yellow);
    let kernel = profile.add_category("Kernel", CategoryColor::Orange);
    let since = |t: u64| Timestamp::from_nanos_since_reference(t.saturating_sub(cx.span.0));
    let mut threads = Threads {
        processes: HashMap::new(),
        threads: BTreeMap::new(),
    };
    let clock_periods = cx.measure == "samples" && sym.event.contains("clock");

    let mut order: Vec<usize> = (0..sym.timeline.len()).collect();
    order.sort_by_key(|&i| (sym.timeline[i].time, i));
    let stack_of = |i: usize| &sym.stacks[sym.timeline[i].stack as usize];
    // A thread is named as it was last: its first samples may precede its exec (`:PID`).
    let mut thread_names: HashMap<(i32, i32), &str> = spans
        .iter()
        .map(|s| ((s.pid, s.tid), s.comm.as_str()))
        .collect();
    for &i in &order {
        let s = stack_of(i);
        thread_names.insert((s.pid, s.tid), &sym.comms[s.comm as usize]);
    }
    let names: Vec<String> = sym
        .frames
        .iter()
        .map(|f| crate::views::folded::frame_name(f).into_owned())
        .collect();
    // Each distinct stack is interned once (a stack belongs to one thread).
    let mut interned: Vec<Option<Option<fx::StackHandle>>> = vec![None; sym.stacks.len()];
    for i in order {
        let t = &sym.timeline[i];
        let s = stack_of(i);
        let thread = threads.get(&mut profile, (s.pid, s.tid), thread_names[&(s.pid, s.tid)]);
        let stack = match interned[t.stack as usize] {
            Some(stack) => stack,
            None => {
                let frames: Vec<fx::FrameInfo> = s
                    .frames
                    .iter()
                    .enumerate()
                    .map(|(k, &f)| fx::FrameInfo {
                        frame: fx::Frame::Label(profile.intern_string(&names[f as usize])),
                        category_pair: if k < s.user_len as usize {
                            user
                        } else {
                            kernel
                        }
                        .into(),
                        flags: FrameFlags::empty(),
                    })
                    .collect();
                let stack = profile.intern_stack_frames(thread, frames.into_iter());
                interned[t.stack as usize] = Some(stack);
                stack
            }
        };
        let cpu = if clock_periods {
            CpuDelta::from_nanos(t.period)
        } else {
            CpuDelta::ZERO
        };
        profile.add_sample(thread, since(t.time), stack, cpu, 1);
    }

    let mut spans: Vec<&Span> = spans.iter().collect();
    spans.sort_by_key(|s| (s.start, s.pid, s.tid));
    for span in spans {
        let thread = threads.get(
            &mut profile,
            (span.pid, span.tid),
            thread_names[&(span.pid, span.tid)],
        );
        let timing = MarkerTiming::Interval(since(span.start), since(span.end));
        match &span.what {
            SpanKind::OffCpu { waker } => {
                let waker = profile.intern_string(waker.as_deref().unwrap_or("(not recorded)"));
                profile.add_marker(thread, timing, OffCpuMarker { waker });
            }
            SpanKind::Io {
                device,
                op,
                bytes,
                issuer,
            } => {
                let marker = IoMarker {
                    device: profile.intern_string(device),
                    op: profile.intern_string(op),
                    issuer: profile.intern_string(issuer),
                    bytes: f64::from(*bytes),
                };
                profile.add_marker(thread, timing, marker);
            }
            SpanKind::Connection {
                local,
                remote,
                tx,
                rx,
            } => {
                let marker = ConnectionMarker {
                    local: profile.intern_string(local),
                    remote: profile.intern_string(remote),
                    tx: *tx as f64,
                    rx: *rx as f64,
                };
                profile.add_marker(thread, timing, marker);
            }
            SpanKind::Request {
                label,
                caller,
                bytes,
            } => {
                let marker = super::firefox_requests::RequestMarker {
                    label: profile.intern_string(label),
                    caller: profile.intern_string(caller),
                    bytes: *bytes as f64,
                };
                profile.add_marker(thread, timing, marker);
            }
            SpanKind::NetTrouble {
                what,
                local,
                remote,
                reason,
            } => {
                let marker = NetTroubleMarker {
                    what: profile.intern_string(what),
                    local: profile.intern_string(local),
                    remote: profile.intern_string(remote),
                    reason: profile.intern_string(reason),
                };
                let at = MarkerTiming::Instant(since(span.start));
                profile.add_marker(thread, at, marker);
            }
        }
    }
    for &thread in threads.threads.values() {
        profile.set_thread_show_markers_in_timeline(thread, true);
    }
    // Patched as raw JSON: only each thread's function, resource and string tables are
    // parsed (a Value of the whole profile, sample tables included, took ~10x the file).
    let bytes = serde_json::to_vec(&profile).map_err(io::Error::other)?;
    drop(profile);
    let mut doc: Object = serde_json::from_slice(&bytes).map_err(io::Error::other)?;
    let threads = doc.remove("threads").map_or(Ok(Vec::new()), |raw| {
        serde_json::from_str::<Vec<Object>>(raw.get())
    });
    let mut threads = threads.map_err(io::Error::other)?;
    drop(bytes);
    let libs = attach_files(&mut threads, sym, &names, cx).map_err(io::Error::other)?;
    use serde_json::value::to_raw_value as raw;
    doc.insert("libs".into(), raw(&libs).map_err(io::Error::other)?);
    doc.insert("threads".into(), raw(&threads).map_err(io::Error::other)?);
    serde_json::to_writer(io::BufWriter::new(out), &doc).map_err(io::Error::other)
}

/// A JSON object whose members stay as they were written.
type Object = std::collections::BTreeMap<String, Box<serde_json::value::RawValue>>;

/// Gives each function its file and source file: the profile's library list (with build ids)
/// and each thread's resources, which label frames do not get from the writer.
fn attach_files(
    threads: &mut [Object],
    sym: &Symbolized,
    names: &[String],
    cx: &Context,
) -> Result<Vec<serde_json::Value>, serde_json::Error> {
    use serde_json::{json, Value};
    // Each name's first frame says where the function is.
    let mut where_is: HashMap<&str, (&str, Option<&str>)> = HashMap::new();
    for (f, name) in sym.frames.iter().zip(names) {
        if f.dso.is_empty() || f.dso == crate::UNKNOWN {
            continue;
        }
        let file = f.srcline.as_deref().map(|l| super::file_and_line(l).0);
        where_is.entry(name).or_insert((&f.dso, file));
    }
    let mut libs: Vec<Value> = Vec::new();
    let mut lib_index: HashMap<&str, usize> = HashMap::new();
    let add_lib = |dso: &str, libs: &mut Vec<Value>| {
        let base = dso.rsplit('/').next().unwrap_or(dso);
        let id = cx.build_ids.get(dso).cloned().unwrap_or_default();
        libs.push(json!({
            "name": base, "path": dso, "debugName": base, "debugPath": dso,
            "breakpadId": breakpad_id(&id), "codeId": id, "arch": "x86_64",
        }));
        libs.len() - 1
    };
    // Every file the recording lists, sampled or not (a thread that only blocked has its
    // program in the list too); then any other file a frame names.
    let mut recorded: Vec<&String> = cx.build_ids.keys().collect();
    recorded.sort();
    for dso in recorded {
        let i = add_lib(dso, &mut libs);
        lib_index.insert(dso, i);
    }
    let table = |thread: &Object, key: &str| -> Result<Value, serde_json::Error> {
        thread
            .get(key)
            .map_or(Ok(Value::Null), |raw| serde_json::from_str(raw.get()))
    };
    for thread in threads {
        let Value::Array(mut strings) = table(thread, "stringArray")? else {
            continue;
        };
        let mut func_table = table(thread, "funcTable")?;
        let mut resources: HashMap<usize, usize> = HashMap::new();
        let mut sources: HashMap<&str, usize> = HashMap::new();
        let mut resource_table = (Vec::new(), Vec::new());
        let funcs = func_table["name"].as_array().cloned().unwrap_or_default();
        let mut resource = Vec::with_capacity(funcs.len());
        let mut file_name = Vec::with_capacity(funcs.len());
        for name in &funcs {
            let name = name
                .as_u64()
                .and_then(|i| strings.get(i as usize))
                .and_then(Value::as_str)
                .unwrap_or("");
            let Some(&(dso, source)) = where_is.get(name) else {
                resource.push(json!(-1));
                file_name.push(Value::Null);
                continue;
            };
            let lib = *lib_index
                .entry(dso)
                .or_insert_with(|| add_lib(dso, &mut libs));
            let r = *resources.entry(lib).or_insert_with(|| {
                let base = dso.rsplit('/').next().unwrap_or(dso);
                strings.push(json!(base));
                resource_table.0.push(json!(lib));
                resource_table.1.push(json!(strings.len() - 1));
                resource_table.0.len() - 1
            });
            resource.push(json!(r));
            file_name.push(match source {
                Some(file) => json!(*sources.entry(file).or_insert_with(|| {
                    strings.push(json!(file));
                    strings.len() - 1
                })),
                None => Value::Null,
            });
        }
        let n = resource_table.0.len();
        let resource_table = json!({
            "length": n, "lib": resource_table.0, "name": resource_table.1,
            "host": vec![Value::Null; n], "type": vec![1; n],
        });
        func_table["resource"] = Value::Array(resource);
        func_table["fileName"] = Value::Array(file_name);
        use serde_json::value::to_raw_value as raw;
        thread.insert("resourceTable".into(), raw(&resource_table)?);
        thread.insert("funcTable".into(), raw(&func_table)?);
        thread.insert("stringArray".into(), raw(&strings)?);
    }
    Ok(libs)
}

/// A GNU build id as a Breakpad debug id: the first 16 bytes as a little-endian GUID, then
/// the age (0), upper-case hex, as the Profiler and symbol servers spell Linux ids.
fn breakpad_id(build_id_hex: &str) -> String {
    let bytes = crate::files::unhex(build_id_hex).unwrap_or_default();
    if bytes.len() < 16 {
        return String::new();
    }
    let mut guid = bytes[..16].to_vec();
    guid[..4].reverse();
    guid[4..6].reverse();
    guid[6..8].reverse();
    let mut out: String = guid.iter().map(|b| format!("{b:02X}")).collect();
    out.push('0');
    out
}

/// The sampling interval: the median period of a clock event's samples (ns), else 1 ms.
fn sampling_interval(sym: &Symbolized) -> SamplingInterval {
    let mut periods: Vec<u64> = sym.timeline.iter().map(|t| t.period).collect();
    if periods.is_empty() || !sym.event.contains("clock") {
        return SamplingInterval::from_millis(1);
    }
    let mid = periods.len() / 2;
    let (_, &mut median, _) = periods.select_nth_unstable(mid);
    SamplingInterval::from_nanos(median.max(1))
}

/// The off-CPU intervals (with their wakers), block I/O requests, TCP connections and their
/// troubles of the threads `o` selects (`--pid`, `--tid`, `--comm`), from a recording read
/// with every sample apart.
pub fn spans(
    rec: &crate::read::Recording,
    requests: &[crate::views::io::Request],
    (net, reasons): (&[NetSample], &Reasons),
    o: &crate::pipeline::Options,
) -> Vec<Span> {
    use format::events::{OFFCPU_EVENT, WAKEUP_EVENT};
    let index = |name: &str| rec.events.iter().position(|e| e == name);
    let (offcpu, wakeup) = (index(OFFCPU_EVENT), index(WAKEUP_EVENT));
    let selected = |pid: i32, tid: i32, comm: Option<&str>| {
        o.pid.is_none_or(|p| p == pid)
            && o.tid.is_none_or(|t| t == tid)
            && o.comm.as_deref().is_none_or(|c| comm == Some(c))
    };
    let wakers: HashMap<(u64, u32), String> = rec
        .samples
        .iter()
        .filter(|s| Some(s.event) == wakeup)
        .map(|s| {
            let name = if s.pid == 0 {
                crate::aggregate::INTERRUPT.to_string()
            } else {
                format!("{} ({}/{})", rec.comms[s.comm as usize], s.pid, s.tid)
            };
            ((s.time, s.cpu), name)
        })
        .collect();
    let mut out: Vec<Span> = rec
        .samples
        .iter()
        .filter(|s| Some(s.event) == offcpu)
        .filter(|s| {
            selected(
                s.pid,
                s.tid,
                rec.comms.get(s.comm as usize).map(|c| c.as_str()),
            )
        })
        .map(|s| Span {
            pid: s.pid,
            tid: s.tid,
            comm: rec.comms[s.comm as usize].clone(),
            start: s.time.saturating_sub(s.period),
            end: s.time,
            what: SpanKind::OffCpu {
                waker: wakers.get(&(s.time, s.cpu)).cloned(),
            },
        })
        .collect();
    for r in requests {
        let pid = r.dirtier.as_ref().map_or(r.pid, |d| d.0);
        let comm = r
            .dirtier
            .as_ref()
            .map_or_else(|| r.io.comm_str(), |d| d.1.clone());
        if !selected(pid, r.tid, Some(&comm)) {
            continue;
        }
        let (major, minor) = r.io.major_minor();
        out.push(Span {
            pid,
            tid: r.tid,
            comm,
            start: r.time.saturating_sub(r.io.latency_ns),
            end: r.time,
            what: SpanKind::Io {
                device: format!("{major}:{minor}"),
                op: r.io.rwbs_str(),
                bytes: r.io.bytes,
                issuer: format!("{} ({})", r.io.comm_str(), r.io.issuer_tid),
            },
        });
    }
    for n in net {
        let conn = n.is(TCP_CONN_TRACEPOINT_ID);
        // Troubles after the close no longer know the owner: they are on no thread.
        if !(conn || n.is_trouble()) || n.pid <= 0 {
            continue;
        }
        let tid = if n.net.owner_tid > 0 {
            n.net.owner_tid
        } else {
            n.tid
        };
        let comm = n.net.comm_str();
        if !selected(n.pid, tid, Some(&comm)) {
            continue;
        }
        let (local, remote) = n.ends();
        let (start, what) = if conn {
            // Opened before the recording: from its start.
            let what = SpanKind::Connection {
                local,
                remote,
                tx: n.net.tx_bytes,
                rx: n.net.rx_bytes,
            };
            (n.net.start_ns, what)
        } else {
            let what = SpanKind::NetTrouble {
                what: n.what(),
                local,
                remote,
                reason: reasons.name(n),
            };
            (n.time, what)
        };
        out.push(Span {
            pid: n.pid,
            tid,
            comm,
            start,
            end: n.time,
            what,
        });
    }
    out
}
