//! The architecture as a test: analyze's files import each other along arrows that point down
//! only. Every path a file names (`use` trees and paths in code: `crate::`, `super::`,
//! `self::`, a child module's name) is resolved to the file that defines the module it
//! reaches; then
//! - no two files import each other, directly or through others (no circle), and
//! - no folder imports a folder above it: `files` <- `read` <- `unwind` <- `resolve` <-
//!   `symbolize` <- `aggregate` <- `pipeline` <- `views` (the stages in the order a recording
//!   flows through them, the one place that finds files below them all) <- `cli` (the
//!   command line, which names the views' options).
//!
//! The binary (`src/bin/analyze/`) is its own crate root and is checked for circles too.
//! Declaring a module (`mod x;`) is not an import; re-exporting from it (`pub use x::Y`) is.
//! The machinery is shared with record's `layers.rs`: `fixtures/layers.rs`.

use std::path::{Path, PathBuf};

#[path = "../../../fixtures/layers.rs"]
mod check;
use check::{circles, describe, load, upward_arrows};

/// The library's top-level modules, lowest first. A module may import its own layer's and
/// lower layers' modules only. `timing` measures phases for all of them and imports nothing.
const LAYERS: &[&[&str]] = &[
    &["timing"],
    &["files"],
    &["read"],
    &["unwind"],
    &["resolve"],
    &["symbolize"],
    &["aggregate"],
    &["pipeline"],
    &["views"],
    &["cli"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_file_of_analyze_imports_one_that_imports_it() {
    let root = src();
    let bin = root.join("bin");
    let mut problems = Vec::new();
    for (dir, skip) in [
        (root.clone(), Some(bin.as_path())),
        (bin.join("analyze"), None),
    ] {
        let krate = load(&dir, skip);
        assert!(krate.files.len() > 3, "{}: too few files", dir.display());
        let edges = krate.edges();
        for scc in circles(&edges) {
            problems.push(describe(&root, &scc, &edges));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn analyze_folders_import_only_the_layers_below_them() {
    let root = src();
    let bin = root.join("bin");
    let problems = upward_arrows(LAYERS, &load(&root, Some(&bin)), &root);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_check_finds_a_circle_and_an_upward_arrow() {
    // Two files importing each other through a third: found, with the paths that did it.
    let dir = std::env::temp_dir().join(format!("layers-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("read")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod read; mod views;").unwrap();
    std::fs::write(
        dir.join("read/mod.rs"),
        "mod parse; pub use parse::parse; pub struct Recording;",
    )
    .unwrap();
    std::fs::write(
        dir.join("read/parse.rs"),
        "pub fn parse() -> super::Recording { crate::views::show(); todo!() }",
    )
    .unwrap();
    std::fs::write(
        dir.join("views.rs"),
        "use crate::read::{self, parse}; pub fn show() {}",
    )
    .unwrap();
    let krate = load(&dir, None);
    let edges = krate.edges();
    let found = circles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].len(),
        3,
        "mod.rs, parse.rs and views.rs: {found:?}"
    );
    let read = &edges[&dir.join("read/parse.rs")];
    assert_eq!(read[&dir.join("views.rs")], "views::show");
    // read (below) calling into views (above): an arrow up, named with its path.
    let up = upward_arrows(LAYERS, &krate, &dir);
    assert_eq!(
        up,
        ["read/parse.rs (read) imports views.rs (views) above it, via views::show"]
    );
    std::fs::remove_dir_all(&dir).ok();
}
