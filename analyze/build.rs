//! Builds the C side of C++ demangling (`src/symbolize/demangle.c`) and links it with GNU
//! libiberty's static library (Debian: libiberty-dev, which scripts/setup installs): perf
//! 6.1 demangles C++ with libiberty, and names must come out byte for byte as perf prints
//! them.

use std::path::PathBuf;
use std::process::Command;

const SHIM: &str = "src/symbolize/demangle.c";

fn main() {
    println!("cargo:rerun-if-changed={SHIM}");
    cc::Build::new()
        .file(SHIM)
        .warnings(true)
        .extra_warnings(true)
        .compile("bpfperf_demangle");

    // libiberty.a where the C compiler finds its libraries (no pkg-config file exists).
    let compiler = cc::Build::new().get_compiler();
    let found = Command::new(compiler.path())
        .arg("-print-file-name=libiberty.a")
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.is_absolute() && p.exists());
    let Some(lib) = found else {
        panic!(
            "libiberty.a not found: install GNU libiberty (Debian: apt-get install \
             libiberty-dev; scripts/setup does)"
        );
    };
    println!("cargo:rerun-if-changed={}", lib.display());
    // Linked from OUT_DIR (where cc put the shim, already a search path), so that the system
    // library directory does not become a search path ahead of other crates' own builds.
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::copy(&lib, out.join("libiberty.a"))
        .unwrap_or_else(|e| panic!("copying {}: {e}", lib.display()));
    println!("cargo:rustc-link-lib=static=iberty");
}
