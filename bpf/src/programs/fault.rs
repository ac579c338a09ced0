//! fault.bpf.c: every major page fault of the followed threads, timed from the exception's
//! entry to the kernel's major-faults event at its end.

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
    super::attach_per_cpu(
        &p.on_major_fault,
        cpus,
        perf_event::open_major_faults,
        "attach to major-faults",
        links,
    )
}
