//! `bpfperf:request`: a sampled request (`record --follow`) passing a layer.

use super::{block_io_attr, EventAttr, EventFormat, COMMON_FIELDS};

/// Name of the sampled-request event.
pub const REQUEST_EVENT: &str = "bpfperf:request";
/// Its tracepoint id in the file (made up, as the other bpfperf events').
pub const REQUEST_TRACEPOINT_ID: u64 = 60010;

/// The attr of sampled-request samples: one per layer a sampled call passes; pid/tid = the
/// thread current there, time = when, period 1, RAW = [`Request`].
pub fn request_attr(sample_type: u64, ids: Vec<u64>) -> EventAttr {
    EventAttr {
        name: REQUEST_EVENT.into(),
        config: REQUEST_TRACEPOINT_ID,
        ..block_io_attr(sample_type, ids)
    }
}

/// What was sampled: a write to a file, or a send on a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestKind {
    Write,
    Send,
}

impl RequestKind {
    pub fn from_u32(v: u32) -> Option<RequestKind> {
        match v {
            1 => Some(RequestKind::Write),
            2 => Some(RequestKind::Send),
            _ => None,
        }
    }

    pub fn to_u32(self) -> u32 {
        self as u32 + 1
    }

    pub fn name(self) -> &'static str {
        match self {
            RequestKind::Write => "write",
            RequestKind::Send => "send",
        }
    }
}

/// The layers a sampled request passes, in the order it passes them (numbered as
/// bpfperf.h's `enum request_layer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestLayer {
    /// The call returned (its offset from the call's entry: its duration).
    Call,
    /// Its first page dirtied in the page cache.
    PageCache,
    /// A block request made of its pages (by writeback, fsync, or the call itself).
    Writeback,
    BlockIssue,
    BlockComplete,
    /// The call entered TCP.
    Tcp,
    /// An skb of its bytes queued to the device.
    Qdisc,
    /// The skb handed to the driver.
    Driver,
    /// The driver took it.
    Device,
}

impl RequestLayer {
    pub const ALL: [RequestLayer; 9] = [
        RequestLayer::Call,
        RequestLayer::PageCache,
        RequestLayer::Writeback,
        RequestLayer::BlockIssue,
        RequestLayer::BlockComplete,
        RequestLayer::Tcp,
        RequestLayer::Qdisc,
        RequestLayer::Driver,
        RequestLayer::Device,
    ];

    pub fn from_u32(v: u32) -> Option<RequestLayer> {
        Self::ALL.get(v as usize).copied()
    }

    pub fn to_u32(self) -> u32 {
        self as u32
    }

    /// The name in `analyze requests --csv`.
    pub fn name(self) -> &'static str {
        match self {
            RequestLayer::Call => "call",
            RequestLayer::PageCache => "page_cache",
            RequestLayer::Writeback => "writeback",
            RequestLayer::BlockIssue => "block_issue",
            RequestLayer::BlockComplete => "block_complete",
            RequestLayer::Tcp => "tcp",
            RequestLayer::Qdisc => "qdisc",
            RequestLayer::Driver => "driver",
            RequestLayer::Device => "device",
        }
    }
}

/// A request's step through a layer, as the RAW payload of a `bpfperf:request` sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The sampled call's id, unique in a recording.
    pub id: u64,
    /// The call's entry (CLOCK_MONOTONIC ns): layers' times are offsets from it.
    pub call_ns: u64,
    /// The call's bytes (call, tcp); the block request's or skb's own in later layers.
    pub bytes: u64,
    pub layer: RequestLayer,
    pub kind: RequestKind,
    /// The thread that made the call.
    pub call_pid: i32,
    pub call_tid: i32,
    /// Block layers: the disk (major << 20 | minor).
    pub dev: u32,
    /// 1: a block request the call made itself (O_DIRECT).
    pub flags: u32,
    /// The thread current at the layer (the sample's tid), by name.
    pub comm: [u8; 16],
}

/// Size of the RAW payload.
pub const REQUEST_RAW_SIZE: usize = 72;

