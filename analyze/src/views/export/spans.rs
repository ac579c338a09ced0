//! What the Firefox export draws as markers beside a thread's samples: stretches of time
//! (off-CPU, block I/O, connections, sampled requests) and instants (network trouble). Made
//! by the export ([`super::firefox`]) and by the sampled requests' tracks
//! ([`super::firefox_requests`]).

/// Something that took time on a thread, shown as a marker beside its samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub pid: i32,
    pub tid: i32,
    /// The thread's name.
    pub comm: String,
    /// Start and end (ns, the recording's clock).
    pub start: u64,
    pub end: u64,
    pub what: SpanKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanKind {
    /// Off the CPU, and who woke the thread if the recording says.
    OffCpu { waker: Option<String> },
    /// A block I/O request charged to the thread (issued by it, or writeback of its pages).
    Io {
        device: String,
        op: String,
        bytes: u32,
        issuer: String,
    },
    /// A TCP connection of the thread, first seen to closed (`ADDR:PORT` each end; bytes
    /// acknowledged by the peer and received, as tcplife counts them).
    Connection {
        local: String,
        remote: String,
        tx: u64,
        rx: u64,
    },
    /// A sampled request reaching a layer (`record --follow`; the thread is the layer's
    /// track: see [`super::firefox_requests`]).
    Request {
        label: String,
        caller: String,
        bytes: u64,
    },
    /// A retransmit, reset or drop on a connection of the thread's process (start = end).
    NetTrouble {
        what: &'static str,
        local: String,
        remote: String,
        reason: String,
    },
}
