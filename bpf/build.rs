//! Compiles each BPF program file in src/bpf/ (one per concern) with clang, links them with
//! libbpf's static linker into one object, and generates its libbpf-rs skeleton: the
//! concerns share maps and settings (common.bpf.h, `__weak`: the linker keeps one of each),
//! and the loader opens one object.

use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

/// The program files, one per concern.
const CONCERNS: &[&str] = &[
    "follow",
    "unwind",
    "sampling",
    "fault",
    "offcpu",
    "blockio",
    "cache",
    "probes",
    "net",
    "netsend",
    "netstamp",
    "requests",
    "requests_send",
];

/// The headers every program file includes.
const HEADERS: &[&str] = &[
    "bpfperf.h",
    "common.bpf.h",
    "stack.bpf.h",
    "unwind.bpf.h",
    "filter.bpf.h",
    "python.bpf.h",
    "agg.bpf.h",
    "sample.bpf.h",
    "trace.bpf.h",
    "trace_agg.bpf.h",
    "net.bpf.h",
    "send.bpf.h",
    "requests.bpf.h",
    "bio_pages.bpf.h",
];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let mut linker = libbpf_rs::Linker::new(out.join("bpfperf.bpf.o"))
        .unwrap_or_else(|e| panic!("BPF linker: {e:#}"));
    for name in CONCERNS {
        let src = format!("src/bpf/{name}.bpf.c");
        let obj = out.join(format!("{name}.bpf.o"));
        SkeletonBuilder::new()
            .source(&src)
            .obj(&obj)
            .clang_args([
                "-I",
                "src/bpf",
                // usdt.bpf.h includes linux/errno.h, which wants asm/errno.h.
                "-I",
                "/usr/include/x86_64-linux-gnu",
                "-D__TARGET_ARCH_x86",
                // Atomics that return the old value (send.bpf.h, netstamp.bpf.c): kernels
                // 5.12+.
                "-mcpu=v3",
                "-O2",
                "-g",
                "-Wall",
            ])
            .build()
            .unwrap_or_else(|e| {
                panic!("building {src}: {e:#} (is clang installed? run scripts/setup)")
            });
        linker
            .add_file(&obj)
            .unwrap_or_else(|e| panic!("linking {src}: {e:#}"));
        println!("cargo:rerun-if-changed={src}");
    }
    linker
        .link()
        .unwrap_or_else(|e| panic!("linking the BPF objects: {e:#}"));
    drop(linker);
    SkeletonBuilder::new()
        .obj(out.join("bpfperf.bpf.o"))
        .generate(out.join("bpfperf.skel.rs"))
        .unwrap_or_else(|e| panic!("generating the skeleton: {e:#}"));
    for h in HEADERS {
        println!("cargo:rerun-if-changed=src/bpf/{h}");
    }
}
