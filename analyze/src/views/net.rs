//! `analyze net`: TCP connections and what went wrong with them, from the `bpfperf:tcp_conn`,
//! `tcp_retransmit`, `tcp_reset` and `skb_drop` samples: the connections as tcplife prints
//! them, retransmits, resets and drops per connection and per reason, and the processes that
//! moved the most bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use format::events::{
    Net, NET_EVENTS, NET_SEND_TRACEPOINT_ID, SKB_DROP_TRACEPOINT_ID, SOCK_WAIT_TRACEPOINT_ID,
    TCP_CONN_TRACEPOINT_ID, TCP_RESET_TRACEPOINT_ID, TCP_RETRANSMIT_TRACEPOINT_ID,
};
use format::linux_perf_data::linux_perf_event_reader::EventRecord;
use format::linux_perf_data::PerfFileRecord;

/// One network sample: a connection at its close, or a retransmit, reset or drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetSample {
    pub net: Net,
    /// The socket's owner (0: not seen).
    pub pid: i32,
    pub tid: i32,
    /// When it happened (ns, CLOCK_MONOTONIC).
    pub time: u64,
}

impl NetSample {
    /// What it is, in words: `TCP connection`, `TCP retransmit`, `TCP reset sent` or
    /// `received`, `packet drop`; else the event's name.
    pub fn what(&self) -> &'static str {
        match self.net.event {
            TCP_CONN_TRACEPOINT_ID => "TCP connection",
            TCP_RETRANSMIT_TRACEPOINT_ID => "TCP retransmit",
            TCP_RESET_TRACEPOINT_ID if self.net.reason == 0 => "TCP reset received",
            TCP_RESET_TRACEPOINT_ID => "TCP reset sent",
            SKB_DROP_TRACEPOINT_ID => "packet drop",
            SOCK_WAIT_TRACEPOINT_ID => "socket wait",
            _ => "send to device",
        }
    }

    /// Its local and remote ends, `ADDR:PORT` each.
    pub fn ends(&self) -> (String, String) {
        (
            format!("{}:{}", self.net.local_addr(), self.net.lport),
            format!("{}:{}", self.net.remote_addr(), self.net.rport),
        )
    }

    /// A retransmit: (events, segments) it adds to the retransmits sent, as TcpRetransSegs
    /// counts them: (1, its segments), or (0, 0) for one the kernel gave up before sending
    /// (EBUSY...: no segment counted); a payload written before segments were recorded
    /// counts (1, 1). Else (0, 0).
    pub fn retransmitted(&self) -> (u64, u64) {
        if !self.is(TCP_RETRANSMIT_TRACEPOINT_ID) {
            return (0, 0);
        }
        let segments = self.net.retrans_segments();
        (u64::from(segments > 0), segments)
    }

    pub fn is(&self, id: u64) -> bool {
        self.net.event == id
    }

    /// A retransmit, reset or drop.
    pub fn is_trouble(&self) -> bool {
        matches!(
            self.net.event,
            TCP_RETRANSMIT_TRACEPOINT_ID | TCP_RESET_TRACEPOINT_ID | SKB_DROP_TRACEPOINT_ID
        )
    }
}

/// Names of the reasons the network events carry, from the kernel's format files the
/// recording keeps (format's `NET_REASON_EVENTS`); a reason without a name prints as its
/// number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reasons {
    /// skb_drop_reason (kfree_skb's `reason`).
    pub drop: BTreeMap<u64, String>,
    /// sk_rst_reason (tcp_send_reset's `reason`).
    pub reset: BTreeMap<u64, String>,
}

impl Reasons {
    /// From a TRACING_DATA blob.
    pub fn from_tracing_data(blob: &[u8]) -> Reasons {
        let mut r = Reasons::default();
        for (system, f) in format::tracing_formats(blob) {
            match (system.as_str(), f.name.as_str()) {
                ("skb", "kfree_skb") => r.drop = f.symbols("reason"),
                ("tcp", "tcp_send_reset") => r.reset = f.symbols("reason"),
                _ => {}
            }
        }
        r
    }

