//! The programs load in two objects side by side: verifying them is most of record's start-up
//! (about 50 of 100 ms at the defaults on one CPU), and the kernel verifies a privileged
//! loader's programs in parallel. The first object creates every map and loads its half; the
//! second reuses the first's maps (their descriptors, so both halves share them, globals
//! included) and loads the other half meanwhile, on another thread.

use std::os::fd::BorrowedFd;

use libbpf_rs::{libbpf_sys, AsRawLibbpf};

use crate::skel::OpenBpfperfSkel;
use crate::Error;

/// The half a program loads in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Half {
    /// Off-CPU time, block I/O, --follow's forks and requests, the network, the page cache:
    /// with the maps, which the first object creates meanwhile the second parses the kernel's
    /// BTF and relocates its programs by it (each object does, ~20 ms).
    First,
    /// Samples, major faults, traced events and probes.
    Second,
}

/// The concerns whose programs load in the second half, by their programs' names (each
/// concern's programs in one half: a concern attaches from one object).
const SECOND: [&str; 10] = [
    "on_cpu_sample",
    "on_major_fault",
    "on_fault_",
    "on_tracepoint",
    "on_uprobe",
    "on_uretprobe",
    "on_usdt",
    "on_kprobe",
    "on_kretprobe",
    "on_sys_",
];

/// The half program `name` loads in.
pub fn half_of(name: &str) -> Half {
    if SECOND.iter().any(|p| name.starts_with(p)) {
        Half::Second
    } else {
        Half::First
    }
}

/// Leaves in `open` only the programs of `half` to load (those the options load); returns
/// whether any of the other half's were to load.
pub fn keep(open: &mut OpenBpfperfSkel<'_>, half: Half) -> bool {
    use libbpf_rs::skel::OpenSkel;
    let mut other = false;
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        if half_of(&name) != half && prog.autoload() {
            prog.set_autoload(false);
            other = true;
        }
    }
    other
}

/// Creates the maps of `first` (and readies its programs to load): libbpf's prepare step,
/// the part of loading that comes before the programs.
pub fn create_maps(first: &mut OpenBpfperfSkel<'_>) -> Result<(), Error> {
    use libbpf_rs::skel::OpenSkel;
    let obj = first.open_object_mut().as_libbpf_object().as_ptr();
    // SAFETY: a valid, opened and not yet loaded object, ours alone.
    let err = unsafe { libbpf_sys::bpf_object__prepare(obj) };
    if err != 0 {
        return Err(Error::bpf("create BPF maps")(
            libbpf_rs::Error::from_raw_os_error(-err),
        ));
    }
    Ok(())
}

/// Points every map of `second` at the map of that name `first` created, so that the
/// second object creates none and both halves share them.
pub fn share_maps(
    first: &OpenBpfperfSkel<'_>,
    second: &mut OpenBpfperfSkel<'_>,
) -> Result<(), Error> {
    use libbpf_rs::skel::OpenSkel;
    let created: Vec<(String, i32)> = first
        .open_object()
        .maps()
        .map(|m| {
            // SAFETY: the map belongs to `first`, alive for this call.
            let fd = unsafe { libbpf_sys::bpf_map__fd(m.as_libbpf_object().as_ptr()) };
            (m.name().to_string_lossy().into_owned(), fd)
        })
        .collect();
    for mut map in second.open_object_mut().maps_mut() {
        let name = map.name().to_string_lossy().into_owned();
        let Some(&(_, fd)) = created.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        if fd < 0 {
            continue;
        }
        // SAFETY: `first` holds the descriptor open for as long as `second` is being loaded
        // (libbpf dups it for the map it reuses).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        map.reuse_fd(fd).map_err(Error::bpf("share the BPF maps"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_concern_loads_in_one_half() {
        // The programs each concern attaches, as programs::attach groups them.
        let second = [
            ["on_cpu_sample"].as_slice(),
            &["on_major_fault", "on_fault_user", "on_fault_kernel"],
            &[
                "on_tracepoint",
                "on_uprobe",
                "on_uretprobe",
                "on_usdt",
                "on_kprobe",
                "on_kretprobe",
                "on_sys_enter",
                "on_sys_exit",
            ],
        ];
        for name in second.iter().flat_map(|c| c.iter()) {
            assert_eq!(half_of(name), Half::Second, "{name}");
        }
        for name in [
            "on_switch",
            "on_waking",
            "on_block_start",
            "on_block_insert",
            "on_block_issue",
            "on_block_complete",
            "on_folio_dirtied",
            "on_fork",
            "on_exit",
            "on_sock_state",
            "on_cache_read",
            "on_request_enter",
            "on_tcp_sendmsg",
            "send_tails",
            "on_sockops",
        ] {
            assert_eq!(half_of(name), Half::First, "{name}");
        }
    }
}
