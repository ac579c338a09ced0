//! Typed records and their encoding into perf.data bytes.

use crate::constants::{misc, record_type, sample_type as st};

/// The `sample_id` trailer values of a non-sample record (used when `sample_id_all` is set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleId {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
}

/// User registers of a sample: ABI (2 = 64-bit) and one value per set bit of
/// `sample_regs_user`, lowest bit first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs<'a> {
    pub abi: u64,
    pub regs: &'a [u64],
}

/// A SAMPLE record. Fields the event's `sample_type` does not ask for are not written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample<'a> {
    /// `misc` of the record header: [`misc::KERNEL`] or [`misc::USER`].
    pub misc: u16,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub addr: u64,
    pub cpu: u32,
    pub period: u64,
    /// Context markers and addresses, as the kernel writes them.
    pub callchain: &'a [u64],
    /// RAW payload; padded with zeros so that the u32 size plus the data is 8-aligned.
    pub raw: &'a [u8],
    pub user_regs: Option<UserRegs<'a>>,
    /// STACK_USER bytes from the user SP upwards; only as many as were copied.
    pub user_stack: &'a [u8],
    pub weight: u64,
}

/// The memory-mapped file of an MMAP2 record: identified by device and inode, or by build id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mmap2File<'a> {
    Inode {
        maj: u32,
        min: u32,
        ino: u64,
        ino_generation: u64,
    },
    BuildId(&'a [u8]),
}

/// Records other than samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideBand<'a> {
    Mmap {
        misc: u16,
        pid: u32,
        tid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        filename: &'a str,
    },
    Mmap2 {
        misc: u16,
        pid: u32,
        tid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        file: Mmap2File<'a>,
        prot: u32,
        flags: u32,
        filename: &'a str,
    },
    Comm {
        pid: u32,
        tid: u32,
        comm: &'a str,
        /// Set when the name changed because of exec.
        exec: bool,
    },
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time: u64,
    },
    Exit {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time: u64,
    },
    Lost {
        id: u64,
        lost: u64,
    },
    /// A kernel symbol registered at run time (or gone, with
    /// [`crate::ksymbol::FLAG_UNREGISTER`]): perf names kernel frames in `addr..addr + len`
    /// `name` (for BPF programs `bpf_prog_<tag>_<name>`, as kallsyms does).
    Ksymbol {
        addr: u64,
        len: u32,
        /// [`crate::ksymbol::TYPE_BPF`] or [`crate::ksymbol::TYPE_OOL`].
        ksym_type: u16,
        flags: u16,
        name: &'a str,
    },
    /// A BPF program loaded ([`crate::bpf_event::PROG_LOAD`]) or unloaded, by id and tag.
    BpfEvent {
        kind: u16,
        flags: u16,
        id: u32,
        tag: [u8; 8],
    },
}

/// Appends little-endian values and keeps the record 8-aligned.
#[derive(Default)]
pub(crate) struct Encoder {
    pub buf: Vec<u8>,
}

impl Encoder {
    fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    fn pad8(&mut self) {
        while !self.buf.len().is_multiple_of(8) {
            self.buf.push(0);
        }
    }
    /// A NUL-terminated string padded to 8 bytes.
    fn cstr(&mut self, s: &str) {
        self.bytes(s.as_bytes());
        self.buf.push(0);
        self.pad8();
    }

    fn begin(&mut self, kind: u32, misc: u16) -> usize {
        let at = self.buf.len();
        self.u32(kind);
        self.u16(misc);
        self.u16(0);
        at
    }

    /// Writes the size into the header begun at `at`. Fails when the record exceeds 64 KiB.
    fn end(&mut self, at: usize) -> Result<(), String> {
        self.pad8();
        let size = self.buf.len() - at;
        let size16 = u16::try_from(size)
            .map_err(|_| format!("record of {size} bytes exceeds perf's 65535-byte limit"))?;
        self.buf[at + 6..at + 8].copy_from_slice(&size16.to_le_bytes());
        Ok(())
    }

    /// The `sample_id` trailer: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER (set bits only).
    fn sample_id(&mut self, sample_type: u64, id: u64, s: &SampleId) {
        if sample_type & st::TID != 0 {
            self.u32(s.pid);
            self.u32(s.tid);
        }
        if sample_type & st::TIME != 0 {
            self.u64(s.time);
        }
        if sample_type & st::ID != 0 {
            self.u64(id);
        }
        if sample_type & st::STREAM_ID != 0 {
            self.u64(id);
        }
        if sample_type & st::CPU != 0 {
            self.u32(s.cpu);
            self.u32(0);
        }
        if sample_type & st::IDENTIFIER != 0 {
            self.u64(id);
        }
    }

