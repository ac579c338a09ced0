//! Records written by the writer come back equal through the reader.

use format::linux_perf_data::linux_perf_event_reader::{EventRecord, Mmap2FileId};
use format::linux_perf_data::PerfFileRecord;
use format::{
    attr_flag, event_type, misc, sample_type as st, sw_event, BuildIdEntry, EventAttr, Features,
    Mmap2File, PerfFileReader, PerfFileWriter, Sample, SampleId, SideBand, UserRegs,
};

use crate::common::TempDir;

pub fn cpu_clock_attr(extra_sample_type: u64) -> EventAttr {
    EventAttr {
        name: "cpu-clock".into(),
        type_: event_type::SOFTWARE,
        config: sw_event::CPU_CLOCK,
        sample_period_or_freq: 999,
        sample_type: st::IDENTIFIER
            | st::IP
            | st::TID
            | st::TIME
            | st::ID
            | st::CPU
            | st::PERIOD
            | st::CALLCHAIN
            | extra_sample_type,
        flags: attr_flag::FREQ
            | attr_flag::SAMPLE_ID_ALL
            | attr_flag::MMAP
            | attr_flag::COMM
            | attr_flag::TASK
            | attr_flag::MMAP2
            | attr_flag::COMM_EXEC
            | attr_flag::USE_CLOCKID,
        clockid: 1,
        ids: vec![1001],
        ..Default::default()
    }
}

pub fn offcpu_attr() -> EventAttr {
    format::events::offcpu_attr(
        st::IDENTIFIER | st::IP | st::TID | st::TIME | st::ID | st::CPU | st::CALLCHAIN,
        vec![1002],
    )
}