    /// A sample's reason as text: `NETFILTER_DROP (12)`, or the number.
    pub fn name(&self, s: &NetSample) -> String {
        let (table, value) = match s.net.event {
            SKB_DROP_TRACEPOINT_ID => (&self.drop, s.net.reason as u64),
            // 0: received; else 1 + the reason of the reset sent.
            TCP_RESET_TRACEPOINT_ID if s.net.reason > 0 => (&self.reset, s.net.reason as u64 - 1),
            TCP_RESET_TRACEPOINT_ID => return "received".into(),
            _ => return s.net.reason.to_string(),
        };
        match table.get(&value) {
            Some(n) => format!("{n} ({value})"),
            None => value.to_string(),
        }
    }
}

/// Every network sample of a recording, in time order, and the names of their reasons.
pub fn read_samples(path: &Path) -> Result<(Vec<NetSample>, Reasons), format::Error> {
    let mut reader = crate::files::input::open(path)?.reader;
    let reasons = reader
        .tracing_data()
        .map(Reasons::from_tracing_data)
        .unwrap_or_default();
    let net_attrs: Vec<bool> = (0..reader.perf_file().event_attributes().len())
        .map(|i| NET_EVENTS.iter().any(|(n, _)| reader.event_name(i) == *n))
        .collect();
    let mut out = Vec::new();
    while let Some(record) = reader.next_record()? {
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        if !net_attrs.get(attr_index).copied().unwrap_or(false) {
            continue;
        }
        let Ok(EventRecord::Sample(s)) = format::parse_record(&record) else {
            continue;
        };
        let Some(net) = s.raw.and_then(|raw| Net::from_raw(&raw.as_slice())) else {
            continue;
        };
        out.push(NetSample {
            net,
            pid: s.pid.unwrap_or(-1),
            tid: s.tid.unwrap_or(-1),
            time: s.timestamp.unwrap_or(0),
        });
    }
    Ok((out, reasons))
}

/// A connection as its two ends name it: (local address, port, remote address, port).
pub type ConnKey = (String, u16, String, u16);

fn key(n: &Net) -> ConnKey {
    (n.local_addr(), n.lport, n.remote_addr(), n.rport)
}

/// What happened to one connection (or to sockets of one owner no connection names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnTroubles {
    pub pid: i32,
    pub comm: String,
    /// Retransmits sent (tcp_retransmit_skb events the kernel counted) and their segments
    /// (TcpRetransSegs's count); attempts given up before sending are in neither.
    pub retransmits: u64,
    pub retrans_segments: u64,
    pub resets_sent: u64,
    pub resets_received: u64,
    pub drops: u64,
}

/// Retransmits, resets and drops per connection.
pub fn troubles(samples: &[NetSample]) -> BTreeMap<ConnKey, ConnTroubles> {
    let mut out: BTreeMap<ConnKey, ConnTroubles> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.is_trouble()) {
        let t = out.entry(key(&s.net)).or_default();
        // Events after the close (a late reset) no longer know the owner.
        if s.pid > 0 {
            t.pid = s.pid;
        }
        if t.comm.is_empty() {
            t.comm = s.net.comm_str();
        }
        match s.net.event {
            TCP_RETRANSMIT_TRACEPOINT_ID => {
                let (events, segments) = s.retransmitted();
                t.retransmits += events;
                t.retrans_segments += segments;
            }
            TCP_RESET_TRACEPOINT_ID if s.net.reason == 0 => t.resets_received += 1,
            TCP_RESET_TRACEPOINT_ID => t.resets_sent += 1,
            SKB_DROP_TRACEPOINT_ID => t.drops += 1,
            _ => {}
        }
    }
    // What happened before the owner was seen (a drop before an accepted connection's first
    // receive) goes to the owner its tcp_conn names.
    for s in samples
        .iter()
        .filter(|s| s.is(TCP_CONN_TRACEPOINT_ID) && s.pid > 0)
    {
        if let Some(t) = out.get_mut(&key(&s.net)).filter(|t| t.pid <= 0) {
            t.pid = s.pid;
            t.comm = s.net.comm_str();
        }
    }
    out
}

/// Per process: connections, bytes, retransmits and drops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Talker {
    pub comm: String,
    pub connections: u64,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    /// As [`ConnTroubles`]: retransmits sent and their segments.
    pub retransmits: u64,
    pub retrans_segments: u64,
    pub drops: u64,
}