impl Request {
    /// The RAW payload, at the offsets of [`request_format`].
    pub fn to_raw(&self, pid: i32) -> [u8; REQUEST_RAW_SIZE] {
        let mut b = [0u8; REQUEST_RAW_SIZE];
        b[0..2].copy_from_slice(&(REQUEST_TRACEPOINT_ID as u16).to_le_bytes());
        b[4..8].copy_from_slice(&pid.to_le_bytes());
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b[16..24].copy_from_slice(&self.call_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.bytes.to_le_bytes());
        b[32..36].copy_from_slice(&self.layer.to_u32().to_le_bytes());
        b[36..40].copy_from_slice(&self.kind.to_u32().to_le_bytes());
        b[40..44].copy_from_slice(&self.call_pid.to_le_bytes());
        b[44..48].copy_from_slice(&self.call_tid.to_le_bytes());
        b[48..52].copy_from_slice(&self.dev.to_le_bytes());
        b[52..56].copy_from_slice(&self.flags.to_le_bytes());
        b[56..72].copy_from_slice(&self.comm);
        b
    }

    /// Reads a payload written by [`Request::to_raw`]; `None` if it is not one.
    pub fn from_raw(raw: &[u8]) -> Option<Request> {
        let raw = raw.get(..REQUEST_RAW_SIZE)?;
        if u16::from_le_bytes([raw[0], raw[1]]) as u64 != REQUEST_TRACEPOINT_ID {
            return None;
        }
        let u64_at = |o: usize| u64::from_le_bytes(raw[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_le_bytes(raw[o..o + 4].try_into().unwrap());
        Some(Request {
            id: u64_at(8),
            call_ns: u64_at(16),
            bytes: u64_at(24),
            layer: RequestLayer::from_u32(u32_at(32))?,
            kind: RequestKind::from_u32(u32_at(36))?,
            call_pid: u32_at(40) as i32,
            call_tid: u32_at(44) as i32,
            dev: u32_at(48),
            flags: u32_at(52),
            comm: raw[56..72].try_into().unwrap(),
        })
    }

    /// The name of the thread current at the layer.
    pub fn comm_str(&self) -> String {
        let end = self.comm.iter().position(|&c| c == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }
}

/// The tracefs-style format of `bpfperf:request`, for TRACING_DATA.
pub fn request_format() -> EventFormat {
    let text = format!(
        "name: request\nID: {REQUEST_TRACEPOINT_ID}\nformat:\n{COMMON_FIELDS}\
\tfield:u64 id;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:u64 call_ns;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:u64 bytes;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:unsigned int layer;\toffset:32;\tsize:4;\tsigned:0;\n\
\tfield:unsigned int kind;\toffset:36;\tsize:4;\tsigned:0;\n\
\tfield:int call_pid;\toffset:40;\tsize:4;\tsigned:1;\n\
\tfield:int call_tid;\toffset:44;\tsize:4;\tsigned:1;\n\
\tfield:dev_t dev;\toffset:48;\tsize:4;\tsigned:0;\n\
\tfield:unsigned int flags;\toffset:52;\tsize:4;\tsigned:0;\n\
\tfield:char comm[16];\toffset:56;\tsize:16;\tsigned:0;\n\n\
print fmt: \"S%llu %s %s call_ns=%llu bytes=%llu call_tid=%d comm=%s\", REC->id, \
__print_symbolic(REC->kind, {{ 1, \"write\" }}, {{ 2, \"send\" }}), \
__print_symbolic(REC->layer, {{ 0, \"call\" }}, {{ 1, \"page_cache\" }}, {{ 2, \"writeback\" }}, \
{{ 3, \"block_issue\" }}, {{ 4, \"block_complete\" }}, {{ 5, \"tcp\" }}, {{ 6, \"qdisc\" }}, \
{{ 7, \"driver\" }}, {{ 8, \"device\" }}), \
REC->call_ns, REC->bytes, REC->call_tid, REC->comm\n"
    );
    EventFormat {
        system: "bpfperf".into(),
        text: text.into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trip() {
        let r = Request {
            id: 7,
            call_ns: 123,
            bytes: 4096,
            layer: RequestLayer::BlockComplete,
            kind: RequestKind::Write,
            call_pid: 10,
            call_tid: 11,
            dev: 8 << 20,
            flags: 1,
            comm: *b"kworker/u8:2\0\0\0\0",
        };
        assert_eq!(Request::from_raw(&r.to_raw(12)), Some(r));
        assert_eq!(r.comm_str(), "kworker/u8:2");
        for (i, l) in RequestLayer::ALL.iter().enumerate() {
            assert_eq!(RequestLayer::from_u32(i as u32), Some(*l));
        }
    }
}
