//! Facts about the kernel this machine runs, for telling whether a recording was made on it.

/// Release of the running kernel (`uname -r`).
pub fn release() -> Option<String> {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    Some(r.trim().to_string())
}

/// Build id of the running kernel, from /sys/kernel/notes.
pub fn build_id() -> Option<Vec<u8>> {
    let notes = std::fs::read("/sys/kernel/notes").ok()?;
    let mut p = 0usize;
    while p + 12 <= notes.len() {
        let word = |o: usize| u32::from_ne_bytes(notes[o..o + 4].try_into().unwrap()) as usize;
        let (namesz, descsz, kind) = (word(p), word(p + 4), word(p + 8));
        let name_at = p + 12;
        let desc_at = name_at + namesz.div_ceil(4) * 4;
        let next = desc_at + descsz.div_ceil(4) * 4;
        if next > notes.len() {
            break;
        }
        if kind == 3 && notes.get(name_at..name_at + 3) == Some(b"GNU") {
            return Some(notes[desc_at..desc_at + descsz].to_vec());
        }
        p = next;
    }
    None
}

/// When this machine booted (`btime` of /proc/stat, to the second).
pub fn boot_time() -> Option<std::time::SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
}
