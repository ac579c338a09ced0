//! The kernel's frames: its symbols, if the recording's kernel is the one they are of.

use std::sync::Arc;

use crate::files::{self, Kallsyms, KallsymsOrigin, Loader};
use crate::read::Recording;
use crate::symbolize::{self, AddrInfo};

/// Kernel symbols, if the recording's kernel is the one they are of (the running one, or the
/// archive's), and the shift from recorded
/// to running addresses (KASLR of another boot). The kernel is told by its build id where the
/// file gives one, else by its release (pipe-mode and older files list no build ids): names
/// from another kernel's symbol table would be wrong names, so its frames stay `[unknown]`.
fn kernel_symbols(
    rec: &Recording,
    loader: &Loader,
) -> (Option<Arc<Kallsyms>>, u64, Option<String>) {
    let other_kernel = |why: String| {
        let warning = format!(
            "the recording's kernel is not the running one ({why}); kernel frames are [unknown]"
        );
        (None, 0, Some(warning))
    };
    let recorded = rec.build_ids.get("[kernel.kallsyms]");
    match loader.kallsyms_origin() {
        KallsymsOrigin::Running => {
            if let (Some(want), Some(have)) = (recorded, files::running_kernel::build_id()) {
                if !files::build_ids_match(want, &have) {
                    return other_kernel("build ids differ".into());
                }
            } else if let (Some(theirs), Some(ours)) =
                (&rec.os_release, files::running_kernel::release())
            {
                if *theirs != ours {
                    return other_kernel(format!("it ran {theirs}, this machine {ours}"));
                }
            }
        }
        KallsymsOrigin::Archive(id) => {
            if recorded.is_some_and(|want| !files::hex(want).starts_with(&id)) {
                return other_kernel("the archive's kernel symbols are another kernel's".into());
            }
        }
        // The user named the file: theirs to choose.
        KallsymsOrigin::File(_) => {}
    }
    let Some(k) = loader.kallsyms() else {
        return (None, 0, None);
    };
    let shift = k.shift(rec.kernel_mapping().map(|m| (m.path.as_str(), m.pgoff)));
    (Some(k), shift, None)
}

/// The kernel's frames at `addrs` (module names for addresses in modules), and why they are
/// `[unknown]` if the recording's kernel is not this one.
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
    let infos = addrs
        .iter()
        .map(|&a| {
            let mut i = symbolize::symbolize_kernel(k.as_deref(), a.wrapping_add(shift));
            i.start = i.start.map(|s| s.wrapping_sub(shift));
            if let Some(module) = modules.name_of(a) {
                for f in &mut i.frames {
                    module.clone_into(&mut f.dso);
                }
            }
            i
        })
        .collect();
    (infos, warning)
}
