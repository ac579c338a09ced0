//! offcpu.bpf.c: off-CPU intervals (sched_switch), their run-queue part and wakers
//! (sched_waking), and whether they waited in a page fault.

use libbpf_rs::Link;

use super::attach_one;
use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::{Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options, cpu_slots: u32) -> Result<(), Error> {
    let on = o.off_cpu_min_ns.is_some();
    let rodata = super::rodata(open);
    rodata.offcpu_enabled = on;
    rodata.offcpu_min_ns = o.off_cpu_min_ns.unwrap_or(0);
    rodata.wakeup_enabled = on && o.wakeups;
    rodata.offcpu_unseen_every = o.offcpu_unseen_every;
    open.progs.on_switch.set_autoload(on);
    // sched_waking also starts the run-queue part of an off-CPU interval.
    open.progs.on_waking.set_autoload(on);
    let slots = if o.stack_copy_bytes > 0 { cpu_slots } else { 1 };
    open.maps
        .offcpu_copy_scratch
        .set_max_entries(slots)
        .map_err(Error::bpf("size off-CPU stack copy buffers"))
}

pub fn attach(skel: &BpfperfSkel<'_>, o: &Options, links: &mut Vec<Link>) -> Result<(), Error> {
    if o.off_cpu_min_ns.is_some() {
        attach_one(&skel.progs.on_switch, "attach sched_switch", links)?;
        attach_one(&skel.progs.on_waking, "attach sched_waking", links)?;
    }
    Ok(())
}

/// Intervals the programs could not end (offcpu_ended_unseen): no switch back, no wakeup.
pub fn unseen_ends(skel: &BpfperfSkel<'_>) -> u64 {
    super::bss_counter(skel, |bss| &bss.offcpu_unseen_ends)
}

/// Off-CPU intervals from now on tell whether the thread blocked inside a socket call:
/// whether one of `fns` (start, end: sk_wait_data... from kallsyms) is near the top of its
/// kernel stack. At most `SOCK_WAIT_FNS` are looked for.
pub fn look_for_socket_waits(skel: &BpfperfSkel<'_>, fns: &[(u64, u64)]) {
    if let Some(bss) = skel.maps.bss_data.as_deref() {
        let bss = bss as *const types::bss as *mut types::bss;
        // SAFETY: as in look_for_faults; start[0] last: the programs look only once it is set.
        unsafe {
            let n = fns.len().min((*bss).sock_fn_start.len());
            for (i, &(start, end)) in fns[..n].iter().enumerate().rev() {
                std::ptr::write_volatile(&mut (*bss).sock_fn_end[i], end);
                std::ptr::write_volatile(&mut (*bss).sock_fn_start[i], start);
            }
        }
    }
}

/// Off-CPU intervals from now on tell whether the thread blocked inside a page fault:
/// whether `start..end` (`handle_mm_fault`, from kallsyms) is on its kernel stack.
pub fn look_for_faults(skel: &BpfperfSkel<'_>, start: u64, end: u64) {
    if let Some(bss) = skel.maps.bss_data.as_deref() {
        // The programs read these as they run: end first, so that they never see a start
        // without its end.
        let bss = bss as *const types::bss as *mut types::bss;
        // SAFETY: the .bss map is mapped writable for the skeleton's life; single aligned
        // u64 stores, read by the programs only.
        unsafe {
            std::ptr::write_volatile(&mut (*bss).fault_fn_end, end);
            std::ptr::write_volatile(&mut (*bss).fault_fn_start, start);
        }
    }
}
