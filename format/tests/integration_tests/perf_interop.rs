//! Files from our writer, read by the real perf: no warnings, symbols resolved as perf does.

use std::path::Path;

use format::{
    callchain, misc, BuildIdEntry, Features, Mmap2File, PerfFileWriter, Sample, SampleId, SideBand,
};

use crate::common::{
    count_with_reader, fixtures, perf, perf_available, perf_script_clean, stdout_of, TempDir,
};
use crate::roundtrip::{cpu_clock_attr, offcpu_attr};

/// Where the program's code lands in our pretend process.
const BASE: u64 = 0x5555_5555_4000;

struct Elf {
    build_id: Vec<u8>,
    /// (file offset, virtual address, size) of the executable PT_LOAD.
    text: (u64, u64, u64),
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

fn read_elf(path: &Path) -> Elf {
    let notes = stdout_of("readelf", &["-n", path.to_str().unwrap()]);
    let id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap();
    let build_id = (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
        .collect();
    let phdrs = stdout_of("readelf", &["-lW", path.to_str().unwrap()]);
    let load = phdrs
        .lines()
        .find(|l| l.trim_start().starts_with("LOAD") && l.contains(" R E "))
        .unwrap();
    let f: Vec<&str> = load.split_whitespace().collect();
    Elf {
        build_id,
        text: (hex(f[1]), hex(f[2]), hex(f[4])),
    }
}

fn symbol(path: &Path, name: &str) -> u64 {
    let out = stdout_of("nm", &[path.to_str().unwrap()]);
    out.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == name).then(|| hex(f[0]))
        })
        .unwrap_or_else(|| panic!("{name} not in {}", path.display()))
}

fn kallsyms(name: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    text.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && f[2] == name).then(|| hex(f[0]))
        })
        .unwrap_or_else(|| panic!("{name} not in /proc/kallsyms"))
}

/// Writes a file as the recorder will: kernel MMAP, MMAP2 of a real ELF by build id,
/// COMM/FORK/EXIT, cpu-clock samples with kernel+user callchains, offcpu-time samples.
/// With `level`, the records are zstd-compressed (`-z`).
fn write_realistic(path: &Path, busy: &Path, level: Option<i32>) -> (u64, u64) {
    let elf = read_elf(busy);
    let (text_off, text_vaddr, text_size) = elf.text;
    let page = |v: u64| v & !0xfff;
    let start = BASE + page(text_vaddr);
    let len = (text_vaddr + text_size - page(text_vaddr)).div_ceil(4096) * 4096;
    let ksym_text = kallsyms("_text");
    let ketext = kallsyms("_etext");
    let (pid, tid) = (4242u32, 4243u32);
    let at = |f: &str, off: u64| BASE + symbol(busy, f) + off;

    let attrs = vec![cpu_clock_attr(0), offcpu_attr()];
    let mut w = match level {
        Some(level) => PerfFileWriter::create_compressed(path, attrs, level).unwrap(),
        None => PerfFileWriter::create(path, attrs).unwrap(),
    };
    let sid = |t: u64| SampleId {
        pid,
        tid: pid,
        time: t,
        cpu: 0,
    };
    let kernel_sid = SampleId {
        pid: u32::MAX,
        tid: u32::MAX,
        time: 0,
        cpu: 0,
    };
    w.write_side_band(
        0,
        &SideBand::Mmap {
            misc: misc::KERNEL,
            pid: u32::MAX,
            tid: 0,
            start: ksym_text,
            len: ketext - ksym_text,
            pgoff: ksym_text,
            filename: "[kernel.kallsyms]_text",
        },
        &kernel_sid,
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Comm {
            pid,
            tid: pid,
            comm: "busy-fp",
            exec: true,
        },
        &sid(1_000),
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Mmap2 {
            misc: misc::USER,
            pid,
            tid: pid,
            start,
            len,
            pgoff: page(text_off),
            file: Mmap2File::BuildId(&elf.build_id),
            prot: 5,
            flags: 2,
            filename: busy.to_str().unwrap(),
        },
        &sid(1_100),
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Fork {
            pid,
            ppid: pid,
            tid,
            ptid: pid,
            time: 1_200,
        },
        &sid(1_200),
    )
    .unwrap();
    w.finish_round().unwrap();

    let schedule = kallsyms("schedule");
    let user = [
        callchain::USER,
        at("spin_inner", 8),
        at("spin_outer", 0x20),
        at("worker", 0x30),
    ];
    let mut t = 2_000u64;
    let mut samples = 0;
    for round in 0..10 {
        for i in 0..50 {
            t += 1_001_001;
            let kernel_hit = i % 10 == 0;
            let kchain = [callchain::KERNEL, schedule + 4];
            let chain: Vec<u64> = if kernel_hit {
                kchain.iter().chain(&user).copied().collect()
            } else {
                user.to_vec()
            };
            let ip = chain[1];
            w.write_sample(
                0,
                &Sample {
                    misc: if kernel_hit { misc::KERNEL } else { misc::USER },
                    ip,
                    pid,
                    tid,
                    time: t,
                    cpu: (i % 2) as u32,
                    period: 1_001_001,
                    callchain: &chain,
                    ..Default::default()
                },
            )
            .unwrap();
            samples += 1;
        }
        let off_chain = [
            callchain::KERNEL,
            schedule + 4,
            callchain::USER,
            at("hash_loop", 4),
            at("worker", 0x30),
        ];
        t += 1000;
        w.write_sample(
            1,
            &Sample {
                misc: misc::KERNEL,
                ip: off_chain[1],
                pid,
                tid,
                time: t,
                cpu: 0,
                period: 5_000_000 + round,
                callchain: &off_chain,
                ..Default::default()
            },
        )
        .unwrap();
        w.finish_round().unwrap();
    }
    w.write_side_band(
        0,
        &SideBand::Exit {
            pid,
            ppid: pid,
            tid,
            ptid: pid,
            time: t + 1,
        },
        &sid(t + 1),
    )
    .unwrap();
    let features = Features {
        hostname: Some("bpfperf-test".into()),
        os_release: Some(stdout_of("uname", &["-r"]).trim().into()),
        arch: Some("x86_64".into()),
        nr_cpus: Some((2, 2)),
        cmdline: Some(vec!["record".into(), busy.display().to_string()]),
        clockid_res_ns: Some(1),
        build_ids: vec![BuildIdEntry {
            pid: pid as i32,
            kernel: false,
            build_id: elf.build_id.clone(),
            filename: busy.display().to_string(),
        }],
        ..Default::default()
    };
    w.finish(&features).unwrap();
    (samples, 10)
}