/// Processes by bytes moved (sent + received), most first.
pub fn talkers(samples: &[NetSample]) -> Vec<(i32, Talker)> {
    let mut by: BTreeMap<i32, Talker> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| !s.is(SOCK_WAIT_TRACEPOINT_ID) && !s.is(NET_SEND_TRACEPOINT_ID))
    {
        let t = by.entry(s.pid).or_default();
        if t.comm.is_empty() {
            t.comm = s.net.comm_str();
        }
        match s.net.event {
            TCP_CONN_TRACEPOINT_ID => {
                t.connections += 1;
                t.tx_bytes += s.net.tx_bytes;
                t.rx_bytes += s.net.rx_bytes;
            }
            TCP_RETRANSMIT_TRACEPOINT_ID => {
                let (events, segments) = s.retransmitted();
                t.retransmits += events;
                t.retrans_segments += segments;
            }
            SKB_DROP_TRACEPOINT_ID => t.drops += 1,
            _ => {}
        }
    }
    let mut v: Vec<_> = by.into_iter().collect();
    v.sort_by_key(|(pid, t)| (std::cmp::Reverse(t.tx_bytes + t.rx_bytes), *pid));
    v
}

/// Time blocked in socket calls of one process on one peer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerWait {
    pub comm: String,
    /// Calls that blocked, their blocked intervals, and the time.
    pub calls: u64,
    pub intervals: u64,
    pub blocked_ns: u64,
}

/// Socket waits (`bpfperf:sock_wait`) per (pid, peer `ADDR:PORT`).
pub fn waits(samples: &[NetSample]) -> BTreeMap<(i32, String), PeerWait> {
    let mut out: BTreeMap<(i32, String), PeerWait> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.is(SOCK_WAIT_TRACEPOINT_ID)) {
        let peer = format!("{}:{}", s.net.remote_addr(), s.net.rport);
        let w = out.entry((s.pid, peer)).or_default();
        if w.comm.is_empty() {
            w.comm = s.net.comm_str();
        }
        w.calls += 1;
        w.intervals += s.net.rx_bytes;
        w.blocked_ns += s.net.tx_bytes;
    }
    out
}

/// Sends followed to the device (`bpfperf:net_send`), per (pid, comm, local, remote): the
/// skbs, their bytes, and the time of each layer (ns): send call to net_dev_queue (the
/// socket and TCP/IP), in the qdisc, in the driver; and send call to net_dev_xmit in all.
/// Each time with the skbs its sample stands for (record follows a socket's skbs at a rate,
/// each followed one standing for those skipped before it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sends {
    pub bytes: u64,
    pub total: Vec<(u64, u64)>,
    pub stack: Vec<(u64, u64)>,
    pub qdisc: Vec<(u64, u64)>,
    pub driver: Vec<(u64, u64)>,
    /// The samples are send calls timed by the kernel's TX timestamping (record's
    /// `--net-send-timing calls`: `active` set), not skbs: from the call's last byte, into
    /// the qdisc, to the driver.
    pub calls: bool,
}

impl Sends {
    fn add(&mut self, n: &Net) {
        self.calls |= n.active != 0;
        let (stack, qdisc, skbs) = (n.rx_bytes, n.reason as u64, n.events());
        self.bytes = self.bytes.saturating_add(n.tx_bytes);
        self.total.push((n.duration_ns, skbs));
        self.stack.push((stack, skbs));
        self.qdisc.push((qdisc, skbs));
        let driver = n.duration_ns.saturating_sub(stack).saturating_sub(qdisc);
        self.driver.push((driver, skbs));
    }

    /// The skbs the samples stand for.
    pub fn skbs(&self) -> u64 {
        self.total
            .iter()
            .fold(0u64, |n, &(_, skbs)| n.saturating_add(skbs))
    }
}

/// A connection's sends: (pid, comm, local `ADDR:PORT`, remote `ADDR:PORT`).
pub type SendKey = (i32, String, String, String);

/// [`Sends`] of every connection, and of all together.
pub fn sends(samples: &[NetSample]) -> (BTreeMap<SendKey, Sends>, Sends) {
    let mut by: BTreeMap<SendKey, Sends> = BTreeMap::new();
    let mut all = Sends::default();
    for s in samples.iter().filter(|s| s.is(NET_SEND_TRACEPOINT_ID)) {
        let n = &s.net;
        let key = (
            s.pid,
            n.comm_str(),
            format!("{}:{}", n.local_addr(), n.lport),
            format!("{}:{}", n.remote_addr(), n.rport),
        );
        by.entry(key).or_default().add(n);
        all.add(n);
    }
    (by, all)
}

