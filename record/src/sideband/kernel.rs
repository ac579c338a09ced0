//! The kernel as perf describes it: the [kernel.kallsyms] mapping, the kernel's build id and
//! the BPF programs loaded in it; where the functions the BPF programs look for on kernel
//! stacks lie; and the tracing glue that stands on top of the kernel stacks tracepoint
//! programs take.

/// What record needs from /proc/kallsyms (zero addresses when kptr_restrict hides them).
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    /// `_text` and `_etext`.
    pub text: Option<(u64, u64)>,
    /// `handle_mm_fault`, from its address to the next symbol's.
    pub fault_fn: Option<(u64, u64)>,
    /// [`SOCK_WAIT_FNS`] found, each from its address to the next symbol's.
    pub sock_wait_fns: Vec<(u64, u64)>,
    /// The functions that run a tracepoint's BPF programs ([`GLUE_PREFIXES`]), sorted: see
    /// [`Symbols::glue_frames`].
    pub glue: Vec<(u64, u64)>,
}

/// The functions a socket call blocks in, under schedule(): TCP receive, TCP send (no
/// room in the send buffer), datagram receive (UDP, unix datagrams).
const SOCK_WAIT_FNS: &[&[u8]] = &[
    b" T sk_wait_data",
    b" T sk_stream_wait_memory",
    b" T __skb_wait_for_more_packets",
];

/// Names of the functions that run tracepoint programs: tp_btf's (`__traceiter_*`,
/// `__bpf_trace_*`, `bpf_trace_run*`) and those of programs attached through perf, as any
/// event attaches them (`perf_trace_*`, `perf_syscall_*`, `perf_call_bpf_*`,
/// `trace_call_bpf`).
const GLUE_PREFIXES: &[&[u8]] = &[
    b"__traceiter_",
    b"__bpf_trace_",
    b"bpf_trace_run",
    b"perf_trace_",
    b"perf_syscall_",
    b"perf_call_bpf_",
    b"trace_call_bpf",
];

/// Frames a tracepoint program's kernel stack starts with when the symbols are unknown: the
/// program, bpf_trace_runN, __traceiter_NAME (as seen on 6.18).
const GLUE_FRAMES: usize = 3;

impl Symbols {
    /// How many leading frames of a tracepoint program's kernel stack are what ran the
    /// program: in BPF code (outside the kernel's text) or in the tracing glue. How many there
    /// are depends on how the program was compiled and JIT-ed (a fixed count to skip in BPF
    /// gave `__traceiter_sched_switch` atop every off-CPU stack after the programs were split).
    pub fn glue_frames(&self, stack: &[u64]) -> usize {
        let Some((text_start, text_end)) = self.text else {
            return GLUE_FRAMES.min(stack.len());
        };
        let glue = |a: u64| {
            let i = self.glue.partition_point(|g| g.0 <= a);
            i > 0 && a < self.glue[i - 1].1
        };
        stack
            .iter()
            .take_while(|&&a| !(text_start..text_end).contains(&a) || glue(a))
            .count()
    }
}

