//! Network events (`-e net`): connections, retransmits, resets, drops, socket waits, sends.

use super::recorder::Recorder;

impl Recorder {
    /// A network event (bpfperf:tcp_conn, tcp_retransmit, tcp_reset, skb_drop, sock_wait, net_send).
    pub(super) fn write_net(&mut self, n: &bpf::NetEvent) -> anyhow::Result<()> {
        let Some(attrs) = self.net_attrs else {
            return Ok(());
        };
        let (slot, reason) = match n.what {
            bpf::NetWhat::Conn => (0, 0),
            bpf::NetWhat::Retransmit => (1, n.reason),
            bpf::NetWhat::SendReset => (2, n.reason + 1),
            bpf::NetWhat::ReceiveReset => (2, 0),
            bpf::NetWhat::Drop => (3, n.reason),
            bpf::NetWhat::Wait => (4, n.reason),
            bpf::NetWhat::Send => (5, n.reason),
        };
        if n.pid != 0 {
            self.name_task(n.pid, n.tid, &n.comm, n.time, n.cpu)?;
        }
        let conn = n.what == bpf::NetWhat::Conn;
        let retransmit = n.what == bpf::NetWhat::Retransmit;
        let spans = matches!(n.what, bpf::NetWhat::Wait | bpf::NetWhat::Send);
        let duration_ns = if (conn || spans) && n.start_time != 0 {
            n.time.saturating_sub(n.start_time)
        } else {
            0
        };
        let raw = format::events::Net {
            event: format::events::NET_EVENTS[slot].1,
            family: n.family,
            lport: n.lport,
            rport: n.rport,
            state: n.state,
            active: n.active as u8,
            saddr: n.saddr,
            daddr: n.daddr,
            tx_bytes: n.tx_bytes,
            // A retransmit's rx_bytes are the segments TcpRetransSegs counted.
            rx_bytes: if retransmit { 0 } else { n.rx_bytes },
            duration_ns,
            reason,
            owner_tid: n.tid as i32,
            comm: n.comm,
            start_ns: n.start_time,
            count: n.skbs,
            segments: Some(if retransmit { n.rx_bytes as u32 } else { 0 }),
        }
        .to_raw(n.pid as i32);
        self.write_stack_sample(
            None,
            attrs[slot],
            n.pid,
            n.tid,
            n.cpu,
            n.time,
            // A connection weighs its life; a socket wait, the time blocked.
            match n.what {
                bpf::NetWhat::Conn => duration_ns.max(1),
                bpf::NetWhat::Wait => n.tx_bytes.max(1),
                // A send's latency to the device, for each skb it stands for.
                bpf::NetWhat::Send => duration_ns.max(1) * u64::from(n.skbs.max(1)),
                _ => 1,
            },
            &n.kernel_stack,
            &n.user_stack,
            &raw,
        )?;
        self.net += 1;
        Ok(())
    }
}
