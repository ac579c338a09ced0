//! The kernel's part of an archive: the kallsyms lines its frames need, and its vmlinux with
//! debug info where one is found.

use std::path::{Path, PathBuf};

use crate::files::Kallsyms;
use crate::files::{self, ElfData, Loader};

/// The lines of `kallsyms` (its text) that the recording's kernel frames need, chosen by the
/// table the lookups use ([`Kallsyms::subset_text`]), so that the archive's lines name every
/// frame as the whole file does (choosing among the raw lines, BPF programs and non-text
/// symbols the lookups skip made a frame in BPF code `_etext` instead of `_einittext`).
pub(super) fn kallsyms_subset(kallsyms: &[u8], rec: &crate::read::Recording) -> Vec<u8> {
    let Some(k) = Kallsyms::parse(&String::from_utf8_lossy(kallsyms)) else {
        return Vec::new();
    };
    let shift = k.shift(rec.kernel_mapping().map(|m| (m.path.as_str(), m.pgoff)));
    let addrs = rec
        .samples
        .iter()
        .flat_map(|s| s.kernel.iter().map(|&a| a.wrapping_add(shift)));
    k.subset_text(addrs).into_bytes()
}

/// A vmlinux with debug info, and the functions of it the kernel frames are in.
pub(super) struct Vmlinux {
    pub path: String,
    pub elf: std::sync::Arc<ElfData>,
    pub functions: Vec<(u64, u64)>,
}

/// The recording kernel's vmlinux, if one of its usual places has it (with the recording's
/// kernel build id).
pub(super) fn vmlinux(rec: &crate::read::Recording, loader: &Loader) -> Option<Vmlinux> {
    let release = rec.os_release.clone()?;
    let id = rec.build_ids.get("[kernel.kallsyms]")?;
    let candidates = [
        format!("/usr/lib/debug/boot/vmlinux-{release}"),
        format!("/usr/lib/debug/lib/modules/{release}/vmlinux"),
        format!("/boot/vmlinux-{release}"),
        format!("/lib/modules/{release}/build/vmlinux"),
    ];
    let (path, elf) = candidates.iter().find_map(|p| {
        if !Path::new(p).is_file() {
            return None;
        }
        Some((p.clone(), loader.elf(p, Some(id))?))
    })?;
    // Recorded addresses to the file's: the recording names `_text`'s address as the kernel
    // mapping's page offset.
    let text_in_file = {
        let obj = object::File::parse(&*elf.bytes).ok()?;
        object::Object::symbols(&obj)
            .find(|s| object::ObjectSymbol::name(s) == Ok("_text"))
            .map(|s| object::ObjectSymbol::address(&s))?
    };
    let shift = rec
        .kernel_mapping()
        .map_or(0, |m| m.pgoff.wrapping_sub(text_in_file));
    let mut functions: Vec<(u64, u64)> = rec
        .samples
        .iter()
        .flat_map(|s| s.kernel.iter())
        .filter_map(|&a| {
            let (_, start, end) = crate::symbolize::function_at(&elf, None, a.wrapping_sub(shift))?;
            Some((start, end))
        })
        .collect();
    functions.sort_unstable();
    functions.dedup();
    Some(Vmlinux {
        path,
        elf,
        functions,
    })
}

/// The kernel symbols to archive: the build id (hex) they are filed under, and their text.
pub(super) fn kallsyms_text(
    rec: &crate::read::Recording,
    loader: &Loader,
) -> Result<(String, Vec<u8>), String> {
    if let Some((id, text)) = loader.sources.archive.as_ref().and_then(|a| a.kallsyms()) {
        return Ok((id, text.to_vec()));
    }
    let recorded = rec
        .build_ids
        .get("[kernel.kallsyms]")
        .map(|id| files::hex(id));
    let running = files::running_kernel::build_id().map(|id| files::hex(&id));
    let path: PathBuf = match &loader.sources.kallsyms {
        Some(p) => p.clone(),
        None => {
            if let (Some(r), Some(here)) = (&recorded, &running) {
                if !r.starts_with(here.as_str()) {
                    return Err("recorded on another kernel than this one; not archived".into());
                }
            }
            PathBuf::from("/proc/kallsyms")
        }
    };
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let id = recorded
        .map(|r| r.trim_end_matches("00000000").to_string())
        .or(running)
        .unwrap_or_else(|| "0".repeat(40));
    Ok((id, text))
}
