//! The kernel's frames: its symbols, if the recording's kernel is the one they are of; BPF
//! programs' code by the recording's KSYMBOL records.

use std::sync::Arc;

use crate::files::{self, Kallsyms, KallsymsOrigin, Loader};
use crate::read::Recording;
use crate::symbolize::{self, AddrInfo, FrameInfo};

/// Kernel symbols, if the recording's kernel is the one they are of (the running one, or the
/// archive's), and the shift from recorded
/// to running addresses (KASLR of another boot). The kernel is told by its build id where the
/// file gives one, else by its release (pipe-mode and older files list no build ids): names
/// from another kernel's symbol table would be wrong names, so its frames stay `[unknown]`.
fn kernel_symbols(
    rec: &Recording,
    loader: &Loader,
) -> (Option<Arc<Kallsyms>>, u64, Option<String>) {
    let recorded = rec.build_ids.get("[kernel.kallsyms]");
    if let Some(why) = loader.other_kernel(recorded.map(Vec::as_slice), rec.os_release.as_deref()) {
        let warning = format!(
            "the recording's kernel is not the running one ({why}); kernel frames are [unknown]"
        );
        return (None, 0, Some(warning));
    }
    let Some(k) = loader.kallsyms() else {
        return (None, 0, None);
    };
    let shift = k.shift(rec.kernel_mapping().map(|m| (m.path.as_str(), m.pgoff)));
    (Some(k), shift, None)
}

/// Names kernel addresses as its frames are named (BPF programs by the recording's KSYMBOL
/// records, the rest by the recording's kernel's symbols, none for another kernel's), for a
/// traced event's fields that hold code addresses (`%pS`: kfree_skb's location): the
/// function and its start. The kernel's symbols are read at the first address asked for.
pub fn kernel_namer<'a>(
    rec: &'a Recording,
    loader: &'a Loader,
) -> impl Fn(u64) -> Option<(String, u64)> + 'a {
    let symbols = std::sync::OnceLock::new();
    let ksymbols = rec.ksymbol_table();
    move |addr| {
        if let Some(ks) = ksymbols.lookup(addr) {
            return Some((ks.name.clone(), ks.start));
        }
        let (k, shift, _) = symbols.get_or_init(|| kernel_symbols(rec, loader));
        let (name, start) = k.as_deref()?.lookup(addr.wrapping_add(*shift))?;
        Some((name.to_string(), start.wrapping_sub(*shift)))
    }
}

/// Whether the recording was made during this boot of this kernel: then the BPF programs
/// the running kernel lists are (where still loaded) those it ran.
fn of_this_boot(rec: &Recording, loader: &Loader, kernel_known: bool, shift: u64) -> bool {
    kernel_known
        && shift == 0
        && loader.kallsyms_origin() == KallsymsOrigin::Running
        && matches!(
            (rec.modified, files::running_kernel::boot_time()),
            (Some(written), Some(booted)) if written >= booted
        )
}

/// A frame named `name` from `start`, in the file perf names after it (as it names frames in
/// BPF programs: `bpf_prog_<tag>_<name>` both).
fn named(name: &str, start: u64) -> AddrInfo {
    AddrInfo {
        frames: vec![FrameInfo::new(name, name)],
        start: Some(start),
    }
}

/// The kernel's frames at `addrs` (module names for addresses in modules), and why they are
/// `[unknown]` if the recording's kernel is not this one. Code the recording's KSYMBOL
/// records name (BPF programs) is named so, whatever the kernel; in a recording without
/// them, made during this boot, by the BPF programs the running kernel lists.
pub(super) fn symbolize_kernel(
    rec: &Recording,
    addrs: &[u64],
    loader: &Loader,
) -> (Vec<AddrInfo>, Option<String>) {
    if addrs.is_empty() {
        return (Vec::new(), None);
    }
    let (k, shift, warning) = kernel_symbols(rec, loader);
    let modules = rec.kernel_modules();
    let ksymbols = rec.ksymbol_table();
    let kernel_text = rec.kernel_mapping().map(|m| (m.start, m.end));
    let running_bpf = std::sync::OnceLock::new();
    let running_bpf = || {
        running_bpf
            .get_or_init(|| {
                (ksymbols.is_empty() && of_this_boot(rec, loader, k.is_some(), shift))
                    .then(|| loader.running_bpf_programs())
                    .flatten()
            })
            .as_deref()
    };
    let infos = addrs
        .iter()
        .map(|&a| {
            if let Some(ks) = ksymbols.lookup(a) {
                return named(&ks.name, ks.start);
            }
            let mut i = symbolize::symbolize_kernel(k.as_deref(), a.wrapping_add(shift));
            i.start = i.start.map(|s| s.wrapping_sub(shift));
            match modules.name_of(a) {
                Some(module) => {
                    for f in &mut i.frames {
                        module.clone_into(&mut f.dso);
                    }
                }
                None if i.start.is_none() => {
                    if let Some((name, start)) = running_bpf().and_then(|b| b.lookup(a)) {
                        return named(name, start);
                    }
                    // Outside the kernel's mapping too: in no file, as perf says.
                    if kernel_text.is_some_and(|(start, end)| !(start..end).contains(&a)) {
                        for f in &mut i.frames {
                            crate::UNKNOWN.clone_into(&mut f.dso);
                        }
                    }
                }
                None => {}
            }
            i
        })
        .collect();
    (infos, warning)
}
