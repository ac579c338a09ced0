//! `analyze archive`: one zstd tar with the recording and, for every ELF file a sample touched
//! (by build id), what analysis reads of it ([`reduce`]), the kernel's symbols
//! ([`kernel`]), JIT maps, and a MANIFEST.

use std::io::Write;
use std::path::Path;

mod kernel;
mod reduce;

use crate::files::archive::{build_id_link, cache_dir, MANIFEST, PERF_DATA};
use crate::files::input::Input;
use crate::files::Loader;
use crate::pipeline::{self, Options};
use crate::read::EventSel;
use crate::resolve::Source;
use kernel::{kallsyms_subset, kallsyms_text, vmlinux, Vmlinux};
use reduce::reduce;

/// One archived file, for the manifest and the summary.
#[derive(Debug, Clone)]
pub struct Entry {
    pub build_id: String,
    /// `elf`, `debug`, `kallsyms`, `vmlinux` or `jit`.
    pub kind: &'static str,
    pub path: String,
    pub size: u64,
    pub kept: u64,
}

/// What was archived.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub recording: u64,
    pub entries: Vec<Entry>,
    /// Files the samples touched that could not be archived, and why.
    pub missing: Vec<String>,
    pub archive: u64,
}

impl Summary {
    /// The lines `analyze archive` prints.
    pub fn to_text(&self, out: &Path) -> String {
        let mb = |b: u64| b as f64 / 1e6;
        let mut s = String::new();
        let elf: u64 = self
            .entries
            .iter()
            .filter(|e| e.kind == "elf")
            .map(|e| e.size)
            .sum();
        for e in &self.entries {
            s += &format!(
                "  {:<8} {:>9.2} MB, kept {:>9.2} MB  {} ({})\n",
                e.kind,
                mb(e.size),
                mb(e.kept),
                e.path,
                e.build_id
            );
        }
        for m in &self.missing {
            s += &format!("  missing: {m}\n");
        }
        let size: u64 = self.entries.iter().map(|e| e.size).sum();
        let kept: u64 = self.entries.iter().map(|e| e.kept).sum();
        s += &format!(
            "wrote {}: {:.2} MB; the recording {:.2} MB and {} files of {:.2} MB, of which \
             {:.2} MB kept ({:.2} MB of unused sections and code left out); {:.1}% of the \
             recording plus its ELF files ({:.2} MB)\n",
            out.display(),
            mb(self.archive),
            mb(self.recording),
            self.entries.len(),
            mb(size),
            mb(kept),
            mb(size - kept),
            100.0 * self.archive as f64 / (self.recording + elf).max(1) as f64,
            mb(self.recording + elf),
        );
        s
    }
}

/// A tar of files and links, compressed with zstd as it is written.
struct Writer {
    tar: tar::Builder<zstd::Encoder<'static, std::fs::File>>,
}

impl Writer {
    fn create(path: &Path) -> Result<Writer, String> {
        use std::os::unix::fs::OpenOptionsExt;
        let at = |e: std::io::Error| format!("{}: {e}", path.display());
        // A recording holds memory contents (stack copies): 0600, as record writes it.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(at)?;
        let mut encoder = zstd::Encoder::new(file, 6).map_err(at)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let _ = encoder.multithread(threads);
        let _ = encoder.long_distance_matching(true);
        Ok(Writer {
            tar: tar::Builder::new(encoder),
        })
    }

    fn file(&mut self, name: &str, bytes: &[u8]) -> Result<(), String> {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        self.tar
            .append_data(&mut h, name, bytes)
            .map_err(|e| format!("{name}: {e}"))
    }

    fn link(&mut self, name: &str, target: &str) -> Result<(), String> {
        let mut h = tar::Header::new_gnu();
        h.set_size(0);
        h.set_mode(0o777);
        h.set_entry_type(tar::EntryType::Symlink);
        self.tar
            .append_link(&mut h, name, target)
            .map_err(|e| format!("{name}: {e}"))
    }

    fn finish(self) -> Result<(), String> {
        let encoder = self.tar.into_inner().map_err(|e| e.to_string())?;
        let mut file = encoder.finish().map_err(|e| e.to_string())?;
        file.flush().map_err(|e| e.to_string())
    }
}

