//! `record --follow`: sampled write and send calls followed through the layers. A dd-like
//! writer (fsync every K writes) and a sender over a veth pair: every sampled call passes
//! every layer, its bytes are what the program wrote, its block completions fall inside the
//! disk's own requests (bpfperf:block_io, recorded beside it), and 1 in N calls is sampled
//! within binomial error. perf script reads the file without complaint.

use std::collections::BTreeMap;
use std::path::Path;

use format::events::{BlockIo, Request, BLOCK_IO_EVENT, REQUEST_EVENT};
use format::linux_perf_data::linux_perf_event_reader::EventRecord;
use format::linux_perf_data::PerfFileRecord;

use crate::common::*;

/// One row of `analyze requests --csv`.
#[derive(Debug, Clone)]
struct Row {
    id: u64,
    kind: String,
    bytes: u64,
    layer: String,
    offset_ns: u64,
}

fn csv_rows(file: &Path) -> Vec<Row> {
    let out = analyze(&["requests", "--csv"], file);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id,kind,pid,comm,bytes,layer,offset_ns"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 7, "{l}");
            Row {
                id: f[0].parse().unwrap(),
                kind: f[1].into(),
                bytes: f[4].parse().unwrap(),
                layer: f[5].into(),
                offset_ns: f[6].parse().unwrap(),
            }
        })
        .collect()
}

/// The rows of each request, by id.
fn by_request(rows: &[Row]) -> BTreeMap<u64, Vec<&Row>> {
    let mut out: BTreeMap<u64, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        out.entry(r.id).or_default().push(r);
    }
    out
}

/// A block request the disk served: (dev, issue, completion).
type DiskRequest = (u32, u64, u64);

/// What the file holds: each request sample (time, RAW), and each block request the disk
/// served.
fn read_file(file: &Path) -> (Vec<(u64, Request)>, Vec<DiskRequest>) {
    let mut reader = format::PerfFileReader::open(file).unwrap();
    let names: Vec<String> = (0..reader.perf_file().event_attributes().len())
        .map(|i| reader.event_name(i))
        .collect();
    let (mut steps, mut disk) = (Vec::new(), Vec::new());
    while let Some(record) = reader.next_record().unwrap() {
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        let Ok(EventRecord::Sample(s)) = format::parse_record(&record) else {
            continue;
        };
        let (Some(raw), Some(time)) = (s.raw, s.timestamp) else {
            continue;
        };
        let raw = raw.as_slice();
        match names[attr_index].as_str() {
            REQUEST_EVENT => steps.push((time, Request::from_raw(&raw).unwrap())),
            BLOCK_IO_EVENT => {
                let b = BlockIo::from_raw(&raw).unwrap();
                disk.push((b.dev, b.issue_ns, time));
            }
            _ => {}
        }
    }
    (steps, disk)
}

/// Whether `n` sampled of `calls` is 1 in `every` within 4 standard deviations.
fn within_binomial(n: usize, calls: usize, every: usize) {
    let p = 1.0 / every as f64;
    let (mean, sd) = (calls as f64 * p, (calls as f64 * p * (1.0 - p)).sqrt());
    assert!(
        (n as f64 - mean).abs() <= 4.0 * sd,
        "{n} sampled of {calls} calls, expected {mean:.1} +- {:.1}",
        4.0 * sd
    );
}

const WRITES: usize = 400;
const WRITE_BYTES: u64 = 64 << 10;
const EVERY: usize = 8;
/// Every layer a buffered write passes.
const BUFFERED_LAYERS: &[&str] = &[
    "call",
    "page_cache",
    "writeback",
    "block_issue",
    "block_complete",
];

/// A recording of the writer.
struct Written {
    file: std::path::PathBuf,
    /// The writer's own wall time (seconds).
    wall: f64,
    /// Followed calls record says have no block_complete step (their request's completion
    /// went unseen).
    unseen: usize,
}

/// Every layer a direct write passes.
const DIRECT_LAYERS: &[&str] = &["call", "writeback", "block_issue", "block_complete"];