#[test]
fn every_record_kind_round_trips() {
    let dir = TempDir::new("roundtrip");
    let path = dir.path("rt.data");
    let regs = [0x1111u64, 0x2222, 0x3333];
    let stack: Vec<u8> = (0..100u8).collect();
    let chain = [
        format::callchain::KERNEL,
        0xffffffff81000100,
        format::callchain::USER,
        0x401000,
        0x402000,
    ];
    let raw_user = st::REGS_USER | st::STACK_USER;
    let mut attr0 = cpu_clock_attr(raw_user);
    attr0.sample_regs_user = (1 << 6) | (1 << 7) | (1 << 8); // BP SP IP
    attr0.sample_stack_user = 8192;
    attr0.flags |= attr_flag::EXCLUDE_CALLCHAIN_USER;
    let mut w = PerfFileWriter::create(&path, vec![attr0, offcpu_attr()]).unwrap();
    let sid = SampleId {
        pid: 42,
        tid: 43,
        time: 5,
        cpu: 1,
    };
    w.write_side_band(
        0,
        &SideBand::Comm {
            pid: 42,
            tid: 43,
            comm: "worker",
            exec: true,
        },
        &sid,
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Fork {
            pid: 42,
            ppid: 1,
            tid: 44,
            ptid: 43,
            time: 6,
        },
        &SampleId { time: 6, ..sid },
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Mmap {
            misc: misc::KERNEL,
            pid: u32::MAX,
            tid: 0,
            start: 0xffffffff81000000,
            len: 0x1000000,
            pgoff: 0xffffffff81000000,
            filename: "[kernel.kallsyms]_text",
        },
        &SampleId { time: 6, ..sid },
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Mmap2 {
            misc: misc::USER,
            pid: 42,
            tid: 43,
            start: 0x400000,
            len: 0x3000,
            pgoff: 0,
            file: Mmap2File::BuildId(&[0xab; 20]),
            prot: 5,
            flags: 2,
            filename: "/usr/bin/x",
        },
        &SampleId { time: 7, ..sid },
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Mmap2 {
            misc: misc::USER,
            pid: 42,
            tid: 43,
            start: 0x500000,
            len: 0x3000,
            pgoff: 0x1000,
            file: Mmap2File::Inode {
                maj: 8,
                min: 1,
                ino: 99,
                ino_generation: 3,
            },
            prot: 5,
            flags: 2,
            filename: "/usr/lib/y.so",
        },
        &SampleId { time: 7, ..sid },
    )
    .unwrap();
    w.finish_round().unwrap();
    w.write_sample(
        0,
        &Sample {
            misc: misc::KERNEL,
            ip: 0xffffffff81000100,
            pid: 42,
            tid: 43,
            time: 10,
            cpu: 1,
            period: 1_001_001,
            callchain: &chain[..2],
            user_regs: Some(UserRegs {
                abi: 2,
                regs: &regs,
            }),
            user_stack: &stack,
            ..Default::default()
        },
    )
    .unwrap();
    w.write_sample(
        1,
        &Sample {
            misc: misc::USER,
            ip: 0x401000,
            pid: 42,
            tid: 44,
            time: 11,
            cpu: 0,
            period: 123_456,
            callchain: &chain[2..],
            ..Default::default()
        },
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Lost { id: 1001, lost: 17 },
        &SampleId { time: 12, ..sid },
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Exit {
            pid: 42,
            ppid: 1,
            tid: 44,
            ptid: 43,
            time: 13,
        },
        &SampleId { time: 13, ..sid },
    )
    .unwrap();
    let features = Features {
        hostname: Some("host".into()),
        os_release: Some("6.18.0".into()),
        arch: Some("x86_64".into()),
        nr_cpus: Some((4, 2)),
        cmdline: Some(vec!["record".into(), "--".into(), "true".into()]),
        build_ids: vec![BuildIdEntry {
            pid: 42,
            kernel: false,
            build_id: vec![0xab; 20],
            filename: "/usr/bin/x".into(),
        }],
        ..Default::default()
    };
    let size = w.finish(&features).unwrap();
    assert_eq!(size, std::fs::metadata(&path).unwrap().len());

    let mut r = PerfFileReader::open(&path).unwrap();
    assert!(r.notes().is_empty(), "{:?}", r.notes());
    assert_eq!(r.event_name(0), "cpu-clock");
    assert_eq!(r.event_name(1), "offcpu-time");
    let pf = r.perf_file();
    assert_eq!(pf.hostname().unwrap(), Some("host"));
    assert_eq!(pf.os_release().unwrap(), Some("6.18.0"));
    assert_eq!(pf.arch().unwrap(), Some("x86_64"));
    assert_eq!(pf.cmdline().unwrap().unwrap(), vec!["record", "--", "true"]);
    let nr = pf.nr_cpus().unwrap().unwrap();
    assert_eq!((nr.nr_cpus_available, nr.nr_cpus_online), (4, 2));
    let times = pf.sample_time_range().unwrap().unwrap();
    assert_eq!((times.first_sample_time, times.last_sample_time), (10, 11));
    let ids = pf.build_ids().unwrap();
    let (_, info) = ids.iter().next().unwrap();
    assert_eq!(info.build_id, vec![0xab; 20]);
    assert_eq!(info.path, b"/usr/bin/x");

    let mut seen = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        let PerfFileRecord::EventRecord { attr_index, record } = rec else {
            continue;
        };
        let parsed = record.parse().unwrap();
        let line = match parsed {
            EventRecord::Comm(c) => format!(
                "comm {} {} {} {}",
                c.pid,
                c.tid,
                String::from_utf8_lossy(&c.name.as_slice()),
                c.is_execve
            ),
            EventRecord::Fork(f) => format!("fork {} {} {} {}", f.pid, f.ppid, f.tid, f.ptid),
            EventRecord::Exit(f) => format!("exit {} {} {} {}", f.pid, f.ppid, f.tid, f.ptid),
            EventRecord::Mmap(m) => format!(
                "mmap {} {:#x} {:#x} {:#x} {}",
                m.pid,
                m.address,
                m.length,
                m.page_offset,
                String::from_utf8_lossy(&m.path.as_slice())
            ),
            EventRecord::Mmap2(m) => {
                let id = match m.file_id {
                    Mmap2FileId::BuildId(b) => format!("buildid {}", b.len()),
                    Mmap2FileId::InodeAndVersion(i) => format!(
                        "inode {} {} {} {}",
                        i.major, i.minor, i.inode, i.inode_generation
                    ),
                };
                format!(
                    "mmap2 {} {:#x} {:#x} {:#x} {id} {} {} {}",
                    m.pid,
                    m.address,
                    m.length,
                    m.page_offset,
                    m.protection,
                    m.flags,
                    String::from_utf8_lossy(&m.path.as_slice())
                )
            }
            EventRecord::Lost(l) => format!("lost {} {}", l.id, l.count),
            EventRecord::Sample(s) => {
                let chain: Vec<u64> = (0..s.callchain.map_or(0, |c| c.len()))
                    .map(|i| s.callchain.unwrap().get(i).unwrap())
                    .collect();
                let regs = s.user_regs.map(|r| (r.get(6), r.get(7), r.get(8)));
                let ustack = s
                    .user_stack
                    .map(|(d, dyn_size)| (d.len(), dyn_size, d.as_slice()[..100] == stack[..]));
                format!(
                    "sample attr{attr_index} {:?} {:?} {:?} {:?} {:?} {:?} {:x?} {:?} {:?}",
                    s.ip, s.pid, s.tid, s.timestamp, s.cpu, s.period, chain, regs, ustack
                )
            }
            other => format!("other {other:?}"),
        };
        seen.push(line);
    }
    let expected = [
        "comm 42 43 worker true",
        "fork 42 1 44 43",
        "mmap -1 0xffffffff81000000 0x1000000 0xffffffff81000000 [kernel.kallsyms]_text",
        "mmap2 42 0x400000 0x3000 0x0 buildid 20 5 2 /usr/bin/x",
        "mmap2 42 0x500000 0x3000 0x1000 inode 8 1 99 3 5 2 /usr/lib/y.so",
        "sample attr0 Some(18446744071578845440) Some(42) Some(43) Some(10) Some(1) Some(1001001) [ffffffffffffff80, ffffffff81000100] Some((Some(4369), Some(8738), Some(13107))) Some((104, 100, true))",
        "sample attr1 Some(4198400) Some(42) Some(44) Some(11) Some(0) Some(123456) [fffffffffffffe00, 401000, 402000] None None",
        "lost 1001 17",
        "exit 42 1 44 43",
    ];
    assert_eq!(seen, expected);
}