/// Writes the archive of the recording `opened` to `output`.
pub fn write(opened: Input, output: &Path, loader: &Loader) -> Result<Summary, String> {
    let recording_bytes = opened.reader.input();
    let rec =
        crate::read::read_with(opened.reader, true, &mut |_| {}).map_err(|e| e.to_string())?;
    let options = Options {
        event: EventSel::All,
        inline: false,
        lines: false,
        ..Default::default()
    };
    let resolved = pipeline::resolve(&rec, &options, loader).map_err(|e| e.to_string())?;

    // The functions each file's frames are in.
    let files = resolved.resolver.files();
    let mut functions: Vec<Vec<(u64, u64)>> = vec![Vec::new(); files.len()];
    for &(f, lookup) in resolved.keys.iter().flatten().flatten() {
        if let Some(Source::Elf { elf, debug }) = &files[f as usize].source {
            if let Some((_, start, end)) =
                crate::symbolize::function_at(elf, debug.as_deref(), lookup.call_site())
            {
                functions[f as usize].push((start, end));
            }
        }
    }

    let mut summary = Summary {
        recording: recording_bytes.len() as u64,
        ..Default::default()
    };
    let mut w = Writer::create(output)?;
    w.file(PERF_DATA, &recording_bytes)?;
    for (f, file) in files.iter().enumerate() {
        let (elf, debug) = match &file.source {
            Some(Source::Elf { elf, debug }) => (elf, debug),
            Some(Source::Jit(map)) => {
                // JIT code's names, at their own path (a perf map or a jitdump file).
                let path = map.path.to_string_lossy();
                match std::fs::read(&map.path) {
                    Ok(bytes) => {
                        w.file(path.trim_start_matches('/'), &bytes)?;
                        summary.entries.push(Entry {
                            build_id: "-".into(),
                            kind: "jit",
                            path: path.into_owned(),
                            size: bytes.len() as u64,
                            kept: bytes.len() as u64,
                        });
                    }
                    Err(e) => summary.missing.push(format!("{path}: {e}")),
                }
                continue;
            }
            None => {
                summary
                    .missing
                    .push(format!("{}: not found here", file.dso));
                continue;
            }
        };
        let Some(id) = elf.build_id_hex() else {
            summary
                .missing
                .push(format!("{}: no build id, cannot be told apart", file.dso));
            continue;
        };
        let fs = &mut functions[f];
        fs.sort_unstable();
        fs.dedup();
        let dir = cache_dir(&file.dso, &id);
        // The binary, and its separate debug file where there is one.
        let parts = std::iter::once(("elf", &**elf, &file.dso))
            .chain(debug.as_deref().map(|d| ("debug", d, &d.name)));
        for (kind, part, path) in parts {
            let (bytes, kept) = reduce(part, fs);
            w.file(&format!("{dir}/{kind}"), &bytes)?;
            summary.entries.push(Entry {
                build_id: id.clone(),
                kind,
                path: path.clone(),
                size: part.bytes.len() as u64,
                kept,
            });
        }
        let (link, target) = build_id_link(&file.dso, &id);
        w.link(&link, &target)?;
    }

    // The kernel's symbols, when the recording's kernel is the one they describe.
    let has_kernel_frames = rec.samples.iter().any(|s| !s.kernel.is_empty());
    if has_kernel_frames {
        match kallsyms_text(&rec, loader) {
            Ok((id, text)) => {
                let full = text.len() as u64;
                let text = kallsyms_subset(&text, &rec);
                let dir = cache_dir("[kernel.kallsyms]", &id);
                w.file(&format!("{dir}/kallsyms"), &text)?;
                let (link, target) = build_id_link("[kernel.kallsyms]", &id);
                w.link(&link, &target)?;
                summary.entries.push(Entry {
                    build_id: id,
                    kind: "kallsyms",
                    path: "[kernel.kallsyms]".into(),
                    size: full,
                    kept: text.len() as u64,
                });
            }
            Err(why) => summary.missing.push(format!("[kernel.kallsyms]: {why}")),
        }
        if let Some(Vmlinux {
            path,
            elf: vmlinux,
            functions,
        }) = vmlinux(&rec, loader)
        {
            let id = vmlinux.build_id_hex().unwrap_or_default();
            let (bytes, kept) = reduce(&vmlinux, &functions);
            w.file(
                &format!("{}/vmlinux", cache_dir("[kernel.kallsyms]", &id)),
                &bytes,
            )?;
            summary.entries.push(Entry {
                build_id: id,
                kind: "vmlinux",
                path,
                size: vmlinux.bytes.len() as u64,
                kept,
            });
        }
    }
    let mut manifest = String::from(
        "# bpfperf archive: build id, kind, size, bytes kept (the rest zeroed), original path\n",
    );
    for e in &summary.entries {
        manifest += &format!(
            "{}\t{}\t{}\t{}\t{}\n",
            e.build_id, e.kind, e.size, e.kept, e.path
        );
    }
    w.file(MANIFEST, manifest.as_bytes())?;
    w.finish()?;
    summary.archive = std::fs::metadata(output).map_or(0, |m| m.len());
    Ok(summary)
}
