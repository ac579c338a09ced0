//! What was lost: the kernel's drops and the samples that did not fit in the file, as LOST
//! records naming the event they would have been.

use format::{SampleId, SideBand};

use super::recorder::Recorder;
use crate::capture::attrs::CPU_CLOCK_ID;

impl Recorder {
    /// Writes a LOST record for each kind of event the kernel dropped since the last call,
    /// naming the event they would have been.
    pub fn write_drops(&mut self, now: bpf::Drops, time: u64) -> anyhow::Result<()> {
        let was = std::mem::replace(&mut self.drops_written, now);
        let ids = self.lost_ids;
        for (id, now, was) in [
            (ids.on_cpu, now.on_cpu, was.on_cpu),
            (ids.off_cpu, now.off_cpu, was.off_cpu),
            (ids.block_io, now.block_io, was.block_io),
            (ids.traced, now.traced, was.traced),
            (ids.net, now.net, was.net),
            (ids.faults, now.faults, was.faults),
            (ids.request, now.requests, was.requests),
            (CPU_CLOCK_ID, now.exits, was.exits),
        ] {
            if now > was {
                self.write_lost(id, now - was, time)?;
            }
        }
        Ok(())
    }

    /// Takes the samples the writer dropped for want of room (a full filesystem) out of the
    /// counts and into `lost`, as its LOST records in the file count them: the summary says
    /// what the file holds.
    pub fn count_unwritten(&mut self) -> u64 {
        let dropped = self.writer.dropped_samples().to_vec();
        let of = |attr: Option<usize>| attr.and_then(|i| dropped.get(i)).copied().unwrap_or(0);
        let traced: u64 = self.traced_attrs.iter().map(|t| of(t.attr)).sum();
        let net: u64 = self
            .net_attrs
            .map_or(0, |n| n.iter().map(|&i| of(Some(i))).sum());
        for (count, n) in [
            (&mut self.samples, of(Some(0))),
            (&mut self.off_cpu, of(self.offcpu_attr)),
            (&mut self.runq, of(self.runq_attr)),
            (&mut self.faults, of(self.fault_attr)),
            (&mut self.fault_waits, of(self.fault_wait_attr)),
            (&mut self.io, of(self.io_attr)),
            (&mut self.wakeups, of(self.wakeup_attr)),
            (&mut self.traced, traced),
            (&mut self.net, net),
            (&mut self.requests, of(self.request_attr)),
        ] {
            *count = count.saturating_sub(n);
        }
        let unwritten = dropped.iter().sum::<u64>();
        self.lost += unwritten;
        unwritten
    }

    /// Writes a LOST record of `lost` events of the event `id` names.
    pub fn write_lost(&mut self, id: u64, lost: u64, time: u64) -> anyhow::Result<()> {
        self.lost += lost;
        let sid = SampleId {
            pid: u32::MAX,
            tid: u32::MAX,
            time,
            cpu: 0,
        };
        self.writer
            .write_side_band(0, &SideBand::Lost { id, lost }, &sid)?;
        Ok(())
    }
}
