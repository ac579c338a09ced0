//! Facts about processes and kernel code, as the side-band records state them.

/// A process fact from the kernel, with the time it happened (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    Mmap2 {
        pid: u32,
        tid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        maj: u32,
        min: u32,
        ino: u64,
        ino_generation: u64,
        prot: u32,
        flags: u32,
        filename: String,
    },
    Comm {
        pid: u32,
        tid: u32,
        comm: String,
        exec: bool,
    },
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
    },
    Exit {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
    },
    /// The side-band buffer overflowed: this many records were lost.
    Lost { lost: u64 },
    /// Kernel code registered (or, flags 1, gone) at run time: a BPF program's JIT-ed
    /// functions, BPF trampolines, out-of-line code.
    Ksymbol {
        addr: u64,
        len: u32,
        ksym_type: u16,
        flags: u16,
        name: String,
    },
    /// A BPF program loaded (kind 1) or unloaded (2).
    BpfEvent {
        kind: u16,
        flags: u16,
        id: u32,
        tag: [u8; 8],
    },
}

impl Fact {
    /// The process the fact is about.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Fact::Mmap2 { pid, .. }
            | Fact::Comm { pid, .. }
            | Fact::Fork { pid, .. }
            | Fact::Exit { pid, .. } => Some(*pid),
            Fact::Lost { .. } | Fact::Ksymbol { .. } | Fact::BpfEvent { .. } => None,
        }
    }
}

/// A fact and when and where it was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedFact {
    pub time: u64,
    pub cpu: u32,
    pub fact: Fact,
}
