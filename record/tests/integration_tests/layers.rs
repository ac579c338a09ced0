//! The architecture as a test: record's files (and the bpf crate's) import each other along
//! arrows that point down only. Every path a file names (`use` trees and paths in code:
//! `crate::`, `super::`, `self::`, a child module's name) is resolved to the file that defines
//! the module it reaches; then
//! - no two files import each other, directly or through others (no circle), in record's
//!   library and in bpf/src (there, arrows into the crate root and programs/mod.rs, still
//!   hubs, are left out); and
//! - no folder of record imports a folder above it: `host` <- `sideband` <- `unwinding`,
//!   `runtimes`, `tracing` <- `output` <- `config` <- `capture` <- `session` <- `cli`.
//!
//! Declaring a module (`mod x;`) is not an import; re-exporting from it (`pub use x::Y`) is.
//! The machinery is shared with analyze's `layers.rs`: `fixtures/layers.rs`.

use std::path::{Path, PathBuf};

#[path = "../../../fixtures/layers.rs"]
mod check;
use check::{circles, describe, load, upward_arrows};

/// The library's top-level modules, lowest first. A module may import its own layer's and
/// lower layers' modules only.
const LAYERS: &[&[&str]] = &[
    &["host"],
    &["sideband"],
    &["unwinding", "runtimes", "tracing"],
    &["output"],
    &["config"],
    &["capture"],
    &["session"],
    &["cli"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_file_of_record_or_bpf_imports_one_that_imports_it() {
    let root = src();
    let bpf = root.join("../../bpf/src");
    let main = root.join("main.rs");
    let mut problems = Vec::new();
    // The library (main.rs, the binary, is a crate of its own: it imports the library only).
    for (dir, skip) in [(root.clone(), Some(main.as_path())), (bpf.clone(), None)] {
        let krate = load(&dir, skip);
        assert!(krate.files.len() > 3, "{}: too few files", dir.display());
        let mut edges = krate.edges();
        if dir == bpf {
            // bpf's crate root (Profiler, Options, the re-exports) and programs/mod.rs (the
            // loader's helpers) are still hubs their files import: arrows into them are left
            // out; the files below must not import each other in a circle.
            let hub = |p: &Path| p.ends_with("lib.rs") || p.ends_with("mod.rs");
            for targets in edges.values_mut() {
                targets.retain(|t, _| !hub(t));
            }
        }
        for scc in circles(&edges) {
            problems.push(describe(&dir, &scc, &edges));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn record_folders_import_only_the_layers_below_them() {
    let root = src();
    let main = root.join("main.rs");
    let problems = upward_arrows(LAYERS, &load(&root, Some(&main)), &root);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_check_finds_a_circle_and_an_upward_arrow() {
    // Two files importing each other through a third: found, with the paths that did it.
    let dir = std::env::temp_dir().join(format!("layers-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sideband")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod sideband; mod cli;").unwrap();
    std::fs::write(
        dir.join("sideband/mod.rs"),
        "mod parse; pub use parse::parse; pub struct Recording;",
    )
    .unwrap();
    std::fs::write(
        dir.join("sideband/parse.rs"),
        "pub fn parse() -> super::Recording { crate::cli::show(); todo!() }",
    )
    .unwrap();
    std::fs::write(
        dir.join("cli.rs"),
        "use crate::sideband::{self, parse}; pub fn show() {}",
    )
    .unwrap();
    let krate = load(&dir, None);
    let edges = krate.edges();
    let found = circles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 3, "mod.rs, parse.rs and cli.rs: {found:?}");
    let read = &edges[&dir.join("sideband/parse.rs")];
    assert_eq!(read[&dir.join("cli.rs")], "cli::show");
    // sideband (below) calling into cli (above): an arrow up, named with its path.
    let up = upward_arrows(LAYERS, &krate, &dir);
    assert_eq!(
        up,
        ["sideband/parse.rs (sideband) imports cli.rs (cli) above it, via cli::show"]
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// One `.bpf.c` per concern, each at most 500 lines: a concern that grows past it moves a
/// step into a header of its own (requests.bpf.c's page walk: bio_pages.bpf.h).
#[test]
fn every_bpf_program_file_is_at_most_500_lines() {
    let dir = src().join("../../bpf/src/bpf");
    let mut long = Vec::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("bpf/src/bpf") {
        let path = entry.expect("entry").path();
        if !path.to_string_lossy().ends_with(".bpf.c") {
            continue;
        }
        seen += 1;
        let lines = std::fs::read_to_string(&path)
            .expect("read")
            .lines()
            .count();
        if lines > 500 {
            long.push(format!("{}: {lines} lines", path.display()));
        }
    }
    assert!(
        seen >= 10,
        "only {seen} .bpf.c files found in {}",
        dir.display()
    );
    assert!(long.is_empty(), "over 500 lines:\n{}", long.join("\n"));
}
