//! A recording cut short, or a writer killed mid-write, still yields what it holds.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use format::{misc, Features, PerfFileReader, PerfFileWriter, Sample, SampleId, SideBand};

use crate::common::{count_with_reader, perf, perf_available, perf_script_clean, TempDir};
use crate::roundtrip::{cpu_clock_attr, offcpu_attr};

const CHILD_ENV: &str = "BPFPERF_TEST_WRITER_OUTPUT";

/// Writes rounds of samples until `rounds` is reached (or forever) and returns the writer.
fn write_rounds(path: &Path, rounds: Option<u64>, pause: Duration) -> PerfFileWriter {
    let mut w = PerfFileWriter::create(path, vec![cpu_clock_attr(0), offcpu_attr()]).unwrap();
    let chain = [format::callchain::USER, 0x401000, 0x402000, 0x403000];
    w.write_side_band(
        0,
        &SideBand::Comm {
            pid: 7,
            tid: 7,
            comm: "victim",
            exec: true,
        },
        &SampleId {
            pid: 7,
            tid: 7,
            time: 1,
            cpu: 0,
        },
    )
    .unwrap();
    let mut t = 10;
    let mut round = 0;
    while rounds.is_none_or(|r| round < r) {
        for i in 0..100u64 {
            t += 1000;
            let attr = usize::from(i % 25 == 0);
            w.write_sample(
                attr,
                &Sample {
                    misc: misc::USER,
                    ip: chain[1],
                    pid: 7,
                    tid: 7,
                    time: t,
                    period: 1000,
                    callchain: &chain,
                    ..Default::default()
                },
            )
            .unwrap();
        }
        w.finish_round().unwrap();
        round += 1;
        std::thread::sleep(pause);
    }
    w
}

/// Not a test of its own: the body of the child process that `killed_writer_*` kills.
#[test]
fn writer_child_process() {
    if let Some(out) = std::env::var_os(CHILD_ENV) {
        write_rounds(Path::new(&out), None, Duration::from_millis(2));
    }
}

#[test]
fn killed_writer_leaves_a_file_perf_and_reader_open() {
    let dir = TempDir::new("killed");
    let check_perf = perf_available();
    for (i, delay_ms) in [60u64, 170, 420].into_iter().enumerate() {
        let path = dir.path(&format!("killed{i}.data"));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "interrupted::writer_child_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL: no destructor, no finish().
        child.wait().unwrap();

        let reader = PerfFileReader::open(&path).unwrap();
        assert!(
            reader.notes().is_empty(),
            "header should be consistent: {:?}",
            reader.notes()
        );
        drop(reader);
        let (per_attr, _) = count_with_reader(&path);
        let samples: u64 = per_attr.iter().sum();
        assert!(
            samples > 0 && samples.is_multiple_of(100),
            "whole rounds only, got {samples}"
        );
        assert_eq!(per_attr[1] * 25, samples, "offcpu share of whole rounds");
        if check_perf {
            let text = perf_script_clean(&path, &["-F", "comm,tid,event,ip"]);
            assert_eq!(
                text.lines().filter(|l| l.contains("victim")).count() as u64,
                samples
            );
        }
    }
}

#[test]
fn file_cut_anywhere_yields_its_whole_records() {
    let dir = TempDir::new("cut");
    let full = dir.path("full.data");
    let w = write_rounds(&full, Some(20), Duration::ZERO);
    w.finish(&Features {
        hostname: Some("h".into()),
        ..Default::default()
    })
    .unwrap();
    let bytes = std::fs::read(&full).unwrap();
    let (full_counts, _) = count_with_reader(&full);
    let total: u64 = full_counts.iter().sum();
    assert_eq!(total, 2000);

    let data_offset = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    let cut_path = dir.path("cut.data");
    // A deterministic spread of cut points: inside the header, the attributes, the records
    // and the feature sections.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut cuts: Vec<usize> = (0..150)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % bytes.len() as u64) as usize
        })
        .collect();
    cuts.extend([
        0,
        1,
        8,
        103,
        104,
        data_offset,
        data_offset + 4,
        bytes.len() - 1,
    ]);
    let mut last_seen = 0;
    cuts.sort();
    for cut in cuts {
        std::fs::write(&cut_path, &bytes[..cut]).unwrap();
        match PerfFileReader::open(&cut_path) {
            Ok(mut r) => {
                assert!(
                    cut >= data_offset,
                    "cut at {cut} inside the header should be an error"
                );
                assert!(!r.notes().is_empty(), "cut at {cut} must be reported");
                let mut n = 0u64;
                while let Some(rec) = r
                    .next_record()
                    .unwrap_or_else(|e| panic!("cut at {cut}: {e}"))
                {
                    if let format::linux_perf_data::PerfFileRecord::EventRecord { record, .. } = rec
                    {
                        n += (record.record_type.0 == 9) as u64;
                    }
                }
                // Every whole sample before the cut comes back: each takes 104 bytes here, plus
                // an 8-byte FINISHED_ROUND per 100 and a COMM record at the start.
                let lower_bound = cut.saturating_sub(data_offset + 200) as u64 / 110;
                assert!(n <= total && n >= lower_bound, "cut at {cut}: {n} samples");
                assert!(n >= last_seen, "later cuts never yield fewer samples");
                last_seen = n;
            }
            Err(e) => {
                assert!(
                    cut < data_offset,
                    "cut at {cut} (in the data) should be readable: {e}"
                );
                assert!(
                    e.to_string().contains("cut.data"),
                    "error names the file: {e}"
                );
            }
        }
    }
}