/// Records the writer (`extra`: its mode) with `--follow RATE` (and `env`).
fn record_writer(dir: &TempDir, rate: &str, extra: &[&str], env: &[(&str, &str)]) -> Written {
    let file = dir.path("req.data");
    // The written file on the disk (/var/tmp), not a tmpfs: its requests reach a device.
    let target = Path::new("/var/tmp").join(format!("bpfperf-req-{}", std::process::id()));
    let (count, bytes) = (WRITES.to_string(), WRITE_BYTES.to_string());
    let mut cmd = vec![fixture("syncwriter-fp").to_str().unwrap().to_string()];
    cmd.extend([target.to_str().unwrap(), &count, &bytes, "16"].map(String::from));
    cmd.extend(extra.iter().map(|s| s.to_string()));
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let out = record_env(&["-o", file.to_str().unwrap(), "--follow", rate], &cmd, env);
    let _ = std::fs::remove_file(&target);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        printed.trim(),
        format!("writes {WRITES} bytes {WRITE_BYTES}")
    );
    perf_script_clean(&file);
    let err = stderr_of(&out);
    // Shown with a failure: what record counted as lost or skipped.
    eprintln!("record said:\n{err}");
    let wall = err
        .split_once("wall ")
        .and_then(|(_, w)| w.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no wall time from the writer: {err}"));
    let unseen = err
        .lines()
        .find(|l| l.contains("followed calls have no block_complete step"))
        .and_then(|l| {
            l.strip_prefix("record: ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    Written { file, wall, unseen }
}

/// 1 in EVERY writes.
fn one_in_every() -> String {
    format!("write:1/{EVERY}")
}

/// Each sampled write: its layers in order, its bytes the program's, its completions
/// inside the disk's own requests. A write without block_complete is one of those record
/// counted (`unseen`: its request's completion ran no program). Returns how many were
/// sampled.
fn check_writes(file: &Path, layers: &[&str], unseen: usize) -> usize {
    let rows = csv_rows(file);
    let requests = by_request(&rows);
    eprintln!("{} sampled writes of {WRITES}", requests.len());
    let mut incomplete = 0;
    for (id, rows) in &requests {
        let seen: Vec<&str> = rows.iter().map(|r| r.layer.as_str()).collect();
        if !seen.contains(&"block_complete") && layers.contains(&"block_complete") {
            incomplete += 1;
            assert!(
                incomplete <= unseen,
                "S{id}: no block_complete in {seen:?} ({unseen} said unseen)"
            );
        }
        for layer in layers.iter().filter(|&&l| l != "block_complete") {
            assert!(seen.contains(layer), "S{id}: no {layer} in {seen:?}");
        }
        // The bound the README gives: call, page cache, 3 for each of 4 requests at most.
        assert!(rows.len() <= 14, "S{id}: {} records", rows.len());
        let call = rows.iter().find(|r| r.layer == "call").unwrap();
        assert_eq!(
            (call.kind.as_str(), call.bytes),
            ("write", WRITE_BYTES),
            "S{id}"
        );
        // Issued before completed, made before issued.
        let at = |layer: &str| rows.iter().find(|r| r.layer == layer).map(|r| r.offset_ns);
        assert!(at("writeback") <= at("block_issue"), "S{id}: {rows:?}");
        if seen.contains(&"block_complete") {
            assert!(at("block_issue") <= at("block_complete"), "S{id}: {rows:?}");
        }
    }
    // Completion times, against the disk's requests (the same completion, seen by
    // block_io's program on the same tracepoint: microseconds apart).
    const SLACK_NS: u64 = 1_000_000;
    let (steps, disk) = read_file(file);
    assert!(!disk.is_empty(), "no block requests recorded");
    for (time, r) in steps
        .iter()
        .filter(|(_, r)| r.layer.name() == "block_complete")
    {
        let inside = disk.iter().any(|&(dev, issue, done)| {
            dev == r.dev && issue.saturating_sub(SLACK_NS) <= *time && *time <= done + SLACK_NS
        });
        assert!(
            inside,
            "S{} completed at {time}, outside the disk's requests",
            r.id
        );
    }
    requests.len()
}

#[test]
fn sampled_writes_pass_every_layer_to_the_disk() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("requests-write");
    let Written { file, unseen, .. } = record_writer(&dir, &one_in_every(), &[], &[]);
    let sampled = check_writes(&file, BUFFERED_LAYERS, unseen);
    within_binomial(sampled, WRITES, EVERY);
    let out = analyze(&["requests"], &file);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" write 64 KiB (syncwriter-fp "), "{text}");
    assert!(
        text.contains("sampled requests; each layer's time"),
        "{text}"
    );
    // The Firefox export: a track per layer, each request's marker on it.
    let requests = by_request(&csv_rows(&file)).len();
    let markers = firefox_request_markers(&dir, &file);
    for layer in [
        "call",
        "page_cache",
        "writeback",
        "block_issue",
        "block_complete",
    ] {
        let n = markers.get(layer).copied().unwrap_or(0);
        assert!(
            n >= requests,
            "{layer}: {n} markers for {requests} requests"
        );
    }
}

/// The sampled-request markers of `file`'s Firefox Profiler export, by track (layer).
fn firefox_request_markers(dir: &TempDir, file: &Path) -> BTreeMap<String, usize> {
    let json = dir.path("profile.json");
    let args = [
        "export",
        "--format",
        "firefox",
        "-o",
        json.to_str().unwrap(),
    ];
    let out = analyze(&args, file);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut out = BTreeMap::new();
    for t in v["threads"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap_or("").to_string();
        let data = t["markers"]["data"].as_array().unwrap();
        let n = data
            .iter()
            .filter(|d| d["type"].as_str() == Some("SampledRequest"))
            .count();
        if n > 0 {
            *out.entry(name).or_default() += n;
        }
    }
    out
}

