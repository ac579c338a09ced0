//! Tests only: the postfix program run as filter.bpf.h runs it (a stack of truth bits; a
//! malformed program lets the event pass; numbers read from the payload with the program's
//! sizes and sign extension, 0 past its end; strings up to their first NUL, at most 64
//! bytes), so that tests check what a compiled filter means in the kernel.

use bpf::trace::{
    Cmp, Filter, FilterInsn, Glob, Operand, Pattern, StrOperand, FILTER_INSNS, FILTER_PATTERNS,
    FILTER_PATTERN_LEN,
};

/// The current task, as the kernel's helpers give it.
#[derive(Debug, Clone, Copy)]
pub struct Task {
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub comm: [u8; 16],
}

impl Task {
    pub fn named(comm: &str) -> Task {
        let mut c = [0u8; 16];
        c[..comm.len().min(15)].copy_from_slice(&comm.as_bytes()[..comm.len().min(15)]);
        Task {
            pid: 100,
            tid: 101,
            cpu: 2,
            comm: c,
        }
    }
}

/// Whether the event with payload `raw` passes `f`.
pub fn passes(f: &Filter, raw: &[u8], task: &Task) -> bool {
    let (mut bits, mut depth) = (0u64, 0u32);
    for insn in f.insns.iter().take(FILTER_INSNS) {
        let truth = match *insn {
            FilterInsn::Number {
                operand,
                cmp,
                value,
                unsigned,
            } => compare(cmp, number(operand, raw, task), value, unsigned),
            FilterInsn::String {
                operand,
                equal,
                pattern,
            } => {
                let pat = &f.patterns[pattern as usize & (FILTER_PATTERNS - 1)];
                string_matches(string(operand, raw, task), pat) == equal
            }
            FilterInsn::And | FilterInsn::Or => {
                if depth < 2 {
                    return true;
                }
                let (a, b) = (bits & 1 == 1, bits >> 1 & 1 == 1);
                bits >>= 2;
                depth -= 2;
                if *insn == FilterInsn::And {
                    a && b
                } else {
                    a || b
                }
            }
            FilterInsn::Not => {
                if depth == 0 {
                    return true;
                }
                bits ^= 1;
                continue;
            }
        };
        if depth >= 63 {
            return true;
        }
        bits = bits << 1 | truth as u64;
        depth += 1;
    }
    depth == 0 || bits & 1 == 1
}

fn number(operand: Operand, raw: &[u8], task: &Task) -> i64 {
    let (offset, size, signed) = match operand {
        Operand::Pid => return task.pid as i64,
        Operand::Tid => return task.tid as i64,
        Operand::Cpu => return task.cpu as i64,
        Operand::Field {
            offset,
            size,
            signed,
        } => (offset as usize, size as usize, signed),
    };
    let read = if [1, 2, 4].contains(&size) { size } else { 8 };
    let Some(b) = raw
        .get(offset..offset + read)
        .filter(|_| offset + size <= raw.len())
    else {
        return 0;
    };
    let mut v = [0u8; 8];
    v[..read].copy_from_slice(b);
    let u = u64::from_le_bytes(v);
    let shift = 64 - 8 * read as u32;
    if signed && read < 8 {
        ((u << shift) as i64) >> shift
    } else {
        u as i64
    }
}

fn compare(cmp: Cmp, v: i64, imm: i64, unsigned: bool) -> bool {
    let (uv, ui) = (v as u64, imm as u64);
    match cmp {
        Cmp::Eq => v == imm,
        Cmp::Ne => v != imm,
        Cmp::Lt if unsigned => uv < ui,
        Cmp::Le if unsigned => uv <= ui,
        Cmp::Gt if unsigned => uv > ui,
        Cmp::Ge if unsigned => uv >= ui,
        Cmp::Lt => v < imm,
        Cmp::Le => v <= imm,
        Cmp::Gt => v > imm,
        Cmp::Ge => v >= imm,
        Cmp::BitAnd => v & imm != 0,
    }
}

/// The string operand's bytes: up to its first NUL, at most [`FILTER_PATTERN_LEN`].
fn string(operand: StrOperand, raw: &[u8], task: &Task) -> Vec<u8> {
    let bytes: &[u8] = match operand {
        StrOperand::Comm => &task.comm,
        StrOperand::CharArray { offset, size } => {
            let (o, n) = (offset as usize, size as usize);
            raw.get(o..o + n).unwrap_or(&[])
        }
        StrOperand::DataLoc { offset } => {
            let o = offset as usize;
            let loc = raw
                .get(o..o + 4)
                .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()));
            let (start, n) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
            raw.get(start..start + n).unwrap_or(&[])
        }
    };
    let bytes = &bytes[..bytes.len().min(FILTER_PATTERN_LEN)];
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    bytes[..end].to_vec()
}

fn string_matches(s: Vec<u8>, p: &Pattern) -> bool {
    let t = &p.text[..];
    match p.glob {
        Glob::Full => s == t,
        Glob::Prefix => s.starts_with(t),
        Glob::Suffix => s.ends_with(t),
        Glob::Contains => t.is_empty() || s.windows(t.len()).any(|w| w == t),
    }
}
