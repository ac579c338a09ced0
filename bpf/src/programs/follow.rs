//! follow.bpf.c: the processes followed (`pids`), grown by fork, shrunk at exit; the settings
//! every program shares.

use libbpf_rs::{Link, MapCore, MapFlags};

use super::attach_one;
use crate::skel::{BpfperfSkel, OpenBpfperfSkel};
use crate::{Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) {
    let rodata = super::rodata(open);
    rodata.system_wide = o.system_wide;
    // The process that loads the programs is never recorded: its own writes (the output
    // file) would feed back into what it records.
    rodata.self_tgid = std::process::id();
    rodata.stack_copy_bytes = o.stack_copy_bytes.min(crate::MAX_STACK_COPY);
}

pub fn attach(skel: &BpfperfSkel<'_>, links: &mut Vec<Link>) -> Result<(), Error> {
    attach_one(&skel.progs.on_fork, "attach sched_process_fork", links)?;
    attach_one(&skel.progs.on_exit, "attach sched_process_exit", links)
}

/// Follows process `pid` (its threads, and the children it forks from now on).
pub fn track(skel: &BpfperfSkel<'_>, pid: u32) -> Result<(), Error> {
    skel.maps
        .pids
        .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
        .map_err(Error::bpf("track pid"))
}
