//! What a recording has told its reader so far about processes and kernel code: each
//! process's thread names and mappings, the BPF programs' kernel symbols. A rotated
//! recording starts each new file with it, so that the file's samples resolve without the
//! files before it (perf synthesizes the same from /proc into each new file; kept here from
//! the records themselves, it also holds processes that exited since, whose last samples
//! may still be on their way).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::sideband::Fact;

/// One mapping of a process, as an MMAP2 record gave it (the name shared: a fork copies every
/// mapping of its parent).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mapping {
    end: u64,
    pgoff: u64,
    maj: u32,
    min: u32,
    ino: u64,
    ino_generation: u64,
    prot: u32,
    flags: u32,
    filename: Arc<str>,
}

#[derive(Debug, Clone, Default)]
struct Process {
    /// Thread names by tid.
    comms: BTreeMap<u32, String>,
    /// Mappings by start; none overlap.
    maps: BTreeMap<u64, Mapping>,
}

impl Process {
    /// Adds a mapping over what it overlaps: older mappings are cut back to what lies
    /// outside it, as the kernel's address space (and perf's reading of it) has them.
    fn map(&mut self, start: u64, m: Mapping) {
        let end = m.end;
        // Mappings do not overlap: those overlapping [start, end) are the last ones that
        // begin before `end`, while they end after `start`.
        let hit: Vec<u64> = self
            .maps
            .range(..end)
            .rev()
            .take_while(|(_, old)| old.end > start)
            .map(|(&s, _)| s)
            .collect();
        for s in hit {
            let old = self.maps.remove(&s).expect("listed above");
            if s < start {
                let mut before = old.clone();
                before.end = start;
                self.maps.insert(s, before);
            }
            if old.end > end {
                let mut after = old.clone();
                after.pgoff = old.pgoff + (end - s);
                self.maps.insert(end, after);
            }
        }
        self.maps.insert(start, m);
    }
}

/// The processes and kernel code a reader knows of after the records written so far.
#[derive(Debug, Default)]
pub struct Known {
    processes: HashMap<u32, Process>,
    /// With `keep_gone`: processes whose last thread exited, with the exit's time, kept for
    /// the counts the kernel still holds of them (see [`Known::forget_gone_before`]).
    gone: HashMap<u32, (u64, Process)>,
    keep_gone: bool,
    /// KSYMBOL records of code still registered, by address.
    ksymbols: BTreeMap<u64, Fact>,
    /// BPF_EVENT records of programs still loaded, by id.
    bpf_programs: BTreeMap<u32, Fact>,
}

impl Known {
    /// A `Known` that keeps exited processes until told to forget them.
    pub fn keeping_exited() -> Known {
        Known {
            keep_gone: true,
            ..Default::default()
        }
    }

    /// Takes in a fact as it is written (at `time`).
    pub fn observe(&mut self, fact: &Fact, time: u64) {
        match fact {
            Fact::Mmap2 {
                pid,
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
                ..
            } => {
                let m = Mapping {
                    end: start.saturating_add(*len),
                    pgoff: *pgoff,
                    maj: *maj,
                    min: *min,
                    ino: *ino,
                    ino_generation: *ino_generation,
                    prot: *prot,
                    flags: *flags,
                    filename: filename.as_str().into(),
                };
                self.processes.entry(*pid).or_default().map(*start, m);
            }
            Fact::Comm {
                pid,
                tid,
                comm,
                exec,
            } => {
                let p = self.processes.entry(*pid).or_default();
                if *exec {
                    // A new image: the old one's mappings are gone (its MMAP2s follow).
                    p.maps.clear();
                }
                p.comms.insert(*tid, comm.clone());
            }
            Fact::Fork {
                pid,
                ppid,
                tid,
                ptid,
            } => {
                let parent = self.processes.get(ppid);
                let comm = parent.and_then(|p| p.comms.get(ptid)).cloned();
                if pid != ppid {
                    // A new process: the parent's mappings, the forking thread's name.
                    let mut child = Process {
                        comms: BTreeMap::new(),
                        maps: parent.map(|p| p.maps.clone()).unwrap_or_default(),
                    };
                    child.comms.extend(comm.map(|c| (*tid, c)));
                    self.processes.insert(*pid, child);
                } else if let Some(c) = comm {
                    self.processes
                        .entry(*pid)
                        .or_default()
                        .comms
                        .insert(*tid, c);
                }
            }
            Fact::Exit { pid, tid, .. } => {
                // The process goes with its last thread.
                if let Some(p) = self.processes.get_mut(pid) {
                    let last =
                        p.comms.is_empty() || (p.comms.len() == 1 && p.comms.contains_key(tid));
                    if !last {
                        p.comms.remove(tid);
                    } else {
                        // Kept as its last thread left it, names included.
                        let p = self.processes.remove(pid).expect("looked up above");
                        if self.keep_gone {
                            self.gone.insert(*pid, (time, p));
                        }
                    }
                }
            }
            Fact::Ksymbol { addr, flags, .. } => {
                if flags & format::ksymbol::FLAG_UNREGISTER != 0 {
                    self.ksymbols.remove(addr);
                } else {
                    self.ksymbols.insert(*addr, fact.clone());
                }
            }
            Fact::BpfEvent { kind, id, .. } => match *kind {
                format::bpf_event::PROG_LOAD => {
                    self.bpf_programs.insert(*id, fact.clone());
                }
                format::bpf_event::PROG_UNLOAD => {
                    self.bpf_programs.remove(id);
                }
                _ => {}
            },
            Fact::Lost { .. } => {}
        }
    }

