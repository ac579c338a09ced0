//! Off-CPU intervals (offcpu-time, runq-time, fault-wait) and their wakers (bpfperf:wakeup).

use super::recorder::Recorder;

impl Recorder {
    /// An off-CPU interval (offcpu-time), with its run-queue wait (runq-time) and its wait inside a page fault (fault-wait).
    pub(super) fn write_off_cpu(&mut self, o: &bpf::OffCpuInterval) -> anyhow::Result<()> {
        let Some(attr) = self.offcpu_attr else {
            return Ok(());
        };
        let copy = o.user_regs.as_ref().map(|r| (r, &o.stack_copy[..]));
        let mut merged = std::mem::take(&mut self.merged);
        let python = self
            .python
            .merge_stack(o.pid, &o.user_stack, &o.python, &mut merged);
        if python {
            if let Err(e) = self.map_python_frames(o.pid, o.time, o.cpu) {
                self.merged = merged;
                return Err(e);
            }
        }
        let user = if python {
            &merged[..]
        } else {
            &o.user_stack[..]
        };
        let written = self.write_stack_sample(
            copy,
            attr,
            o.pid,
            o.tid,
            o.cpu,
            o.time,
            o.duration_ns,
            &o.kernel_stack,
            user,
            &[],
        );
        if let Err(e) = written {
            self.merged = merged;
            return Err(e);
        }
        self.off_cpu += 1;
        // The samples below share the off-CPU sample's stack: in DWARF mode they carry
        // its registers and no bytes of their own (the stack copies are the bulk of the
        // file); analyze borrows the off-CPU sample's, perf unwinds the leaf.
        let shared = copy.map(|(regs, _)| (regs, &[][..]));
        // Waiting for a CPU; blocked inside a page fault (until its wakeup).
        let runq = self.runq_attr.filter(|_| o.runq_ns > 0);
        let fault = self.fault_wait_attr.filter(|_| o.in_fault);
        let waited = o.duration_ns - o.runq_ns.min(o.duration_ns);
        for (attr, period) in [(runq, o.runq_ns), (fault, waited)] {
            let Some(attr) = attr else {
                continue;
            };
            let written = self.write_stack_sample(
                shared,
                attr,
                o.pid,
                o.tid,
                o.cpu,
                o.time,
                period,
                &o.kernel_stack,
                user,
                &[],
            );
            if let Err(e) = written {
                self.merged = merged;
                return Err(e);
            }
        }
        self.merged = merged;
        self.runq += runq.is_some() as u64;
        self.fault_waits += fault.is_some() as u64;
        Ok(())
    }

    /// The waker of a blocked thread (bpfperf:wakeup), its Python frames merged into its
    /// user stack as the blocked thread's are.
    pub(super) fn write_wakeup(&mut self, w: &bpf::Wakeup) -> anyhow::Result<()> {
        let Some(attr) = self.wakeup_attr else {
            return Ok(());
        };
        self.name_task(w.pid, w.tid, &w.comm, w.time, w.cpu)?;
        let raw = format::events::Wakeup {
            wakee_pid: w.wakee_pid,
            wakee_tid: w.wakee_tid,
            blocked_ns: w.blocked_ns,
            wake_ns: w.wake_time,
        }
        .to_raw(w.pid as i32);
        let mut merged = std::mem::take(&mut self.merged);
        let python = self
            .python
            .merge_stack(w.pid, &w.user_stack, &w.python, &mut merged);
        let user = if python {
            &merged[..]
        } else {
            &w.user_stack[..]
        };
        let mapped = if python {
            self.map_python_frames(w.pid, w.time, w.cpu)
        } else {
            Ok(())
        };
        let written = mapped.and_then(|()| {
            self.write_stack_sample(
                None,
                attr,
                w.pid,
                w.tid,
                w.cpu,
                w.time,
                w.blocked_ns,
                &w.kernel_stack,
                user,
                &raw,
            )
        });
        self.merged = merged;
        written?;
        self.wakeups += 1;
        Ok(())
    }
}
