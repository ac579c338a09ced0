//! fault.bpf.c: every major page fault of the followed threads, timed from the exception's
//! entry to the kernel's major-faults event at its end.

use std::os::fd::{AsRawFd, IntoRawFd};

use libbpf_rs::Link;

use super::attach_one;
use crate::skel::{BpfperfSkel, OpenBpfperfSkel};
use crate::{perf_event, Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) {
    let p = &mut open.progs;
    p.on_fault_user.set_autoload(o.faults);
    p.on_fault_kernel.set_autoload(o.faults);
    p.on_major_fault.set_autoload(o.faults);
}

/// Notes each fault's start, then opens major-faults on every CPU with the program attached.
pub fn attach(
    skel: &BpfperfSkel<'_>,
    o: &Options,
    cpus: &[u32],
    links: &mut Vec<Link>,
) -> Result<(), Error> {
    if !o.faults {
        return Ok(());
    }
    let p = &skel.progs;
    attach_one(&p.on_fault_user, "attach exceptions:page_fault_user", links)?;
    attach_one(
        &p.on_fault_kernel,
        "attach exceptions:page_fault_kernel",
        links,
    )?;
    for &cpu in cpus {
        let fd = perf_event::open_major_faults(cpu)?;
        links.push(
            p.on_major_fault
                .attach_perf_event(fd.as_raw_fd())
                .map_err(Error::bpf("attach to major-faults"))?,
        );
        // The link owns the event now and closes it when detached.
        let _ = fd.into_raw_fd();
    }
    Ok(())
}
