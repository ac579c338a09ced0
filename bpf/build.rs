//! Compiles the BPF programs in src/bpf/ with clang and generates their libbpf-rs skeletons.

use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const PROGRAMS: &[&str] = &["profile"];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    for name in PROGRAMS {
        let src = format!("src/bpf/{name}.bpf.c");
        SkeletonBuilder::new()
            .source(&src)
            .clang_args(["-I", "src/bpf", "-D__TARGET_ARCH_x86", "-O2", "-g", "-Wall"])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| {
                panic!("building {src}: {e:#} (is clang installed? run scripts/setup)")
            });
        println!("cargo:rerun-if-changed={src}");
    }
    println!("cargo:rerun-if-changed=src/bpf/bpfperf.h");
}
