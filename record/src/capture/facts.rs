//! Side-band facts as perf records (MMAP2, COMM, FORK, EXIT, KSYMBOL, BPF_EVENT, the
//! kernel's MMAP), for the processes followed; thinned system-wide (see [`Recorder::thin`]).

use format::{misc, Mmap2File, SampleId, SideBand};

use super::recorder::Recorder;
use crate::capture::attrs::CPU_CLOCK_ID;
use crate::sideband::{Fact, TimedFact};

impl Recorder {
    pub fn write_fact(&mut self, f: &TimedFact) -> anyhow::Result<()> {
        if let Fact::Fork { pid, ppid, .. } = f.fact {
            if self.tracked.contains(&ppid) {
                self.tracked.insert(pid);
            }
        }
        if !self.system_wide && f.fact.pid().is_some_and(|p| !self.tracked.contains(&p)) {
            return Ok(());
        }
        if let Some(known) = &mut self.known {
            known.observe(&f.fact, f.time);
        }
        if let Fact::Mmap2 { pid, filename, .. } = &f.fact {
            if crate::runtimes::jvm::is_libjvm(filename) {
                self.jvms.insert(*pid);
            }
        }
        match f.fact.pid() {
            Some(pid) if self.thin => {
                if !self.described.contains(&pid) {
                    return Ok(());
                }
                self.emit_fact(f)?;
                if matches!(f.fact, Fact::Exit { .. })
                    && !self.known.as_ref().is_some_and(|k| k.is_alive(pid))
                {
                    // Its last thread: a process that reuses the pid is described anew.
                    self.described.remove(&pid);
                }
                Ok(())
            }
            _ => self.emit_fact(f),
        }
    }

    /// With `thin`: describes process `pid` (thread names and mappings as the facts up to
    /// `time` left them) before the first record of it in the file.
    pub(super) fn describe(&mut self, pid: u32, time: u64) -> anyhow::Result<()> {
        if !self.thin || !self.described.insert(pid) {
            return Ok(());
        }
        let facts = self
            .known
            .as_ref()
            .map(|k| k.process_facts(pid))
            .unwrap_or_default();
        for fact in facts {
            self.emit_fact(&TimedFact { time, cpu: 0, fact })?;
        }
        Ok(())
    }

