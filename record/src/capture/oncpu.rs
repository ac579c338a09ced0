//! On-CPU samples (cpu-clock), major page faults (fault-time), and the samples counted in
//! the kernel (--aggregate): each with its Python frames merged into its user stack.

use super::recorder::Recorder;
use crate::sideband::TimedFact;

/// What is written of a sample of a running thread: one BPF sent, or those it counted.
struct Sampled<'a> {
    pid: u32,
    tid: u32,
    cpu: u32,
    time: u64,
    kernel: &'a [u64],
    user: &'a [u64],
    python: &'a [bpf::PyFrame],
    /// DWARF mode, a stack not unwound in the kernel: the registers and the copy.
    copy: Option<(&'a bpf::UserRegs, &'a [u8])>,
    /// The samples it stands for.
    samples: u64,
}

impl<'a> Sampled<'a> {
    fn sent(s: &'a bpf::OnCpuSample) -> Sampled<'a> {
        Sampled {
            pid: s.pid,
            tid: s.tid,
            cpu: s.cpu,
            time: s.time,
            kernel: &s.kernel_stack,
            user: &s.user_stack,
            python: &s.python,
            copy: s.user_regs.as_ref().map(|r| (r, &s.stack_copy[..])),
            samples: 1,
        }
    }
}

impl Recorder {
    /// An on-CPU sample taken by BPF (cpu-clock).
    pub(super) fn write_sample(&mut self, s: &bpf::OnCpuSample) -> anyhow::Result<()> {
        let period = if self.aggregate { 1 } else { s.period };
        self.write_sampled(&Sampled::sent(s), 0, period)?;
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
        self.write_sampled(&Sampled::sent(s), attr, s.period)?;
        self.faults += 1;
        Ok(())
    }

    /// On-CPU samples counted in the kernel: one sample per stack, its period the count.
    pub(super) fn write_aggregated(
        &mut self,
        a: &bpf::AggregatedSamples,
        time: &u64,
    ) -> anyhow::Result<()> {
        let counted = Sampled {
            pid: a.pid,
            tid: a.tid,
            // The thread's CPU is not counted: CPU 0.
            cpu: 0,
            time: *time,
            kernel: &a.kernel_stack,
            user: &a.user_stack,
            python: &a.python,
            copy: None,
            samples: a.count,
        };
        self.write_sampled(&counted, 0, a.count)?;
        self.samples += a.count;
        self.aggregated += 1;
        self.last_take = *time;
        Ok(())
    }

    /// Writes a sample of a running thread (on-CPU, a major fault, or those counted in the
    /// kernel) under `attr`, its Python frames merged into its user stack.
    fn write_sampled(&mut self, s: &Sampled<'_>, attr: usize, period: u64) -> anyhow::Result<()> {
        let mut merged = std::mem::take(&mut self.merged);
        let python = self
            .python
            .merge(s.pid, s.samples, s.user, s.python, &mut merged);
        let user = if python { &merged[..] } else { s.user };
        let mapped = if python {
            self.map_python_frames(s.pid, s.time, s.cpu)
        } else {
            Ok(())
        };
        let written = mapped.and_then(|()| {
            self.write_stack_sample(
                s.copy,
                attr,
                s.pid,
                s.tid,
                s.cpu,
                s.time,
                period,
                s.kernel,
                user,
                &[],
            )
        });
        self.merged = merged;
        written
    }

    /// Before the first record of `pid` with Python frames in a stack: the synthetic mapping
    /// they lie in.
    pub(super) fn map_python_frames(
        &mut self,
        pid: u32,
        time: u64,
        cpu: u32,
    ) -> anyhow::Result<()> {
        match self.python.take_mapping(pid) {
            Some(fact) => self.write_fact(&TimedFact { time, cpu, fact }),
            None => Ok(()),
        }
    }
}
