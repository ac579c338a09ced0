//! net.bpf.c: TCP connections (inet_sock_set_state), retransmits, resets and drops charged
//! to the socket's owner, socket waits named by peer; netsend.bpf.c and
//! netstamp.bpf.c: sends followed to the device, skb by skb or timed per call.

use libbpf_rs::Link;

use super::attach_one;
use crate::skel::{BpfperfSkel, OpenBpfperfSkel};
use crate::{Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) -> Result<(), Error> {
    let rodata = super::rodata(open);
    rodata.net_enabled = o.net;
    rodata.netsend_enabled = o.net;
    rodata.socket_waits = o.net && o.off_cpu_min_ns.is_some();
    if o.net_send_rate > 0 {
        (rodata.send_interval_ns, rodata.send_burst_ns) = interval_and_burst(o.net_send_rate);
        // Each CPU follows its share of the machine's cap.
        if o.net_send_cap > 0 {
            let cpus = crate::perf_event::online_cpus().map_or(1, |c| c.len().max(1)) as u64;
            (rodata.cap_interval_ns, rodata.cap_burst_ns) =
                interval_and_burst((o.net_send_cap / cpus).max(1));
        }
    }
    rodata.netstamp_enabled = o.net && o.net_send_calls;
    rodata.unseen_every = o.net_unseen_every;
    rodata.tails_tgid = if o.net { std::process::id() } else { 0 };
    for prog in [
        &mut open.progs.on_tcp_sendmsg,
        &mut open.progs.on_net_dev_queue,
        &mut open.progs.on_net_dev_start_xmit,
        &mut open.progs.on_net_dev_xmit,
    ] {
        prog.set_autoload(o.net && !o.net_send_calls);
    }
    for prog in [&mut open.progs.on_sockops, &mut open.progs.on_stamped_send] {
        prog.set_autoload(o.net && o.net_send_calls);
    }
    for prog in [
        &mut open.progs.on_sock_state,
        &mut open.progs.on_tcp_retransmit,
        &mut open.progs.on_tcp_send_reset,
        &mut open.progs.on_tcp_receive_reset,
        &mut open.progs.on_kfree_skb,
        &mut open.progs.on_sock_send,
        &mut open.progs.on_sock_recv,
        &mut open.progs.on_send_close,
        &mut open.progs.send_tails,
    ] {
        prog.set_autoload(o.net);
    }
    if !o.net {
        let m = &mut open.maps;
        super::unused(
            [
                &mut m.conns,
                &mut m.conn_stacks,
                &mut m.send_skbs,
                &mut m.sock_waits,
                &mut m.call_sites,
            ],
            "size the network maps",
        )?;
    }
    Ok(())
}

/// One skb per interval at `rate` a second, from credit of up to a tenth of a second's skbs:
/// the interval and that credit, in ns.
fn interval_and_burst(rate: u64) -> (u64, u64) {
    let interval = 1_000_000_000 / rate.min(1_000_000_000);
    (interval, interval * (rate / 10).max(1))
}

pub fn attach(skel: &BpfperfSkel<'_>, o: &Options, links: &mut Vec<Link>) -> Result<(), Error> {
    if o.net {
        let p = &skel.progs;
        attach_one(&p.on_sock_state, "attach inet_sock_set_state", links)?;
        attach_one(&p.on_tcp_retransmit, "attach tcp_retransmit_skb", links)?;
        attach_one(&p.on_tcp_send_reset, "attach tcp_send_reset", links)?;
        attach_one(&p.on_tcp_receive_reset, "attach tcp_receive_reset", links)?;
        attach_one(&p.on_kfree_skb, "attach kfree_skb", links)?;
        attach_one(&p.on_sock_send, "attach sock_send_length", links)?;
        attach_one(&p.on_sock_recv, "attach sock_recv_length", links)?;
        if o.net_send_calls {
            attach_one(&p.on_stamped_send, "attach sock_send_length", links)?;
            let root = cgroup2_root()?;
            let dir = std::fs::File::open(&root).map_err(|e| {
                sockops_error(format!("open the cgroup v2 root {}: {e}", root.display()))
            })?;
            use std::os::fd::AsRawFd;
            links.push(
                p.on_sockops
                    .attach_cgroup(dir.as_raw_fd())
                    .map_err(Error::bpf(
                        "attach the TX timestamping sockops to the cgroup v2 root",
                    ))?,
            );
        } else {
            attach_one(&p.on_tcp_sendmsg, "attach tcp_sendmsg_locked", links)?;
            attach_one(&p.on_net_dev_queue, "attach net_dev_queue", links)?;
            attach_one(&p.on_net_dev_start_xmit, "attach net_dev_start_xmit", links)?;
            attach_one(&p.on_net_dev_xmit, "attach net_dev_xmit", links)?;
        }
        attach_one(&p.on_send_close, "attach inet_sock_set_state", links)?;
    }
    Ok(())
}

