//! Sampled requests (`--follow`): each layer a sampled call passed, as a `bpfperf:request`
//! sample of the thread current there.

use format::events::{Request, RequestKind, RequestLayer};

use super::recorder::Recorder;

impl Recorder {
    pub(super) fn write_request(&mut self, r: &bpf::RequestStep) -> anyhow::Result<()> {
        let Some(attr) = self.request_attr else {
            return Ok(());
        };
        let (Some(layer), Some(kind)) = (
            RequestLayer::from_u32(r.layer),
            RequestKind::from_u32(r.kind),
        ) else {
            return Ok(());
        };
        self.name_task(r.pid, r.tid, &r.comm, r.time, r.cpu)?;
        let request = Request {
            id: r.id,
            call_ns: r.call_time,
            bytes: r.bytes,
            layer,
            kind,
            call_pid: r.call_pid as i32,
            call_tid: r.call_tid as i32,
            dev: r.dev,
            flags: r.flags,
            comm: r.comm,
        };
        let raw = request.to_raw(r.pid as i32);
        self.write_stack_sample(None, attr, r.pid, r.tid, r.cpu, r.time, 1, &[], &[], &raw)?;
        self.requests += 1;
        Ok(())
    }
}