/// A small tmpfs mounted for a test, unmounted when dropped.
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    /// None (a skip) when mounting is not allowed here, except under CI (tests run as root).
    fn mount(at: std::path::PathBuf, size: &str) -> Option<SmallFs> {
        std::fs::create_dir_all(&at).unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "bpfperf-small",
            ])
            .arg(&at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(std::env::var_os("CI").is_none(), "mount a tmpfs (root)");
            eprintln!("skipping: cannot mount a tmpfs");
            return None;
        }
        Some(SmallFs(at))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_filesystem_keeps_what_fits() {
    let dir = TempDir::new("full");
    let check_perf = perf_available();
    // 3 MiB: less than the first 4 MiB step, which then left no file at all. 256 KiB: less
    // than the features' 1 MiB reserve, which then kept no record (the reserve shrinks to
    // 64 KiB where room is short). 64 KiB: no room for even that, the file is full from the
    // start and still gets its features. 4 KiB: the header and attrs alone fit.
    for (size, rounds_fit, features_fit) in [
        ("3m", true, true),
        ("256k", true, true),
        ("64k", false, true),
        ("4k", false, false),
    ] {
        let Some(fs) = SmallFs::mount(dir.path(size), size) else {
            return;
        };
        let path = fs.0.join("full.data");
        let mut w = PerfFileWriter::create(&path, vec![cpu_clock_attr(0), offcpu_attr()])
            .unwrap_or_else(|e| panic!("{size}: {e}"));
        let chain = [format::callchain::USER, 0x401000, 0x402000, 0x403000];
        let mut t = 10;
        let mut rounds = 0;
        while !w.is_full() && rounds < 100_000 {
            for i in 0..100u64 {
                t += 1000;
                let sample = Sample {
                    misc: misc::USER,
                    ip: chain[1],
                    pid: 7,
                    tid: 7,
                    time: t,
                    period: 1000,
                    callchain: &chain,
                    ..Default::default()
                };
                w.write_sample(usize::from(i % 25 == 0), &sample).unwrap();
            }
            w.finish_round().unwrap();
            rounds += 1;
        }
        assert!(w.is_full(), "{size}: {rounds} rounds and not full");
        let dropped: u64 = w.dropped_samples().iter().sum();
        // Features of 16 KiB: more than the 4 KiB filesystem holds.
        let finished = w.finish(&Features {
            hostname: Some("h".into()),
            cmdline: Some(vec!["x".repeat(16 << 10)]),
            ..Default::default()
        });
        match finished {
            Ok(_) => assert!(features_fit, "{size}: features written"),
            Err(format::Error::NoSpace { .. }) => assert!(!features_fit, "{size}: no features"),
            Err(e) => panic!("{size}: {e}"),
        }
        let reader = PerfFileReader::open(&path).unwrap_or_else(|e| panic!("{size}: {e}"));
        assert!(reader.notes().is_empty(), "{size}: {:?}", reader.notes());
        drop(reader);
        let (per_attr, _) = count_with_reader(&path);
        let samples: u64 = per_attr.iter().sum();
        // Every sample written is in the file or counted dropped (the round cut short by the
        // full filesystem keeps the records that fit).
        assert_eq!(
            samples + dropped,
            rounds * 100,
            "{size}: {samples} + {dropped}"
        );
        assert_eq!(samples > 0, rounds_fit, "{size}: {samples} samples");
        if check_perf {
            let out = perf(&["script", "-F", "event,time", "-i", path.to_str().unwrap()]);
            let text = String::from_utf8_lossy(&out.stdout);
            let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
            assert_eq!(lines as u64, samples, "{size}");
            // perf counts the dropped samples: the LOST records `finish` wrote.
            let out = perf(&["report", "--stats", "-i", path.to_str().unwrap()]);
            let stats = String::from_utf8_lossy(&out.stdout);
            let lost_line = stats.lines().any(|l| l.trim().starts_with("LOST events:"));
            assert_eq!(lost_line, features_fit && dropped > 0, "{size}: {stats}");
        }
        eprintln!(
            "{size}: {} bytes, {samples} samples of {} written",
            std::fs::metadata(&path).unwrap().len(),
            rounds * 100
        );
    }
}
