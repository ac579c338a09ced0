//! What "any event" attaches (probes.bpf.c): tracepoints, uprobes, USDT probes and kprobes,
//! each with what its program reads as payload and the filter it runs in the kernel. Record
//! resolves a user's `-e` and `--filter` into these; nothing here parses either.

use std::path::PathBuf;

use crate::skel::types;

/// Most events attached at once (bpfperf.h's MAX_TRACE_EVENTS).
pub const MAX_TRACE_EVENTS: usize = types::bpfperf_limits::BPFPERF_MAX_TRACE_EVENTS.0 as usize;
/// Most payload bytes an event keeps (a tracepoint's record with its dynamic data).
pub const MAX_TRACE_RAW: usize = types::bpfperf_limits::BPFPERF_MAX_TRACE_RAW.0 as usize;
/// Most `__data_loc` fields of a tracepoint whose data is kept.
pub const MAX_DATA_LOC: usize = types::bpfperf_limits::BPFPERF_MAX_DATA_LOC.0 as usize;
/// Syscall numbers [`TraceAttach::Syscall`] can take (below this).
pub const SYSCALL_SLOTS: u32 = types::bpfperf_limits::BPFPERF_SYSCALL_SLOTS.0;
/// Most instructions of a filter.
pub const FILTER_INSNS: usize = types::bpfperf_limits::BPFPERF_FILTER_INSNS.0 as usize;
/// Most string patterns of a filter.
pub const FILTER_PATTERNS: usize = types::bpfperf_limits::BPFPERF_FILTER_PATTERNS.0 as usize;
/// Longest string pattern, and the most bytes of a string a filter compares.
pub const FILTER_PATTERN_LEN: usize = types::bpfperf_limits::BPFPERF_FILTER_PATTERN_LEN.0 as usize;
/// Bytes of a probe's payload before its arguments: the 8-byte common header and the
/// probed address (`__probe_ip`).
pub const PROBE_HEADER: usize = 16;
/// Most arguments a probe's payload holds (arg1..arg6).
pub const PROBE_ARGS: usize = 6;

/// One event to attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    /// Its name, for errors (`syscalls:sys_enter_openat`, `probe_libc:getaddrinfo`).
    pub name: String,
    pub attach: TraceAttach,
    pub payload: TracePayload,
    pub filter: Option<Filter>,
    /// Take the kernel and user stacks.
    pub stacks: bool,
    /// A pair's exit: the index of its entry among [`crate::Options::trace`]. The exit sends
    /// the entry's payload, time and stacks with the time between (a return probe appends
    /// its return address and value: 16 bytes).
    pub entry: Option<usize>,
    /// A pair's entry: kept per thread for its exit, never sent alone.
    pub entry_only: bool,
    /// The payload's `common_type`: the tracepoint's id, or the id of the probe's format.
    pub common_type: u16,
    /// With [`crate::Options::trace_aggregate`]: the value whose power-of-two histogram is
    /// counted in the kernel (the events are counted per bucket as well as per thread and
    /// stacks).
    pub hist: Option<TraceHist>,
}

/// What an event's histogram counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceHist {
    /// The payload's `size` bytes (1, 2, 4 or 8) at `offset`, signed or not.
    Field {
        offset: u32,
        size: u32,
        signed: bool,
    },
    /// A pair's latency (ns).
    Latency,
}

/// Where an event's program is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceAttach {
    /// `events/SYSTEM/NAME` in tracefs.
    Tracepoint {
        system: String,
        name: String,
    },
    /// A uprobe at `offset` in the file (a file offset, as uprobes take them); `ret`: at
    /// the function's return.
    Uprobe {
        path: PathBuf,
        offset: u64,
        ret: bool,
    },
    /// A USDT probe of the file's `.note.stapsdt` (libbpf reads its notes and arguments).
    Usdt {
        path: PathBuf,
        provider: String,
        name: String,
    },
    Kprobe {
        function: String,
        ret: bool,
    },
    /// A `syscalls:sys_enter_NAME` (or `sys_exit_NAME`) tracepoint of syscall number `nr`,
    /// its record built from the raw syscall tracepoints (tp_btf sys_enter/sys_exit), the
    /// cheaper way in: what perf.data holds is the same record. At most one event per
    /// syscall and direction.
    Syscall {
        nr: u32,
        exit: bool,
    },
}