#[test]
fn perf_script_reads_our_file_and_resolves_symbols() {
    if !perf_available() {
        return;
    }
    let dir = TempDir::new("interop");
    let busy = fixtures().join("busy-fp");
    let path = dir.path("ours.data");
    let (cpu_samples, offcpu_samples) = write_realistic(&path, &busy, None);

    let text = perf_script_clean(&path, &["-F", "comm,pid,tid,event,ip,sym,dso,period"]);
    let headers: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(|c: char| c.is_whitespace()) && !l.is_empty())
        .collect();
    assert_eq!(
        headers.iter().filter(|l| l.contains("cpu-clock")).count() as u64,
        cpu_samples,
        "{text}"
    );
    assert_eq!(
        headers.iter().filter(|l| l.contains("offcpu-time")).count() as u64,
        offcpu_samples
    );
    assert!(
        headers.iter().all(|l| l.starts_with("busy-fp")),
        "comm not applied: {:?}",
        &headers[..3]
    );
    // User frames resolve through the MMAP2 by build id, kernel frames through [kernel.kallsyms].
    for sym in ["spin_inner", "spin_outer", "worker", "hash_loop"] {
        assert!(
            text.contains(&format!(" {sym} (")),
            "{sym} not resolved:\n{}",
            &text[..2000.min(text.len())]
        );
    }
    assert!(
        text.contains(" schedule ([kernel.kallsyms])"),
        "kernel frame not resolved"
    );
    assert!(!text.contains("[unknown]"), "unresolved frames:\n{text}");

    let report = perf(&[
        "report",
        "--stdio",
        "-i",
        path.to_str().unwrap(),
        "--no-children",
        "--sort",
        "sym",
    ]);
    let stderr = String::from_utf8_lossy(&report.stderr);
    assert!(
        report.status.success() && stderr.trim().is_empty(),
        "perf report: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&report.stdout);
    assert!(
        stdout.contains("spin_inner") && stdout.contains("offcpu-time"),
        "{stdout}"
    );
    assert!(stdout.contains("# hostname : bpfperf-test") || !stdout.contains("# hostname"));
}

/// The tracing data of this machine plus bpfperf:block_io's format (mounts tracefs if needed).
fn tracing_data_with_block_io() -> format::TracingData {
    let tracefs = std::path::Path::new("/sys/kernel/tracing");
    if !tracefs.join("events/header_page").exists() {
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
    }
    let mut td =
        format::TracingData::from_tracefs(tracefs).expect("tracefs header files (mount tracefs)");
    assert!(
        td.header_page.len() > 100,
        "header_page read whole: {} bytes",
        td.header_page.len()
    );
    td.events.push(format::events::block_io_format());
    td
}

