//! `analyze export`: pprof read by `go tool pprof`, the Firefox Profiler's processed format,
//! speedscope's file format checked against its own JSON schema and opened in a real browser
//! (speedscope from npm in headless Chromium, over a loopback HTTP server).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;
use crate::folded::{parse_folded, run_ok, Folded};

fn export(file: &Path, format: &str, out: &Path, extra: &[&str]) {
    let mut args = vec!["export", "--format", format, "-i", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-o", out.to_str().unwrap()]);
    let o = analyze(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn folded(file: &Path, extra: &[&str]) -> Folded {
    let mut args = vec!["report", "--folded", "-i", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    parse_folded(&run_ok(&args))
}

/// The hottest leaf of folded stacks and its weight.
fn hottest_leaf(f: &Folded) -> (String, u64) {
    let mut leaves: std::collections::BTreeMap<&str, u64> = Default::default();
    for (k, v) in f {
        *leaves.entry(k.rsplit(';').next().unwrap()).or_insert(0) += v;
    }
    let (name, w) = leaves.into_iter().max_by_key(|(_, w)| *w).unwrap();
    (name.to_string(), w)
}

/// A function name as pprof's `-top` shortens it: template arguments and parameter lists
/// (anything in `<>` or `()`) left out.
fn pprof_short(name: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::new();
    for c in name.chars() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Weights summed by name.
fn grouped(rows: impl Iterator<Item = (String, u64)>) -> std::collections::BTreeMap<String, u64> {
    let mut g = std::collections::BTreeMap::new();
    for (name, w) in rows {
        *g.entry(name).or_insert(0) += w;
    }
    g
}

/// A fixture program (`0.4 2`: 0.4 s on two threads) recorded by perf at 499 Hz with
/// `--call-graph CALL_GRAPH` into DIR/PROGRAM.data.
fn record_program(dir: &Tmp, program: &str, call_graph: &str) -> PathBuf {
    let file = dir.0.join(format!("{program}.data"));
    perf_record(
        &file,
        &["-F", "499", "--call-graph", call_graph],
        &fixture(program),
        &["0.4", "2"],
    );
    file
}

/// perf script's FIELDS of every sample in `file`, a line each, trimmed.
fn perf_script_fields(file: &Path, fields: &str) -> Vec<String> {
    let out = Command::new("perf")
        .args(["script", "-F", fields, "-i"])
        .arg(file)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// How many samples perf script counts in `file` (one event).
fn perf_sample_count(file: &Path) -> u64 {
    perf_script_fields(file, "period").len() as u64
}

fn go_pprof(args: &[&str], profile: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(profile)
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `-top`'s total ("... of N total") and its rows (flat, function), hottest first.
fn top(text: &str) -> (u64, Vec<(u64, String)>) {
    let total = text
        .lines()
        .find_map(|l| l.split(" of ").nth(1)?.strip_suffix(" total")?.parse().ok())
        .unwrap_or_else(|| panic!("no total in:\n{text}"));
    let header = text.lines().position(|l| l.contains("flat%")).unwrap();
    let rows = text
        .lines()
        .skip(header + 1)
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0].parse().unwrap(), w[5..].join(" "))
        })
        .collect();
    (total, rows)
}

/// The GNU build id of `binary` (Go's linker writes none).
fn build_id(binary: &Path) -> Option<String> {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(binary)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
}

/// pprof on C, C++, Rust and Go, frame pointers and DWARF: `go tool pprof -top` reads every
/// sample perf counts, the hot function first (C and Go: pprof shortens C++ and Rust names
/// past recognition, so for those the full names are checked in `-raw`), the main binary's
/// build id, inline frames as Lines of one Location (Rust, DWARF).
#[test]
fn pprof_export_reads_in_go_tool_pprof() {
    if !perf_ok() || !have(Command::new("go").arg("version").output().is_ok(), "go") {
        return;
    }
    let dir = Tmp::new("export-pprof");
    for (program, call_graph) in [
        ("busy-fp", "fp"),
        ("cxxprog-g++-fp", "fp"),
        ("rsprog-nofp", "dwarf"),
        ("goprog", "fp"),
    ] {
        let file = record_program(&dir, program, call_graph);
        let bin = fixture(program);
        let pb = dir.0.join(format!("{program}.pb.gz"));
        export(&file, "pprof", &pb, &[]);
        let text = go_pprof(&["-top"], &pb);
        let (total, rows) = top(&text);
        let samples = perf_sample_count(&file);
        assert_eq!(
            total, samples,
            "{program}: pprof's total is perf's count\n{text}"
        );
        if let Some(id) = build_id(&bin) {
            assert!(
                text.contains(&format!("Build ID: {id}")),
                "{program}: the main binary's build id first\n{text}"
            );
        }
        let ours = folded(&file, &[]);
        let (hot, weight) = hottest_leaf(&ours);
        eprintln!(
            "{program}: {samples} samples, pprof's first {rows:?}, ours {hot} ({weight})",
            rows = rows[0]
        );
        // pprof merges functions whose names differ only in template arguments or Rust's
        // `<T as Trait>` (both `<A as K>::run` and `<B as K>::run` are its `::run`) and splits
        // a function's inline and out-of-line rows: compare the hottest of its merged names.
        let pprof_groups = grouped(rows.iter().map(|(w, name)| {
            let name = name.trim_end_matches(" (inline)");
            (pprof_short(name.trim_end_matches(" (partial-inline)")), *w)
        }));
        let our_groups = grouped(
            ours.iter()
                .map(|(k, v)| (pprof_short(k.rsplit(';').next().unwrap()), *v)),
        );
        let hottest = |g: &std::collections::BTreeMap<String, u64>| g.values().max().copied();
        assert_eq!(
            hottest(&pprof_groups),
            hottest(&our_groups),
            "{program}: the hot function's samples (ours {hot}: {weight})\n{text}"
        );
        if program == "busy-fp" || program == "goprog" {
            assert!(
                rows.iter().any(|r| r.0 == weight && r.1 == hot),
                "{program}: the hot function first\n{text}"
            );
        }
        let raw = go_pprof(&["-raw"], &pb);
        assert!(raw.contains(&hot), "{program}: {hot} in -raw");
        assert!(
            raw.contains(&format!("process_name:[{program}] thread_name:[{program}]")),
            "{program}: process and thread labels"
        );
        if program == "rsprog-nofp" {
            // A location line followed by an indented line: an inlined function's Line.
            let inlined = raw.lines().collect::<Vec<_>>().windows(2).any(|w| {
                w[0].trim_start()
                    .split(':')
                    .next()
                    .unwrap()
                    .parse::<u64>()
                    .is_ok()
                    && w[1].starts_with("             ")
                    && !w[1].trim().is_empty()
            });
            assert!(inlined, "{program}: no location with inlined Lines:\n{raw}");
            assert!(
                raw.contains(".rs:"),
                "{program}: no Rust file names and lines"
            );
        }
        // The same selection flags as report: --tid of one worker keeps its samples only.
        let tid_total = {
            let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
            for tid in perf_script_fields(&file, "tid") {
                *counts.entry(tid).or_insert(0) += 1;
            }
            counts.into_iter().max_by_key(|(_, n)| *n).unwrap()
        };
        let one = dir.0.join(format!("{program}-tid.pb.gz"));
        export(&file, "pprof", &one, &["--tid", &tid_total.0]);
        assert_eq!(
            top(&go_pprof(&["-top"], &one)).0,
            tid_total.1,
            "{program} --tid"
        );
    }
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Firefox Profiler: a processed profile (meta, threads, samples, consistent tables) with
/// every sample of the recording, on-CPU and off-CPU in one file: the off-CPU intervals as
/// markers naming their waker, block I/O requests as markers naming their issuer, the
/// program in the library list with its build id.
#[test]
fn firefox_export_holds_every_sample_and_the_off_cpu_intervals() {
    if !can_record() {
        return;
    }
    let dir = Tmp::new("export-firefox");
    let file = dir.0.join("handoff.data");
    let bin = fixture("handoff-fp");
    // Blocked and woken (handoff), busy on two threads, then direct writes (block I/O
    // issued by dd itself).
    let script = format!(
        "{} 40 5000 && {} 0.3 2 && dd if=/dev/zero of={} bs=256k count=16 oflag=direct status=none",
        bin.display(),
        fixture("busy-fp").display(),
        dir.0.join("dd.out").display()
    );
    // What record said (drops, runs the kernel skipped), for the failures below.
    let said = record_ours(
        &file,
        &["--call-graph", "fp", "-F", "999"],
        Path::new("/bin/sh"),
        &["-c", &script],
    );
    let out = dir.0.join("handoff.json");
    export(&file, "firefox", &out, &[]);
    let p = json(&out);
    assert!(p["meta"]["version"].as_u64().is_some(), "meta.version");
    assert!(p["meta"]["preprocessedProfileVersion"].as_u64().is_some());
    let threads = p["threads"].as_array().unwrap();
    let mut samples = 0;
    let (mut offcpu, mut woken_by_handoff, mut io, mut io_by_dd) = (0, 0, 0, 0);
    let mut written = 0;
    let mut requests = Vec::new();
    for t in threads {
        let s = &t["samples"];
        let n = s["length"].as_u64().unwrap() as usize;
        let stacks = s["stack"].as_array().unwrap();
        assert_eq!(stacks.len(), n);
        let weights: Vec<u64> = match s["weight"].as_array() {
            Some(w) => w.iter().map(|x| x.as_u64().unwrap()).collect(),
            None => vec![1; n],
        };
        samples += weights.iter().sum::<u64>();
        // Every sample's stack, frame and function exist.
        let (st, fr, fu) = (&t["stackTable"], &t["frameTable"], &t["funcTable"]);
        for stack in stacks.iter().filter_map(|x| x.as_u64()) {
            assert!(stack < st["length"].as_u64().unwrap());
            let frame = st["frame"][stack as usize].as_u64().unwrap();
            let func = fr["func"][frame as usize].as_u64().unwrap();
            assert!(func < fu["length"].as_u64().unwrap());
        }
        let strings = t["stringArray"].as_array().unwrap();
        let m = &t["markers"];
        for (i, data) in m["data"].as_array().unwrap().iter().enumerate() {
            let name = strings[m["name"][i].as_u64().unwrap() as usize]
                .as_str()
                .unwrap();
            if name == "block I/O" {
                io += 1;
                let issuer = data["issuer"].as_u64().unwrap() as usize;
                io_by_dd += strings[issuer].as_str().unwrap().starts_with("dd (") as usize;
                let op = strings[data["op"].as_u64().unwrap() as usize]
                    .as_str()
                    .unwrap();
                if op.contains('W') {
                    written += data["bytes"].as_f64().unwrap() as u64;
                }
                requests.push(format!(
                    "{op} {} by {}",
                    data["bytes"],
                    strings[issuer].as_str().unwrap()
                ));
            }
            if name == "off-CPU" {
                offcpu += 1;
                let waker = data["waker"].as_u64().unwrap() as usize;
                if strings[waker].as_str().unwrap().starts_with("handoff-fp (") {
                    woken_by_handoff += 1;
                }
            }
        }
    }
    let on_cpu: u64 = folded(&file, &[]).values().sum();
    assert_eq!(samples, on_cpu, "every on-CPU sample");
    // busy's two threads run 0.3 s: ~600 samples alone, fewer when other tests share the CPUs.
    assert!(samples > 100, "busy's samples: {samples}");
    let busy_threads = threads
        .iter()
        .filter(|t| t["name"] == "busy-fp" && t["samples"]["length"].as_u64() > Some(20))
        .count();
    assert!(busy_threads >= 2, "a track per busy thread");
    let events = perf_script_fields(&file, "event");
    let count = |name: &str| {
        events
            .iter()
            .filter(|l| l.trim_end_matches(':') == name)
            .count()
    };
    let recorded_offcpu = count("offcpu-time");
    eprintln!(
        "firefox: {samples} samples, {offcpu} off-CPU markers ({woken_by_handoff} woken by handoff), perf script: {recorded_offcpu} offcpu-time"
    );
    assert_eq!(offcpu, recorded_offcpu, "one marker per off-CPU interval");
    let recorded_io = count("bpfperf:block_io");
    eprintln!(
        "firefox: {io} block I/O markers ({io_by_dd} issued by dd, {written} bytes written), perf script: {recorded_io}"
    );
    assert_eq!(io, recorded_io, "one marker per block I/O request");
    // The bytes written are perf script's of the same file, and hold all of dd's 16 direct
    // writes of 256 KiB: each request is taken where dd made it, whoever issues it to the
    // driver (dd, or kblockd's kworker when the queue dispatches it later: such requests
    // were once lost, 9 of 16 written in a loaded run).
    let perf_written: u64 = perf_script_fields(&file, "event,trace")
        .iter()
        .filter(|l| l.starts_with("bpfperf:block_io:"))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let bytes = w.iter().position(|x| *x == "bytes")?;
            w[2].contains('W')
                .then(|| w[bytes - 1].parse::<u64>().ok())?
        })
        .sum();
    assert_eq!(written, perf_written, "written bytes: {requests:#?}");
    // A request whose completion no program saw (an interrupt that ran none: "Firefox short
    // of one dd write" in an earlier note) is not recorded, and record counts its bytes.
    let unseen = crate::record_said::unseen_io_bytes(&said);
    assert!(
        written + unseen >= 16 * 256 * 1024,
        "dd's writes: {written} bytes in {requests:#?}\nrecord said: {said}"
    );
    assert!(woken_by_handoff >= 40, "the 40 handoffs name their waker");
    let id = build_id(&bin).unwrap();
    let libs = p["libs"].as_array().unwrap();
    assert!(
        libs.iter()
            .any(|l| l["codeId"] == id.as_str() && l["name"] == "handoff-fp"),
        "{libs:?}"
    );
}

/// How many pixels of a PNG have a color (not white, gray or black).
fn colored_pixels(path: &Path) -> usize {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut decoder = png::Decoder::new(file);
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks(channels)
        .filter(|p| {
            p.len() >= 3 && p[..3].iter().max().unwrap() - p[..3].iter().min().unwrap() > 40
        })
        .count()
}

/// Serves `dir` over HTTP on a loopback port (GET only) until the process ends.
fn serve(dir: PathBuf) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut line = String::new();
            let mut reader = BufReader::new(&stream);
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // Headers, up to the blank line.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/");
            let path = path
                .split(['?', '#'])
                .next()
                .unwrap()
                .trim_start_matches('/');
            let file = dir.join(if path.is_empty() { "index.html" } else { path });
            let mut stream = &stream;
            match std::fs::read(&file) {
                Ok(body) if !path.contains("..") => {
                    let kind = match file.extension().and_then(|e| e.to_str()) {
                        Some("html") => "text/html",
                        Some("js") => "text/javascript",
                        Some("css") => "text/css",
                        Some("json") => "application/json",
                        Some("wasm") => "application/wasm",
                        _ => "application/octet-stream",
                    };
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(&body);
                }
                _ => {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            }
        }
    });
    port
}