fn sends_report(o: &mut String, samples: &[NetSample]) {
    use super::latency::{histogram_us_weighted, render_histogram, summary_weighted, us};
    let (by, all) = sends(samples);
    if all.total.is_empty() {
        return;
    }
    let skbs = all.skbs();
    let followed = if all.total.len() as u64 == skbs {
        String::new()
    } else {
        format!(
            ", {} of them followed, each standing for those of its socket before it              (record --net-send-rate)",
            all.total.len()
        )
    };
    let (what, timed, count, histogram) = if all.calls {
        (
            "send calls",
            "from the call's last byte written to the driver, by the kernel's TX timestamps of \
             its skb; layers: TCP/IP to the qdisc, qdisc to the driver",
            "CALLS",
            "send latency to the device (the call's last byte to the driver):",
        )
    } else {
        (
            "skbs",
            "from the send call's start to net_dev_xmit; layers: socket/TCP/IP to \
             net_dev_queue, qdisc to net_dev_start_xmit, driver to net_dev_xmit",
            "SKBS",
            "send latency to the device (send call to net_dev_xmit):",
        )
    };
    let _ = writeln!(
        o,
        "\nsends to the device: {} {what} of TCP data, {} KB{followed} ({timed}; report \
         --event net-send: by stack)",
        skbs,
        all.bytes / 1024
    );
    let _ = writeln!(
        o,
        "{:<7} {:<16} {:<21} {:<21} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "PID",
        "COMM",
        "LOCAL",
        "REMOTE",
        count,
        "KB",
        "P50_US",
        "P99_US",
        "STACK_P50",
        "QDISC_P50",
        "DRV_P50"
    );
    let row = |o: &mut String, pid: &str, comm: &str, l: &str, r: &str, s: &Sends| {
        let (t, st, q, d) = (
            summary_weighted(s.total.iter().copied()),
            summary_weighted(s.stack.iter().copied()),
            summary_weighted(s.qdisc.iter().copied()),
            summary_weighted(s.driver.iter().copied()),
        );
        let _ = writeln!(
            o,
            "{:<7} {:<16} {:<21} {:<21} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            pid,
            comm,
            l,
            r,
            t.count,
            s.bytes / 1024,
            us(t.p50_ns),
            us(t.p99_ns),
            us(st.p50_ns),
            us(q.p50_ns),
            us(d.p50_ns)
        );
    };
    for ((pid, comm, l, r), s) in &by {
        row(o, &pid.to_string(), comm, l, r, s);
    }
    if by.len() > 1 {
        row(o, "all", "", "", "", &all);
    }
    let _ = writeln!(o);
    render_histogram(
        o,
        histogram,
        &histogram_us_weighted(all.total.iter().copied()),
    );
}

