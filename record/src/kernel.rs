//! The kernel as perf describes it: the [kernel.kallsyms] mapping and the kernel's build id.

/// `_text` and `_etext` from /proc/kallsyms (zero when kptr_restrict hides them).
pub fn text_range() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    let (mut start, mut end) = (None, None);
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(addr), Some(_), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        match name {
            "_text" => start = u64::from_str_radix(addr, 16).ok(),
            "_etext" => end = u64::from_str_radix(addr, 16).ok(),
            _ => continue,
        }
        if start.is_some() && end.is_some() {
            break;
        }
    }
    match (start?, end?) {
        (s, e) if s != 0 && e > s => Some((s, e)),
        _ => None,
    }
}

/// The running kernel's GNU build id, from the ELF notes in /sys/kernel/notes.
pub fn build_id() -> Option<Vec<u8>> {
    let notes = std::fs::read("/sys/kernel/notes").ok()?;
    crate::buildid::from_notes(&notes)
}