/// A speedscope export of `recording` passes speedscope's schema (ajv, from npm), holds every
/// sample perf counts, its frame indices are in the frame table, and `function` is named
/// with its source file.
fn check_speedscope(out: &Path, recording: &Path, function: &str, source: &str) {
    let web = root().join("target/web/node_modules");
    let check = r#"
        const [ajvPath, schemaPath, file] = process.argv.slice(1);
        const Ajv = require(ajvPath);
        const validate = new Ajv({ strict: false, allErrors: true }).compile(require(schemaPath));
        const data = JSON.parse(require('fs').readFileSync(file));
        if (!validate(data)) { console.log(JSON.stringify(validate.errors.slice(0, 5))); process.exit(1); }
    "#;
    let node = Command::new("node")
        .args(["-e", check])
        .arg(web.join("ajv"))
        .arg(web.join("speedscope/dist/release/file-format-schema.json"))
        .arg(out)
        .output()
        .unwrap();
    assert!(
        node.status.success(),
        "{}: speedscope's schema: {}{}",
        out.display(),
        String::from_utf8_lossy(&node.stdout),
        String::from_utf8_lossy(&node.stderr)
    );
    let p = json(out);
    let frames = p["shared"]["frames"].as_array().unwrap();
    let mut total = 0;
    for profile in p["profiles"].as_array().unwrap() {
        let samples = profile["samples"].as_array().unwrap();
        let weights = profile["weights"].as_array().unwrap();
        assert_eq!(samples.len(), weights.len());
        for s in samples {
            assert!(s
                .as_array()
                .unwrap()
                .iter()
                .all(|f| (f.as_u64().unwrap() as usize) < frames.len()));
        }
        total += weights.iter().map(|w| w.as_u64().unwrap()).sum::<u64>();
    }
    assert_eq!(
        total,
        perf_sample_count(recording),
        "{}: every sample",
        out.display()
    );
    assert!(
        frames
            .iter()
            .any(|f| f["name"] == function
                && f["file"].as_str().is_some_and(|s| s.ends_with(source))),
        "{}: {function} in {source}",
        out.display()
    );
    eprintln!("speedscope: {} samples of {}", total, out.display());
}