/// The whole `analyze net` report.
pub fn report(samples: &[NetSample], reasons: &Reasons) -> String {
    let mut o = String::new();
    if samples.is_empty() {
        let _ = writeln!(
            o,
            "no network events in this recording (record them with -e net)"
        );
        return o;
    }
    let conns: Vec<&NetSample> = samples
        .iter()
        .filter(|s| s.is(TCP_CONN_TRACEPOINT_ID))
        .collect();
    let _ = writeln!(
        o,
        "TCP connections: {} (TX/RX: bytes acknowledged and received, as tcplife counts \
         them: SYN and FIN included)",
        conns.len()
    );
    let _ = writeln!(
        o,
        "{:<7} {:<16} {:<15} {:>5} {:<15} {:>5} {:>8} {:>8} {:>10}",
        "PID", "COMM", "LADDR", "LPORT", "RADDR", "RPORT", "TX_KB", "RX_KB", "MS"
    );
    for s in &conns {
        let n = &s.net;
        let ms = if n.duration_ns > 0 {
            format!("{:.2}", n.duration_ns as f64 / 1e6)
        } else {
            "-".into()
        };
        let _ = writeln!(
            o,
            "{:<7} {:<16} {:<15} {:>5} {:<15} {:>5} {:>8} {:>8} {:>10}",
            s.pid,
            n.comm_str(),
            n.local_addr(),
            n.lport,
            n.remote_addr(),
            n.rport,
            n.tx_bytes / 1024,
            n.rx_bytes / 1024,
            ms
        );
    }
    let troubles = troubles(samples);
    if !troubles.is_empty() {
        let _ = writeln!(
            o,
            "\nretransmits, resets and drops per connection (RETRANS: retransmits sent, \
             tcp_retransmit_skb events; SEGS: their segments, as TcpRetransSegs counts them):"
        );
        let _ = writeln!(
            o,
            "{:<7} {:<16} {:<21} {:<21} {:>7} {:>7} {:>7} {:>7} {:>7}",
            "PID", "COMM", "LOCAL", "REMOTE", "RETRANS", "SEGS", "RST_TX", "RST_RX", "DROPS"
        );
        for ((la, lp, ra, rp), t) in &troubles {
            let _ = writeln!(
                o,
                "{:<7} {:<16} {:<21} {:<21} {:>7} {:>7} {:>7} {:>7} {:>7}",
                t.pid,
                t.comm,
                format!("{la}:{lp}"),
                format!("{ra}:{rp}"),
                t.retransmits,
                t.retrans_segments,
                t.resets_sent,
                t.resets_received,
                t.drops
            );
        }
        let retrans: Vec<&NetSample> = samples
            .iter()
            .filter(|s| s.is(TCP_RETRANSMIT_TRACEPOINT_ID))
            .collect();
        if !retrans.is_empty() {
            let (events, segments) = retrans
                .iter()
                .map(|s| s.retransmitted())
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
            let _ = write!(
                o,
                "retransmits: {events} sent, {segments} segments (TcpRetransSegs)"
            );
            let given_up = retrans.len() as u64 - events;
            if given_up > 0 {
                let _ = write!(o, "; {given_up} attempts given up before sending");
            }
            if retrans.iter().any(|s| s.net.segments.is_none()) {
                let _ = write!(
                    o,
                    " (segments not in this file, written before record counted them: 1 per \
                     retransmit)"
                );
            }
            let _ = writeln!(o);
        }
        let mut by: BTreeMap<(&str, u32), (String, u64)> = BTreeMap::new();
        for s in samples.iter().filter(|s| s.is_trouble()) {
            let what = match s.net.event {
                TCP_RETRANSMIT_TRACEPOINT_ID => "retransmit (send result)",
                TCP_RESET_TRACEPOINT_ID => "reset (sk_rst_reason)",
                _ => "drop (skb_drop_reason)",
            };
            by.entry((what, s.net.reason))
                .or_insert_with(|| (reasons.name(s), 0))
                .1 += 1;
        }
        let _ = writeln!(o, "\nby reason:");
        for ((what, _), (name, n)) in by {
            let _ = writeln!(o, "  {what:<26} {name:<40} {n:>8}");
        }
    }
    let waits = waits(samples);
    if !waits.is_empty() {
        let _ = writeln!(
            o,
            "\ntime blocked in socket calls, by peer (off-CPU; report --event offcpu shows \
             it under peer:ADDR:PORT frames):"
        );
        let _ = writeln!(
            o,
            "{:<7} {:<16} {:<21} {:>6} {:>8} {:>12}",
            "PID", "COMM", "PEER", "CALLS", "BLOCKS", "MS"
        );
        for ((pid, peer), w) in &waits {
            let _ = writeln!(
                o,
                "{:<7} {:<16} {:<21} {:>6} {:>8} {:>12.3}",
                pid,
                w.comm,
                peer,
                w.calls,
                w.intervals,
                w.blocked_ns as f64 / 1e6
            );
        }
    }
    sends_report(&mut o, samples);
    let _ = writeln!(o, "\ntop talkers:");
    let _ = writeln!(
        o,
        "{:<7} {:<16} {:>6} {:>10} {:>10} {:>7} {:>7} {:>7}",
        "PID", "COMM", "CONNS", "TX_KB", "RX_KB", "RETRANS", "SEGS", "DROPS"
    );
    for (pid, t) in talkers(samples) {
        let _ = writeln!(
            o,
            "{:<7} {:<16} {:>6} {:>10} {:>10} {:>7} {:>7} {:>7}",
            pid,
            t.comm,
            t.connections,
            t.tx_bytes / 1024,
            t.rx_bytes / 1024,
            t.retransmits,
            t.retrans_segments,
            t.drops
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(event: u64, pid: i32, lport: u16, tx: u64) -> NetSample {
        let mut net = Net {
            event,
            family: 2,
            lport,
            rport: 80,
            tx_bytes: tx,
            duration_ns: 2_500_000,
            ..Default::default()
        };
        net.saddr[..4].copy_from_slice(&[10, 0, 0, 1]);
        net.daddr[..4].copy_from_slice(&[10, 0, 0, 2]);
        net.comm[..4].copy_from_slice(b"curl");
        NetSample {
            net,
            pid,
            tid: pid,
            time: 1,
        }
    }

    #[test]
    fn report_lists_connections_troubles_and_talkers() {
        let s = vec![
            sample(TCP_CONN_TRACEPOINT_ID, 7, 40000, 4096 * 3),
            retransmit(Some(20)),
            retransmit(Some(3)),
            // Given up before sending (EBUSY): no segment counted, and no retransmit sent.
            retransmit(Some(0)),
            {
                let mut d = sample(SKB_DROP_TRACEPOINT_ID, 7, 40000, 0);
                d.net.reason = 12;
                d
            },
        ];
        let t = troubles(&s);
        let c = &t[&("10.0.0.1".into(), 40000, "10.0.0.2".into(), 80)];
        assert_eq!((c.retransmits, c.retrans_segments, c.drops), (2, 23, 1));
        assert_eq!(
            (
                talkers(&s)[0].1.retransmits,
                talkers(&s)[0].1.retrans_segments
            ),
            (2, 23)
        );
        assert_eq!(talkers(&s)[0].1.tx_bytes, 4096 * 3);
        let reasons = Reasons {
            drop: [(12, "NETFILTER_DROP".to_string())].into(),
            ..Default::default()
        };
        let r = report(&s, &reasons);
        assert!(r.contains("NETFILTER_DROP (12)"), "{r}");
        assert!(
            r.contains("retransmits: 2 sent, 23 segments (TcpRetransSegs); 1 attempts given up"),
            "{r}"
        );
        // A file written before the segments: one per retransmit, and said so.
        let old = report(&[retransmit(None), retransmit(None)], &reasons);
        assert!(
            old.contains(
                "retransmits: 2 sent, 2 segments (TcpRetransSegs) (segments not in this file"
            ),
            "{old}"
        );
        assert!(
            r.contains("7       curl             10.0.0.1        40000 10.0.0.2           80       12        0       2.50"),
            "{r}"
        );
    }

    /// A retransmit of `segments` counted (None: a payload written before the field).
    fn retransmit(segments: Option<u32>) -> NetSample {
        let mut s = sample(TCP_RETRANSMIT_TRACEPOINT_ID, 7, 40000, 0);
        s.net.segments = segments;
        if segments == Some(0) {
            s.net.reason = (-16i32) as u32;
        }
        s
    }

    /// A send sample standing for `skbs` skbs of 1,500 bytes that took `ns`.
    fn send(skbs: u32, ns: u64) -> NetSample {
        let mut s = sample(NET_SEND_TRACEPOINT_ID, 7, 40000, 1500 * u64::from(skbs));
        (s.net.duration_ns, s.net.count) = (ns, skbs);
        s
    }

    #[test]
    fn sends_count_the_skbs_each_sample_stands_for() {
        // One skb followed alone at 2.5 ms, one standing for 9 at 10 us (record's rate).
        let samples = [send(1, 2_500_000), send(9, 10_000)];
        let (by, all) = sends(&samples);
        assert_eq!(
            (all.skbs(), all.bytes, all.total.len(), by.len()),
            (10, 15_000, 2, 1)
        );
        let mut o = String::new();
        sends_report(&mut o, &samples);
        assert!(
            o.contains("10 skbs of TCP data, 14 KB, 2 of them followed"),
            "{o}"
        );
        // The median skb took 10 us; the histogram counts 9 there, 1 at 2.5 ms.
        let row = o.lines().find(|l| l.starts_with("7 ")).unwrap();
        let w: Vec<&str> = row.split_whitespace().collect();
        assert_eq!((w[4], w[6], w[7]), ("10", "10.0", "2500.0"), "{o}");
        assert!(o.contains("8 -> 15         : 9 "), "{o}");
        assert!(o.contains("2048 -> 4095       : 1 "), "{o}");
    }
}
