//! Kernel probes: whether this kernel has them, whether it has the function, and, where it
//! has none (CONFIG_KPROBES off), the tracepoints that come closest to what was asked.

use std::path::Path;

/// Whether the kernel offers kprobes: the `kprobe` PMU, or tracefs's `kprobe_events`.
pub fn available(sys: &Path, tracefs: &Path) -> bool {
    sys.join("bus/event_source/devices/kprobe").exists() || tracefs.join("kprobe_events").exists()
}

/// The one-line refusal where the kernel has no kprobes, naming the three tracepoints
/// (`system:name`) whose names come closest to `function`'s.
pub fn absent(word: &str, function: &str, tracepoints: &[(String, String)]) -> anyhow::Error {
    let shown: Vec<String> = tracepoints
        .iter()
        .map(|(s, n)| format!("{s}:{n}"))
        .collect();
    let near = super::closest::closest(
        function,
        tracepoints
            .iter()
            .zip(&shown)
            .map(|((_, n), s)| (n.as_str(), s.as_str())),
        3,
    );
    anyhow::anyhow!(
        "{word}: this kernel has no kprobes (CONFIG_KPROBES is off); the closest tracepoints: {}",
        near.join(", ")
    )
}

/// Checks that `function` is a kernel function (text symbol of /proc/kallsyms' text); an
/// error naming the closest ones if not. An unreadable or empty list checks nothing (the
/// attach will say).
pub fn check_function(word: &str, function: &str, kallsyms: &str) -> anyhow::Result<()> {
    let functions: Vec<&str> = kallsyms
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, kind, name) = (f.next()?, f.next()?, f.next()?);
            matches!(kind, "t" | "T").then_some(name)
        })
        .collect();
    if functions.is_empty() || functions.contains(&function) {
        return Ok(());
    }
    let near = super::closest::list(function, functions, 5);
    anyhow::bail!("{word}: the kernel has no function '{function}'; the closest: {near}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracing::testing::temp_dir;

    fn tracepoints() -> Vec<(String, String)> {
        [
            ("syscalls", "sys_enter_openat2"),
            ("syscalls", "sys_exit_openat2"),
            ("syscalls", "sys_enter_openat"),
            ("syscalls", "sys_enter_read"),
            ("tcp", "tcp_retransmit_skb"),
            ("tcp", "tcp_probe"),
            ("sched", "sched_switch"),
        ]
        .iter()
        .map(|(s, n)| (s.to_string(), n.to_string()))
        .collect()
    }

    #[test]
    fn without_kprobes_the_closest_tracepoints() {
        let e = absent("kprobe:do_sys_openat2", "do_sys_openat2", &tracepoints()).to_string();
        assert!(
            e.starts_with("kprobe:do_sys_openat2: this kernel has no kprobes (CONFIG_KPROBES is off); the closest tracepoints: syscalls:sys_e"),
            "{e}"
        );
        assert!(
            e.contains("syscalls:sys_enter_openat2") && e.contains("syscalls:sys_exit_openat2")
        );
        assert_eq!(e.matches(", ").count(), 2, "three named: {e}");
        assert!(!e.contains('\n'));
        let e = absent(
            "kretprobe:tcp_retransmit_skb",
            "tcp_retransmit_skb",
            &tracepoints(),
        )
        .to_string();
        assert!(e.contains("tracepoints: tcp:tcp_retransmit_skb, "), "{e}");
    }

    #[test]
    fn presence_is_read_from_sysfs_or_tracefs() {
        let d = temp_dir("kprobes");
        let (sys, tracefs) = (d.join("sys"), d.join("tracing"));
        std::fs::create_dir_all(&tracefs).unwrap();
        assert!(!available(&sys, &tracefs));
        std::fs::write(tracefs.join("kprobe_events"), "").unwrap();
        assert!(available(&sys, &tracefs));
        std::fs::remove_file(tracefs.join("kprobe_events")).unwrap();
        std::fs::create_dir_all(sys.join("bus/event_source/devices/kprobe")).unwrap();
        assert!(available(&sys, &tracefs));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn kernel_functions() {
        let kallsyms = "ffffffff81000000 T vfs_read\nffffffff81000100 t do_sys_openat2\nffffffff82000000 D some_data\n";
        assert!(check_function("kprobe:vfs_read", "vfs_read", kallsyms).is_ok());
        let e = check_function("kprobe:vfs_reed", "vfs_reed", kallsyms)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "kprobe:vfs_reed: the kernel has no function 'vfs_reed'; the closest: vfs_read, do_sys_openat2");
        assert!(check_function("kprobe:some_data", "some_data", kallsyms).is_err());
        assert!(check_function("kprobe:x", "x", "").is_ok());
    }
}
