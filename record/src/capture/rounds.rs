//! The writer's rounds: items pending until the time they are older than is past, then
//! written in time order, each by its kind's writer, and the round finished; a new file of a
//! rotated recording begun with what its reader needs.

use super::item::Item;
use super::recorder::Recorder;
use crate::sideband::TimedFact;

impl Recorder {
    /// The time of the oldest record still to be written.
    pub fn oldest_pending(&self) -> Option<u64> {
        self.pending.iter().map(Item::time).min()
    }

    /// Starts the writer's file, a new file of a rotated recording, with what its reader
    /// needs of the kernel and of the processes as the records so far left them, at `time`
    /// (older than the records to come).
    pub fn begin_file(&mut self, time: u64) -> anyhow::Result<()> {
        self.output_files.clear();
        self.write_kernel_map(self.kernel_text)?;
        self.described.clear();
        let facts = match &self.known {
            Some(known) if self.thin => known.kernel_facts(),
            Some(known) => known.facts(),
            None => Vec::new(),
        };
        for fact in facts {
            self.emit_fact(&TimedFact { time, cpu: 0, fact })?;
        }
        self.writer.finish_round()?;
        Ok(())
    }

    /// Writes every pending item older than `cut` in time order, then ends the round.
    pub fn flush_until(&mut self, cut: u64) -> anyhow::Result<()> {
        // Written in place, then dropped: items are a few hundred bytes, and moving each
        // into a vector of its own was a tenth of record's CPU at 70k events a second.
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_by_key(Item::time);
        let n = pending.partition_point(|i| i.time() < cut);
        let written = pending[..n]
            .iter()
            .try_for_each(|item| self.write_item(item));
        pending.drain(..n);
        self.pending = pending;
        written?;
        if self.thin {
            // Their last counts are written: what exited before holds no more.
            if let Some(known) = &mut self.known {
                known.forget_gone_before(self.last_take);
            }
        }
        self.writer.finish_round()?;
        Ok(())
    }

    fn write_item(&mut self, item: &Item) -> anyhow::Result<()> {
        match item {
            Item::Sample(s) => self.write_sample(s),
            Item::Fault(s) => self.write_fault(s),
            Item::Aggregated { samples, time } => self.write_aggregated(samples, time),
            Item::OffCpu(o) => self.write_off_cpu(o),
            Item::Cache {
                counts,
                time,
                interval_ns,
            } => self.write_cache(counts, time, interval_ns),
            Item::Dirty(d) => self.write_dirty(d),
            Item::BlockIo(b) => self.write_block_io(b),
            Item::Net(n) => self.write_net(n),
            Item::Request(r) => self.write_request(r),
            Item::Wakeup(w) => self.write_wakeup(w),
            Item::Trace(t) => self.write_trace(t),
            Item::AggregatedEvents { events, time } => self.write_aggregated_events(events, time),
            Item::Fact(f) => self.write_fact(f),
        }
    }
}
