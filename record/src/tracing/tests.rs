//! Resolution as a whole: requests in, events out, over a made-up tracefs and over this
//! machine's (tracefs, libc, python3.11).

use std::path::Path;

use bpf::trace::{Cmp, FilterInsn, Operand, TraceAttach, TracePayload};
use format::events::PROBE_TRACEPOINT_ID_BASE;
use format::TraceFormat;

use super::testing::{skip_or_fail, temp_dir};
use super::tracepoints::{fake_tracefs, Tracefs};
use super::*;

/// This machine, but with `tracefs` and without kprobes.
fn host(tracefs: Tracefs) -> Host {
    Host {
        tracefs,
        kprobes: false,
        kallsyms: "/nonexistent".into(),
        debug_root: "/usr/lib/debug".into(),
        places: super::libraries::Places::host(&[], None),
    }
}

fn request(events: &[(&str, Option<&str>)]) -> Request {
    Request {
        events: events
            .iter()
            .map(|(e, f)| (e.to_string(), f.map(String::from)))
            .collect(),
        stacks: true,
        ..Default::default()
    }
}

fn error(req: &Request, host: &Host) -> String {
    format!("{:#}", resolve_on(req, host).unwrap_err())
}

fn parse(t: &Traced) -> TraceFormat {
    TraceFormat::parse(std::str::from_utf8(&t.format_text).unwrap()).unwrap()
}