/// A file with one bpfperf:block_io sample by `tar`, all rounds finished, features not written.
fn write_block_io(path: &Path) -> (PerfFileWriter, Vec<u8>, format::events::BlockIo) {
    use format::events::{block_io_attr, BlockIo};
    use format::sample_type as st;
    let attr = block_io_attr(
        st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU,
        vec![77],
    );
    let mut w = PerfFileWriter::create(path, vec![attr]).unwrap();
    w.write_side_band(
        0,
        &SideBand::Comm {
            pid: 99,
            tid: 99,
            comm: "tar",
            exec: true,
        },
        &SampleId {
            pid: 99,
            tid: 99,
            time: 1,
            cpu: 0,
        },
    )
    .unwrap();
    let mut io = BlockIo {
        dev: (8 << 20) | 16,
        sector: 123456,
        bytes: 4096,
        latency_ns: 250_000,
        issue_ns: 999_750_000,
        tracked: 1,
        issuer_pid: 99,
        ..Default::default()
    };
    io.rwbs[..2].copy_from_slice(b"WS");
    io.comm[..3].copy_from_slice(b"tar");
    let raw = io.to_raw();
    w.write_sample(
        0,
        &Sample {
            pid: 99,
            tid: 99,
            time: 1_000_000_000,
            period: io.latency_ns,
            raw: &raw,
            ..Default::default()
        },
    )
    .unwrap();
    w.finish_round().unwrap();
    (w, raw.to_vec(), io)
}

/// bpfperf:block_io, a made-up tracepoint (own system, own ID, own fields) carried in
/// TRACING_DATA: perf script prints its fields by name.
#[test]
fn perf_script_decodes_block_io_from_tracing_data() {
    use format::events::{BlockIo, BLOCK_IO_TRACEPOINT_ID};
    if !perf_available() {
        return;
    }
    let td = tracing_data_with_block_io();
    let dir = TempDir::new("tracepoint");
    let path = dir.path("tp.data");
    let (w, raw, io) = write_block_io(&path);
    w.finish(&Features {
        tracing_data: Some(td.to_bytes()),
        ..Default::default()
    })
    .unwrap();

    let text = perf_script_clean(&path, &[]);
    assert!(text.contains("bpfperf:block_io:"), "{text}");
    assert!(
        text.contains("8,16 WS 123456 + 4096 bytes latency=250000 ns comm=tar tracked=1"),
        "{text}"
    );
    assert!(text.trim_start().starts_with("tar"), "{text}");
    // Our reader names the event from the same blob and decodes the payload.
    let r = format::PerfFileReader::open(&path).unwrap();
    assert_eq!(
        format::tracepoint_names(r.tracing_data().unwrap())
            .get(&BLOCK_IO_TRACEPOINT_ID)
            .unwrap(),
        "bpfperf:block_io"
    );
    assert_eq!(BlockIo::from_raw(&raw), Some(io));
}

/// A recording killed before `finish` has no TRACING_DATA, and perf refuses any file with a
/// tracepoint attr but no tracing data ("broken or missing trace data"). Until `finish`, the
/// tracepoint stands as a BPF_OUTPUT event, so perf still shows the sample (as raw data).
#[test]
fn killed_before_finish_a_tracepoint_file_is_still_read_by_perf() {
    use format::events::BlockIo;
    if !perf_available() {
        return;
    }
    let dir = TempDir::new("tracepoint-killed");
    let path = dir.path("killed.data");
    let (w, raw, io) = write_block_io(&path);
    // As if killed: the mapped pages are in the file, the writer never finishes.
    std::mem::forget(w);

    let text = perf_script_clean(&path, &[]);
    assert!(text.trim_start().starts_with("tar"), "{text}");
    assert_eq!(text.matches("tar ").count(), 1, "one sample: {text}");
    let (counts, _) = count_with_reader(&path);
    assert_eq!(counts.iter().sum::<u64>(), 1, "our reader: {counts:?}");
    assert_eq!(BlockIo::from_raw(&raw), Some(io));
}