#[test]
fn raw_sample_payload_is_padded_and_returned() {
    let dir = TempDir::new("raw");
    let path = dir.path("raw.data");
    let attr = EventAttr {
        name: "bpfperf:block_io".into(),
        type_: event_type::TRACEPOINT,
        config: 60001,
        sample_period_or_freq: 1,
        sample_type: st::IDENTIFIER | st::TID | st::TIME | st::RAW,
        flags: attr_flag::SAMPLE_ID_ALL,
        ids: vec![7],
        ..Default::default()
    };
    let mut w = PerfFileWriter::create(&path, vec![attr]).unwrap();
    for n in 0..12usize {
        let payload: Vec<u8> = (0..n as u8).collect();
        w.write_sample(
            0,
            &Sample {
                pid: 1,
                tid: 1,
                time: n as u64,
                raw: &payload,
                ..Default::default()
            },
        )
        .unwrap();
    }
    w.finish(&Features::default()).unwrap();
    let mut r = PerfFileReader::open(&path).unwrap();
    let mut n = 0usize;
    while let Some(rec) = r.next_record().unwrap() {
        let PerfFileRecord::EventRecord { record, .. } = rec else {
            continue;
        };
        let EventRecord::Sample(s) = record.parse().unwrap() else {
            continue;
        };
        let raw = s.raw.unwrap().as_slice().to_vec();
        // The payload comes back first; padding (zeros) brings u32 size + data to 8 bytes.
        assert_eq!(&raw[..n], &(0..n as u8).collect::<Vec<_>>()[..]);
        assert_eq!((raw.len() + 4) % 8, 0);
        n += 1;
    }
    assert_eq!(n, 12);
}

#[test]
fn several_events_need_identifier() {
    let dir = TempDir::new("ident");
    let mut a = cpu_clock_attr(0);
    a.sample_type &= !st::IDENTIFIER;
    let err = PerfFileWriter::create(&dir.path("x.data"), vec![a, offcpu_attr()])
        .err()
        .unwrap();
    assert!(err.to_string().contains("IDENTIFIER"), "{err}");
}

#[test]
fn created_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("mode");
    let path = dir.path("m.data");
    let w = PerfFileWriter::create(&path, vec![cpu_clock_attr(0)]).unwrap();
    w.finish(&Features::default()).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
}
