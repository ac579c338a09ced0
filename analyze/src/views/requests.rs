//! `analyze requests`: sampled requests (`record --follow`) followed through the layers, one
//! line per request with each layer's time from the call, then each layer's distribution;
//! `--csv`: one row per request and layer.

use std::fmt::Write as _;
use std::path::Path;

use format::events::{Request, RequestLayer, REQUEST_EVENT};
use format::linux_perf_data::linux_perf_event_reader::EventRecord;
use format::linux_perf_data::PerfFileRecord;

use crate::aggregate::requests::{group, layer_offsets, Pass, SampledRequest, Step};

/// The sampled requests of a recording, in the calls' order.
pub fn read_requests(path: &Path) -> Result<Vec<SampledRequest>, format::Error> {
    let mut reader = crate::files::input::open(path)?.reader;
    let is_request: Vec<bool> = (0..reader.perf_file().event_attributes().len())
        .map(|i| reader.event_name(i) == REQUEST_EVENT)
        .collect();
    let mut steps = Vec::new();
    while let Some(record) = reader.next_record()? {
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        if !is_request.get(attr_index).copied().unwrap_or(false) {
            continue;
        }
        if let Ok(EventRecord::Sample(s)) = format::parse_record(&record) {
            let Some(request) = s.raw.and_then(|raw| Request::from_raw(&raw.as_slice())) else {
                continue;
            };
            steps.push(Step {
                time: s.timestamp.unwrap_or(0),
                tid: s.tid.unwrap_or(-1),
                request,
            });
        }
    }
    Ok(group(steps))
}

/// A time from the call: milliseconds under a second, else seconds.
fn offset(ns: u64) -> String {
    if ns < 1_000_000_000 {
        format!("+{:.3} ms", ns as f64 / 1e6)
    } else {
        format!("+{:.2} s", ns as f64 / 1e9)
    }
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b >> 10),
        b if b >= 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// How a layer reads in the text view.
fn label(p: &Pass) -> &'static str {
    match p.layer {
        RequestLayer::Call => "returned",
        RequestLayer::PageCache => "page cache",
        RequestLayer::Writeback if p.direct => "request made (direct)",
        RequestLayer::Writeback => "writeback bio",
        RequestLayer::BlockIssue => "request issued",
        RequestLayer::BlockComplete => "completed",
        RequestLayer::Tcp => "tcp",
        RequestLayer::Qdisc => "qdisc",
        RequestLayer::Driver => "driver",
        RequestLayer::Device => "device",
    }
}

/// One line per request, then each layer's distribution of times from the call.
pub fn report(requests: &[SampledRequest]) -> String {
    let mut o = String::new();
    if requests.is_empty() {
        let _ = writeln!(o, "no sampled requests in this recording (record them with --follow write:1/N or --follow send:1/N)");
        return o;
    }
    for r in requests {
        let passes: Vec<String> = r
            .passes
            .iter()
            .map(|p| {
                let mut s = format!("{} {}", label(p), offset(p.offset_ns));
                // Who wrote the pages back (a flusher, fsync's caller).
                if p.layer == RequestLayer::Writeback {
                    let _ = write!(s, " ({})", p.comm);
                }
                s
            })
            .collect();
        let _ = writeln!(
            o,
            "S{} {} {} ({} {}): {}",
            r.id,
            r.kind.name(),
            size(r.bytes),
            r.comm,
            r.tid,
            passes.join(", ")
        );
    }
    let _ = writeln!(
        o,
        "\n{} sampled requests; each layer's time from the call (first pass):",
        requests.len()
    );
    let _ = writeln!(
        o,
        "  {:<16} {:>8} {:>14} {:>14} {:>14}",
        "layer", "requests", "p50", "p99", "max"
    );
    for (layer, offsets) in layer_offsets(requests) {
        let s = super::latency::summary(offsets.iter().copied());
        let _ = writeln!(
            o,
            "  {:<16} {:>8} {:>14} {:>14} {:>14}",
            layer.name(),
            s.count,
            offset(s.p50_ns),
            offset(s.p99_ns),
            offset(s.max_ns)
        );
    }
    o
}

/// A CSV field: quoted where it holds a comma or a quote.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `id,kind,pid,comm,bytes,layer,offset_ns`: one row per request and layer passed; bytes
/// are the call's on its `call` row, the layer's own (a block request's, an skb's) on the
/// others.
pub fn csv(requests: &[SampledRequest]) -> String {
    let mut o = String::from("id,kind,pid,comm,bytes,layer,offset_ns\n");
    for r in requests {
        for p in &r.passes {
            let _ = writeln!(
                o,
                "{},{},{},{},{},{},{}",
                r.id,
                r.kind.name(),
                r.pid,
                csv_field(&r.comm),
                p.bytes,
                p.layer.name(),
                p.offset_ns
            );
        }
    }
    o
}
