//! On-CPU samples (cpu-clock), major page faults (fault-time), and the samples counted in
//! the kernel (--aggregate): each with its Python frames merged into its user stack.

use super::recorder::Recorder;
use crate::sideband::TimedFact;

impl Recorder {
    /// An on-CPU sample taken by BPF (cpu-clock).
    pub(super) fn write_sample(&mut self, s: &bpf::OnCpuSample) -> anyhow::Result<()> {
        let period = if self.aggregate { 1 } else { s.period };
        self.write_sampled(s, 0, period)?;
        self.samples += 1;
        self.copied_stacks += !s.stack_copy.is_empty() as u64;
        self.late.count(s);
        Ok(())
    }

    /// A major page fault (fault-time), its period its nanoseconds.
    pub(super) fn write_fault(&mut self, s: &bpf::OnCpuSample) -> anyhow::Result<()> {
        let Some(attr) = self.fault_attr else {
            return Ok(());
        };
        self.write_sampled(s, attr, s.period)?;
        self.faults += 1;
        Ok(())
    }

    /// On-CPU samples counted in the kernel: one sample per stack, its period the count.
    pub(super) fn write_aggregated(
        &mut self,
        a: &bpf::AggregatedSamples,
        time: &u64,
    ) -> anyhow::Result<()> {
        // The thread's CPU is not counted: CPU 0.
        self.write_stack_sample(
            None,
            0,
            a.pid,
            a.tid,
            0,
            *time,
            a.count,
            &a.kernel_stack,
            &a.user_stack,
            &[],
        )?;
        self.samples += a.count;
        self.aggregated += 1;
        self.last_take = *time;
        Ok(())
    }

    /// Writes a sample BPF took of a running thread (on-CPU, a major fault) under `attr`, its
    /// Python frames merged into its user stack.
    fn write_sampled(
        &mut self,
        s: &bpf::OnCpuSample,
        attr: usize,
        period: u64,
    ) -> anyhow::Result<()> {
        let copy = s.user_regs.as_ref().map(|r| (r, &s.stack_copy[..]));
        let mut merged = std::mem::take(&mut self.merged);
        let user = if self.python.merge(s, &mut merged) {
            if let Some(fact) = self.python.take_mapping(s.pid) {
                if let Err(e) = self.write_fact(&TimedFact {
                    time: s.time,
                    cpu: s.cpu,
                    fact,
                }) {
                    self.merged = merged;
                    return Err(e);
                }
            }
            &merged[..]
        } else {
            &s.user_stack[..]
        };
        let written = self.write_stack_sample(
            copy,
            attr,
            s.pid,
            s.tid,
            s.cpu,
            s.time,
            period,
            &s.kernel_stack,
            user,
            &[],
        );
        self.merged = merged;
        written
    }
}