#[test]
fn tracepoints_by_glob_each_with_its_filter() {
    let dir = temp_dir("resolve-tp");
    let h = host(fake_tracefs(&dir));
    let out = resolve_on(
        &request(&[("syscalls:sys_enter_open*", Some("count > 4096"))]),
        &h,
    )
    .unwrap();
    let names: Vec<&str> = out.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["syscalls:sys_enter_openat", "syscalls:sys_enter_openat2"]
    );
    for t in &out {
        let file = std::fs::read(
            dir.join("events/syscalls")
                .join(&t.name[9..])
                .join("format"),
        )
        .unwrap();
        assert_eq!(t.format_text, file, "the format file unchanged");
        assert_eq!((t.id, t.bpf.common_type as u64), (parse(t).id, parse(t).id));
        assert_eq!(t.system, "syscalls");
        assert!(
            t.written && !t.latency && t.bpf.stacks && !t.bpf.entry_only && t.bpf.entry.is_none()
        );
        assert_eq!(
            t.bpf.attach,
            TraceAttach::Tracepoint {
                system: "syscalls".into(),
                name: t.name[9..].into()
            }
        );
        assert_eq!(
            t.bpf.payload,
            TracePayload::Record {
                fixed_size: 40,
                data_loc: vec![]
            }
        );
        let f = t.bpf.filter.as_ref().unwrap();
        assert_eq!(
            f.insns,
            [FilterInsn::Number {
                operand: Operand::Field {
                    offset: 32,
                    size: 8,
                    signed: false
                },
                cmp: Cmp::Gt,
                value: 4096,
                unsigned: true
            }]
        );
    }
    // A glob whose events differ: the one without the field is named.
    let e = error(&request(&[("syscalls:sys_*_read", Some("count > 1"))]), &h);
    assert!(
        e.starts_with("syscalls:sys_exit_read: --filter 'count > 1': at column 1: sys_exit_read has no field 'count'"),
        "{e}"
    );
    // Strings of a __data_loc field.
    let out = resolve_on(
        &request(&[("sched:sched_process_exec", Some("filename ~ \"*/ls\""))]),
        &h,
    )
    .unwrap();
    assert_eq!(
        out[0].bpf.payload,
        TracePayload::Record {
            fixed_size: 16,
            data_loc: vec![8]
        }
    );
    assert_eq!(out[0].bpf.filter.as_ref().unwrap().patterns.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn refusals_come_before_anything_runs() {
    let dir = temp_dir("resolve-errors");
    let h = host(fake_tracefs(&dir));
    for (req, says) in [
        (
            request(&[("syscalls:sys_enter_opnat", None)]),
            "unknown tracepoint syscalls:sys_enter_opnat; the closest: syscalls:sys_enter_openat",
        ),
        (request(&[("syscalls:nothing*", None)]), "no tracepoint matches syscalls:nothing*"),
        (request(&[("readd", None)]), "unknown event 'readd'"),
        (
            request(&[("syscalls:sys_enter_read", Some("count >> 3"))]),
            "syscalls:sys_enter_read: --filter 'count >> 3': at column 8: expected a value after '>'\n    count >> 3\n           ^",
        ),
        (
            request(&[("kprobe:do_sys_openat2", None)]),
            "kprobe:do_sys_openat2: this kernel has no kprobes (CONFIG_KPROBES is off); the closest tracepoints: syscalls:sys_e",
        ),
    ] {
        let e = error(&req, &h);
        assert!(e.starts_with(says), "{e}\n  wanted: {says}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn latency_pairs() {
    let dir = temp_dir("resolve-latency");
    let h = host(fake_tracefs(&dir));
    let req = Request {
        latency: vec![(
            "syscalls:sys_enter_read".into(),
            "syscalls:sys_exit_read".into(),
            Some("count >= 4096".into()),
        )],
        events: vec![("sched:sched_process_exec".into(), None)],
        ..Default::default()
    };
    let out = resolve_on(&req, &h).unwrap();
    assert_eq!(out.len(), 3);
    let (entry, exit) = (&out[1], &out[2]);
    assert_eq!(entry.name, "syscalls:sys_enter_read");
    assert!(
        entry.bpf.entry_only
            && !entry.written
            && entry.bpf.filter.is_none()
            && entry.format_text.is_empty()
    );
    assert_eq!(
        entry.bpf.payload,
        TracePayload::Record {
            fixed_size: 40,
            data_loc: vec![]
        }
    );
    assert_eq!(exit.name, "syscalls:sys_enter_read->sys_exit_read");
    assert_eq!(exit.bpf.entry, Some(1));
    assert!(exit.latency && exit.written && !exit.bpf.entry_only && !exit.bpf.stacks);
    // The sample is the entry's record: its id, its format; the exit's program reads the
    // exit's own record.
    assert_eq!(
        (exit.id, exit.bpf.common_type, entry.bpf.common_type),
        (700, 700, 700)
    );
    assert_eq!(
        exit.format_text,
        std::fs::read(dir.join("events/syscalls/sys_enter_read/format")).unwrap()
    );
    assert_eq!(
        exit.bpf.payload,
        TracePayload::Record {
            fixed_size: 24,
            data_loc: vec![]
        }
    );
    // The exit's format is the one tp_btf sys_exit builds: it is taken from there (read is
    // syscall 0); the entry's (made up here with a gap at 24) is not, and goes through perf.
    assert_eq!(exit.bpf.attach, TraceAttach::Syscall { nr: 0, exit: true });
    assert_eq!(
        entry.bpf.attach,
        TraceAttach::Tracepoint {
            system: "syscalls".into(),
            name: "sys_enter_read".into()
        }
    );
    // The filter reads the entry's count (offset 32), which the exit does not have.
    let f = exit.bpf.filter.as_ref().unwrap();
    assert!(matches!(
        f.insns[0],
        FilterInsn::Number {
            operand: Operand::Field { offset: 32, .. },
            ..
        }
    ));
    for (a, b, says) in [
        (
            "syscalls:sys_enter_*",
            "syscalls:sys_exit_read",
            "is not a tracepoint named in full",
        ),
        (
            "uprobe:libc:malloc",
            "syscalls:sys_exit_read",
            "is not a tracepoint named in full",
        ),
        (
            "syscalls:sys_enter_red",
            "syscalls:sys_exit_read",
            "the closest: syscalls:sys_enter_read",
        ),
    ] {
        let req = Request {
            latency: vec![(a.into(), b.into(), None)],
            ..Default::default()
        };
        let e = error(&req, &h);
        assert!(e.contains(says), "{e}");
    }
    let req = Request {
        latency: vec![(
            "syscalls:sys_enter_read".into(),
            "syscalls:sys_exit_read".into(),
            Some("ret < 0".into()),
        )],
        ..Default::default()
    };
    assert!(error(&req, &h).contains("sys_enter_read has no field 'ret'"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn kprobes_where_the_kernel_has_them() {
    let dir = temp_dir("resolve-kprobes");
    let kallsyms = dir.join("kallsyms");
    std::fs::write(
        &kallsyms,
        "ffffffff81000000 T vfs_read\nffffffff81000100 t do_sys_openat2\n",
    )
    .unwrap();
    let h = Host {
        kprobes: true,
        kallsyms,
        ..host(fake_tracefs(&dir))
    };
    let out = resolve_on(
        &request(&[
            ("kprobe:vfs_read", Some("arg3 > 100")),
            ("kretprobe:do_sys_openat2", Some("ret < 0")),
        ]),
        &h,
    )
    .unwrap();
    let names: Vec<&str> = out.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "probe:vfs_read",
            "probe:do_sys_openat2",
            "probe:do_sys_openat2__return"
        ]
    );
    assert_eq!(
        out[0].bpf.attach,
        TraceAttach::Kprobe {
            function: "vfs_read".into(),
            ret: false
        }
    );
    assert_eq!(out[0].bpf.payload, TracePayload::Args(6));
    assert_eq!(out[0].id, PROBE_TRACEPOINT_ID_BASE);
    assert_eq!(parse(&out[0]).name, "vfs_read");
    assert_eq!(
        out[1].bpf.attach,
        TraceAttach::Kprobe {
            function: "do_sys_openat2".into(),
            ret: false
        }
    );
    assert!(out[1].bpf.entry_only && !out[1].written);
    assert_eq!(
        out[2].bpf.attach,
        TraceAttach::Kprobe {
            function: "do_sys_openat2".into(),
            ret: true
        }
    );
    assert_eq!(
        (out[2].bpf.entry, out[2].bpf.payload.clone()),
        (Some(1), TracePayload::Return)
    );
    assert_eq!(out[2].id, PROBE_TRACEPOINT_ID_BASE + 1);
    assert_eq!(out[1].bpf.common_type as u64, out[2].id);
    assert_eq!(out[2].system, "probe");
    let e = error(&request(&[("kprobe:vfs_reed", None)]), &h);
    assert!(
        e.contains("no function 'vfs_reed'; the closest: vfs_read"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

#[test]
fn uprobes_on_libc() {
    if !Path::new(LIBC).exists() {
        return skip_or_fail("no libc.so.6");
    }
    let dir = temp_dir("resolve-uprobes");
    let h = host(fake_tracefs(&dir));
    let out = resolve_on(
        &request(&[
            ("uprobe:libc:getaddrinfo", Some("arg2 != 0")),
            ("uretprobe:libc:getaddrinfo", Some("ret < 0 && arg1 != 0")),
            ("uprobe:libc.so.6:getaddrinfo+4", None),
        ]),
        &h,
    )
    .unwrap();
    let names: Vec<&str> = out.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "probe_libc:getaddrinfo",
            "probe_libc:getaddrinfo",
            "probe_libc:getaddrinfo__return",
            "probe_libc:getaddrinfo_1"
        ]
    );
    let libc = std::fs::canonicalize(LIBC).unwrap();
    let TraceAttach::Uprobe {
        path,
        offset,
        ret: false,
    } = &out[0].bpf.attach
    else {
        panic!("{:?}", out[0].bpf.attach)
    };
    assert_eq!(path, &libc);
    // The offset is the function's bytes in the file (readelf/nm's address through the
    // segment) — the same as the return probe's, 4 less than the +4 one's.
    let bin = symbols::Binary::open(&libc).unwrap();
    let f = bin
        .function("getaddrinfo", Path::new("/nonexistent"))
        .unwrap();
    assert_eq!(Some(*offset), bin.file_offset(f.address));
    assert_eq!(
        out[2].bpf.attach,
        TraceAttach::Uprobe {
            path: libc.clone(),
            offset: *offset,
            ret: true
        }
    );
    assert_eq!(
        out[3].bpf.attach,
        TraceAttach::Uprobe {
            path: libc.clone(),
            offset: offset + 4,
            ret: false
        }
    );
    // Made-up ids, in order of the events written.
    let ids: Vec<u64> = out.iter().map(|t| t.id).collect();
    let base = PROBE_TRACEPOINT_ID_BASE;
    assert_eq!(ids, [base, base + 1, base + 1, base + 2]);
    assert!(out
        .iter()
        .all(|t| t.bpf.common_type as u64 == t.id && t.bpf.stacks));
    // The entry: written, six arguments, its filter over its own format.
    let f0 = parse(&out[0]);
    assert_eq!((f0.name.as_str(), f0.id), ("getaddrinfo", base));
    assert_eq!(out[0].system, "probe_libc");
    assert_eq!(out[0].bpf.payload, TracePayload::Args(6));
    assert!(matches!(
        out[0].bpf.filter.as_ref().unwrap().insns[0],
        FilterInsn::Number {
            operand: Operand::Field {
                offset: 24,
                size: 8,
                signed: true
            },
            cmp: Cmp::Ne,
            ..
        }
    ));
    // The pair: the entry kept, the return written with the entry's arguments and ret.
    let (entry, exit) = (&out[1], &out[2]);
    assert!(entry.bpf.entry_only && !entry.written && entry.bpf.filter.is_none());
    assert_eq!(entry.bpf.payload, TracePayload::Args(6));
    assert_eq!(
        (exit.bpf.entry, exit.latency, exit.written),
        (Some(1), true, true)
    );
    assert_eq!(exit.bpf.payload, TracePayload::Return);
    let fr = parse(exit);
    assert_eq!(
        (fr.name.as_str(), fr.fixed_size()),
        ("getaddrinfo__return", 80)
    );
    let insns = &exit.bpf.filter.as_ref().unwrap().insns;
    assert!(matches!(
        insns[0],
        FilterInsn::Number {
            operand: Operand::Field {
                offset: 72,
                size: 8,
                signed: true
            },
            cmp: Cmp::Lt,
            value: 0,
            ..
        }
    ));
    assert_eq!(insns.len(), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn uprobe_refusals() {
    if !Path::new(LIBC).exists() {
        return skip_or_fail("no libc.so.6");
    }
    let dir = temp_dir("resolve-uprobe-errors");
    let h = host(fake_tracefs(&dir));
    let e = error(&request(&[("uprobe:libc:getaddrinfp", None)]), &h);
    assert!(
        e.starts_with("uprobe:libc:getaddrinfp: no function 'getaddrinfp' in /usr/lib/x86_64-linux-gnu/libc.so.6; the closest: getaddrinfo")
            || e.contains("is stripped"),
        "{e}"
    );
    let e = error(&request(&[("uprobe:libc:getaddrinfo+100000", None)]), &h);
    assert!(e.contains("+100000 is past the end of getaddrinfo"), "{e}");
    let e = error(&request(&[("uprobe:libnosuch:f", None)]), &h);
    assert!(
        e.starts_with("uprobe:libnosuch:f: no library 'libnosuch'"),
        "{e}"
    );
    let e = error(
        &request(&[("uprobe:libc:getaddrinfo", Some("arg7 > 0"))]),
        &h,
    );
    assert!(e.contains("getaddrinfo has no field 'arg7'"), "{e}");
    let e = error(
        &request(&[("uprobe:libc:getaddrinfo", Some("ret < 0"))]),
        &h,
    );
    assert!(
        e.contains("no field 'ret'"),
        "an entry has no return value: {e}"
    );
    // A stripped program (no .symtab, no debug file): what to do.
    let py = Path::new("/usr/bin/python3.11");
    if py.exists() && !symbols::has_symtab(py) {
        let e = error(
            &request(&[("uprobe:/usr/bin/python3.11:no_such_function", None)]),
            &h,
        );
        assert!(
            e.contains("/usr/bin/python3.11 is stripped (no .symtab) and has no debug file (/usr/lib/debug/.build-id/")
                && e.contains("install its debug symbols")
                && e.contains("uprobe:/usr/bin/python3.11:0xADDRESS"),
            "{e}"
        );
        // An address instead: probe_python3:abs_<hex>.
        let out = resolve_on(
            &request(&[("uprobe:/usr/bin/python3.11:0x4f20a1", None)]),
            &h,
        )
        .unwrap();
        assert_eq!(out[0].name, "probe_python3:abs_4f20a1");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usdt_of_python() {
    let py = Path::new("/usr/bin/python3.11");
    if !py.exists() {
        return skip_or_fail("no /usr/bin/python3.11");
    }
    let dir = temp_dir("resolve-usdt");
    let h = host(fake_tracefs(&dir));
    let out = resolve_on(
        &request(&[
            (
                "usdt:/usr/bin/python3.11:python:function__entry",
                Some("arg3 > 10"),
            ),
            ("usdt:/usr/bin/python3.11:gc__start", None),
        ]),
        &h,
    )
    .unwrap();
    assert_eq!(out[0].name, "sdt_python:function__entry");
    assert_eq!(out[0].system, "sdt_python");
    assert_eq!(
        out[0].bpf.attach,
        TraceAttach::Usdt {
            path: py.into(),
            provider: "python".into(),
            name: "function__entry".into()
        }
    );
    assert_eq!(out[0].bpf.payload, TracePayload::Args(3));
    let f = parse(&out[0]);
    assert_eq!(f.fixed_size(), 16 + 3 * 8);
    // `-4@%eax`: signed; `8@%rbp`: unsigned.
    assert!(f.field("arg3").unwrap().signed && !f.field("arg1").unwrap().signed);
    assert!(matches!(
        out[0].bpf.filter.as_ref().unwrap().insns[0],
        FilterInsn::Number {
            operand: Operand::Field { offset: 32, .. },
            unsigned: false,
            ..
        }
    ));
    assert_eq!(
        (out[1].name.as_str(), out[1].id),
        ("sdt_python:gc__start", PROBE_TRACEPOINT_ID_BASE + 1)
    );
    assert_eq!(out[1].bpf.payload, TracePayload::Args(1));
    let e = error(
        &request(&[("usdt:/usr/bin/python3.11:python:function_entry", None)]),
        &h,
    );
    assert!(
        e.contains("has no USDT probe python:function_entry; the closest: python:function__entry"),
        "{e}"
    );
    if Path::new(LIBC).exists() {
        let e = error(&request(&[("usdt:libc:libc:setjmp", None)]), &h);
        assert!(
            e.contains("no USDT probe") || e.contains("has no USDT probes"),
            "{e}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn this_machines_tracefs() {
    crate::host::mount_tracefs();
    let root = Path::new("/sys/kernel/tracing");
    if !root
        .join("events/syscalls/sys_enter_openat/format")
        .exists()
    {
        return skip_or_fail(
            "no tracefs at /sys/kernel/tracing (mount -t tracefs nodev /sys/kernel/tracing)",
        );
    }
    let h = host(Tracefs { root: root.into() });
    let out = resolve_on(
        &request(&[
            (
                "syscalls:sys_enter_openat",
                Some("flags & 0x40 && filename != 0 && comm == \"bash\""),
            ),
            ("sched:*", None),
        ]),
        &h,
    )
    .unwrap();
    let file =
        format::read_tracefs_file(&root.join("events/syscalls/sys_enter_openat/format")).unwrap();
    assert_eq!(out[0].format_text, file);
    let f = parse(&out[0]);
    assert_eq!(out[0].id, f.id);
    assert_eq!(
        out[0].bpf.payload,
        TracePayload::Record {
            fixed_size: f.fixed_size() as u32,
            data_loc: vec![]
        }
    );
    assert!(out.len() > 10 && out[1..].iter().all(|t| t.name.starts_with("sched:")));
    // sched_process_exec keeps its filename (__data_loc).
    let exec = out
        .iter()
        .find(|t| t.name == "sched:sched_process_exec")
        .unwrap();
    assert!(
        matches!(&exec.bpf.payload, TracePayload::Record { data_loc, .. } if data_loc.len() == 1)
    );
    // Every tracepoint at once is more than can be attached.
    let e = error(&request(&[("*:*", None)]), &h);
    assert!(e.contains("at most 1024 can be attached"), "{e}");
    // Without kprobes here, the closest tracepoints.
    if !h.kprobes {
        let e = error(&request(&[("kprobe:tcp_retransmit_skb", None)]), &h);
        assert!(
            e.contains("the closest tracepoints: tcp:tcp_retransmit_skb"),
            "{e}"
        );
    }
}
