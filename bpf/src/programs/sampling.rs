//! sampling.bpf.c: on-CPU samples from one cpu-clock event per CPU.

use std::os::fd::{AsRawFd, IntoRawFd};

use libbpf_rs::Link;

use crate::skel::{BpfperfSkel, OpenBpfperfSkel};
use crate::{perf_event, Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options, cpu_slots: u32) -> Result<(), Error> {
    open.progs.on_cpu_sample.set_autoload(o.sampling);
    // DWARF mode assembles each sample in a buffer per CPU.
    let slots = if o.stack_copy_bytes > 0 { cpu_slots } else { 1 };
    open.maps
        .sample_scratch
        .set_max_entries(slots)
        .map_err(Error::bpf("size stack copy buffers"))
}

/// Opens cpu-clock on each sampled CPU with the program attached: sampling starts.
pub fn attach(
    skel: &BpfperfSkel<'_>,
    o: &Options,
    cpus: &[u32],
    links: &mut Vec<Link>,
) -> Result<(), Error> {
    let sampled = cpus
        .iter()
        .filter(|c| o.sampling && o.cpus.as_ref().is_none_or(|l| l.contains(c)));
    for &cpu in sampled {
        let fd = perf_event::open_cpu_clock(cpu, o.frequency)?;
        links.push(
            skel.progs
                .on_cpu_sample
                .attach_perf_event(fd.as_raw_fd())
                .map_err(Error::bpf("attach to cpu-clock"))?,
        );
        // The link owns the event now and closes it when detached.
        let _ = fd.into_raw_fd();
    }
    Ok(())
}