/// Reads /proc/kallsyms once.
pub fn symbols() -> Symbols {
    let Ok(text) = std::fs::read("/proc/kallsyms") else {
        return Symbols::default();
    };
    // Lines are "ADDRESS TYPE NAME[\t[MODULE]]": compare names as bytes, parse addresses only
    // where needed.
    let lines = || text.split(|&b| b == b'\n');
    let address = |line: &[u8]| {
        line.split(|&b| b == b' ')
            .next()
            .and_then(|addr| u64::from_str_radix(std::str::from_utf8(addr).ok()?, 16).ok())
    };
    let address_of = |name: &[u8]| {
        lines()
            .find(|line| line.ends_with(name) && line.len() > name.len() + 2)
            .and_then(address)
            .filter(|&a| a != 0)
    };
    let text_range = match (address_of(b" _text"), address_of(b" _etext")) {
        (Some(s), Some(e)) if e > s => Some((s, e)),
        _ => None,
    };
    // The function ends where the next symbol starts (kallsyms lists no sizes).
    let function = |name: &[u8]| {
        address_of(name).and_then(|start| {
            let end = lines().filter_map(address).filter(|&a| a > start).min()?;
            Some((start, end))
        })
    };
    let fault_fn = function(b" T handle_mm_fault");
    let sock_wait_fns = SOCK_WAIT_FNS.iter().filter_map(|n| function(n)).collect();
    // Every symbol's address, sorted: where each glue function ends.
    let mut addresses: Vec<u64> = lines().filter_map(address).filter(|&a| a != 0).collect();
    addresses.sort_unstable();
    addresses.dedup();
    let end_of = |start: u64| {
        let i = addresses.partition_point(|&a| a <= start);
        addresses.get(i).copied()
    };
    let mut glue: Vec<(u64, u64)> = lines()
        .filter(|line| {
            let name = line.rsplit(|&b| b == b' ').next().unwrap_or(b"");
            let name = name.split(|&b| b == b'\t').next().unwrap_or(b"");
            GLUE_PREFIXES.iter().any(|p| name.starts_with(p))
        })
        .filter_map(|line| {
            let start = address(line).filter(|&a| a != 0)?;
            Some((start, end_of(start)?))
        })
        .collect();
    glue.sort_unstable();
    Symbols {
        text: text_range,
        fault_fn,
        sock_wait_fns,
        glue,
    }
}

/// The running kernel's GNU build id, from the ELF notes in /sys/kernel/notes.
pub fn build_id() -> Option<Vec<u8>> {
    let notes = std::fs::read("/sys/kernel/notes").ok()?;
    crate::sideband::buildid::from_notes(&notes)
}

/// The BPF programs loaded now (record's own among them), as the KSYMBOL records (one per
/// JIT-ed function) and BPF_EVENT (load) record the kernel writes when a program loads: perf
/// synthesizes the same at its start, so that kernel frames in them have names. Programs
/// loaded later come from the side-band events.
pub fn bpf_programs() -> Vec<crate::sideband::Fact> {
    use crate::sideband::Fact;
    let mut facts = Vec::new();
    for p in bpf::loaded_programs() {
        facts.extend(p.functions.into_iter().map(|f| Fact::Ksymbol {
            addr: f.addr,
            len: f.len,
            ksym_type: format::ksymbol::TYPE_BPF,
            flags: 0,
            name: f.name,
        }));
        facts.push(Fact::BpfEvent {
            kind: format::bpf_event::PROG_LOAD,
            flags: 0,
            id: p.id,
            tag: p.tag,
        });
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracepoint_stacks_lose_the_program_and_the_glue_only() {
        let s = Symbols {
            text: Some((0xffff_ffff_8100_0000, 0xffff_ffff_8300_0000)),
            fault_fn: None,
            sock_wait_fns: Vec::new(),
            glue: vec![
                (0xffff_ffff_8139_bb30, 0xffff_ffff_8139_bc00), // __traceiter_sched_switch
                (0xffff_ffff_814b_a870, 0xffff_ffff_814b_aa00), // bpf_trace_run4
            ],
        };
        let stack = [
            0xffff_ffff_c002_bb47, // the JIT-ed program
            0xffff_ffff_814b_a96c,
            0xffff_ffff_8139_bb71,
            0xffff_ffff_821f_acd8, // __schedule
            0xffff_ffff_821f_b643,
        ];
        assert_eq!(s.glue_frames(&stack), 3);
        // Nothing to strip; a stack of glue only.
        assert_eq!(s.glue_frames(&stack[3..]), 0);
        assert_eq!(s.glue_frames(&stack[..3]), 3);
        // Symbols unknown: the three frames seen on this kernel.
        assert_eq!(Symbols::default().glue_frames(&stack), 3);
    }

    #[test]
    fn this_kernels_tracing_glue_is_found() {
        let s = symbols();
        if s.text.is_none() {
            return; // kallsyms hidden
        }
        assert!(s.glue.len() > 100, "{} glue functions", s.glue.len());
        assert!(s.glue.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}
