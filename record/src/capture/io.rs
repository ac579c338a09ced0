//! Block I/O (bpfperf:block_io), writeback charged to the thread that dirtied its pages, and
//! page-cache counts (bpfperf:cachestat).

use super::recorder::Recorder;

impl Recorder {
    /// A tracked thread began dirtying pages: its stacks are kept for the writeback to come.
    pub(super) fn write_dirty(&mut self, d: &bpf::OffCpuInterval) -> anyhow::Result<()> {
        if self.io_attr.is_some() {
            self.dirty_bursts.insert(d);
        }
        Ok(())
    }

    /// A block request (bpfperf:block_io), writeback charged to the thread that dirtied it.
    pub(super) fn write_block_io(&mut self, b: &bpf::BlockIoRequest) -> anyhow::Result<()> {
        let Some(attr) = self.io_attr else {
            return Ok(());
        };
        self.name_task(b.pid, b.tid, &b.comm, b.time, b.cpu)?;
        // Writeback of pages a tracked thread dirtied is charged to it, at its write.
        let dirtier = b
            .dirtier
            .and_then(|(_, tid, time)| self.dirty_bursts.get(time, tid));
        let io = format::events::BlockIo {
            dev: b.dev,
            sector: b.sector,
            bytes: b.bytes,
            rwbs: b.rwbs,
            latency_ns: b.time.saturating_sub(b.issue_time),
            issue_ns: b.issue_time,
            comm: b.comm,
            tracked: b.tracked as u8,
            issuer_pid: b.pid as i32,
            issuer_tid: b.tid as i32,
            dirtied: dirtier.is_some() as u8,
        };
        let raw = io.to_raw();
        match &dirtier {
            Some(d) => {
                let copy = d.user_regs.as_ref().map(|r| (r, &d.stack_copy[..]));
                self.write_stack_sample(
                    copy,
                    attr,
                    d.pid,
                    d.tid,
                    b.cpu,
                    b.time,
                    io.latency_ns,
                    &d.kernel_stack,
                    &d.user_stack,
                    &raw,
                )?;
            }
            None => self.write_stack_sample(
                None,
                attr,
                b.pid,
                b.tid,
                b.cpu,
                b.time,
                io.latency_ns,
                &b.kernel_stack,
                &b.user_stack,
                &raw,
            )?,
        }
        self.io += 1;
        Ok(())
    }

    /// A process's page-cache counts (bpfperf:cachestat).
    pub(super) fn write_cache(
        &mut self,
        counts: &bpf::CacheCounts,
        time: &u64,
        interval_ns: &u64,
    ) -> anyhow::Result<()> {
        let Some(attr) = self.cache_attr else {
            return Ok(());
        };
        let stat = format::events::CacheStat {
            accesses: counts.accesses,
            added: counts.added,
            dirtied: counts.dirtied,
            interval_ns: *interval_ns,
        };
        let raw = stat.to_raw(counts.pid as i32);
        self.write_stack_sample(
            None,
            attr,
            counts.pid,
            counts.pid,
            0,
            *time,
            counts.accesses.max(1),
            &[],
            &[],
            &raw,
        )?;
        Ok(())
    }
}
