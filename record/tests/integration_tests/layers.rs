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
//! (The same check as analyze's `layers.rs`, over these crates.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

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

/// A crate's module tree: module path -> the file that defines it (inline modules map to the
/// file holding them).
struct Crate {
    modules: BTreeMap<Vec<String>, PathBuf>,
    /// Per file: its module path and its syntax.
    files: Vec<(PathBuf, Vec<String>, syn::File)>,
}

fn module_path(root_dir: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root_dir).expect("under the root");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    match last.as_str() {
        "mod.rs" | "lib.rs" | "main.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_string()),
    }
    parts
}

fn rust_files(dir: &Path, skip: Option<&Path>, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("dir entry").path();
        if Some(p.as_path()) == skip {
            continue;
        }
        if p.is_dir() {
            rust_files(&p, skip, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Inline modules (`mod tests { ... }`) of a file, with their paths relative to it.
struct InlineMods(Vec<Vec<String>>);

impl<'a> Visit<'a> for InlineMods {
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if m.content.is_some() {
            self.0.push(vec![m.ident.to_string()]);
            let mut inner = InlineMods(Vec::new());
            if let Some((_, items)) = &m.content {
                for it in items {
                    inner.visit_item(it);
                }
            }
            for p in inner.0 {
                let mut full = vec![m.ident.to_string()];
                full.extend(p);
                self.0.push(full);
            }
        }
    }
}

fn load(root_dir: &Path, skip: Option<&Path>) -> Crate {
    let mut paths = Vec::new();
    rust_files(root_dir, skip, &mut paths);
    paths.sort();
    let mut modules = BTreeMap::new();
    let mut files = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(&p).expect("readable source");
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let m = module_path(root_dir, &p);
        let mut inline = InlineMods(Vec::new());
        inline.visit_file(&ast);
        for i in inline.0 {
            let mut full = m.clone();
            full.extend(i);
            modules.insert(full, p.clone());
        }
        modules.insert(m.clone(), p.clone());
        files.push((p, m, ast));
    }
    Crate { modules, files }
}

/// Collects the module paths a file's code names, resolved against the module it is in.
struct Imports<'c> {
    krate: &'c Crate,
    /// The module the code being visited is in (the file's, or an inline module of it).
    here: Vec<String>,
    /// Child modules declared in the module being visited.
    children: Vec<BTreeSet<String>>,
    found: BTreeSet<Vec<String>>,
}

