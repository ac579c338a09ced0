//! perf_event_open for the events BPF programs attach to, and the online CPU list.

use std::os::fd::{FromRawFd, OwnedFd};

use perf_event_open_sys::bindings;

use crate::Error;

/// The online CPUs, from /sys/devices/system/cpu/online ("0-3,5").
pub fn online_cpus() -> Result<Vec<u32>, Error> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u32, u32) = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
        cpus.extend(a..=b);
    }
    Ok(cpus)
}

/// A cpu-clock event on `cpu` for every process, sampling at `frequency` Hz; the samples go to
/// the attached BPF program only (no ring buffer is mapped).
pub fn open_cpu_clock(cpu: u32, frequency: u64) -> Result<OwnedFd, Error> {
    let mut attr = bindings::perf_event_attr {
        size: std::mem::size_of::<bindings::perf_event_attr>() as u32,
        type_: bindings::PERF_TYPE_SOFTWARE,
        config: bindings::PERF_COUNT_SW_CPU_CLOCK as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_freq = frequency;
    attr.set_freq(1);
    open(&mut attr, -1, cpu, "a cpu-clock event")
}

/// The major-faults software event on `cpu` for every process, one sample per fault (the
/// kernel raises it where it counts the fault in getrusage's ru_majflt); the samples go to
/// the attached BPF program only.
pub fn open_major_faults(cpu: u32) -> Result<OwnedFd, Error> {
    let mut attr = bindings::perf_event_attr {
        size: std::mem::size_of::<bindings::perf_event_attr>() as u32,
        type_: bindings::PERF_TYPE_SOFTWARE,
        config: bindings::PERF_COUNT_SW_PAGE_FAULTS_MAJ as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    open(&mut attr, -1, cpu, "a major-faults event")
}

pub(crate) fn open(
    attr: &mut bindings::perf_event_attr,
    pid: i32,
    cpu: u32,
    what: &'static str,
) -> Result<OwnedFd, Error> {
    // SAFETY: attr is a valid, initialized perf_event_attr that lives across the call.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            attr,
            pid,
            cpu as i32,
            -1,
            bindings::PERF_FLAG_FD_CLOEXEC as u64,
        )
    };
    if fd < 0 {
        let source = std::io::Error::last_os_error();
        return Err(match source.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => Error::NotPermitted,
            _ => Error::PerfEventOpen { what, cpu, source },
        });
    }
    // SAFETY: fd is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