/// speedscope: the export of C++, Rust (DWARF) and Go recordings matches speedscope's own
/// JSON schema (ajv, from npm) and carries every sample; speedscope (from npm) opens the C++
/// one in headless Chromium over loopback HTTP: the
/// page's title names our profile, no import error, frames drawn (a screenshot is kept in
/// target/export-check/ for a look).
#[test]
fn speedscope_export_matches_its_schema_and_opens_in_a_browser() {
    let web = root().join("target/web/node_modules");
    let release = web.join("speedscope/dist/release");
    if !perf_ok()
        || !have(
            release.join("index.html").exists(),
            "speedscope (scripts/setup)",
        )
        || !have(
            Command::new("chromium").arg("--version").output().is_ok(),
            "chromium",
        )
    {
        return;
    }
    let dir = Tmp::new("export-speedscope");
    let file = dir.0.join("cxx.data");
    let bin = fixture("cxxprog-g++-fp");
    perf_record(&file, &["-F", "499", "-g"], &bin, &["0.4", "2"]);
    let site = dir.0.join("site");
    std::fs::create_dir_all(&site).unwrap();
    for entry in std::fs::read_dir(&release).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), site.join(entry.file_name())).unwrap();
    }
    let out = site.join("cxx.speedscope.json");
    export(&file, "speedscope", &out, &[]);

    check_speedscope(&out, &file, "sort_values", "cxxprog.cpp");
    let total = perf_sample_count(&file);
    // Rust (DWARF) and Go: the same checks, not the browser again.
    for (program, call_graph, function, source) in [
        ("rsprog-nofp", "dwarf", "rsprog::worker", "rsprog.rs"),
        ("goprog", "fp", "main.worker", "goprog.go"),
    ] {
        let file = record_program(&dir, program, call_graph);
        let out = dir.0.join(format!("{program}.speedscope.json"));
        export(&file, "speedscope", &out, &[]);
        check_speedscope(&out, &file, function, source);
    }

    // The browser.
    let port = serve(site);
    let url = format!("http://127.0.0.1:{port}/index.html#profileURL=/cxx.speedscope.json");
    let chromium = |extra: &[&str]| {
        let out = Command::new("timeout")
            .args([
                "120",
                "chromium",
                "--headless",
                "--no-sandbox",
                "--enable-unsafe-swiftshader",
            ])
            .args(["--virtual-time-budget=15000", "--window-size=1280,800"])
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "chromium: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dom = chromium(&["--dump-dom"]);
    let title = dom
        .split("<title>")
        .nth(1)
        .and_then(|t| t.split("</title>").next())
        .unwrap_or("");
    eprintln!("speedscope: {total} samples, page title {title:?}");
    assert!(
        title.contains("cxx.data: cpu-clock") && title.ends_with(" - speedscope"),
        "the page's title names our profile: {title:?}"
    );
    assert!(
        !dom.contains("Something went wrong"),
        "import error:\n{dom}"
    );
    assert!(dom.contains("<canvas"), "no canvas: {dom}");
    assert!(
        dom.contains("cxxprog-g++-fp (pid"),
        "our thread's profile shown"
    );
    let shots = root().join("target/export-check");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("speedscope.png");
    chromium(&[&format!("--screenshot={}", shot.display())]);
    let colored = colored_pixels(&shot);
    eprintln!(
        "speedscope: screenshot {} ({colored} colored pixels)",
        shot.display()
    );
    // speedscope's page without a profile has ~20,000 (its logo, a link); flame charts of
    // this program 120,000-205,000.
    assert!(colored > 60_000, "frames drawn: {colored} colored pixels");
}

