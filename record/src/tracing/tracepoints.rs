//! Tracepoints under tracefs `events/`: found by name or glob, with their format files.

use std::path::{Path, PathBuf};

use anyhow::Context;
use bpf::trace::{TracePayload, MAX_DATA_LOC, MAX_TRACE_RAW};
use format::{FieldKind, TraceFormat};

/// A mounted tracefs (`/sys/kernel/tracing`).
#[derive(Debug, Clone)]
pub struct Tracefs {
    pub root: PathBuf,
}

/// One tracepoint and its format file.
#[derive(Debug, Clone)]
pub struct Tracepoint {
    pub system: String,
    pub name: String,
    /// The format file's bytes, unchanged (they go into TRACING_DATA).
    pub text: Vec<u8>,
    pub format: TraceFormat,
}

impl Tracepoint {
    /// `system:name`.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.system, self.name)
    }

    /// What the BPF side reads of each record: the fixed part, then the data of the
    /// `__data_loc` fields.
    pub fn payload(&self) -> anyhow::Result<TracePayload> {
        let fixed_size = self.format.fixed_size();
        anyhow::ensure!(
            fixed_size <= MAX_TRACE_RAW,
            "{}: its records take {fixed_size} bytes, and at most {MAX_TRACE_RAW} are kept",
            self.full_name()
        );
        let data_loc: Vec<u16> = self
            .format
            .fields
            .iter()
            .filter(|f| matches!(f.kind, FieldKind::DataLoc | FieldKind::RelLoc))
            .map(|f| f.offset as u16)
            .collect();
        anyhow::ensure!(
            data_loc.len() <= MAX_DATA_LOC,
            "{}: it has {} dynamic fields (__data_loc), and at most {MAX_DATA_LOC} are kept",
            self.full_name(),
            data_loc.len()
        );
        Ok(TracePayload::Record {
            fixed_size: fixed_size as u32,
            data_loc,
        })
    }
}

impl Tracefs {
    fn events(&self) -> PathBuf {
        self.root.join("events")
    }

