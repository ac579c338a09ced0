//! Any event (tracepoints, probes, latency pairs), one by one or counted in the kernel.

use super::recorder::Recorder;

impl Recorder {
    /// Any event (a tracepoint, a probe), as its tracepoint sample.
    pub(super) fn write_trace(&mut self, t: &bpf::TraceRecord) -> anyhow::Result<()> {
        let Some(how) = self.traced_attrs.get(t.event as usize).copied() else {
            return Ok(());
        };
        let Some(attr) = how.attr else {
            return Ok(());
        };
        self.name_task(t.pid, t.tid, &t.comm, t.time, t.cpu)?;
        let copy = t.user_regs.as_ref().map(|r| (r, &t.stack_copy[..]));
        // --aggregate: an event written alone says so in its payload.
        let alone = self
            .counted
            .get(t.event as usize)
            .and_then(Option::as_ref)
            .map(|c| {
                use crate::tracing::aggregate::Alone;
                c.alone(
                    &t.raw,
                    if copy.is_some() {
                        Alone::StackCopy
                    } else {
                        Alone::NoRoom
                    },
                )
            });
        let kernel = if how.kernel_stack {
            &t.kernel_stack[..]
        } else {
            &[]
        };
        self.write_stack_sample(
            copy,
            attr,
            t.pid,
            t.tid,
            t.cpu,
            t.time,
            if how.latency { t.latency_ns } else { 1 },
            kernel,
            &t.user_stack,
            alone.as_deref().unwrap_or(&t.raw),
        )?;
        self.traced += 1;
        self.traced_records += 1;
        Ok(())
    }

    /// Traced events counted in the kernel: one sample per (thread, stack, bucket) with its count.
    pub(super) fn write_aggregated_events(
        &mut self,
        a: &bpf::AggregatedEvents,
        time: &u64,
    ) -> anyhow::Result<()> {
        self.last_take = *time;
        let Some(how) = self.traced_attrs.get(a.event as usize).copied() else {
            return Ok(());
        };
        let (Some(attr), Some(Some(counted))) = (how.attr, self.counted.get(a.event as usize))
        else {
            return Ok(());
        };
        let raw = counted.payload(a.tid, a.count, a.bucket);
        // The thread's CPU is not counted: CPU 0.
        self.name_task(a.pid, a.tid, &a.comm, *time, 0)?;
        let kernel = if how.kernel_stack {
            &a.kernel_stack[..]
        } else {
            &[]
        };
        self.write_stack_sample(
            None,
            attr,
            a.pid,
            a.tid,
            0,
            *time,
            if how.latency { a.latency_ns } else { a.count },
            kernel,
            &a.user_stack,
            &raw,
        )?;
        self.traced += a.count;
        self.traced_records += 1;
        Ok(())
    }
}