    /// Whether process `pid` has a thread left.
    pub fn is_alive(&self, pid: u32) -> bool {
        self.processes.contains_key(&pid)
    }

    /// Forgets the processes that exited before `time`.
    pub fn forget_gone_before(&mut self, time: u64) {
        self.gone.retain(|_, (exited, _)| *exited >= time);
    }

    /// What a new file starts with: the kernel code, then each process's thread names and
    /// mappings (by pid, tid and address).
    pub fn facts(&self) -> Vec<Fact> {
        let mut facts = self.kernel_facts();
        let mut pids: Vec<&u32> = self.processes.keys().collect();
        pids.sort_unstable();
        for &pid in pids {
            describe(pid, &self.processes[&pid], &mut facts);
        }
        facts
    }

    /// The kernel code registered: KSYMBOL and BPF_EVENT facts.
    pub fn kernel_facts(&self) -> Vec<Fact> {
        let mut facts: Vec<Fact> = self.ksymbols.values().cloned().collect();
        facts.extend(self.bpf_programs.values().cloned());
        facts
    }

    /// One process's thread names and mappings, living or (kept) exited; none if unknown.
    pub fn process_facts(&self, pid: u32) -> Vec<Fact> {
        let mut facts = Vec::new();
        let p = self
            .processes
            .get(&pid)
            .or(self.gone.get(&pid).map(|(_, p)| p));
        if let Some(p) = p {
            describe(pid, p, &mut facts);
        }
        facts
    }
}