impl Imports<'_> {
    /// `segments` as an absolute module path, if it starts inside this crate.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let mut at: Vec<String>;
        let mut rest = segments;
        match first.as_str() {
            "crate" => {
                at = Vec::new();
                rest = &rest[1..];
            }
            "self" => {
                at = self.here.clone();
                rest = &rest[1..];
            }
            "super" => {
                at = self.here.clone();
                while rest.first().is_some_and(|s| s == "super") {
                    at.pop()?;
                    rest = &rest[1..];
                }
            }
            name if self.children.last().is_some_and(|c| c.contains(name)) => {
                at = self.here.clone();
            }
            _ => return None,
        }
        at.extend(rest.iter().cloned());
        Some(at)
    }

    fn add(&mut self, segments: &[String]) {
        if let Some(abs) = self.absolute(segments) {
            self.found.insert(abs);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.add(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.add(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.add(&prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

fn declared_children(items: &[syn::Item]) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect()
}

impl<'a> Visit<'a> for Imports<'_> {
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'a syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() > 1 {
            self.add(&segs);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            self.here.push(m.ident.to_string());
            self.children.push(declared_children(items));
            for it in items {
                self.visit_item(it);
            }
            self.children.pop();
            self.here.pop();
        }
    }
}

impl Crate {
    /// The file defining the longest module prefix of `path`.
    fn file_of(&self, path: &[String]) -> Option<&PathBuf> {
        (0..=path.len())
            .rev()
            .find_map(|n| self.modules.get(&path[..n]))
    }

    /// file -> the files it imports, with the first path that made each edge.
    fn edges(&self) -> BTreeMap<PathBuf, BTreeMap<PathBuf, String>> {
        let mut edges: BTreeMap<PathBuf, BTreeMap<PathBuf, String>> = BTreeMap::new();
        for (file, m, ast) in &self.files {
            let mut v = Imports {
                krate: self,
                here: m.clone(),
                children: vec![declared_children(&ast.items)],
                found: BTreeSet::new(),
            };
            v.visit_file(ast);
            let out = edges.entry(file.clone()).or_default();
            for path in v.found {
                let Some(target) = v.krate.file_of(&path) else {
                    continue;
                };
                if target != file {
                    out.entry(target.clone()).or_insert_with(|| path.join("::"));
                }
            }
        }
        edges
    }
}

/// Strongly connected components with more than one file (Tarjan's algorithm).
fn circles(edges: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>) -> Vec<Vec<PathBuf>> {
    struct State<'e> {
        edges: &'e BTreeMap<PathBuf, BTreeMap<PathBuf, String>>,
        index: BTreeMap<&'e PathBuf, usize>,
        low: BTreeMap<&'e PathBuf, usize>,
        stack: Vec<&'e PathBuf>,
        on_stack: BTreeSet<&'e PathBuf>,
        next: usize,
        out: Vec<Vec<PathBuf>>,
    }
    fn connect<'e>(s: &mut State<'e>, v: &'e PathBuf) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let targets: Vec<&'e PathBuf> = s.edges.get(v).into_iter().flat_map(|m| m.keys()).collect();
        for w in targets {
            if !s.index.contains_key(w) {
                connect(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = s.stack.pop().expect("on the stack");
                s.on_stack.remove(w);
                scc.push(w.clone());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            connect(&mut s, v);
        }
    }
    s.out
}

fn describe(
    root: &Path,
    scc: &[PathBuf],
    edges: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>,
) -> String {
    let name = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let mut lines = vec![format!(
        "circle of {} files: {}",
        scc.len(),
        scc.iter().map(|p| name(p)).collect::<Vec<_>>().join(", ")
    )];
    for a in scc {
        for (b, via) in &edges[a] {
            if scc.contains(b) {
                lines.push(format!("    {} -> {} ({via})", name(a), name(b)));
            }
        }
    }
    lines.join("\n")
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn layer_of(m: &[String]) -> Option<usize> {
    let top = m.first()?;
    LAYERS.iter().position(|l| l.contains(&top.as_str()))
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

/// Every import of a file in one layer from a file in a layer above it, and every top-level
/// module in no layer.
fn upward_arrows(krate: &Crate, root: &Path) -> Vec<String> {
    let module_of: BTreeMap<&PathBuf, &Vec<String>> =
        krate.files.iter().map(|(p, m, _)| (p, m)).collect();
    let edges = krate.edges();
    let name = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let mut problems = Vec::new();
    for (file, m, _) in &krate.files {
        if m.is_empty() {
            continue; // lib.rs declares every module
        }
        let Some(from) = layer_of(m) else {
            problems.push(format!(
                "{}: top-level module {:?} is in no layer (add it to LAYERS)",
                name(file),
                m[0]
            ));
            continue;
        };
        for (target, via) in &edges[file] {
            let Some(to) = layer_of(module_of[target]) else {
                continue; // lib.rs declares the modules
            };
            if to > from {
                problems.push(format!(
                    "{} ({}) imports {} ({}) above it, via {via}",
                    name(file),
                    LAYERS[from][0],
                    name(target),
                    LAYERS[to][0],
                ));
            }
        }
    }
    problems
}

#[test]
fn record_folders_import_only_the_layers_below_them() {
    let root = src();
    let main = root.join("main.rs");
    let problems = upward_arrows(&load(&root, Some(&main)), &root);
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
    let up = upward_arrows(&krate, &dir);
    assert_eq!(
        up,
        ["sideband/parse.rs (sideband) imports cli.rs (cli) above it, via cli::show"]
    );
    std::fs::remove_dir_all(&dir).ok();
}
