//! The programs, one module per concern as in `src/bpf/`: each says which of its programs
//! load for the [`Options`], sizes its maps before load, and attaches what loaded. The
//! [`crate::Profiler`] runs them in order: open, [`configure`], load, [`attach`], and at its
//! end [`detach`].

pub mod blockio;
pub mod cache;
pub mod fault;
pub mod follow;
pub mod halves;
pub mod net;
pub mod offcpu;
pub mod probes;
pub mod python;
pub mod requests;
pub mod sampling;
pub mod unwind;

use libbpf_rs::Link;

use crate::skel::{BpfperfSkel, OpenBpfperfSkel};
use crate::{Error, Options};

/// Before load: each concern's settings, which programs load, map sizes. `cpu_slots` is the
/// highest online CPU + 1 (maps indexed by CPU number).
pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options, cpu_slots: u32) -> Result<(), Error> {
    follow::configure(open, o);
    unwind::configure(open, o)?;
    sampling::configure(open, o, cpu_slots)?;
    fault::configure(open, o);
    offcpu::configure(open, o, cpu_slots)?;
    blockio::configure(open, o)?;
    cache::configure(open, o)?;
    net::configure(open, o)?;
    probes::configure(open, o)?;
    requests::configure(open, o)?;
    Ok(())
}

/// The ring buffer's fill level at which programs wake the reader.
pub fn set_wakeup_bytes(open: &mut OpenBpfperfSkel<'_>, bytes: u64) {
    rodata(open).wakeup_bytes = bytes;
}

/// After load: attaches each concern's programs that loaded, from the object of its half
/// ([`halves`]; `second` is `None` where none of its half loads); sampling starts here.
pub fn attach(
    first: &BpfperfSkel<'_>,
    second: Option<&BpfperfSkel<'_>>,
    o: &Options,
    cpus: &[u32],
) -> Result<Vec<Link>, Error> {
    let mut links = Vec::new();
    let second = second.unwrap_or(first);
    follow::attach(first, &mut links)?;
    offcpu::attach(first, o, &mut links)?;
    cache::attach(first, o, &mut links)?;
    net::attach(first, o, &mut links)?;
    requests::attach(first, &mut links)?;
    blockio::attach(first, o, &mut links)?;
    probes::attach(second, o, &mut links)?;
    fault::attach(second, o, cpus, &mut links)?;
    sampling::attach(second, o, cpus, &mut links)?;
    Ok(links)
}

/// Detaches `links` (in the order they were attached). A program on a tracepoint through a
/// perf event (traced events) waits for two RCU grace periods as it is detached: the
/// program's from its perf event, which waits side by side share, then the tracepoint's own,
/// which the kernel does one at a time (under its event mutex). One link after another took
/// 76 ms a tracepoint: `record -e 'btrfs:*' -- true` (102 of them) 7.8 s, 6.6 of it ending;
/// side by side 5.2 s (perf record: 4.9 s). Those go side by side. A tp_btf program (a raw
/// tracepoint link) waits for a grace period only where it leaves another probe on its
/// tracepoint and was attached before it (the kernel then makes sure no CPU still calls the
/// old first probe with the new one's data): those go one after another, newest first, so
/// that none waits (`-e net`'s end: 25 -> ~8 ms; 9 ms a wait here).
pub fn detach(links: Vec<Link>) {
    /// Threads that detach at once (they wait, not run: more than the CPUs).
    const THREADS: usize = 64;
    let (raw, mut links): (Vec<Link>, Vec<Link>) = links.into_iter().partition(is_raw_tracepoint);
    for link in raw.into_iter().rev() {
        drop(link);
    }
    let per_thread = links.len().div_ceil(THREADS);
    std::thread::scope(|scope| {
        while !links.is_empty() {
            let chunk: Vec<Link> = links.drain(..per_thread.min(links.len())).collect();
            // No thread to be had (a process at its limit): the chunk drops here, with the
            // closure that failed to start.
            let _ = std::thread::Builder::new()
                .name("detach".into())
                .stack_size(64 << 10)
                .spawn_scoped(scope, move || drop(chunk));
        }
    });
}