/// Appends `p`'s thread names and mappings as facts of `pid`.
fn describe(pid: u32, p: &Process, facts: &mut Vec<Fact>) {
    facts.extend(p.comms.iter().map(|(&tid, comm)| Fact::Comm {
        pid,
        tid,
        comm: comm.clone(),
        exec: false,
    }));
    facts.extend(p.maps.iter().map(|(&start, m)| Fact::Mmap2 {
        pid,
        tid: pid,
        start,
        len: m.end - start,
        pgoff: m.pgoff,
        maj: m.maj,
        min: m.min,
        ino: m.ino,
        ino_generation: m.ino_generation,
        prot: m.prot,
        flags: m.flags,
        filename: m.filename.to_string(),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmap(pid: u32, start: u64, len: u64, pgoff: u64, name: &str) -> Fact {
        Fact::Mmap2 {
            pid,
            tid: pid,
            start,
            len,
            pgoff,
            maj: 8,
            min: 1,
            ino: 42,
            ino_generation: 0,
            prot: 5,
            flags: 2,
            filename: name.into(),
        }
    }

    fn comm(pid: u32, tid: u32, name: &str) -> Fact {
        Fact::Comm {
            pid,
            tid,
            comm: name.into(),
            exec: false,
        }
    }

    /// (pid, start, end, pgoff, file) of each mapping in `facts`.
    fn maps(facts: &[Fact]) -> Vec<(u32, u64, u64, u64, &str)> {
        facts
            .iter()
            .filter_map(|f| match f {
                Fact::Mmap2 {
                    pid,
                    start,
                    len,
                    pgoff,
                    filename,
                    ..
                } => Some((*pid, *start, start + len, *pgoff, filename.as_str())),
                _ => None,
            })
            .collect()
    }

    fn comms(facts: &[Fact]) -> Vec<(u32, u32, &str)> {
        facts
            .iter()
            .filter_map(|f| match f {
                Fact::Comm { pid, tid, comm, .. } => Some((*pid, *tid, comm.as_str())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_mapping_over_others_cuts_them_back() {
        let mut k = Known::default();
        k.observe(&mmap(1, 0x1000, 0x3000, 0, "/a"), 0); // 1000-4000
        k.observe(&mmap(1, 0x5000, 0x1000, 0, "/b"), 0); // 5000-6000
        k.observe(&mmap(1, 0x7000, 0x1000, 0, "/c"), 0); // 7000-8000
                                                         // 3000-7800: the end of /a, all of /b, the start of /c.
        k.observe(&mmap(1, 0x3000, 0x4800, 0x10000, "/d"), 0);
        assert_eq!(
            maps(&k.facts()),
            [
                (1, 0x1000, 0x3000, 0, "/a"),
                (1, 0x3000, 0x7800, 0x10000, "/d"),
                (1, 0x7800, 0x8000, 0x800, "/c"),
            ]
        );
        // Inside one mapping: it is split around the new one.
        k.observe(&mmap(1, 0x4000, 0x1000, 0, "/e"), 0);
        assert_eq!(
            maps(&k.facts()),
            [
                (1, 0x1000, 0x3000, 0, "/a"),
                (1, 0x3000, 0x4000, 0x10000, "/d"),
                (1, 0x4000, 0x5000, 0, "/e"),
                (1, 0x5000, 0x7800, 0x12000, "/d"),
                (1, 0x7800, 0x8000, 0x800, "/c"),
            ]
        );
        // The same mapping again changes nothing.
        k.observe(&mmap(1, 0x4000, 0x1000, 0, "/e"), 0);
        assert_eq!(maps(&k.facts()).len(), 5);
    }

    #[test]
    fn forks_copy_the_parent_and_exits_remove_threads_then_the_process() {
        let mut k = Known::default();
        k.observe(&comm(10, 10, "parent"), 0);
        k.observe(&mmap(10, 0x1000, 0x1000, 0, "/bin/parent"), 0);
        // A thread, then a child process forked by it.
        k.observe(
            &Fact::Fork {
                pid: 10,
                ppid: 10,
                tid: 11,
                ptid: 10,
            },
            0,
        );
        k.observe(
            &Fact::Fork {
                pid: 20,
                ppid: 10,
                tid: 20,
                ptid: 11,
            },
            0,
        );
        assert_eq!(
            comms(&k.facts()),
            [(10, 10, "parent"), (10, 11, "parent"), (20, 20, "parent")]
        );
        // The child execs: a new name, and its new image in place of the old one (the
        // parent's mappings it had are gone, wherever the new image lies).
        k.observe(
            &Fact::Comm {
                pid: 20,
                tid: 20,
                comm: "child".into(),
                exec: true,
            },
            0,
        );
        k.observe(&mmap(20, 0x5000, 0x2000, 0, "/bin/child"), 0);
        assert_eq!(
            maps(&k.facts()),
            [
                (10, 0x1000, 0x2000, 0, "/bin/parent"),
                (20, 0x5000, 0x7000, 0, "/bin/child")
            ]
        );
        let exit = |pid, tid| Fact::Exit {
            pid,
            ppid: 1,
            tid,
            ptid: 1,
        };
        k.observe(&exit(10, 11), 0);
        k.observe(&exit(20, 20), 0);
        assert_eq!(comms(&k.facts()), [(10, 10, "parent")]);
        assert_eq!(maps(&k.facts()), [(10, 0x1000, 0x2000, 0, "/bin/parent")]);
        k.observe(&exit(10, 10), 0);
        assert!(k.facts().is_empty());
    }

    #[test]
    fn exited_processes_are_kept_until_forgotten_when_asked() {
        let exit = |pid| Fact::Exit {
            pid,
            ppid: 1,
            tid: pid,
            ptid: 1,
        };
        let mut k = Known::keeping_exited();
        for pid in [10, 20] {
            k.observe(&comm(pid, pid, "short"), 0);
            k.observe(&mmap(pid, 0x1000, 0x1000, 0, "/bin/short"), 0);
        }
        k.observe(&exit(10), 100);
        k.observe(&exit(20), 200);
        // Gone from a new file's facts, still there to describe a last count.
        assert!(k.facts().is_empty());
        assert_eq!(comms(&k.process_facts(10)), [(10, 10, "short")]);
        assert_eq!(maps(&k.process_facts(20)).len(), 1);
        k.forget_gone_before(150);
        assert!(k.process_facts(10).is_empty());
        assert_eq!(comms(&k.process_facts(20)), [(20, 20, "short")]);
        // Without keeping: gone at the exit.
        let mut k = Known::default();
        k.observe(&comm(10, 10, "short"), 0);
        k.observe(&exit(10), 100);
        assert!(k.process_facts(10).is_empty());
    }

    #[test]
    fn kernel_code_is_known_while_registered() {
        let mut k = Known::default();
        let ksym = |addr, flags| Fact::Ksymbol {
            addr,
            len: 64,
            ksym_type: format::ksymbol::TYPE_BPF,
            flags,
            name: format!("bpf_prog_{addr:x}"),
        };
        let prog = |kind, id| Fact::BpfEvent {
            kind,
            flags: 0,
            id,
            tag: [0; 8],
        };
        k.observe(&ksym(0x100, 0), 0);
        k.observe(&ksym(0x200, 0), 0);
        k.observe(&prog(format::bpf_event::PROG_LOAD, 7), 0);
        k.observe(&prog(format::bpf_event::PROG_LOAD, 8), 0);
        k.observe(&ksym(0x100, format::ksymbol::FLAG_UNREGISTER), 0);
        k.observe(&prog(format::bpf_event::PROG_UNLOAD, 7), 0);
        assert_eq!(
            k.facts(),
            [ksym(0x200, 0), prog(format::bpf_event::PROG_LOAD, 8)]
        );
    }
}
