//! Function names as perf 6.1 prints them, on whole libraries and on a recording.
//!
//! perf 6.1 as Debian builds it (no libbfd) demangles with libiberty's
//! `cplus_demangle(name, DMGL_NO_OPTS)`: no parameters, no return types, and no "verbose"
//! expansions (`std::string`, not `std::basic_string<char, std::char_traits<char>,
//! std::allocator<char> >`). That is `c++filt -p -i`, not `c++filt -p`: checked here against
//! `perf probe -F` on the same libraries, where `-p` alone misses 330 of libstdc++'s names
//! and 465 of libLLVM 14's.
//!
//! perf chooses among the symbols at one address after demangling: a Rust program's v0
//! aliases are named by the longer demangled name.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use object::{Object, ObjectSymbol};

use crate::common::{fixture, perf_ok, perf_record, Tmp};
use crate::folded::{fold_script, parse_folded, perf_script_with, run_ok, Folded};

/// Under CI a missing tool or library fails the test; elsewhere the test is skipped, saying
/// what is missing in one line. Returns whether to go on.
fn needs(what: &str, present: bool) -> bool {
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} is missing (scripts/setup installs it)"
        );
        eprintln!("skipping: {what} is missing");
    }
    present
}

/// Debian's libLLVM (every version installed, from the llvm and clang packages), libstdc++
/// and OpenJDK's libjvm, each once (by real path); and what was not found.
fn libraries() -> (Vec<PathBuf>, Vec<&'static str>) {
    let glob = |dir: &str, keep: &dyn Fn(&str) -> bool| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| keep(&e.file_name().to_string_lossy()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let llvm = glob("/usr/lib/x86_64-linux-gnu", &|n| {
        n.starts_with("libLLVM-") && n.contains(".so")
    });
    let stdcxx: Vec<PathBuf> = [PathBuf::from("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")]
        .into_iter()
        .filter(|p| p.exists())
        .collect();
    // Debian's OpenJDK packages only (java-17-openjdk-amd64), not other vendors' JDKs.
    let jvm: Vec<PathBuf> = glob("/usr/lib/jvm", &|n| {
        n.starts_with("java-") && n.contains("openjdk")
    })
    .into_iter()
    .map(|d| d.join("lib/server/libjvm.so"))
    .filter(|p| p.exists())
    .collect();
    let mut missing = Vec::new();
    for (set, what) in [
        (&llvm, "libLLVM-*.so (Debian's llvm)"),
        (&stdcxx, "libstdc++.so.6"),
        (&jvm, "libjvm.so (Debian's openjdk-17-jre-headless)"),
    ] {
        if set.is_empty() {
            missing.push(what);
        }
    }
    let mut seen = BTreeSet::new();
    let libs = llvm
        .into_iter()
        .chain(stdcxx)
        .chain(jvm)
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .filter(|p| seen.insert(p.clone()))
        .collect();
    (libs, missing)
}

/// The mangled C++ names (`_Z...`) of `lib`'s dynamic symbols, and of the symbols its
/// `.symtab` defines when it has one (libjvm keeps its 57k symbols there: only 223 are
/// dynamic). Not `.symtab`'s undefined ones: the linker names those with their version
/// (`_ZSt7nothrow@GLIBCXX_3.4`), which c++filt splits off as a separate word and perf never
/// shows.
fn cxx_names(lib: &Path) -> BTreeSet<String> {
    let bytes = std::fs::read(lib).unwrap();
    let obj = object::File::parse(&*bytes).unwrap();
    obj.dynamic_symbols()
        .chain(obj.symbols().filter(|s| !s.is_undefined()))
        .filter_map(|s| s.name().ok().map(str::to_string))
        .filter(|n| n.starts_with("_Z"))
        .collect()
}

/// `c++filt -p -i` of each name, one process for all of them.
fn cxxfilt(names: &[&str]) -> Vec<String> {
    let mut child = Command::new("c++filt")
        .args(["-p", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = names.join("\n") + "\n";
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert_eq!(lines.len(), names.len(), "c++filt gave one line per name");
    lines
}

/// Every C++ name of libLLVM, libstdc++ and libjvm (dynamic symbols, and libjvm's symbol
/// table) demangles as c++filt from binutils (`-p -i`) demangles it: empty template
/// parameter packs (`AnalysisManager<llvm::Function>`), integer template arguments (`8u`,
/// `548964ul`), thunks (`non-virtual thunk to LIRGenerator::block_do(BlockBegin*)`: the
/// thunk's target keeps its parameters), the `std::string` abbreviations, and names too long
/// for libiberty (over 1024 characters: left mangled, by perf too).
#[test]
fn cxx_names_equal_cxxfilts_on_llvm_libstdcxx_and_libjvm() {
    let cxxfilt_ok = Command::new("c++filt")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !needs("c++filt (binutils)", cxxfilt_ok) {
        return;
    }
    let (libs, missing) = libraries();
    if !needs(&missing.join(", "), missing.is_empty()) {
        return;
    }
    let mut report = String::new();
    let mut total_diffs = 0;
    for lib in &libs {
        let names = cxx_names(lib);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let theirs = cxxfilt(&names);
        let diffs: Vec<(&str, &String, String)> = names
            .iter()
            .zip(&theirs)
            .map(|(n, t)| (*n, t, analyze::symbolize::demangle(n)))
            .filter(|(_, t, o)| *t != o)
            .collect();
        eprintln!(
            "{}: {} C++ names, {} differ from c++filt -p -i",
            lib.display(),
            names.len(),
            diffs.len()
        );
        assert!(
            names.len() > 100,
            "{}: only {} C++ names",
            lib.display(),
            names.len()
        );
        total_diffs += diffs.len();
        for (n, t, o) in diffs.iter().take(8) {
            report += &format!("  {n}\n    c++filt: {t}\n    ours:    {o}\n");
        }
    }
    assert!(
        total_diffs == 0,
        "{total_diffs} names differ from c++filt -p -i:\n{report}"
    );
}

/// perf itself: every name `perf probe -F` lists for these libraries (the names perf keeps
/// after choosing among aliases, demangled as perf demangles) is one we give a symbol of the
/// same table (`.symtab` if it has one, else `.dynsym`; PLT entries as `name@plt`).
#[test]
fn cxx_names_equal_perfs_on_llvm_libstdcxx_and_libjvm() {
    if !perf_ok() {
        return;
    }
    let (libs, missing) = libraries();
    if !needs(&missing.join(", "), missing.is_empty()) {
        return;
    }
    let mut report = String::new();
    for lib in &libs {
        let out = Command::new("perf")
            .args(["probe", "-F", "--filter", "*", "-x"])
            .arg(lib)
            .output()
            .unwrap();
        assert!(out.status.success(), "perf probe -F -x {}", lib.display());
        let text = String::from_utf8(out.stdout).unwrap();
        let perfs: BTreeSet<&str> = text
            .lines()
            .map(|l| l.strip_suffix("@plt").unwrap_or(l))
            .collect();
        let bytes = std::fs::read(lib).unwrap();
        let obj = object::File::parse(&*bytes).unwrap();
        let ours: BTreeSet<String> = obj
            .symbols()
            .chain(obj.dynamic_symbols())
            .filter_map(|s| s.name().ok())
            .map(analyze::symbolize::demangle)
            .collect();
        let missing: Vec<&&str> = perfs.iter().filter(|n| !ours.contains(**n)).collect();
        eprintln!(
            "{}: {} names in perf probe -F, {} not ours",
            lib.display(),
            perfs.len(),
            missing.len()
        );
        assert!(
            perfs.len() > 1000,
            "{}: perf lists {}",
            lib.display(),
            perfs.len()
        );
        if !missing.is_empty() {
            let first: Vec<_> = missing.iter().take(8).collect();
            report += &format!("{}: {first:#?}\n", lib.display());
        }
    }
    assert!(
        report.is_empty(),
        "names perf prints that we never give (first 8 of each library):\n{report}"
    );
}

/// The weight of the samples whose leaf frame is `name`.
fn leaf_weight(folded: &Folded, name: &str) -> u64 {
    folded
        .iter()
        .filter(|(k, _)| k.rsplit(';').next() == Some(name))
        .map(|(_, v)| v)
        .sum()
}

/// std's `Display` for u64 and usize is one function under two v0 symbols of equal length
/// (`..3impyNtB9_7Display3fmt`, `..3impjNtB9_7Display3fmt`), u64's first in the symbol table
/// of `rsalias-v0`. perf compares the demangled names and keeps the longer,
/// `<usize as core::fmt::Display>::fmt`; so do we, where comparing the mangled ones (equal)
/// kept the first, `<u64 as core::fmt::Display>::fmt`.
#[test]
fn rust_v0_aliases_are_named_as_perf_names_them() {
    if !perf_ok() {
        return;
    }
    const U64: &str = "<u64 as core::fmt::Display>::fmt";
    const USIZE: &str = "<usize as core::fmt::Display>::fmt";
    let program = fixture("rsalias-v0");
    let bytes = std::fs::read(&program).unwrap();
    let obj = object::File::parse(&*bytes).unwrap();
    let symbol = |suffix: &str| {
        obj.symbols()
            .enumerate()
            .find(|(_, s)| {
                s.name()
                    .is_ok_and(|n| n.starts_with("_R") && n.ends_with(suffix))
            })
            .map(|(i, s)| (i, s.address()))
            .unwrap_or_else(|| panic!("rsalias-v0 has no v0 symbol ending in {suffix}"))
    };
    let (u64_index, u64_addr) = symbol("3num3impyNtB9_7Display3fmt");
    let (usize_index, usize_addr) = symbol("3num3impjNtB9_7Display3fmt");
    assert_eq!(u64_addr, usize_addr, "the two impls are one function");
    assert!(
        u64_index < usize_index,
        "u64's symbol is no longer first: the table order alone would pick usize's"
    );

    let dir = Tmp::new("v0-aliases");
    let file = dir.0.join("perf.data");
    perf_record(&file, &["-F", "999", "-g"], &program, &["0.5"]);
    let perf = fold_script(&perf_script_with(&file, &["--no-inline"]), None);
    let f = file.to_str().unwrap();
    let ours = parse_folded(&run_ok(&["report", "--folded", "--no-inline", "-i", f]));
    let (perf_usize, ours_usize) = (leaf_weight(&perf, USIZE), leaf_weight(&ours, USIZE));
    let total: u64 = perf.values().sum();
    eprintln!(
        "rsalias-v0: {total} samples; {USIZE} the leaf of {perf_usize} in perf script, {ours_usize} in ours; {U64}: {} and {}",
        leaf_weight(&perf, U64),
        leaf_weight(&ours, U64)
    );
    assert!(
        perf_usize >= 20,
        "perf script: {USIZE} the leaf of only {perf_usize} of {total} samples"
    );
    assert_eq!(leaf_weight(&perf, U64), 0, "perf script names {U64}");
    assert_eq!(
        ours_usize, perf_usize,
        "samples in {USIZE}, ours and perf's"
    );
    assert_eq!(leaf_weight(&ours, U64), 0, "we name {U64}");
}