/// The Firefox export of perf's recordings of C++, Rust (DWARF) and Go programs: every
/// sample perf counts, on the program's threads, the hot functions named, with their
/// library and source file.
#[test]
fn firefox_export_of_other_languages_holds_every_sample() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("export-firefox-langs");
    for (program, call_graph, function, source) in [
        ("cxxprog-clang++-fp", "fp", "sort_values", "cxxprog.cpp"),
        ("rsprog-nofp", "dwarf", "rsprog::worker", "rsprog.rs"),
        ("goprog", "fp", "main.worker", "goprog.go"),
    ] {
        let file = record_program(&dir, program, call_graph);
        let out = dir.0.join(format!("{program}.json"));
        export(&file, "firefox", &out, &[]);
        let p = json(&out);
        let mut samples = 0;
        let mut named = false;
        for t in p["threads"].as_array().unwrap() {
            samples += t["samples"]["length"].as_u64().unwrap();
            let strings = t["stringArray"].as_array().unwrap();
            let fu = &t["funcTable"];
            for (i, name) in fu["name"].as_array().unwrap().iter().enumerate() {
                let string =
                    |v: &serde_json::Value| v.as_u64().and_then(|k| strings[k as usize].as_str());
                if string(name) == Some(function) {
                    let file = string(&fu["fileName"][i]).unwrap_or("");
                    let resource = fu["resource"][i].as_i64().unwrap();
                    named |= file.ends_with(source) && resource >= 0;
                }
            }
        }
        eprintln!("firefox: {program}: {samples} samples");
        assert_eq!(samples, perf_sample_count(&file), "{program}: every sample");
        assert!(named, "{program}: {function} with its library and {source}");
    }
}