/// Whether `link` is a raw tracepoint's (tp_btf), as the kernel says.
fn is_raw_tracepoint(link: &Link) -> bool {
    use std::os::fd::{AsFd, AsRawFd};
    let mut info = libbpf_rs::libbpf_sys::bpf_link_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a valid out buffer of `len` bytes; the descriptor is the link's own.
    let r = unsafe {
        libbpf_rs::libbpf_sys::bpf_link_get_info_by_fd(
            link.as_fd().as_raw_fd(),
            &mut info,
            &mut len,
        )
    };
    r == 0 && info.type_ == libbpf_rs::libbpf_sys::BPF_LINK_TYPE_RAW_TRACEPOINT
}

/// Every program, by name, with the concern's name for it (for run-time statistics).
pub fn all<'s>(skel: &'s BpfperfSkel<'_>) -> Vec<(&'static str, &'s libbpf_rs::ProgramMut<'s>)> {
    let p = &skel.progs;
    vec![
        ("on_cpu_sample", &p.on_cpu_sample),
        ("on_major_fault", &p.on_major_fault),
        ("on_fault_user", &p.on_fault_user),
        ("on_fault_kernel", &p.on_fault_kernel),
        ("on_switch", &p.on_switch),
        ("on_waking", &p.on_waking),
        ("on_block_start", &p.on_block_start),
        ("on_block_insert", &p.on_block_insert),
        ("on_block_issue", &p.on_block_issue),
        ("on_block_complete", &p.on_block_complete),
        ("on_folio_dirtied", &p.on_folio_dirtied),
        ("on_cache_read", &p.on_cache_read),
        ("on_cache_fault", &p.on_cache_fault),
        ("on_cache_add", &p.on_cache_add),
        ("on_cache_dirty", &p.on_cache_dirty),
        ("on_sock_state", &p.on_sock_state),
        ("on_tcp_retransmit", &p.on_tcp_retransmit),
        ("on_tcp_send_reset", &p.on_tcp_send_reset),
        ("on_tcp_receive_reset", &p.on_tcp_receive_reset),
        ("on_kfree_skb", &p.on_kfree_skb),
        ("on_sock_send", &p.on_sock_send),
        ("on_sock_recv", &p.on_sock_recv),
        ("on_tcp_sendmsg", &p.on_tcp_sendmsg),
        ("on_net_dev_queue", &p.on_net_dev_queue),
        ("on_net_dev_start_xmit", &p.on_net_dev_start_xmit),
        ("on_net_dev_xmit", &p.on_net_dev_xmit),
        ("on_sockops", &p.on_sockops),
        ("on_stamped_send", &p.on_stamped_send),
        ("on_send_close", &p.on_send_close),
        ("on_tracepoint", &p.on_tracepoint),
        ("on_uprobe", &p.on_uprobe),
        ("on_uretprobe", &p.on_uretprobe),
        ("on_usdt", &p.on_usdt),
        ("on_kprobe", &p.on_kprobe),
        ("on_kretprobe", &p.on_kretprobe),
        ("on_sys_enter", &p.on_sys_enter),
        ("on_sys_exit", &p.on_sys_exit),
        ("on_request_enter", &p.on_request_enter),
        ("on_request_exit", &p.on_request_exit),
        ("on_request_dirty", &p.on_request_dirty),
        ("on_request_start", &p.on_request_start),
        ("on_request_issue", &p.on_request_issue),
        ("on_request_complete", &p.on_request_complete),
        ("on_request_tcp", &p.on_request_tcp),
        ("on_request_queue", &p.on_request_queue),
        ("on_request_xmit", &p.on_request_xmit),
        ("on_request_sent", &p.on_request_sent),
        ("on_fork", &p.on_fork),
        ("on_exit", &p.on_exit),
    ]
}

/// Whether the running kernel's BTF names `name` (a function, a tracepoint's
/// `btf_trace_NAME` type): a program attached to what it lacks would fail to load.
pub(crate) fn kernel_has_function(name: &str) -> bool {
    let Some(btf) = kernel_btf() else {
        return false;
    };
    let needle = [b"\0", name.as_bytes(), b"\0"].concat();
    memchr::memmem::find(btf, &needle).is_some()
}

