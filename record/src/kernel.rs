//! The kernel as perf describes it: the [kernel.kallsyms] mapping and the kernel's build id.

/// `_text` and `_etext` from /proc/kallsyms (zero when kptr_restrict hides them).
pub fn text_range() -> Option<(u64, u64)> {
    let text = std::fs::read("/proc/kallsyms").ok()?;
    // Lines are "ADDRESS TYPE NAME[\t[MODULE]]": compare names as bytes, parse only the two.
    let address_of = |name: &[u8]| {
        text.split(|&b| b == b'\n')
            .find(|line| line.ends_with(name) && line.len() > name.len() + 2)
            .and_then(|line| line.split(|&b| b == b' ').next())
            .and_then(|addr| u64::from_str_radix(std::str::from_utf8(addr).ok()?, 16).ok())
    };
    match (address_of(b" _text")?, address_of(b" _etext")?) {
        (s, e) if s != 0 && e > s => Some((s, e)),
        _ => None,
    }
}

/// The running kernel's GNU build id, from the ELF notes in /sys/kernel/notes.
pub fn build_id() -> Option<Vec<u8>> {
    let notes = std::fs::read("/sys/kernel/notes").ok()?;
    crate::buildid::from_notes(&notes)
}
