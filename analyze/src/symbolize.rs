//! Stage 3, symbolize: addresses to function names (with inline frames) and source lines.
//!
//! User addresses are looked up per ELF file, each file opened once (addr2line's loader:
//! .symtab/.dynsym, DWARF, separate debug files), files in parallel. Kernel addresses are
//! looked up in /proc/kallsyms when the recording's kernel is the running one.

use std::collections::HashMap;
use std::path::Path;

use object::{Object, ObjectSegment};
use rayon::prelude::*;

/// One frame as shown to people.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FrameInfo {
    pub function: String,
    /// The file it came from (`[kernel.kallsyms]`, `/usr/lib/.../libc.so.6`, `[unknown]`).
    pub dso: String,
    /// `file:line`, when DWARF says.
    pub srcline: Option<String>,
    /// An inlined call (not a real stack frame).
    pub inlined: bool,
}

impl FrameInfo {
    pub fn unknown(dso: &str) -> FrameInfo {
        FrameInfo {
            function: "[unknown]".into(),
            dso: dso.into(),
            srcline: None,
            inlined: false,
        }
    }
}

/// How deep the C++ demangler may recurse: hostile or corrupt names must not overflow the stack.
const CPP_DEMANGLE_RECURSION_LIMIT: u32 = 128;

/// Demangles Rust and C++ names; others (and names the demanglers reject) stay as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        let parse =
            cpp_demangle::ParseOptions::default().recursion_limit(CPP_DEMANGLE_RECURSION_LIMIT);
        if let Ok(sym) = cpp_demangle::Symbol::new_with_options(name, &parse) {
            let opts = cpp_demangle::DemangleOptions::default()
                .no_params()
                .recursion_limit(CPP_DEMANGLE_RECURSION_LIMIT);
            if let Ok(d) = sym.demangle_with_options(&opts) {
                return d;
            }
        }
    }
    name.to_string()
}

/// Kernel symbols, sorted by address.
pub struct Kallsyms {
    syms: Vec<(u64, String)>,
}

impl Kallsyms {
    /// /proc/kallsyms of the running kernel (text symbols only).
    pub fn load() -> Option<Kallsyms> {
        let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let addr = u64::from_str_radix(f.next()?, 16).ok()?;
                let kind = f.next()?;
                let name = f.next()?;
                (addr != 0 && matches!(kind, "T" | "t" | "W" | "w"))
                    .then(|| (addr, name.to_string()))
            })
            .collect();
        if syms.is_empty() {
            return None;
        }
        syms.sort_unstable();
        Some(Kallsyms { syms })
    }

    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|(a, _)| *a <= addr);
        (i > 0).then(|| self.syms[i - 1].1.as_str())
    }
}

/// SVMA of a file offset, through the ELF's PT_LOAD segments.
fn segments_of(path: &Path) -> Option<Vec<(u64, u64, u64)>> {
    let data = std::fs::read(path).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    Some(
        obj.segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, s.address(), size)
            })
            .collect(),
    )
}

/// File facts needed before lookups: its segments and whether its build id matches.
pub struct ElfFile {
    pub segments: Vec<(u64, u64, u64)>,
}

impl ElfFile {
    pub fn open(path: &Path) -> Option<ElfFile> {
        Some(ElfFile {
            segments: segments_of(path)?,
        })
    }

    /// The SVMA at file offset `off`.
    pub fn svma(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(o, _, size)| off >= *o && off < o + size.max(&1))
            .map(|(o, vaddr, _)| off - o + vaddr)
    }
}

/// Build id of an ELF file.
pub fn build_id_of(path: &Path) -> Option<Vec<u8>> {
    let data = std::fs::read(path).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    obj.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// The separate debug file of a binary, by build id (Debian's `-dbg`/`-dbgsym` packages).
pub fn debug_file(path: &Path) -> Option<std::path::PathBuf> {
    let id = build_id_of(path)?;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    if hex.len() < 3 {
        return None;
    }
    let p = Path::new("/usr/lib/debug/.build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]));
    p.exists().then_some(p)
}

fn frames_from(loader: &addr2line::Loader, dso: &str, svma: u64) -> Vec<FrameInfo> {
    let mut frames: Vec<FrameInfo> = Vec::new();
    if let Ok(mut iter) = loader.find_frames(svma) {
        while let Ok(Some(f)) = iter.next() {
            let Some(func) = f.function.as_ref() else {
                continue;
            };
            let Ok(name) = func.demangle().map(|c| c.into_owned()) else {
                continue;
            };
            let srcline = f
                .location
                .as_ref()
                .and_then(|l| Some(format!("{}:{}", l.file?.rsplit('/').next()?, l.line?)));
            frames.push(FrameInfo {
                function: name,
                dso: dso.to_string(),
                srcline,
                inlined: true,
            });
        }
    }
    // find_frames yields innermost first; the last one is the real (outer) function.
    frames.reverse();
    if let Some(first) = frames.first_mut() {
        first.inlined = false;
    }
    frames
}

/// Looks up `svmas` (call sites already adjusted) in one file. Each result lists the
/// function and the functions inlined into it, outermost first.
pub fn lookup_file(
    path: &Path,
    dso: &str,
    svmas: &[u64],
    with_inline: bool,
) -> HashMap<u64, Vec<FrameInfo>> {
    let mut out = HashMap::with_capacity(svmas.len());
    // The separate debug file first (DWARF and the full symbol table), then the file itself.
    let loaders: Vec<addr2line::Loader> = debug_file(path)
        .into_iter()
        .chain(std::iter::once(path.to_path_buf()))
        .filter_map(|p| addr2line::Loader::new(&p).ok())
        .collect();
    for &svma in svmas {
        let mut frames = loaders
            .iter()
            .map(|l| frames_from(l, dso, svma))
            .find(|f| !f.is_empty())
            .unwrap_or_default();
        if !with_inline {
            frames.truncate(1);
        }
        if frames.is_empty() {
            let name = loaders
                .iter()
                .find_map(|l| l.find_symbol(svma))
                .map(demangle);
            frames.push(FrameInfo {
                function: name.unwrap_or_else(|| "[unknown]".into()),
                dso: dso.to_string(),
                srcline: None,
                inlined: false,
            });
        }
        out.insert(svma, frames);
    }
    out
}

/// Looks up many files in parallel: (path, its svmas) -> per file results.
pub fn lookup_files(
    files: Vec<(String, Vec<u64>)>,
    with_inline: bool,
) -> HashMap<String, HashMap<u64, Vec<FrameInfo>>> {
    files
        .into_par_iter()
        .map(|(path, svmas)| {
            let dso = path.clone();
            let r = lookup_file(Path::new(&path), &dso, &svmas, with_inline);
            (path, r)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn demangles_rust_and_cpp_and_survives_deep_nesting() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar");
        assert_eq!(demangle("main"), "main");
        // A pathologically nested C++ name: returned as it is, no stack overflow.
        let deep = format!("_Z1f{}i{}", "PFv".repeat(5000), "E".repeat(5000));
        assert!(!demangle(&deep).is_empty());
    }
}
