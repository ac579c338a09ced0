//! `analyze top` on a recording while `record` writes it: the terminal view driven in tmux as a
//! user would (keys in, screen out), and the served flame graph page screenshotted by headless
//! Chromium in two phases of a workload whose hot function changes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{analyze, can_record, fixture, have, record_bin, root, Tmp};

/// Starts `record -o file -- program args` and returns at once.
fn start_recording(file: &Path, program: &Path, args: &[&str]) -> Child {
    Command::new(record_bin())
        .args(["-q", "-o"])
        .arg(file)
        .arg("--")
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits up to `limit` for `f` to give something.
fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A tmux server of this test's own, with one 200x50 session running a command.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(tag: &str, command: &str) -> Tmux {
        let t = Tmux {
            socket: format!("bpfperf-{tag}-{}", std::process::id()),
        };
        let st = t
            .cmd()
            .args(["new-session", "-d", "-x", "200", "-y", "50", command])
            .status()
            .unwrap();
        assert!(st.success(), "tmux new-session");
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    fn screen(&self) -> String {
        let out = self.cmd().args(["capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let st = self.cmd().args(["send-keys", keys]).status().unwrap();
        assert!(st.success(), "tmux send-keys {keys}");
    }

    fn running(&self) -> bool {
        self.cmd()
            .arg("has-session")
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
    }
}

/// The first percentage on the line that ends with `[.] function` (the Self column of the
/// function views, as in the report).
fn share(text: &str, function: &str) -> Option<f64> {
    let suffix = format!("[.] {function}");
    text.lines()
        .find(|l| l.trim_end().ends_with(&suffix))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|p| p.strip_suffix('%'))
        .and_then(|p| p.parse().ok())
}

#[test]
fn live_view_in_tmux() {
    let tmux_ok = Command::new("tmux").arg("-V").output().is_ok();
    if !can_record() || !have(tmux_ok, "tmux") {
        return;
    }
    let dir = Tmp::new("live-tmux");
    let file = dir.0.join("live.data");
    let analyze_bin = env!("CARGO_BIN_EXE_analyze");
    // The view starts first and waits for the file, as a user would start it beside record.
    let tmux = Tmux::start("top", &format!("{analyze_bin} top -i {}", file.display()));
    let started = Instant::now();
    let mut rec = start_recording(&file, &fixture("busy-fp"), &["6", "2"]);
    let created = wait_for(Duration::from_secs(20), || {
        file.exists().then(|| started.elapsed())
    })
    .expect("record creates its file");
    let first = wait_for(Duration::from_secs(10), || {
        let s = tmux.screen();
        share(&s, "spin_inner").map(|p| (p, started.elapsed(), s))
    });
    let (first_share, seen, screen) = first
        .unwrap_or_else(|| panic!("spin_inner never appeared; the screen:\n{}", tmux.screen()));
    eprintln!(
        "live: file after {:.2} s, spin_inner on screen after {:.2} s ({first_share}%)",
        created.as_secs_f64(),
        seen.as_secs_f64()
    );
    assert!(
        (seen - created).as_secs_f64() <= 3.0,
        "spin_inner appeared {:.2} s after record created the file:\n{screen}",
        (seen - created).as_secs_f64()
    );

    // Keys: the hottest stacks, then back to functions by self.
    tmux.keys("k");
    let stacks = wait_for(Duration::from_secs(3), || {
        let s = tmux.screen();
        s.contains("spin_inner <- spin_outer <- worker")
            .then_some(s)
    })
    .unwrap_or_else(|| panic!("k did not show the stacks:\n{}", tmux.screen()));
    assert!(stacks.contains("hottest stacks") && !stacks.contains("Self samples"));
    assert!(share(&stacks, "spin_inner").is_none(), "{stacks}");
    tmux.keys("s");
    wait_for(Duration::from_secs(3), || {
        share(&tmux.screen(), "spin_inner").map(|_| ())
    })
    .unwrap_or_else(|| panic!("s did not show the functions:\n{}", tmux.screen()));

    // The share shown while the recording is still being written, late in it.
    std::thread::sleep(Duration::from_secs(2));
    let live = tmux.screen();
    let still_recording = rec.try_wait().unwrap().is_none();
    let live_share = share(&live, "spin_inner").expect("spin_inner on screen");

    let st = rec.wait().unwrap();
    assert!(st.success(), "record failed");
    // The view reads the finished file at its next refresh.
    std::thread::sleep(Duration::from_millis(2500));
    let last = tmux.screen();
    let final_share = share(&last, "spin_inner").expect("spin_inner on screen at the end");

    let report = analyze(&["report", "-i", file.to_str().unwrap()]);
    assert!(report.status.success());
    let report = String::from_utf8_lossy(&report.stdout);
    let report_share = share(&report, "spin_inner").expect("spin_inner in the report");
    eprintln!(
        "live: spin_inner {live_share}% while recording (still recording: {still_recording}), \
         {final_share}% after, analyze report {report_share}%"
    );
    assert!(still_recording, "the workload ended before the live check");
    for (what, s) in [("while recording", live_share), ("at the end", final_share)] {
        assert!(
            (s - report_share).abs() <= 5.0,
            "spin_inner {s}% on screen {what}, {report_share}% in the report:\n{last}"
        );
    }
    // Not a terminal: the same table, once.
    let once = analyze(&["top", "--once", "-i", file.to_str().unwrap()]);
    assert!(once.status.success());
    let once = String::from_utf8_lossy(&once.stdout);
    assert_eq!(share(&once, "spin_inner"), Some(report_share), "{once}");

    tmux.keys("q");
    wait_for(Duration::from_secs(3), || (!tmux.running()).then_some(()))
        .unwrap_or_else(|| panic!("q did not quit:\n{}", tmux.screen()));
}

/// The live view of a recording counted in the kernel (`--aggregate --interval 1`): the counts
/// of each second (500 samples or more), read while recording, show the hot function within
/// 3 s, at the final report's share within 5 points.
#[test]
fn live_view_reads_the_kernels_counts() {
    if !can_record() {
        return;
    }
    let dir = Tmp::new("live-counted");
    let file = dir.0.join("counted.data");
    let started = Instant::now();
    let mut rec = Command::new(record_bin())
        .args(["-q", "--aggregate", "--interval", "1", "-o"])
        .arg(&file)
        .arg("--")
        .arg(fixture("busy-fp"))
        .args(["6", "2"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The first counts (the first interval's): before them the view holds only the few
    // samples sent alone (a new stack the kernel's map had no room for at once).
    let samples = |text: &str| -> u64 {
        text.lines()
            .next()
            .and_then(|l| {
                l.split(" samples of ")
                    .next()?
                    .rsplit(' ')
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    // What the live view read is compared with a report of the file as it was then (copied
    // at once: the next counts come a second later), not of the whole run: the workload's
    // split drifts as it runs (45.7% in the first 2 s, 51.9% over 6, on a fresh clone).
    let snapshot = dir.0.join("then.data");
    let live = wait_for(Duration::from_secs(10), || {
        let out = analyze(&["top", "--once", "-i", file.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let found = (samples(&text) >= 500)
            .then(|| share(&text, "spin_inner"))
            .flatten()
            .map(|p| (p, started.elapsed(), text));
        if found.is_some() {
            std::fs::copy(&file, &snapshot).unwrap();
        }
        found
    });
    let (live_share, seen, text) = live.expect("spin_inner never shown while recording");
    let still_recording = rec.try_wait().unwrap().is_none();
    assert!(rec.wait().unwrap().success());
    let report_of = |f: &std::path::Path| {
        let report = analyze(&[
            "report",
            "--stdio",
            "--no-children",
            "-i",
            f.to_str().unwrap(),
        ]);
        assert!(report.status.success());
        let report = String::from_utf8_lossy(&report.stdout).into_owned();
        share(&report, "spin_inner").expect("spin_inner in the report")
    };
    let (report_share, whole_share) = (report_of(&snapshot), report_of(&file));
    eprintln!(
        "live (counted): spin_inner {live_share}% after {:.2} s, {report_share}% in the report \
         of the file then ({whole_share}% of the whole run)",
        seen.as_secs_f64()
    );
    assert!(still_recording, "the workload ended before the live check");
    assert!(text.contains("cpu-clock"), "{text}");
    assert!(
        seen.as_secs_f64() <= 3.0 + 1.0,
        "shown after {seen:?} (3 s + start-up)"
    );
    assert!(
        (live_share - report_share).abs() <= 5.0,
        "spin_inner {live_share}% live, {report_share}% in the report:\n{text}"
    );
}

/// GET `path` from `addr` (host:port): the body.
fn get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_string()
}

/// The share of the flame graph's boxes named `function` (inferno's titles:
/// `name (N samples, P%)`), summed.
fn svg_share(svg: &str, function: &str) -> f64 {
    svg.split(&format!("<title>{function} ("))
        .skip(1)
        .filter_map(|t| {
            let inside = t.split(")</title>").next()?;
            inside
                .rsplit(", ")
                .next()?
                .strip_suffix('%')?
                .parse::<f64>()
                .ok()
        })
        .fold(0.0, |a, b| a + b)
}

/// The RGB pixels of a PNG and its width.
fn pixels(path: &Path) -> (Vec<[u8; 3]>, u32) {
    let file = BufReader::new(std::fs::File::open(path).unwrap());
    let mut decoder = png::Decoder::new(file);
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1 % channels], p[2 % channels]])
        .collect();
    (px, info.width)
}

/// A screenshot of `url` by headless Chromium into `shot`.
fn screenshot(url: &str, shot: &Path) {
    let out = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--enable-unsafe-swiftshader",
            "--virtual-time-budget=3000",
            "--window-size=1280,800",
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(url)
        .output()
        .unwrap();
    assert!(
        out.status.success() && shot.exists(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Kills and reaps a child when dropped (the server runs until killed).
struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn served_flame_graph_follows_the_workload() {
    let chromium_ok = Command::new("chromium").arg("--version").output().is_ok();
    if !can_record() || !have(chromium_ok, "chromium") {
        return;
    }
    let dir = Tmp::new("live-serve");
    let file = dir.0.join("phases.data");
    let go = dir.0.join("go");
    // Phase one until the test has seen it (at most 60 s), then phase two for 3 s.
    let mut rec = start_recording(
        &file,
        &fixture("phases-fp"),
        &["60", "3", go.to_str().unwrap()],
    );
    wait_for(Duration::from_secs(20), || file.exists().then_some(()))
        .expect("record creates its file");
    let mut server = Killed(
        Command::new(env!("CARGO_BIN_EXE_analyze"))
            .args(["top", "--serve", "127.0.0.1:0", "--window", "1", "-i"])
            .arg(&file)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(server.0.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let url = format!("http://{addr}/");
    assert!(
        addr.starts_with("127.0.0.1:"),
        "bound only where asked: {addr}"
    );
    assert!(get(&addr, "/").contains("/flamegraph.svg"));

    let shots: PathBuf = root().join("target/live-check");
    std::fs::create_dir_all(&shots).unwrap();
    let (shot1, shot2) = (shots.join("phase-one.png"), shots.join("phase-two.png"));

    // Phase one's graph once it holds both of its children (the first one served can hold a
    // handful of samples, none of them in one of them yet: seen once under the whole suite).
    let svg1 = wait_for(Duration::from_secs(20), || {
        let svg = get(&addr, "/flamegraph.svg");
        (svg_share(&svg, "phase_one") > 50.0
            && svg.contains("one_left")
            && svg.contains("one_right"))
        .then_some(svg)
    })
    .expect("phase_one in the served flame graph");
    screenshot(&url, &shot1);
    // Still phase one: the go file is not there yet.
    let svg1_after = get(&addr, "/flamegraph.svg");
    std::fs::write(&go, "").unwrap();
    let svg2 = wait_for(Duration::from_secs(20), || {
        let svg = get(&addr, "/flamegraph.svg");
        (svg_share(&svg, "phase_two") > 50.0).then_some(svg)
    })
    .expect("phase_two dominating the served flame graph");
    screenshot(&url, &shot2);
    let st = rec.wait().unwrap();
    assert!(st.success(), "record failed");

    let (one, two) = (svg_share(&svg1, "phase_one"), svg_share(&svg2, "phase_two"));
    eprintln!(
        "serve: phase one: phase_one {one}%, phase_two {}%; phase two: phase_two {two}%, \
         phase_one {}%",
        svg_share(&svg1, "phase_two"),
        svg_share(&svg2, "phase_one")
    );
    assert!(svg1.contains("one_left") && svg1.contains("one_right"));
    assert!(
        svg_share(&svg1_after, "phase_one") > 50.0,
        "phase one went on"
    );
    assert!(svg_share(&svg1, "phase_two") < 1.0);
    assert!(two > svg_share(&svg2, "phase_one"));

    let ((a, width), (b, _)) = (pixels(&shot1), pixels(&shot2));
    assert_eq!(a.len(), b.len(), "screenshots of one size");
    let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    let colored = |px: &[[u8; 3]]| {
        px.iter()
            .filter(|p| p.iter().max().unwrap() - p.iter().min().unwrap() > 40)
            .count()
    };
    eprintln!(
        "serve: screenshots {} and {} ({width} px wide): {differ} of {} pixels differ; \
         colored pixels {} and {}",
        shot1.display(),
        shot2.display(),
        a.len(),
        colored(&a),
        colored(&b)
    );
    assert!(
        colored(&a) > 10_000 && colored(&b) > 10_000,
        "flame graphs drawn"
    );
    assert!(
        differ > a.len() / 100,
        "the two screenshots should show different flame graphs ({differ} pixels differ)"
    );
}
