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
    b"sk_wait_data",
    b"sk_stream_wait_memory",
    b"__skb_wait_for_more_packets",
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

/// What record needs of kallsyms' text: lines "ADDRESS TYPE NAME[\t[MODULE]]", in one pass
/// (`kallsyms.rs` reads the file, or what an earlier start kept of it).
pub fn parse_symbols(text: &[u8]) -> Symbols {
    let (mut text_start, mut text_end, mut fault_start) = (None, None, None);
    let mut sock_starts = Vec::new();
    let mut glue_starts = Vec::new();
    // Every symbol's address: where each function ends (the next symbol's start; kallsyms
    // lists no sizes).
    let mut addresses = Vec::with_capacity(text.len() / 40);
    for line in text.split(|&b| b == b'\n') {
        let mut fields = line.splitn(3, |&b| b == b' ');
        let (Some(addr), Some(kind), Some(rest)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Some(addr) = parse_hex(addr).filter(|&a| a != 0) else {
            continue;
        };
        addresses.push(addr);
        // A module's symbol: "NAME\t[MODULE]".
        let (name, in_module) = match rest.iter().position(|&b| b == b'\t') {
            Some(i) => (&rest[..i], true),
            None => (rest, false),
        };
        if GLUE_PREFIXES.iter().any(|p| name.starts_with(p)) {
            glue_starts.push(addr);
        }
        if in_module {
            continue;
        }
        match (kind, name) {
            (_, b"_text") => text_start = Some(addr),
            (_, b"_etext") => text_end = Some(addr),
            (b"T", b"handle_mm_fault") => fault_start = Some(addr),
            (b"T", name) if SOCK_WAIT_FNS.contains(&name) => sock_starts.push(addr),
            _ => {}
        }
    }
    addresses.sort_unstable();
    addresses.dedup();
    let span = |start: u64| {
        let i = addresses.partition_point(|&a| a <= start);
        Some((start, *addresses.get(i)?))
    };
    let mut glue: Vec<(u64, u64)> = glue_starts.into_iter().filter_map(span).collect();
    glue.sort_unstable();
    Symbols {
        text: match (text_start, text_end) {
            (Some(s), Some(e)) if e > s => Some((s, e)),
            _ => None,
        },
        fault_fn: fault_start.and_then(span),
        sock_wait_fns: sock_starts.into_iter().filter_map(span).collect(),
        glue,
    }
}

/// A hexadecimal number, as kallsyms writes addresses.
fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        let v = (d as char).to_digit(16)?;
        Some(n << 4 | u64::from(v))
    })
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
    fn kallsyms_lines_give_each_function_its_span() {
        let text = b"ffffffff81000000 T _text
ffffffff81000100 T handle_mm_fault
ffffffff81000180 t helper
ffffffff81000200 T sk_wait_data
ffffffff81000200 T sk_wait_data_alias
ffffffff81000300 T bpf_trace_run2
ffffffff81000340 T __traceiter_sched_switch
ffffffff81000400 T _etext
0000000000000000 T hidden
ffffffffc0000000 t __bpf_trace_mod_event\t[some_mod]
ffffffffc0000040 t sk_stream_wait_memory\t[some_mod]
ffffffffc0000080 t mod_end\t[some_mod]
garbage line
";
        let s = parse_symbols(text);
        assert_eq!(s.text, Some((0xffff_ffff_8100_0000, 0xffff_ffff_8100_0400)));
        assert_eq!(
            s.fault_fn,
            Some((0xffff_ffff_8100_0100, 0xffff_ffff_8100_0180))
        );
        // The alias at the same address: the span ends at the next address, not at it.
        assert_eq!(
            s.sock_wait_fns,
            [(0xffff_ffff_8100_0200, 0xffff_ffff_8100_0300)]
        );
        assert_eq!(
            s.glue,
            [
                (0xffff_ffff_8100_0300, 0xffff_ffff_8100_0340),
                (0xffff_ffff_8100_0340, 0xffff_ffff_8100_0400),
                (0xffff_ffff_c000_0000, 0xffff_ffff_c000_0040),
            ]
        );
        // kptr_restrict: every address zero.
        let hidden = parse_symbols(b"0000000000000000 T _text\n0000000000000000 T _etext\n");
        assert_eq!(hidden.text, None);
        assert!(hidden.glue.is_empty());
    }
}
