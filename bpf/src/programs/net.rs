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
/// buffer, as tail records: reading the iterator over the sockets' send state runs
/// `send_tails` on each (at the end of the recording, for the sockets still open), which
/// also counts as lost each socket's data sent but never seen at the driver.
pub fn send_tails(skel: &BpfperfSkel<'_>) -> Result<(), Error> {
    use std::io::Read;
    use std::os::fd::AsFd;

    let link = skel
        .progs
        .send_tails
        .attach_iter(skel.maps.send_calls.as_fd())
        .map_err(Error::bpf("attach the send tails' iterator"))?;
    let mut iter =
        libbpf_rs::Iter::new(&link).map_err(Error::bpf("open the send tails' iterator"))?;
    let mut out = Vec::new();
    iter.read_to_end(&mut out)
        .map_err(|e| Error::bpf("read the send tails' iterator")(e.into()))?;
    Ok(())
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