/// O_DIRECT: the request the sampled call made itself, no page cache.
#[test]
fn sampled_direct_writes_own_their_request() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("requests-direct");
    let Written { file, unseen, .. } = record_writer(&dir, &one_in_every(), &["direct"], &[]);
    let sampled = check_writes(&file, DIRECT_LAYERS, unseen);
    within_binomial(sampled, WRITES, EVERY);
    assert!(csv_rows(&file).iter().all(|r| r.layer != "page_cache"));
}

/// Completions no program saw (about one in 3, by construction, as interrupts on some hosts
/// run none): each sampled write without its block_complete is one record counts.
#[test]
fn sampled_writes_whose_completion_went_unseen_are_counted() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("requests-unseen");
    let env = [("BPFPERF_IO_UNSEEN_EVERY", "3")];
    let Written { file, unseen, .. } = record_writer(&dir, &one_in_every(), &["direct"], &env);
    let sampled = check_writes(&file, DIRECT_LAYERS, unseen);
    let complete = by_request(&csv_rows(&file))
        .values()
        .filter(|rows| rows.iter().any(|r| r.layer == "block_complete"))
        .count();
    eprintln!("{complete} of {sampled} sampled writes completed seen, {unseen} said unseen");
    // check_writes: no more without block_complete than record counted.
    assert!(unseen > 0 && complete < sampled, "{unseen} said unseen");
}

/// `write:R/s`: the first write, then the first one at least 1/R s after the last one
/// chosen. No two sampled calls are closer than 1/R s (so no more than R a second of the
/// writer's time), and each passes every layer as a call sampled 1 in N does.
#[test]
fn writes_chosen_by_time_are_spaced_by_the_rate() {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    const PER_SECOND: u64 = 500;
    let dir = TempDir::new("requests-time");
    let Written { file, wall, unseen } =
        record_writer(&dir, &format!("write:{PER_SECOND}/s"), &[], &[]);
    let sampled = check_writes(&file, BUFFERED_LAYERS, unseen);
    let (steps, _) = read_file(&file);
    let mut calls: Vec<u64> = steps
        .iter()
        .filter(|(_, r)| r.layer.name() == "call")
        .map(|(_, r)| r.call_ns)
        .collect();
    calls.sort_unstable();
    assert_eq!(calls.len(), sampled);
    let gap = 1_000_000_000 / PER_SECOND;
    for w in calls.windows(2) {
        assert!(
            w[1] - w[0] >= gap,
            "two sampled calls {} ns apart: {calls:?}",
            w[1] - w[0]
        );
    }
    // The first write is always chosen; at most one a gap after it.
    let most = (wall * PER_SECOND as f64).floor() as usize + 1;
    eprintln!("{sampled} sampled of {WRITES} writes in {wall:.3} s (at most {most})");
    assert!(
        (1..=most).contains(&sampled),
        "{sampled} sampled, at most {most}"
    );
}

#[test]
fn sampled_sends_pass_every_layer_to_the_device() {
    if !crate::net::can_run() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("requests-send");
    let ns = crate::net::Netns::new();
    let mut server = ns.server(&dir, 1, 0);
    let file = dir.path("send.data");
    // SEND_LOOP: 200 sends of 16 KiB, 5 ms apart.
    let out = ns.record_python(
        &dir,
        crate::net::SEND_LOOP,
        &["--follow", "send:1/10"],
        &file,
        &[],
        &[],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(server.wait().unwrap().success());
    perf_script_clean(&file);
    let rows = csv_rows(&file);
    let requests = by_request(&rows);
    eprintln!("{} sampled sends of 200", requests.len());
    within_binomial(requests.len(), 200, 10);
    for (id, rows) in &requests {
        let seen: Vec<&str> = rows.iter().map(|r| r.layer.as_str()).collect();
        for layer in ["call", "tcp", "qdisc", "driver", "device"] {
            assert!(seen.contains(&layer), "S{id}: no {layer} in {seen:?}");
        }
        let call = rows.iter().find(|r| r.layer == "call").unwrap();
        // One send() of sendall()'s 16 KiB (a short one leaves the rest to the next).
        assert_eq!(call.kind, "send", "S{id}");
        assert!(
            (1..=16384).contains(&call.bytes),
            "S{id}: {} bytes",
            call.bytes
        );
        let at = |layer: &str| rows.iter().find(|r| r.layer == layer).unwrap().offset_ns;
        assert!(
            at("tcp") <= at("qdisc") && at("qdisc") <= at("driver"),
            "S{id}: {rows:?}"
        );
        assert!(at("driver") <= at("device"), "S{id}: {rows:?}");
        // At most REQ_MAX_REQUESTS skbs, three records each, besides call and tcp.
        assert!(rows.len() <= 2 + 3 * 4, "S{id}: {rows:?}");
    }
}