/// What the program reads as the event's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TracePayload {
    /// A tracepoint's record: `fixed_size` bytes, then the data of its `__data_loc` fields
    /// (the offsets of their u32 locators).
    Record { fixed_size: u32, data_loc: Vec<u16> },
    /// A probe's: [`PROBE_HEADER`] bytes, then this many u64 arguments (at most
    /// [`PROBE_ARGS`]).
    Args(u32),
    /// A return probe's: its entry's payload, then the return address and value.
    Return,
}

/// A filter run in the kernel on an event's payload before anything else is taken: a
/// postfix program (each operand pushes a truth; And, Or pop two and push one; Not flips
/// the top), passing the event when the truth left on top is set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    pub insns: Vec<FilterInsn>,
    pub patterns: Vec<Pattern>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterInsn {
    /// `operand cmp value`; `unsigned`: compare as unsigned 64-bit numbers.
    Number {
        operand: Operand,
        cmp: Cmp,
        value: i64,
        unsigned: bool,
    },
    /// The string `operand` matches (or, `equal` false, does not match) `patterns[pattern]`.
    String {
        operand: StrOperand,
        equal: bool,
        pattern: u8,
    },
    And,
    Or,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// An integer of the payload: `size` (1, 2, 4, 8) bytes at `offset`.
    Field {
        offset: u16,
        size: u8,
        signed: bool,
    },
    /// The thread group id of the current task.
    Pid,
    Tid,
    Cpu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrOperand {
    /// The current task's name.
    Comm,
    /// A `char[size]` field of the payload.
    CharArray { offset: u16, size: u8 },
    /// A `__data_loc char[]` field: its u32 locator at `offset`.
    DataLoc { offset: u16 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `field & value` is not 0.
    BitAnd,
}

/// A string pattern (perf's simple globs: `x`, `x*`, `*x`, `*x*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    pub glob: Glob,
    /// At most [`FILTER_PATTERN_LEN`] bytes, without the stars.
    pub text: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Glob {
    Full,
    Prefix,
    Suffix,
    Contains,
}

/// An event that passed its filter, as its program sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// The event's index among [`crate::Options::trace`].
    pub event: u32,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub comm: [u8; 16],
    /// When it happened (a pair: its exit), CLOCK_MONOTONIC ns.
    pub time: u64,
    /// A pair: the time from its entry (0 otherwise).
    pub latency_ns: u64,
    /// The payload (see [`TracePayload`]).
    pub raw: Vec<u8>,
    pub kernel_stack: Vec<u64>,
    pub user_stack: Vec<u64>,
    /// DWARF mode, when the kernel could not unwind: the user registers and stack copy.
    pub user_regs: Option<crate::UserRegs>,
    pub stack_copy: Vec<u8>,
}

impl Filter {
    /// The filter as the kernel's program reads it; an error if it is over the limits.
    pub(crate) fn to_prog(&self) -> Result<types::filter_prog, String> {
        if self.insns.len() > FILTER_INSNS {
            return Err(format!(
                "the filter needs {} steps: at most {FILTER_INSNS} fit",
                self.insns.len()
            ));
        }
        if self.patterns.len() > FILTER_PATTERNS {
            return Err(format!(
                "the filter has {} string patterns: at most {FILTER_PATTERNS} fit",
                self.patterns.len()
            ));
        }
        let mut p = types::filter_prog {
            n: self.insns.len() as u32,
            ..Default::default()
        };
        for (out, insn) in p.insns.iter_mut().zip(&self.insns) {
            let op = |op: types::filter_op| op.0 as u8;
            *out = match *insn {
                FilterInsn::Number {
                    operand,
                    cmp,
                    value,
                    unsigned,
                } => {
                    let (src, off, size, signed) = match operand {
                        Operand::Field {
                            offset,
                            size,
                            signed,
                        } => (types::filter_src::FS_RAW, offset, size, signed),
                        Operand::Pid => (types::filter_src::FS_PID, 0, 0, false),
                        Operand::Tid => (types::filter_src::FS_TID, 0, 0, false),
                        Operand::Cpu => (types::filter_src::FS_CPU, 0, 0, false),
                    };
                    let cmp = match cmp {
                        Cmp::Eq => types::filter_cmp::FC_EQ,
                        Cmp::Ne => types::filter_cmp::FC_NE,
                        Cmp::Lt => types::filter_cmp::FC_LT,
                        Cmp::Le => types::filter_cmp::FC_LE,
                        Cmp::Gt => types::filter_cmp::FC_GT,
                        Cmp::Ge => types::filter_cmp::FC_GE,
                        Cmp::BitAnd => types::filter_cmp::FC_AND,
                    };
                    let flags = if signed {
                        types::filter_flags::FF_SIGNED.0
                    } else {
                        0
                    } | if unsigned {
                        types::filter_flags::FF_UNSIGNED_CMP.0
                    } else {
                        0
                    };
                    types::filter_insn {
                        op: op(types::filter_op::F_CMP),
                        cmp: cmp.0 as u8,
                        src: src.0 as u8,
                        size,
                        flags: flags as u8,
                        off,
                        imm: value,
                        ..Default::default()
                    }
                }
                FilterInsn::String {
                    operand,
                    equal,
                    pattern,
                } => {
                    let (src, off, size) = match operand {
                        StrOperand::Comm => (types::filter_src::FS_COMM, 0, 16),
                        StrOperand::CharArray { offset, size } => {
                            (types::filter_src::FS_RAW, offset, size)
                        }
                        StrOperand::DataLoc { offset } => {
                            (types::filter_src::FS_DATA_LOC, offset, 4)
                        }
                    };
                    types::filter_insn {
                        op: op(types::filter_op::F_STR),
                        cmp: if equal {
                            types::filter_cmp::FC_EQ.0
                        } else {
                            types::filter_cmp::FC_NE.0
                        } as u8,
                        src: src.0 as u8,
                        size,
                        off,
                        str: pattern,
                        ..Default::default()
                    }
                }
                FilterInsn::And => types::filter_insn {
                    op: op(types::filter_op::F_AND),
                    ..Default::default()
                },
                FilterInsn::Or => types::filter_insn {
                    op: op(types::filter_op::F_OR),
                    ..Default::default()
                },
                FilterInsn::Not => types::filter_insn {
                    op: op(types::filter_op::F_NOT),
                    ..Default::default()
                },
            };
        }
        for (out, pat) in p.patterns.iter_mut().zip(&self.patterns) {
            if pat.text.len() > FILTER_PATTERN_LEN {
                return Err(format!(
                    "the string {:?} is longer than the {FILTER_PATTERN_LEN} bytes a filter compares",
                    String::from_utf8_lossy(&pat.text)
                ));
            }
            out.r#match = match pat.glob {
                Glob::Full => types::filter_match::FM_FULL,
                Glob::Prefix => types::filter_match::FM_FRONT,
                Glob::Suffix => types::filter_match::FM_END,
                Glob::Contains => types::filter_match::FM_MIDDLE,
            }
            .0 as u8;
            out.len = pat.text.len() as u8;
            for (d, &s) in out.text.iter_mut().zip(&pat.text) {
                *d = s as _;
            }
        }
        Ok(p)
    }
}
