//! Any event (probes.bpf.c): tracepoints with their records as the kernel lays them out, and
//! filters run in the kernel, on real syscalls of a followed process.

use std::time::{Duration, Instant};

use bpf::trace::{
    Cmp, Filter, FilterInsn, Glob, Operand, Pattern, StrOperand, TraceAttach, TracePayload,
};
use bpf::{Event, Options, Profiler, TraceEvent, TraceRecord};

use crate::common::*;

/// sys_enter_write's record: `count` (size_t) at offset 32, 40 bytes in all.
const COUNT_OFFSET: u16 = 32;

fn sys_enter_write(filter: Option<Filter>) -> TraceEvent {
    let id = std::fs::read_to_string("/sys/kernel/tracing/events/syscalls/sys_enter_write/id")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    TraceEvent {
        common_type: id,
        name: "syscalls:sys_enter_write".into(),
        attach: TraceAttach::Tracepoint {
            system: "syscalls".into(),
            name: "sys_enter_write".into(),
        },
        payload: TracePayload::Record {
            fixed_size: 40,
            data_loc: vec![],
        },
        filter,
        stacks: true,
        entry: None,
        entry_only: false,
        hist: None,
    }
}

/// Runs `script` followed, with only `trace` attached; the records it produced.
fn traced(script: &str, trace: Vec<TraceEvent>) -> Vec<TraceRecord> {
    let profiler = Profiler::start(&Options {
        sampling: false,
        off_cpu_min_ns: None,
        block_io: false,
        cache: false,
        wakeups: false,
        trace,
        ..Options::default()
    })
    .unwrap();
    let mut held = Held::spawn(script, std::path::Path::new("sh"), &[]);
    profiler.track(held.pid()).unwrap();
    held.release();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        profiler
            .poll(Duration::from_millis(20), |e| {
                if let Event::Trace(t) = e {
                    out.push(t)
                }
            })
            .unwrap();
        if held.try_wait().is_some() || Instant::now() > deadline {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(5));
    profiler
        .poll(Duration::ZERO, |e| {
            if let Event::Trace(t) = e {
                out.push(t)
            }
        })
        .unwrap();
    assert_eq!(profiler.drops(), 0);
    out
}

fn count_of(t: &TraceRecord) -> u64 {
    let o = COUNT_OFFSET as usize;
    u64::from_le_bytes(t.raw[o..o + 8].try_into().unwrap())
}

/// 20 writes of 7 bytes and 5 of 3 (printf's one write per call, to /dev/null).
const WRITES: &str = "for i in $(seq 20); do printf 'abcdef\\n'; done >/dev/null; \
                      for i in $(seq 5); do printf 'ab\\n'; done >/dev/null";

#[test]
fn tracepoint_records_come_as_the_kernel_lays_them_out_and_filters_run_in_the_kernel() {
    if !can_load_bpf() {
        return;
    }
    let _x = exclusive();
    let script = WRITES;
    let all = traced(script, vec![sys_enter_write(None)]);
    let sevens = all.iter().filter(|t| count_of(t) == 7).count();
    let threes = all.iter().filter(|t| count_of(t) == 3).count();
    assert_eq!((sevens, threes), (20, 5), "{} records", all.len());
    // printf is the shell's own: its writes are sh's (seq's are the others).
    let t = all.iter().find(|t| count_of(t) == 7).unwrap();
    assert_eq!(t.raw.len(), 40);
    // common_type is the tracepoint's id (written again: the kernel gives BPF a record whose
    // header it overwrote), common_pid the thread.
    let id: u16 = std::fs::read_to_string("/sys/kernel/tracing/events/syscalls/sys_enter_write/id")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(u16::from_le_bytes([t.raw[0], t.raw[1]]), id);
    assert_eq!(
        i32::from_le_bytes(t.raw[4..8].try_into().unwrap()),
        t.tid as i32
    );
    assert!(!t.kernel_stack.is_empty());
    assert_eq!(&t.comm[..3], b"sh\0");

    let filter = Filter {
        insns: vec![FilterInsn::Number {
            operand: Operand::Field {
                offset: COUNT_OFFSET,
                size: 8,
                signed: false,
            },
            cmp: Cmp::Lt,
            value: 5,
            unsigned: true,
        }],
        patterns: vec![],
    };
    let small = traced(script, vec![sys_enter_write(Some(filter))]);
    assert_eq!(small.len(), 5);
    assert!(small.iter().all(|t| count_of(t) == 3));
}

#[test]
fn string_filters_match_globs_and_combine_in_the_kernel() {
    if !can_load_bpf() {
        return;
    }
    let _x = exclusive();
    let script = WRITES;
    let comm = |glob, text: &str, equal| {
        (
            FilterInsn::String {
                operand: StrOperand::Comm,
                equal,
                pattern: 0,
            },
            Pattern {
                glob,
                text: text.as_bytes().to_vec(),
            },
        )
    };
    let small = FilterInsn::Number {
        operand: Operand::Field {
            offset: COUNT_OFFSET,
            size: 8,
            signed: false,
        },
        cmp: Cmp::Lt,
        value: 5,
        unsigned: true,
    };
    // comm == "sh" && !(count < 5): the shell's 20 writes of 7 bytes.
    let (is_sh, sh) = comm(Glob::Full, "sh", true);
    let f = Filter {
        insns: vec![is_sh, small, FilterInsn::Not, FilterInsn::And],
        patterns: vec![sh],
    };
    let got = traced(script, vec![sys_enter_write(Some(f))]);
    assert_eq!(got.len(), 20);
    assert!(got
        .iter()
        .all(|t| count_of(t) == 7 && &t.comm[..3] == b"sh\0"));
    // Every glob shape, and !=: seq's writes (its comm holds "e", ends in "q", starts with
    // "se", is not "sh").
    for (glob, text, equal) in [
        (Glob::Contains, "e", true),
        (Glob::Suffix, "q", true),
        (Glob::Prefix, "se", true),
        (Glob::Full, "sh", false),
    ] {
        let (insn, pattern) = comm(glob, text, equal);
        let f = Filter {
            insns: vec![insn],
            patterns: vec![pattern],
        };
        let got = traced(script, vec![sys_enter_write(Some(f))]);
        assert!(!got.is_empty(), "{glob:?} {text}");
        assert!(
            got.iter().all(|t| &t.comm[..4] == b"seq\0"),
            "{glob:?} {text}: {:?}",
            got.iter()
                .map(|t| String::from_utf8_lossy(&t.comm).into_owned())
                .collect::<Vec<_>>()
        );
    }
    // || of two: both kinds of writes.
    let (is_sh, sh) = comm(Glob::Full, "sh", true);
    let (_, seq) = comm(Glob::Full, "seq", true);
    let is_seq = FilterInsn::String {
        operand: StrOperand::Comm,
        equal: true,
        pattern: 1,
    };
    let f = Filter {
        insns: vec![is_sh, is_seq, FilterInsn::Or],
        patterns: vec![sh, seq],
    };
    let all = traced(script, vec![sys_enter_write(None)]);
    let got = traced(script, vec![sys_enter_write(Some(f))]);
    assert_eq!(got.len(), all.len());
}
