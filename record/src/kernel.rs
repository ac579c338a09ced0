//! The kernel as perf describes it: the [kernel.kallsyms] mapping, the kernel's build id and
//! the BPF programs loaded in it; and where the functions the BPF programs look for on kernel
//! stacks lie.

/// What record needs from /proc/kallsyms (zero addresses when kptr_restrict hides them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Symbols {
    /// `_text` and `_etext`.
    pub text: Option<(u64, u64)>,
    /// `handle_mm_fault`, from its address to the next symbol's.
    pub fault_fn: Option<(u64, u64)>,
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
    let fault_fn = address_of(b" T handle_mm_fault").and_then(|start| {
        let end = lines().filter_map(address).filter(|&a| a > start).min()?;
        Some((start, end))
    });
    Symbols {
        text: text_range,
        fault_fn,
    }
}

/// The running kernel's GNU build id, from the ELF notes in /sys/kernel/notes.
pub fn build_id() -> Option<Vec<u8>> {
    let notes = std::fs::read("/sys/kernel/notes").ok()?;
    crate::buildid::from_notes(&notes)
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