/// `-z`: the same records zstd-compressed into COMPRESSED records, as `perf record -z` writes
/// them. perf shows exactly what it shows of the plain file; so does our reader.
#[test]
fn compressed_file_reads_as_the_plain_one() {
    if !perf_available() {
        return;
    }
    let dir = TempDir::new("compressed");
    let busy = fixtures().join("busy-fp");
    let (plain, packed) = (dir.path("plain.data"), dir.path("packed.data"));
    write_realistic(&plain, &busy, None);
    write_realistic(&packed, &busy, Some(3));
    let fields = ["-F", "comm,pid,tid,time,event,ip,sym,dso,period"];
    let (a, b) = (
        perf_script_clean(&plain, &fields),
        perf_script_clean(&packed, &fields),
    );
    assert!(a.lines().count() > 100);
    assert_eq!(a, b, "perf script differs");
    assert_eq!(count_with_reader(&plain), count_with_reader(&packed));
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(
        size(&packed) * 3 < size(&plain),
        "{} vs {} bytes",
        size(&packed),
        size(&plain)
    );
    let header = perf(&["report", "--header-only", "-i", packed.to_str().unwrap()]);
    let header = String::from_utf8_lossy(&header.stdout);
    assert!(
        header.contains("# compressed : Zstd, level = 3"),
        "{header}"
    );
}

#[test]
fn perf_script_names_frames_in_bpf_programs_from_ksymbol_records() {
    if !perf_available() {
        return;
    }
    let dir = TempDir::new("ksymbol");
    let path = dir.path("bpf.data");
    let (ktext, ketext) = (kallsyms("_text"), kallsyms("_etext"));
    let schedule = kallsyms("schedule");
    // A program and its subprogram where BPF programs load (after the kernel and its init
    // text), and an address past both that nothing names.
    let prog = 0xffff_ffff_c100_0000u64;
    let sub = prog + 0x200;
    let names = [
        "bpf_prog_0123456789abcdef_on_test",
        "bpf_prog_fedcba9876543210_helper",
    ];
    let mut w = PerfFileWriter::create(&path, vec![cpu_clock_attr(0)]).unwrap();
    let sid = SampleId {
        pid: 0,
        tid: 0,
        time: 0,
        cpu: 0,
    };
    w.write_side_band(
        0,
        &SideBand::Mmap {
            misc: misc::KERNEL,
            pid: u32::MAX,
            tid: 0,
            start: ktext,
            len: ketext - ktext,
            pgoff: ktext,
            filename: "[kernel.kallsyms]_text",
        },
        &sid,
    )
    .unwrap();
    for (addr, len, name) in [(prog, 0x200, names[0]), (sub, 0x80, names[1])] {
        w.write_side_band(
            0,
            &SideBand::Ksymbol {
                addr,
                len,
                ksym_type: format::ksymbol::TYPE_BPF,
                flags: 0,
                name,
            },
            &sid,
        )
        .unwrap();
    }
    w.write_side_band(
        0,
        &SideBand::BpfEvent {
            kind: format::bpf_event::PROG_LOAD,
            flags: 0,
            id: 77,
            tag: [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef],
        },
        &sid,
    )
    .unwrap();
    w.finish_round().unwrap();
    let chain = [callchain::KERNEL, sub + 0x8, prog + 0x10, schedule + 4];
    w.write_sample(
        0,
        &Sample {
            misc: misc::KERNEL,
            ip: chain[1],
            pid: 0,
            tid: 0,
            time: 1000,
            period: 1,
            callchain: &chain,
            ..Default::default()
        },
    )
    .unwrap();
    w.finish(&Features::default()).unwrap();

    let text = perf_script_clean(&path, &["-F", "ip,sym,symoff,dso"]);
    let frames: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        frames,
        [
            format!("{:x} {}+0x8 ({})", sub + 8, names[1], names[1]),
            format!("{:x} {}+0x10 ({})", prog + 0x10, names[0], names[0]),
            format!("{:x} schedule+0x4 ([kernel.kallsyms])", schedule + 4),
        ],
        "{text}"
    );

    // Our reader gives the records back.
    let mut r = format::PerfFileReader::open(&path).unwrap();
    let mut ksymbols = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let format::linux_perf_data::PerfFileRecord::EventRecord { record, .. } = rec {
            ksymbols.extend(format::KsymbolRecord::parse(&record));
        }
    }
    assert_eq!(
        ksymbols,
        [
            format::KsymbolRecord {
                addr: prog,
                len: 0x200,
                ksym_type: 1,
                flags: 0,
                name: names[0].into()
            },
            format::KsymbolRecord {
                addr: sub,
                len: 0x80,
                ksym_type: 1,
                flags: 0,
                name: names[1].into()
            },
        ]
    );
}
