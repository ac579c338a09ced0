//! The words of `-e` that name an event: which kind of event, and its parts.

/// One `-e` word, split into its parts (nothing looked up yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `SYSTEM:NAME` (`tracepoint:SYSTEM:NAME` too), either part a glob.
    Tracepoint { system: String, name: String },
    /// `uprobe:PATH:FUNCTION[+OFFSET]`, `uretprobe:PATH:FUNCTION`.
    Uprobe {
        path: String,
        function: String,
        offset: u64,
        ret: bool,
    },
    /// `usdt:PATH:PROVIDER:NAME`, or `usdt:PATH:NAME` when one provider has the name.
    Usdt {
        path: String,
        provider: Option<String>,
        name: String,
    },
    /// `kprobe:FUNCTION`, `kretprobe:FUNCTION`.
    Kprobe { function: String, ret: bool },
}

/// Splits an `-e` word. PATH ends at the first `:` after the kind (paths holding `:` are
/// not supported), so that FUNCTION may hold `::` (C++).
pub fn parse(word: &str) -> anyhow::Result<Spec> {
    let (kind, rest) = word.split_once(':').ok_or_else(|| unknown(word))?;
    let nonempty = |s: &str, what: &str| -> anyhow::Result<String> {
        anyhow::ensure!(!s.is_empty(), "{word}: no {what} given");
        Ok(s.to_string())
    };
    match kind {
        "uprobe" | "uretprobe" => {
            let ret = kind == "uretprobe";
            let (path, function) = rest
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("{word}: expected {kind}:PATH:FUNCTION"))?;
            let (function, offset) = split_offset(function);
            anyhow::ensure!(
                !(ret && offset > 0),
                "{word}: a return probe takes no offset (it fires where the function returns)"
            );
            Ok(Spec::Uprobe {
                path: nonempty(path, "PATH")?,
                function: nonempty(function, "FUNCTION")?,
                offset,
                ret,
            })
        }
        "usdt" => {
            let (path, probe) = rest
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("{word}: expected usdt:PATH:PROVIDER:NAME"))?;
            let (provider, name) = match probe.split_once(':') {
                Some((p, n)) => (Some(nonempty(p, "PROVIDER")?), n),
                None => (None, probe),
            };
            Ok(Spec::Usdt {
                path: nonempty(path, "PATH")?,
                provider,
                name: nonempty(name, "NAME")?,
            })
        }
        "kprobe" | "kretprobe" => {
            anyhow::ensure!(
                !rest.contains(['+', ':']),
                "{word}: expected {kind}:FUNCTION (offsets and modules are not supported)"
            );
            Ok(Spec::Kprobe {
                function: nonempty(rest, "FUNCTION")?,
                ret: kind == "kretprobe",
            })
        }
        "tracepoint" => tracepoint(word, rest),
        _ => tracepoint(word, word),
    }
}

fn tracepoint(word: &str, sys_name: &str) -> anyhow::Result<Spec> {
    match sys_name.split_once(':') {
        Some((system, name)) if !system.is_empty() && !name.is_empty() && !name.contains(':') => {
            Ok(Spec::Tracepoint {
                system: system.into(),
                name: name.into(),
            })
        }
        _ => Err(unknown(word)),
    }
}

fn unknown(word: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "unknown event '{word}': expected SYSTEM:NAME (a tracepoint), uprobe:PATH:FUNCTION[+OFFSET], \
         uretprobe:PATH:FUNCTION, usdt:PATH:PROVIDER:NAME, kprobe:FUNCTION or kretprobe:FUNCTION"
    )
}

/// `name+0x10` -> (`name`, 16); a `+` not followed by a number stays in the name.
fn split_offset(function: &str) -> (&str, u64) {
    if let Some((name, off)) = function.rsplit_once('+') {
        if let Some(n) = parse_u64(off) {
            return (name, n);
        }
    }
    (function, 0)
}

/// A number as C writes it: decimal, `0x` hex, `0` octal.
pub fn parse_u64(s: &str) -> Option<u64> {
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(
            parse("syscalls:sys_enter_open*").unwrap(),
            Spec::Tracepoint {
                system: "syscalls".into(),
                name: "sys_enter_open*".into()
            }
        );
        assert_eq!(
            parse("tracepoint:sched:sched_switch").unwrap(),
            parse("sched:sched_switch").unwrap()
        );
        assert_eq!(
            parse("uprobe:libc:getaddrinfo+0x10").unwrap(),
            Spec::Uprobe {
                path: "libc".into(),
                function: "getaddrinfo".into(),
                offset: 16,
                ret: false
            }
        );
        assert_eq!(
            parse("uretprobe:/usr/bin/x:ns::f").unwrap(),
            Spec::Uprobe {
                path: "/usr/bin/x".into(),
                function: "ns::f".into(),
                offset: 0,
                ret: true
            }
        );
        assert_eq!(
            parse("uprobe:x:operator+").unwrap(),
            Spec::Uprobe {
                path: "x".into(),
                function: "operator+".into(),
                offset: 0,
                ret: false
            }
        );
        assert_eq!(
            parse("usdt:python3.11:python:function__entry").unwrap(),
            Spec::Usdt {
                path: "python3.11".into(),
                provider: Some("python".into()),
                name: "function__entry".into()
            }
        );
        assert_eq!(
            parse("usdt:/bin/x:line").unwrap(),
            Spec::Usdt {
                path: "/bin/x".into(),
                provider: None,
                name: "line".into()
            }
        );
        assert_eq!(
            parse("kretprobe:do_sys_openat2").unwrap(),
            Spec::Kprobe {
                function: "do_sys_openat2".into(),
                ret: true
            }
        );
    }

    #[test]
    fn mistakes_are_named() {
        for (word, says) in [
            ("sched", "unknown event 'sched'"),
            ("a:b:c", "unknown event 'a:b:c'"),
            ("sched:", "unknown event"),
            ("uprobe:libc", "expected uprobe:PATH:FUNCTION"),
            ("uprobe:libc:", "no FUNCTION"),
            ("uprobe::malloc", "no PATH"),
            ("uretprobe:libc:malloc+4", "takes no offset"),
            ("kprobe:vfs_read+4", "offsets"),
            ("usdt:/bin/x", "expected usdt:PATH:PROVIDER:NAME"),
        ] {
            let e = parse(word).unwrap_err().to_string();
            assert!(e.contains(says), "{word}: {e}");
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u64("0x1F"), Some(31));
        assert_eq!(parse_u64("017"), Some(15));
        assert_eq!(parse_u64("0"), Some(0));
        assert_eq!(parse_u64("12"), Some(12));
        assert_eq!(parse_u64("08"), None);
        assert_eq!(parse_u64("x"), None);
    }
}