    /// Every tracepoint, as (system, name), sorted.
    pub fn all(&self) -> anyhow::Result<Vec<(String, String)>> {
        let events = self.events();
        let systems = std::fs::read_dir(&events).with_context(|| {
            format!(
                "cannot list tracepoints in {} (is tracefs mounted? mount -t tracefs nodev {})",
                events.display(),
                self.root.display()
            )
        })?;
        let mut out = Vec::new();
        for system in systems.flatten() {
            if !system.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let sys = system.file_name().to_string_lossy().into_owned();
            for event in std::fs::read_dir(system.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if event.file_type().is_ok_and(|t| t.is_dir()) {
                    out.push((
                        sys.clone(),
                        event.file_name().to_string_lossy().into_owned(),
                    ));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// The tracepoints `system:name` names: itself, or those its globs (`*`, `?`, `[..]`, in
    /// either part, as perf takes them) match; an error naming the closest ones if none.
    pub fn find(&self, system: &str, name: &str) -> anyhow::Result<Vec<(String, String)>> {
        let is_glob = |s: &str| s.contains(['*', '?', '[']);
        if !is_glob(system) && !is_glob(name) {
            if self
                .events()
                .join(system)
                .join(name)
                .join("format")
                .is_file()
            {
                return Ok(vec![(system.into(), name.into())]);
            }
            let all = self.all()?;
            let shown: Vec<String> = all.iter().map(|(s, n)| format!("{s}:{n}")).collect();
            let near = super::closest::list(
                &format!("{system}:{name}"),
                shown.iter().map(String::as_str),
                5,
            );
            anyhow::bail!("unknown tracepoint {system}:{name}; the closest: {near}");
        }
        // ftrace's own events (function, funcgraph_entry...) cannot carry a BPF program.
        let found: Vec<(String, String)> = self
            .all()?
            .into_iter()
            .filter(|(s, n)| s != "ftrace" && glob_match(system, s) && glob_match(name, n))
            .collect();
        anyhow::ensure!(!found.is_empty(), "no tracepoint matches {system}:{name}");
        Ok(found)
    }

    /// A tracepoint's format file, read and parsed.
    pub fn load(&self, system: &str, name: &str) -> anyhow::Result<Tracepoint> {
        let path = self.events().join(system).join(name).join("format");
        let text = format::read_tracefs_file(&path)
            .with_context(|| format!("{system}:{name}: cannot read {}", path.display()))?;
        let format = TraceFormat::parse(&String::from_utf8_lossy(&text))
            .map_err(|e| anyhow::anyhow!("{system}:{name}: {}: {e}", path.display()))?;
        anyhow::ensure!(
            format.id > 0 && format.id <= u16::MAX as u64,
            "{system}:{name}: its ID {} does not fit the records' 16-bit common_type",
            format.id
        );
        Ok(Tracepoint {
            system: system.into(),
            name: name.into(),
            text,
            format,
        })
    }
}

/// Whether `s` matches `pattern`: `*` any run, `?` any one character, `[abc]`, `[a-z]`,
/// `[!a]` one of a set (perf's strglobmatch).
pub fn glob_match(pattern: &str, s: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    matches(&p, &s)
}

fn matches(p: &[char], s: &[char]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some('*') => (0..=s.len()).any(|i| matches(&p[1..], &s[i..])),
        Some('?') => !s.is_empty() && matches(&p[1..], &s[1..]),
        Some('[') => {
            let Some(close) = p.iter().skip(2).position(|&c| c == ']').map(|i| i + 2) else {
                return s.first() == Some(&'[') && matches(&p[1..], &s[1..]);
            };
            let Some(&c) = s.first() else { return false };
            let (negate, set) = match p[1] {
                '!' | '^' => (true, &p[2..close]),
                _ => (false, &p[1..close]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == '-' {
                    hit |= set[i] <= c && c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && matches(&p[close + 1..], &s[1..])
        }
        Some(&c) => s.first() == Some(&c) && matches(&p[1..], &s[1..]),
    }
}

/// tracefs as record mounts it.
pub fn default_root() -> &'static Path {
    Path::new("/sys/kernel/tracing")
}

/// Tests only: a tracefs of its own: two systems, and a format file per event.
#[cfg(test)]
pub(crate) fn fake_tracefs(dir: &Path) -> Tracefs {
    let fmt = |name: &str, id: u64, fields: &str| {
        format!(
            "name: {name}\nID: {id}\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n{fields}\n\
print fmt: \"x\"\n"
        )
    };
    let read = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:size_t count;\toffset:32;\tsize:8;\tsigned:0;\n";
    let exit = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n";
    let exec = "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n";
    for (sys, name, id, fields) in [
        ("syscalls", "sys_enter_read", 700, read),
        ("syscalls", "sys_exit_read", 701, exit),
        ("syscalls", "sys_enter_openat", 702, read),
        ("syscalls", "sys_enter_openat2", 703, read),
        ("sched", "sched_process_exec", 300, exec),
        ("ftrace", "function", 1, ""),
    ] {
        let d = dir.join("events").join(sys).join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("format"), fmt(name, id, fields)).unwrap();
    }
    std::fs::write(dir.join("events/header_page"), "x").unwrap();
    Tracefs { root: dir.into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracing::testing::temp_dir;

    #[test]
    fn globs() {
        assert!(glob_match("sys_enter_open*", "sys_enter_openat2"));
        assert!(glob_match("sys_enter_open*", "sys_enter_open"));
        assert!(!glob_match("sys_enter_open*", "sys_exit_open"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("sched_*_exec", "sched_process_exec"));
        assert!(glob_match("sys_?nter_read", "sys_enter_read"));
        assert!(glob_match("sys_e[nx]*_read", "sys_exit_read"));
        assert!(!glob_match("sys_e[!nx]*_read", "sys_exit_read"));
        assert!(glob_match("block_rq_[a-j]*", "block_rq_issue"));
        assert!(!glob_match("block_rq_[a-h]*", "block_rq_issue"));
        assert!(glob_match("a[b", "a[b"));
    }

    #[test]
    fn found_by_name_and_glob() {
        let dir = temp_dir("tp");
        let t = fake_tracefs(&dir);
        assert_eq!(t.all().unwrap().len(), 6);
        assert_eq!(
            t.find("syscalls", "sys_enter_open*").unwrap(),
            [
                ("syscalls".into(), "sys_enter_openat".into()),
                ("syscalls".into(), "sys_enter_openat2".into())
            ]
        );
        assert_eq!(
            t.find("*", "*").unwrap().len(),
            5,
            "ftrace's events left out"
        );
        let e = t
            .find("syscalls", "sys_enter_opnat")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("unknown tracepoint syscalls:sys_enter_opnat; the closest: syscalls:sys_enter_openat"), "{e}");
        let e = t.find("syscalls", "nothing*").unwrap_err().to_string();
        assert_eq!(e, "no tracepoint matches syscalls:nothing*");
        let tp = t.load("sched", "sched_process_exec").unwrap();
        assert_eq!(
            (tp.format.id, tp.full_name().as_str()),
            (300, "sched:sched_process_exec")
        );
        assert_eq!(
            tp.payload().unwrap(),
            TracePayload::Record {
                fixed_size: 16,
                data_loc: vec![8]
            }
        );
        let none = Tracefs {
            root: dir.join("nothing"),
        };
        assert!(format!("{:#}", none.find("a", "b").unwrap_err()).contains("is tracefs mounted?"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn payload_limits() {
        let mut fields = String::new();
        for i in 0..9 {
            fields += &format!(
                "\tfield:__data_loc char[] s{i};\toffset:{};\tsize:4;\tsigned:0;\n",
                8 + 4 * i
            );
        }
        let text = format!("name: x\nID: 5\nformat:\n{fields}\nprint fmt: \"\"\n");
        let tp = Tracepoint {
            system: "s".into(),
            name: "x".into(),
            format: TraceFormat::parse(&text).unwrap(),
            text: text.into_bytes(),
        };
        assert!(tp.payload().unwrap_err().to_string().contains("at most 8"));
        let big =
            "name: y\nID: 6\nformat:\n\tfield:char b[4096];\toffset:8;\tsize:4096;\tsigned:0;\n";
        let tp = Tracepoint {
            format: TraceFormat::parse(big).unwrap(),
            ..tp
        };
        assert!(tp.payload().unwrap_err().to_string().contains("4104 bytes"));
    }
}