/// Sends the skbs that each socket's rate skipped after its last followed one to the ring
/// buffer, as tail records, for the sockets still open at the end of the recording (those
/// closed before had theirs at their close), and counts as lost each one's data sent but never
/// seen at the driver: with `send_tails` attached, record peeks (a recv of no bytes,
/// MSG_PEEK | MSG_DONTWAIT) at each open socket that has send state, through a copy of the
/// descriptor of a process that holds it (pidfd_getfd). An iterator over the send state did
/// this once; the kernel here refuses iterator programs.
pub fn send_tails(skel: &BpfperfSkel<'_>) -> Result<(), Error> {
    use libbpf_rs::MapCore;
    use std::os::fd::AsRawFd;

    // SAFETY: a u32 of the .bss map, mapped for the skeleton's life; the programs only set it.
    let made = skel
        .maps
        .bss_data
        .as_deref()
        .is_some_and(|bss| unsafe { std::ptr::read_volatile(&bss.send_state_made) != 0 });
    if !made {
        return Ok(());
    }
    let _link = skel
        .progs
        .send_tails
        .attach()
        .map_err(Error::bpf("attach the send tails' program"))?;
    let mut seen = std::collections::HashSet::new();
    for (pid, fd, inode) in open_sockets() {
        if !seen.insert(inode) {
            continue;
        }
        let Some(sock) = descriptor_of(pid, fd) else {
            continue;
        };
        let key = sock.as_raw_fd().to_ne_bytes();
        let has_state = skel
            .maps
            .send_calls
            .lookup(&key, libbpf_rs::MapFlags::ANY)
            .is_ok_and(|v| v.is_some());
        if has_state {
            // SAFETY: a descriptor this process owns; no bytes are read (MSG_PEEK, length 0).
            unsafe {
                libc::recv(
                    sock.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
        }
    }
    Ok(())
}

/// Every process's socket descriptors but this one's: (pid, fd, the socket's inode).
fn open_sockets() -> Vec<(i32, i32, u64)> {
    let me = std::process::id() as i32;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for pid in procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
    {
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for e in fds.flatten() {
            let Some(fd) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(target) = std::fs::read_link(e.path()) else {
                continue;
            };
            let inode = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok());
            if let Some(inode) = inode {
                found.push((pid, fd, inode));
            }
        }
    }
    found
}

/// A copy of descriptor `fd` of process `pid` (pidfd_getfd), if it still has it.
fn descriptor_of(pid: i32, fd: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: plain system calls; each descriptor they return is owned once.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        if pidfd < 0 {
            return None;
        }
        let pidfd = std::os::fd::OwnedFd::from_raw_fd(pidfd as i32);
        let copy = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
        (copy >= 0).then(|| std::os::fd::OwnedFd::from_raw_fd(copy as i32))
    }
}

/// Whether send calls can be timed by BPF TX timestamping here: the kernel has it (6.15+:
/// its BTF names the kfunc that flags an skb) and a cgroup v2 hierarchy is mounted whole
/// (the sockops program is attached at its root).
pub fn tx_timestamping() -> bool {
    super::kernel_has_function("bpf_sock_ops_enable_tx_tstamp") && cgroup2_root().is_ok()
}

/// The root of the cgroup v2 hierarchy (a sockops program attached there sees every
/// process's connections): where it is mounted whole, from /proc/self/mountinfo.
fn cgroup2_root() -> Result<std::path::PathBuf, Error> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| sockops_error(format!("read /proc/self/mountinfo: {e}")))?;
    info.lines()
        .find_map(|line| {
            let (mount, fs) = line.split_once(" - ")?;
            let fields: Vec<&str> = mount.split(' ').collect();
            if !fs.starts_with("cgroup2 ") || fields.get(3) != Some(&"/") {
                return None;
            }
            fields.get(4).map(std::path::PathBuf::from)
        })
        .ok_or_else(|| {
            sockops_error(
                "no cgroup v2 hierarchy is mounted (mount -t cgroup2 none /sys/fs/cgroup)".into(),
            )
        })
}

fn sockops_error(why: String) -> Error {
    Error::Attach {
        event: "TX timestamping of sends (sockops)".into(),
        why,
    }
}
