//! Source text for annotate: the paths DWARF gives, remapped as the user asks (`--source-dir`,
//! perf's `--prefix`/`--prefix-strip`), read once each. Files that are not found are
//! remembered with where they were looked for, so that the view says so once.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// How to find source files whose recorded paths are not on this machine.
#[derive(Debug, Clone, Default)]
pub struct SourceDirs {
    /// Directories to look in: each is tried with the recorded path, then with its leading
    /// components dropped one by one (`/build/x/src/main.c` in DIR: DIR/build/x/src/main.c,
    /// DIR/x/src/main.c, DIR/src/main.c, DIR/main.c).
    pub dirs: Vec<PathBuf>,
    /// perf's `--prefix`: put before the path once `prefix_strip` components are dropped.
    pub prefix: Option<PathBuf>,
    pub prefix_strip: usize,
}

/// A source file's lines, or where it was looked for.
pub enum Found {
    Text(Vec<String>),
    Missing(Vec<PathBuf>),
}

/// Reads source files, once each.
pub struct Sources {
    dirs: SourceDirs,
    files: HashMap<String, Found>,
}

/// Files larger than this are not read as source (a path that names something else).
const MAX_SOURCE: u64 = 64 << 20;

impl Sources {
    pub fn new(dirs: SourceDirs) -> Sources {
        Sources {
            dirs,
            files: HashMap::new(),
        }
    }

    /// The text of line `line` (1-based) of the file DWARF names `path`.
    pub fn line(&mut self, path: &str, line: u32) -> Option<&str> {
        match self.file(path) {
            Found::Text(lines) => lines
                .get((line as usize).checked_sub(1)?)
                .map(String::as_str),
            Found::Missing(_) => None,
        }
    }

    pub fn file(&mut self, path: &str) -> &Found {
        if !self.files.contains_key(path) {
            let found = self.find(path);
            self.files.insert(path.to_string(), found);
        }
        &self.files[path]
    }

    /// The files that were not found, each with where it was looked for.
    pub fn missing(&self) -> Vec<(&str, &[PathBuf])> {
        let mut out: Vec<(&str, &[PathBuf])> = self
            .files
            .iter()
            .filter_map(|(p, f)| match f {
                Found::Missing(tried) => Some((p.as_str(), &tried[..])),
                Found::Text(_) => None,
            })
            .collect();
        out.sort();
        out
    }

    fn find(&self, path: &str) -> Found {
        let candidates = self.candidates(Path::new(path));
        for c in &candidates {
            if let Some(text) = read_text(c) {
                return Found::Text(text.lines().map(str::to_string).collect());
            }
        }
        Found::Missing(candidates)
    }

    /// Where `path` may be, in the order tried.
    fn candidates(&self, path: &Path) -> Vec<PathBuf> {
        let parts: Vec<&std::ffi::OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(p) => Some(p),
                _ => None,
            })
            .collect();
        let tail = |skip: usize| -> PathBuf { parts.iter().skip(skip).collect() };
        let mut out = Vec::new();
        if let Some(prefix) = &self.dirs.prefix {
            out.push(prefix.join(tail(self.dirs.prefix_strip)));
        }
        for dir in &self.dirs.dirs {
            for skip in 0..parts.len() {
                out.push(dir.join(tail(skip)));
            }
        }
        out.push(path.to_path_buf());
        out
    }
}

fn read_text(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_SOURCE {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaps_by_dropping_leading_components_and_by_prefix() {
        let dir = std::env::temp_dir().join(format!("bpfperf-source-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/main.c"), "int a;\nint b;\n").unwrap();

        let mut s = Sources::new(SourceDirs {
            dirs: vec![dir.clone()],
            ..Default::default()
        });
        assert_eq!(s.line("/build/x/src/main.c", 2), Some("int b;"));
        assert_eq!(s.line("/build/x/src/main.c", 3), None);

        let mut p = Sources::new(SourceDirs {
            prefix: Some(dir.clone()),
            prefix_strip: 2,
            ..Default::default()
        });
        assert_eq!(p.line("/build/x/src/main.c", 1), Some("int a;"));

        let mut none = Sources::new(SourceDirs::default());
        assert_eq!(none.line("/nowhere/at/all.c", 1), None);
        let missing = none.missing();
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].1, [PathBuf::from("/nowhere/at/all.c")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