    /// Writes a fact's record.
    pub(super) fn emit_fact(&mut self, f: &TimedFact) -> anyhow::Result<()> {
        let sid = |pid: u32, tid: u32| SampleId {
            pid,
            tid,
            time: f.time,
            cpu: f.cpu,
        };
        match &f.fact {
            Fact::Mmap2 {
                pid,
                tid,
                start,
                len,
                pgoff,
                maj,
                min,
                ino,
                ino_generation,
                prot,
                flags,
                filename,
            } => {
                // (`//anon`: no file; Python frames' synthetic mapping.)
                if prot & 4 != 0 && filename.starts_with('/') && !filename.starts_with("//") {
                    if !self.mapped_files.contains_key(filename) {
                        let id = crate::sideband::foreign::is_foreign(filename, *maj, *min, *ino)
                            .then(|| {
                                crate::sideband::foreign::cache(*pid, *start, start + len, filename)
                            })
                            .flatten();
                        self.mapped_files.insert(filename.clone(), id);
                    }
                    if !self.output_files.contains(filename) {
                        self.output_files.insert(filename.clone());
                    }
                }
                let record = SideBand::Mmap2 {
                    misc: misc::USER,
                    pid: *pid,
                    tid: *tid,
                    start: *start,
                    len: *len,
                    pgoff: *pgoff,
                    file: Mmap2File::Inode {
                        maj: *maj,
                        min: *min,
                        ino: *ino,
                        ino_generation: *ino_generation,
                    },
                    prot: *prot,
                    flags: *flags,
                    filename,
                };
                self.writer.write_side_band(0, &record, &sid(*pid, *tid))?;
            }
            Fact::Comm {
                pid,
                tid,
                comm,
                exec,
            } => {
                self.writer.write_side_band(
                    0,
                    &SideBand::Comm {
                        pid: *pid,
                        tid: *tid,
                        comm,
                        exec: *exec,
                    },
                    &sid(*pid, *tid),
                )?;
            }
            Fact::Fork {
                pid,
                ppid,
                tid,
                ptid,
            } => {
                self.writer.write_side_band(
                    0,
                    &SideBand::Fork {
                        pid: *pid,
                        ppid: *ppid,
                        tid: *tid,
                        ptid: *ptid,
                        time: f.time,
                    },
                    &sid(*pid, *tid),
                )?;
            }
            Fact::Exit {
                pid,
                ppid,
                tid,
                ptid,
            } => {
                self.writer.write_side_band(
                    0,
                    &SideBand::Exit {
                        pid: *pid,
                        ppid: *ppid,
                        tid: *tid,
                        ptid: *ptid,
                        time: f.time,
                    },
                    &sid(*pid, *tid),
                )?;
            }
            Fact::Lost { lost } => self.write_lost(CPU_CLOCK_ID, *lost, f.time)?,
            Fact::Ksymbol {
                addr,
                len,
                ksym_type,
                flags,
                name,
            } => {
                let record = SideBand::Ksymbol {
                    addr: *addr,
                    len: *len,
                    ksym_type: *ksym_type,
                    flags: *flags,
                    name,
                };
                self.writer.write_side_band(0, &record, &sid(0, 0))?;
            }
            Fact::BpfEvent {
                kind,
                flags,
                id,
                tag,
            } => {
                let record = SideBand::BpfEvent {
                    kind: *kind,
                    flags: *flags,
                    id: *id,
                    tag: *tag,
                };
                self.writer.write_side_band(0, &record, &sid(0, 0))?;
            }
        }
        Ok(())
    }

    /// Names a task the file may know nothing of (a kworker that issued I/O, the waker of a
    /// tracked thread) once, from the comm the probe saw. pid 0 is perf's "swapper".
    pub(super) fn name_task(
        &mut self,
        pid: u32,
        tid: u32,
        comm: &[u8; 16],
        time: u64,
        cpu: u32,
    ) -> anyhow::Result<()> {
        if pid == 0 || self.tracked.contains(&pid) || !self.named.insert(pid) {
            return Ok(());
        }
        let comm = String::from_utf8_lossy(comm)
            .trim_end_matches('\0')
            .to_string();
        if let Some(known) = &mut self.known {
            known.observe(
                &Fact::Comm {
                    pid,
                    tid,
                    comm: comm.clone(),
                    exec: false,
                },
                time,
            );
        }
        let sid = SampleId {
            pid,
            tid,
            time,
            cpu,
        };
        let record = SideBand::Comm {
            pid,
            tid,
            comm: &comm,
            exec: false,
        };
        self.writer.write_side_band(0, &record, &sid)?;
        Ok(())
    }

    /// Writes the kernel's MMAP record ([kernel.kallsyms]_text from `_text` to `_etext`), as
    /// each file needs it, and keeps it for the files to come.
    pub fn write_kernel_map(&mut self, text: Option<(u64, u64)>) -> anyhow::Result<()> {
        self.kernel_text = text;
        let Some((start, end)) = text else {
            return Ok(());
        };
        let kmap = SideBand::Mmap {
            misc: misc::KERNEL,
            pid: u32::MAX,
            tid: 0,
            start,
            len: end - start,
            pgoff: start,
            filename: "[kernel.kallsyms]_text",
        };
        let sid = SampleId {
            pid: u32::MAX,
            tid: u32::MAX,
            time: 0,
            cpu: 0,
        };
        self.writer.write_side_band(0, &kmap, &sid)?;
        Ok(())
    }
}
