//! Sampled requests (`record --follow`): the `bpfperf:request` samples of each sampled call
//! grouped into one request with its layers in time order, and each layer's time from the
//! call over all requests.

use std::collections::BTreeMap;

use format::events::{Request, RequestKind, RequestLayer};

/// One `bpfperf:request` sample: a sampled call passed a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// When (ns, CLOCK_MONOTONIC).
    pub time: u64,
    /// The thread current there.
    pub tid: i32,
    pub request: Request,
}

/// A layer a request passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub layer: RequestLayer,
    /// From the call's entry (for [`RequestLayer::Call`]: its return, the call's duration).
    pub offset_ns: u64,
    /// The layer's bytes: the call's, a block request's, an skb's.
    pub bytes: u64,
    /// The thread current there, by name and id.
    pub comm: String,
    pub tid: i32,
    /// A block request the call made itself (O_DIRECT).
    pub direct: bool,
}

/// A sampled call and the layers it passed, in time order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledRequest {
    pub id: u64,
    pub kind: RequestKind,
    pub pid: i32,
    pub tid: i32,
    /// The calling thread's name (as the call's record saw it).
    pub comm: String,
    /// The call's bytes (its return value; 0 where its record is missing).
    pub bytes: u64,
    pub call_ns: u64,
    pub passes: Vec<Pass>,
}

impl SampledRequest {
    /// The first time it passed `layer`, from the call.
    pub fn first(&self, layer: RequestLayer) -> Option<&Pass> {
        self.passes.iter().find(|p| p.layer == layer)
    }
}

/// The steps grouped by call, in the calls' order.
pub fn group(steps: impl IntoIterator<Item = Step>) -> Vec<SampledRequest> {
    let mut by_id: BTreeMap<u64, SampledRequest> = BTreeMap::new();
    let mut timed: BTreeMap<u64, Vec<(u64, Pass)>> = BTreeMap::new();
    for s in steps {
        let r = &s.request;
        let req = by_id.entry(r.id).or_insert_with(|| SampledRequest {
            id: r.id,
            kind: r.kind,
            pid: r.call_pid,
            tid: r.call_tid,
            comm: String::new(),
            bytes: 0,
            call_ns: r.call_ns,
            passes: Vec::new(),
        });
        if r.layer == RequestLayer::Call {
            req.comm = r.comm_str();
            req.bytes = r.bytes;
        } else if req.comm.is_empty() && s.tid == r.call_tid {
            req.comm = r.comm_str();
        }
        let pass = Pass {
            layer: r.layer,
            offset_ns: s.time.saturating_sub(r.call_ns),
            bytes: r.bytes,
            comm: r.comm_str(),
            tid: s.tid,
            direct: r.flags & 1 != 0,
        };
        timed.entry(r.id).or_default().push((s.time, pass));
    }
    let mut out: Vec<SampledRequest> = by_id.into_values().collect();
    for req in &mut out {
        let mut passes = timed.remove(&req.id).unwrap_or_default();
        // Equal times keep the layers' order (issue and completion of one request).
        passes.sort_by_key(|(time, p)| (*time, p.layer));
        req.passes = passes.into_iter().map(|(_, p)| p).collect();
        if req.comm.is_empty() {
            req.comm = format!(":{}", req.pid);
        }
    }
    out.sort_by_key(|r| (r.call_ns, r.id));
    out
}

/// Each layer's offsets from the call (its first pass per request), over all requests.
pub fn layer_offsets(requests: &[SampledRequest]) -> BTreeMap<RequestLayer, Vec<u64>> {
    let mut out: BTreeMap<RequestLayer, Vec<u64>> = BTreeMap::new();
    for r in requests {
        for layer in RequestLayer::ALL {
            if let Some(p) = r.first(layer) {
                out.entry(layer).or_default().push(p.offset_ns);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: u64, layer: RequestLayer, time: u64, tid: i32, comm: &str) -> Step {
        let mut c = [0u8; 16];
        c[..comm.len()].copy_from_slice(comm.as_bytes());
        Step {
            time,
            tid,
            request: Request {
                id,
                call_ns: 1000 * id,
                bytes: 4096,
                layer,
                kind: RequestKind::Write,
                call_pid: 7,
                call_tid: 7,
                dev: 0,
                flags: 0,
                comm: c,
            },
        }
    }

    #[test]
    fn steps_become_requests_with_layers_in_time_order() {
        use RequestLayer::*;
        let reqs = group([
            step(2, Call, 2500, 7, "dd"),
            step(1, BlockComplete, 9000, 0, "swapper/0"),
            step(1, Writeback, 5000, 40, "kworker/u8:2"),
            step(1, Call, 1200, 7, "dd"),
            step(1, PageCache, 1100, 7, "dd"),
            step(1, BlockIssue, 5000, 40, "kworker/u8:2"),
        ]);
        assert_eq!(reqs.len(), 2);
        let layers: Vec<_> = reqs[0].passes.iter().map(|p| p.layer).collect();
        assert_eq!(
            layers,
            [PageCache, Call, Writeback, BlockIssue, BlockComplete]
        );
        assert_eq!((reqs[0].comm.as_str(), reqs[0].bytes), ("dd", 4096));
        assert_eq!(reqs[0].first(Writeback).unwrap().offset_ns, 4000);
        let offsets = layer_offsets(&reqs);
        assert_eq!(offsets[&Call], [200, 500]);
        assert_eq!(offsets[&BlockComplete], [8000]);
    }
}
