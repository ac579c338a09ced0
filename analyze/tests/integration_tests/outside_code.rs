//! Return addresses that are no code: a word of garbage taken for one (a broken frame-pointer
//! chain, a frame without CFI under a DWARF unwind) must be `[unknown]`, never the nearest
//! symbol, and a DWARF unwind ends there.
//!
//! The recordings are made by hand (format's writer), so that the garbage is known: a
//! fixture program mapped whole with execute rights from its first page, as ld.so maps a
//! library whose first segment is executable before it maps the data segment over it (only
//! that first mapping makes a record, so its `.data` and `.bss` look executable), and samples
//! whose chain or stack holds an address in its `.bss`. The symbol table would call that
//! address `_edata` (perf does: the clang/libLLVM case).

use std::path::Path;

use format::{
    attr_flag, callchain, event_type, sample_type as st, sw_event, BuildIdEntry, EventAttr,
    Features, Mmap2File, PerfFileWriter, Sample, SampleId, SideBand, UserRegs,
};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

use crate::common::{analyze, fixture, Tmp};

const PID: u32 = 4242;
/// Where the program is mapped (page-aligned; its first segment is at SVMA 0).
const BASE: u64 = 0x5555_5555_4000;

/// What the test needs of the program: its build id, where `main` is, an address in `.bss`,
/// and how far its segments reach.
struct Program {
    path: String,
    build_id: Vec<u8>,
    main: u64,
    bss: u64,
    span: u64,
}

fn program() -> Program {
    let path = fixture("busy-nofp");
    let bytes = std::fs::read(&path).unwrap();
    let obj = object::File::parse(&*bytes).unwrap();
    let main = obj
        .symbols()
        .find(|s| s.name() == Ok("main"))
        .unwrap()
        .address();
    let bss = obj.section_by_name(".bss").unwrap();
    assert!(bss.size() >= 16, ".bss of {} bytes", bss.size());
    let span = obj
        .segments()
        .map(|s| s.address() + s.size())
        .max()
        .unwrap();
    Program {
        path: path.to_string_lossy().into_owned(),
        build_id: obj.build_id().unwrap().unwrap().to_vec(),
        main,
        // Past `_edata`/`__bss_start`, before `_end`.
        bss: bss.address() + 8,
        span,
    }
}

fn attr(extra: u64) -> EventAttr {
    EventAttr {
        name: "cpu-clock".into(),
        type_: event_type::SOFTWARE,
        config: sw_event::CPU_CLOCK,
        sample_period_or_freq: 1_000_000,
        sample_type: st::IP | st::TID | st::TIME | st::CPU | st::PERIOD | extra,
        flags: attr_flag::SAMPLE_ID_ALL | attr_flag::MMAP | attr_flag::MMAP2 | attr_flag::COMM,
        ids: vec![1],
        ..Default::default()
    }
}

/// Writes `file`: the program mapped whole, executable, at [`BASE`], then `samples`.
fn write(file: &Path, p: &Program, attr: EventAttr, samples: &[Sample]) {
    let mut w = PerfFileWriter::create(file, vec![attr]).unwrap();
    let id = SampleId {
        pid: PID,
        tid: PID,
        time: 1,
        cpu: 0,
    };
    w.write_side_band(
        0,
        &SideBand::Comm {
            pid: PID,
            tid: PID,
            comm: "busy",
            exec: true,
        },
        &id,
    )
    .unwrap();
    w.write_side_band(
        0,
        &SideBand::Mmap2 {
            misc: format::misc::USER,
            pid: PID,
            tid: PID,
            start: BASE,
            len: p.span.next_multiple_of(0x1000),
            pgoff: 0,
            file: Mmap2File::BuildId(&p.build_id),
            prot: 5, // PROT_READ | PROT_EXEC
            flags: 2,
            filename: &p.path,
        },
        &id,
    )
    .unwrap();
    for s in samples {
        w.write_sample(0, s).unwrap();
    }
    w.finish(&Features {
        arch: Some("x86_64".into()),
        build_ids: vec![BuildIdEntry {
            pid: PID as i32,
            kernel: false,
            build_id: p.build_id.clone(),
            filename: p.path.clone(),
        }],
        ..Default::default()
    })
    .unwrap();
}

fn sample<'a>(ip: u64, chain: &'a [u64]) -> Sample<'a> {
    Sample {
        misc: format::misc::USER,
        ip,
        pid: PID,
        tid: PID,
        time: 10,
        period: 1_000_000,
        callchain: chain,
        ..Default::default()
    }
}

/// `analyze report --folded`'s stacks and its standard error.
fn folded(file: &Path) -> (String, String) {
    let out = analyze(&["report", "--folded", "-i", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8(out.stdout).unwrap(), err)
}

#[test]
fn a_frame_pointer_chain_into_bss_is_unknown_not_edata() {
    let p = program();
    let dir = Tmp::new("outside-code-fp");
    let file = dir.0.join("fp.data");
    let main = BASE + p.main;
    // main, called from "the .bss", called from main: the middle word is garbage.
    let chain = [callchain::USER, main + 1, BASE + p.bss, main + 5];
    write(&file, &p, attr(st::CALLCHAIN), &[sample(main + 1, &chain)]);
    let (text, err) = folded(&file);
    assert_eq!(text.trim(), "busy;main;[unknown];main 1", "{err}");
}

#[test]
fn a_dwarf_unwind_ends_at_a_return_address_outside_code() {
    let p = program();
    let dir = Tmp::new("outside-code-dwarf");
    let file = dir.0.join("dwarf.data");
    let main = BASE + p.main;
    // Stopped on main's first instruction: its return address is the word at SP. That word
    // is an address in .bss; past it, a frame-pointer chain (rbp) that leads on to main
    // again, which an unwinder falling back to frame pointers would follow.
    let sp: u64 = 0x7ffd_0000_1000;
    let mut stack = vec![0u64; 32];
    stack[0] = BASE + p.bss;
    stack[8] = sp + 0x80; // [rbp]: the next frame's rbp
    stack[9] = main + 5; // [rbp + 8]: a return address into main
    let bytes: Vec<u8> = stack.iter().flat_map(|w| w.to_le_bytes()).collect();
    // REGS_USER with perf's x86-64 registers bp (6), sp (7), ip (8), lowest bit first.
    let regs = [sp + 0x40, sp, main];
    let mut a = attr(st::REGS_USER | st::STACK_USER);
    a.sample_regs_user = (1 << 6) | (1 << 7) | (1 << 8);
    a.sample_stack_user = bytes.len() as u32;
    let s = Sample {
        user_regs: Some(UserRegs {
            abi: 2,
            regs: &regs,
        }),
        user_stack: &bytes,
        ..sample(main, &[])
    };
    write(&file, &p, a, &[s]);
    let (text, err) = folded(&file);
    assert_eq!(text.trim(), "busy;[unknown];main 1", "{err}");
    assert!(err.contains("OutsideCode 1"), "{err}");
}
