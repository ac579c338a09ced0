//! Probes named as perf names them, so that a file of ours reads like one of `perf probe`'s.
//!
//! From perf's sources (tools/perf/util/probe-event.c, probe-file.c):
//! - the group of a uprobe is `probe_` and the binary's file name up to its first character
//!   that is neither alphanumeric nor `_` (convert_exec_to_group): `probe_libc` for
//!   `libc.so.6`, `probe_python3` for `python3.11`; a kernel probe's group is `probe`
//!   (PERFPROBE_GROUP);
//! - the event is the function's name without a leading `.` and cut at its first `.` or `@`
//!   (`.isra.0`, `@GLIBC_2.2.5`), other characters that C names cannot hold becoming `_`
//!   (get_new_event_name); a return probe's ends in `__return`; an event that exists already
//!   gets `_1`, `_2`, ... before that ending; a probe at a bare address is `abs_<hex>`;
//! - a USDT probe is `sdt_<provider>:<name>` (probe_cache__scan_sdt).

use std::collections::HashSet;

/// `probe_<file name up to its first character outside [A-Za-z0-9_]>`.
pub fn uprobe_group(path: &std::path::Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem: String = file
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    format!("probe_{stem}")
}

/// The group of kernel probes.
pub const KPROBE_GROUP: &str = "probe";

/// A USDT probe's group.
pub fn usdt_group(provider: &str) -> String {
    format!("sdt_{provider}")
}

/// The event name perf gives a probe on `function` (`0x...`: a probe at that address).
pub fn event(function: &str) -> String {
    if let Some(hex) = function
        .strip_prefix("0x")
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return format!("abs_{}", hex.trim_start_matches('0').to_ascii_lowercase());
    }
    let base = function.strip_prefix('.').unwrap_or(function);
    let base = match base.find(['.', '@']) {
        Some(i) if i > 0 => &base[..i],
        _ => base,
    };
    let mut out = String::new();
    for c in base.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    out
}

/// The names given so far, to give each new event one of its own.
#[derive(Debug, Default)]
pub struct Names {
    taken: HashSet<String>,
}

impl Names {
    /// `group:event` (`__return` appended for a return probe), or with the first free
    /// `_N` before that ending.
    pub fn take(&mut self, group: &str, event: &str, ret: bool) -> String {
        let end = if ret { "__return" } else { "" };
        let mut name = format!("{group}:{event}{end}");
        let mut n = 1;
        while self.taken.contains(&name) {
            name = format!("{group}:{event}_{n}{end}");
            n += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn perfs_names() {
        let g = |p: &str| uprobe_group(Path::new(p));
        assert_eq!(g("/usr/lib/x86_64-linux-gnu/libc.so.6"), "probe_libc");
        assert_eq!(g("/usr/bin/python3.11"), "probe_python3");
        assert_eq!(
            g("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"),
            "probe_ld"
        );
        assert_eq!(g("/opt/my_app"), "probe_my_app");
        assert_eq!(usdt_group("python"), "sdt_python");
        assert_eq!(event("getaddrinfo"), "getaddrinfo");
        assert_eq!(event("foo.isra.0"), "foo");
        assert_eq!(event(".hidden"), "hidden");
        assert_eq!(event("memcpy@GLIBC_2.2.5"), "memcpy");
        assert_eq!(event("0x1140"), "abs_1140");
        assert_eq!(event("0x0001aF"), "abs_1af");
        assert_eq!(event("ns::f(int)"), "ns_f_int_");
    }

    #[test]
    fn repeated_names_get_numbers() {
        let mut n = Names::default();
        assert_eq!(n.take("probe_libc", "malloc", false), "probe_libc:malloc");
        assert_eq!(n.take("probe_libc", "malloc", false), "probe_libc:malloc_1");
        assert_eq!(
            n.take("probe_libc", "malloc", true),
            "probe_libc:malloc__return"
        );
        assert_eq!(
            n.take("probe_libc", "malloc", true),
            "probe_libc:malloc_1__return"
        );
        assert_eq!(n.take("probe_libc", "malloc", false), "probe_libc:malloc_2");
    }
}