    pub fn sample(&mut self, sample_type: u64, id: u64, s: &Sample) -> Result<(), String> {
        let at = self.begin(record_type::SAMPLE, s.misc);
        if sample_type & st::IDENTIFIER != 0 {
            self.u64(id);
        }
        if sample_type & st::IP != 0 {
            self.u64(s.ip);
        }
        if sample_type & st::TID != 0 {
            self.u32(s.pid);
            self.u32(s.tid);
        }
        if sample_type & st::TIME != 0 {
            self.u64(s.time);
        }
        if sample_type & st::ADDR != 0 {
            self.u64(s.addr);
        }
        if sample_type & st::ID != 0 {
            self.u64(id);
        }
        if sample_type & st::STREAM_ID != 0 {
            self.u64(id);
        }
        if sample_type & st::CPU != 0 {
            self.u32(s.cpu);
            self.u32(0);
        }
        if sample_type & st::PERIOD != 0 {
            self.u64(s.period);
        }
        if sample_type & st::READ != 0 {
            return Err("READ in sample_type is not supported by the writer".into());
        }
        if sample_type & st::CALLCHAIN != 0 {
            self.u64(s.callchain.len() as u64);
            for &ip in s.callchain {
                self.u64(ip);
            }
        }
        if sample_type & st::RAW != 0 {
            let padded = (s.raw.len() + 4).div_ceil(8) * 8 - 4;
            self.u32(padded as u32);
            self.bytes(s.raw);
            self.buf.resize(self.buf.len() + padded - s.raw.len(), 0);
        }
        if sample_type & st::BRANCH_STACK != 0 {
            self.u64(0);
        }
        if sample_type & st::REGS_USER != 0 {
            match s.user_regs {
                Some(r) => {
                    self.u64(r.abi);
                    for &v in r.regs {
                        self.u64(v);
                    }
                }
                None => self.u64(0),
            }
        }
        if sample_type & st::STACK_USER != 0 {
            let n = s.user_stack.len().div_ceil(8) * 8;
            self.u64(n as u64);
            if n > 0 {
                self.bytes(s.user_stack);
                self.buf.resize(self.buf.len() + n - s.user_stack.len(), 0);
                self.u64(s.user_stack.len() as u64);
            }
        }
        if sample_type & st::WEIGHT != 0 {
            self.u64(s.weight);
        }
        self.end(at)
    }

    pub fn side_band(
        &mut self,
        sample_type: u64,
        sample_id_all: bool,
        id: u64,
        r: &SideBand,
        sid: &SampleId,
    ) -> Result<(), String> {
        let at = match *r {
            SideBand::Mmap {
                misc: m,
                pid,
                tid,
                start,
                len,
                pgoff,
                filename,
            } => {
                let at = self.begin(record_type::MMAP, m);
                self.u32(pid);
                self.u32(tid);
                self.u64(start);
                self.u64(len);
                self.u64(pgoff);
                self.cstr(filename);
                at
            }
            SideBand::Mmap2 {
                misc: m,
                pid,
                tid,
                start,
                len,
                pgoff,
                file,
                prot,
                flags,
                filename,
            } => {
                let m = match file {
                    Mmap2File::BuildId(_) => m | misc::MMAP_BUILD_ID,
                    Mmap2File::Inode { .. } => m & !misc::MMAP_BUILD_ID,
                };
                let at = self.begin(record_type::MMAP2, m);
                self.u32(pid);
                self.u32(tid);
                self.u64(start);
                self.u64(len);
                self.u64(pgoff);
                match file {
                    Mmap2File::Inode {
                        maj,
                        min,
                        ino,
                        ino_generation,
                    } => {
                        self.u32(maj);
                        self.u32(min);
                        self.u64(ino);
                        self.u64(ino_generation);
                    }
                    Mmap2File::BuildId(id) => {
                        if id.len() > 20 {
                            return Err(format!("build id of {} bytes, at most 20 fit", id.len()));
                        }
                        self.buf.push(id.len() as u8);
                        self.bytes(&[0; 3]);
                        let mut padded = [0u8; 20];
                        padded[..id.len()].copy_from_slice(id);
                        self.bytes(&padded);
                    }
                }
                self.u32(prot);
                self.u32(flags);
                self.cstr(filename);
                at
            }
            SideBand::Comm {
                pid,
                tid,
                comm,
                exec,
            } => {
                let at = self.begin(record_type::COMM, if exec { misc::COMM_EXEC } else { 0 });
                self.u32(pid);
                self.u32(tid);
                self.cstr(comm);
                at
            }
            SideBand::Fork {
                pid,
                ppid,
                tid,
                ptid,
                time,
            }
            | SideBand::Exit {
                pid,
                ppid,
                tid,
                ptid,
                time,
            } => {
                let kind = if matches!(r, SideBand::Fork { .. }) {
                    record_type::FORK
                } else {
                    record_type::EXIT
                };
                let at = self.begin(kind, 0);
                self.u32(pid);
                self.u32(ppid);
                self.u32(tid);
                self.u32(ptid);
                self.u64(time);
                at
            }
            SideBand::Lost { id: lost_id, lost } => {
                let at = self.begin(record_type::LOST, 0);
                self.u64(lost_id);
                self.u64(lost);
                at
            }
            SideBand::Ksymbol {
                addr,
                len,
                ksym_type,
                flags,
                name,
            } => {
                let at = self.begin(record_type::KSYMBOL, 0);
                self.u64(addr);
                self.u32(len);
                self.u16(ksym_type);
                self.u16(flags);
                self.cstr(name);
                at
            }
            SideBand::BpfEvent {
                kind,
                flags,
                id,
                tag,
            } => {
                let at = self.begin(record_type::BPF_EVENT, 0);
                self.u16(kind);
                self.u16(flags);
                self.u32(id);
                self.bytes(&tag);
                at
            }
        };
        if sample_id_all {
            self.sample_id(sample_type, id, sid);
        }
        self.end(at)
    }

    pub fn finished_round(&mut self) {
        let at = self.begin(record_type::FINISHED_ROUND, 0);
        self.end(at).expect("8 bytes fit");
    }
}
