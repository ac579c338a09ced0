//! Facts about processes that already run when recording starts (-p, -a), read from /proc.

use crate::sideband::Fact;

/// Thread ids of a process.
pub fn threads(pid: u32) -> Vec<u32> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    tids
}

/// Whether process `pid` is gone or a zombie (exited, not yet reaped by its parent).
pub fn has_exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

/// Every process id in /proc.
pub fn all_pids() -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// COMM for each thread and MMAP2 for each executable file mapping of `pid` (every file
/// mapping with `data`, as DWARF unwinders need) and each executable anonymous one (JIT
/// code), as the kernel would have reported them.
pub fn synthesize(pid: u32, data: bool) -> Vec<Fact> {
    let mut facts = Vec::new();
    for tid in threads(pid) {
        if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")) {
            facts.push(Fact::Comm {
                pid,
                tid,
                comm: comm.trim_end().to_string(),
                exec: false,
            });
        }
    }
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return facts;
    };
    for line in maps.lines() {
        // 5581c2a4d000-5581c2a51000 r-xp 00002000 fe:01 1837 /usr/bin/cat
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms), Some(off), Some(dev), Some(ino)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let mut path = f.collect::<Vec<_>>().join(" ");
        // Executable anonymous memory is JIT code (named from perf maps): the kernel's
        // MMAP2 calls it //anon, and its page offset is its address.
        let anon_code = path.is_empty() && perms.contains('x');
        if anon_code {
            path = "//anon".into();
        } else if (!perms.contains('x') && !data) || !path.starts_with('/') {
            continue;
        }
        let (Some((a, b)), Some((maj, min))) = (range.split_once('-'), dev.split_once(':')) else {
            continue;
        };
        let hex = |s: &str| u64::from_str_radix(s, 16).unwrap_or(0);
        let prot = (perms.contains('r') as u32)
            | ((perms.contains('w') as u32) << 1)
            | ((perms.contains('x') as u32) << 2);
        let flags = if perms.ends_with('p') { 2 } else { 1 };
        facts.push(Fact::Mmap2 {
            pid,
            tid: pid,
            start: hex(a),
            len: hex(b) - hex(a),
            pgoff: if anon_code { hex(a) } else { hex(off) },
            maj: hex(maj) as u32,
            min: hex(min) as u32,
            ino: ino.parse().unwrap_or(0),
            ino_generation: 0,
            prot,
            flags,
            filename: path,
        });
    }
    facts
}