/// The kernel's BTF (5.5 MB), found once a run: mapped where the kernel lets it be (6.16
/// on), else read, which sysfs answers 4 KiB a call (1,350 calls, ~6 ms here).
fn kernel_btf() -> Option<&'static [u8]> {
    static BTF: std::sync::OnceLock<Option<Box<dyn std::ops::Deref<Target = [u8]> + Send + Sync>>> =
        std::sync::OnceLock::new();
    BTF.get_or_init(|| {
        let path = "/sys/kernel/btf/vmlinux";
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: the kernel's BTF is read-only and does not change while it runs. (A
        // private mapping: the kernel refuses a shared one.)
        if let Ok(map) = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) } {
            return Some(Box::new(map) as Box<dyn std::ops::Deref<Target = [u8]> + Send + Sync>);
        }
        std::fs::read(path).ok().map(|b| Box::new(b) as Box<_>)
    })
    .as_deref()
    .map(|b| &**b)
}

/// Makes `maps` one entry each: a feature that is off keeps its maps (its programs refer to
/// them) but not their room; a preallocated hash of 65,536 entries takes ~2 ms to create.
fn unused<'a, 'b: 'a>(
    maps: impl IntoIterator<Item = &'a mut libbpf_rs::OpenMapMut<'b>>,
    step: &'static str,
) -> Result<(), Error> {
    for map in maps {
        map.set_max_entries(1).map_err(Error::bpf(step))?;
    }
    Ok(())
}

/// The settings written before load (`const volatile` globals of every program file).
fn rodata<'a>(open: &'a mut OpenBpfperfSkel<'_>) -> &'a mut crate::skel::types::rodata {
    open.maps
        .rodata_data
        .as_deref_mut()
        .expect("rodata is mapped")
}

/// A counter the programs add to atomically in `.bss` (0 if `.bss` is not mapped).
fn bss_counter(
    skel: &BpfperfSkel<'_>,
    field: impl FnOnce(&crate::skel::types::bss) -> &u64,
) -> u64 {
    skel.maps
        .bss_data
        .as_deref()
        // SAFETY: the .bss map is mapped for the skeleton's life; the field is an aligned u64.
        .map(|bss| unsafe { std::ptr::read_volatile(field(bss)) })
        .unwrap_or(0)
}

/// Sizes a pair of aggregation maps (counts and stacks, each flipped between two halves):
/// `entries` when counting in the kernel (`None`: bpfperf.h's sizes), else one entry each
/// (they are not used, and take no room).
fn size_aggregation_maps(
    maps: [&mut libbpf_rs::OpenMapMut<'_>; 4],
    counting: bool,
    entries: Option<u32>,
    step: &'static str,
) -> Result<(), Error> {
    let Some(n) = (if counting { entries } else { Some(1) }) else {
        return Ok(());
    };
    for map in maps {
        map.set_max_entries(n.max(1)).map_err(Error::bpf(step))?;
    }
    Ok(())
}

/// Attaches `prog` (a perf_event program) to an event on each of `cpus`, opened by `open`;
/// each link owns its event and closes it when detached.
fn attach_per_cpu<'c>(
    prog: &libbpf_rs::ProgramMut<'_>,
    cpus: impl IntoIterator<Item = &'c u32>,
    open: impl Fn(u32) -> Result<std::os::fd::OwnedFd, Error>,
    step: &'static str,
    links: &mut Vec<Link>,
) -> Result<(), Error> {
    use std::os::fd::{AsRawFd, IntoRawFd};
    for &cpu in cpus {
        let fd = open(cpu)?;
        links.push(
            prog.attach_perf_event(fd.as_raw_fd())
                .map_err(Error::bpf(step))?,
        );
        let _ = fd.into_raw_fd();
    }
    Ok(())
}

/// Attaches `prog` (a tracepoint program), naming the step in the error.
fn attach_one(
    prog: &libbpf_rs::ProgramMut<'_>,
    step: &'static str,
    links: &mut Vec<Link>,
) -> Result<(), Error> {
    links.push(prog.attach().map_err(Error::bpf(step))?);
    Ok(())
}
