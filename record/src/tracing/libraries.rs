//! A probe's PATH: a file, or a name found as perf and bpftrace users expect.
//!
//! A name without `/` that looks like a library (it starts with `lib` or holds `.so`) is
//! looked for in the mappings of the recorded processes, then in the ld.so cache, then in
//! the standard library directories: `libc` matches `libc.so.6` (a file named NAME, or whose
//! name starts with `NAME.so`). Another name is a program: the recorded command's, or one on
//! $PATH. Either way the result is the real path (links resolved), as perf probes it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where names are looked for.
#[derive(Debug, Clone)]
pub struct Places {
    /// Processes whose mappings are searched first (`-p`).
    pub pids: Vec<u32>,
    /// The recorded command (`record -- CMD`), as given.
    pub command: Option<PathBuf>,
    /// $PATH.
    pub path_env: Option<OsString>,
    /// `/etc/ld.so.cache`.
    pub ld_cache: PathBuf,
    /// Standard library directories, in order.
    pub lib_dirs: Vec<PathBuf>,
    /// `/proc`.
    pub proc: PathBuf,
}

impl Places {
    /// This machine's.
    pub fn host(pids: &[u32], command: Option<&Path>) -> Places {
        Places {
            pids: pids.to_vec(),
            command: command.map(Path::to_path_buf),
            path_env: std::env::var_os("PATH"),
            ld_cache: "/etc/ld.so.cache".into(),
            lib_dirs: [
                "/lib/x86_64-linux-gnu",
                "/usr/lib/x86_64-linux-gnu",
                "/lib64",
                "/usr/lib64",
                "/lib",
                "/usr/lib",
                "/usr/local/lib",
            ]
            .iter()
            .map(PathBuf::from)
            .collect(),
            proc: "/proc".into(),
        }
    }

    /// The file `name` stands for.
    pub fn find(&self, name: &str) -> anyhow::Result<PathBuf> {
        let real = |p: &Path| {
            std::fs::canonicalize(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
        };
        if name.contains('/') {
            return real(Path::new(name));
        }
        let library = name.starts_with("lib") || name.contains(".so");
        let found = if library {
            self.in_mappings(name)
                .or_else(|| self.in_ld_cache(name))
                .or_else(|| self.in_lib_dirs(name))
        } else {
            self.as_command(name).or_else(|| self.on_path(name))
        };
        match found {
            Some(p) => real(&p),
            None if library => anyhow::bail!(
                "no library '{name}' in the recorded processes' mappings, the ld.so cache ({}) or {}: give its path",
                self.ld_cache.display(),
                self.lib_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => anyhow::bail!("no program '{name}' on $PATH: give its path"),
        }
    }

    fn in_mappings(&self, name: &str) -> Option<PathBuf> {
        self.pids.iter().find_map(|pid| {
            let maps = std::fs::read_to_string(self.proc.join(format!("{pid}/maps"))).ok()?;
            maps.lines()
                .filter_map(|l| l.split_whitespace().nth(5))
                .filter(|p| p.starts_with('/'))
                .find(|p| names_library(name, p))
                .map(PathBuf::from)
        })
    }

    fn in_ld_cache(&self, name: &str) -> Option<PathBuf> {
        let data = std::fs::read(&self.ld_cache).ok()?;
        ld_cache_entries(&data)
            .into_iter()
            .filter(|(key, _)| names_library(name, key))
            .map(|(_, path)| PathBuf::from(path))
            .find(|p| is_native_elf(p))
    }

    fn in_lib_dirs(&self, name: &str) -> Option<PathBuf> {
        self.lib_dirs.iter().find_map(|dir| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|f| names_library(name, &f.to_string_lossy()))
                })
                .filter(|p| is_native_elf(p))
                .collect();
            // The shortest name: `libc.so.6` before `libc.so.6.debug`.
            files.sort_by_key(|p| p.as_os_str().len());
            files.into_iter().next()
        })
    }

    fn as_command(&self, name: &str) -> Option<PathBuf> {
        let cmd = self.command.as_ref()?;
        if cmd.file_name()? != name {
            return None;
        }
        if cmd.components().count() > 1 {
            return Some(cmd.clone());
        }
        self.on_path(name)
    }

    fn on_path(&self, name: &str) -> Option<PathBuf> {
        std::env::split_paths(self.path_env.as_ref()?)
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
    }
}

/// Whether the file at `path` (or named `path`) is the library `name` means.
fn names_library(name: &str, path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    file == name
        || file
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with(".so"))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A 64-bit little-endian x86-64 ELF file (multiarch systems hold i386 libraries too).
fn is_native_elf(p: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 20];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|_| &head[..4] == b"\x7fELF" && head[4] == 2 && head[5] == 1 && head[18] == 62)
}

/// The (library name, path) entries of an ld.so cache, in its order (glibc's
/// `glibc-ld.so.cache1.1` format: a 48-byte header, then 24-byte entries whose name and path
/// are offsets from the header's start; an old-format cache may come first).
pub fn ld_cache_entries(data: &[u8]) -> Vec<(String, String)> {
    const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    let Some(base) = data.windows(MAGIC.len()).position(|w| w == MAGIC) else {
        return Vec::new();
    };
    let u32_at = |o: usize| -> Option<u32> {
        Some(u32::from_le_bytes(data.get(o..o + 4)?.try_into().ok()?))
    };
    let string = |o: u32| -> Option<String> {
        let s = data.get(base + o as usize..)?;
        let end = s.iter().position(|&c| c == 0)?;
        Some(String::from_utf8_lossy(&s[..end]).into_owned())
    };
    let n = u32_at(base + 20).unwrap_or(0) as usize;
    (0..n)
        .map_while(|i| {
            let e = base + 48 + 24 * i;
            Some((string(u32_at(e + 4)?)?, string(u32_at(e + 8)?)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracing::testing::skip_or_fail;

    #[test]
    fn library_names() {
        assert!(names_library("libc", "/usr/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(names_library("libc.so.6", "libc.so.6"));
        assert!(names_library("libpython3.11", "libpython3.11.so.1.0"));
        assert!(!names_library("libc", "libcap.so.2"));
        assert!(!names_library("libc", "libc_malloc_debug.so.0"));
    }

    #[test]
    fn ld_cache_format() {
        // Header, two entries, strings.
        let mut d = b"glibc-ld.so.cache1.1".to_vec();
        d.extend_from_slice(&2u32.to_le_bytes());
        d.resize(48, 0);
        let strings = 48 + 2 * 24;
        let names = [
            "libm.so.6\0",
            "/lib/libm.so.6\0",
            "libc.so.6\0",
            "/lib/libc.so.6\0",
        ];
        let mut offs = Vec::new();
        let mut at = strings;
        for s in names {
            offs.push(at as u32);
            at += s.len();
        }
        for i in 0..2 {
            let mut e = vec![0u8; 24];
            e[0..4].copy_from_slice(&0x303i32.to_le_bytes());
            e[4..8].copy_from_slice(&offs[2 * i].to_le_bytes());
            e[8..12].copy_from_slice(&offs[2 * i + 1].to_le_bytes());
            d.extend(e);
        }
        for s in names {
            d.extend_from_slice(s.as_bytes());
        }
        assert_eq!(
            ld_cache_entries(&d),
            [
                ("libm.so.6".into(), "/lib/libm.so.6".into()),
                ("libc.so.6".into(), "/lib/libc.so.6".into())
            ]
        );
        assert!(ld_cache_entries(b"nothing").is_empty());
        assert!(ld_cache_entries(&d[..60]).is_empty());
    }

    #[test]
    fn this_machines_libc_and_python() {
        let here = Places::host(&[std::process::id()], None);
        let Ok(libc) = std::fs::canonicalize("/usr/lib/x86_64-linux-gnu/libc.so.6") else {
            return skip_or_fail("no /usr/lib/x86_64-linux-gnu/libc.so.6");
        };
        // From our own mappings, from the cache, from the directories.
        assert_eq!(here.find("libc").unwrap(), libc);
        let cache_only = Places {
            pids: vec![],
            ..here.clone()
        };
        assert_eq!(cache_only.find("libc.so.6").unwrap(), libc);
        let dirs_only = Places {
            pids: vec![],
            ld_cache: "/nonexistent".into(),
            ..here.clone()
        };
        assert_eq!(dirs_only.find("libc").unwrap(), libc);
        assert!(!ld_cache_entries(&std::fs::read("/etc/ld.so.cache").unwrap()).is_empty());
        let e = dirs_only.find("libnosuchthing").unwrap_err().to_string();
        assert!(e.contains("no library 'libnosuchthing'"), "{e}");
        // Programs on $PATH, links resolved (python3 -> python3.11).
        match std::fs::canonicalize("/usr/bin/python3") {
            Ok(py) => {
                let with_path = Places {
                    path_env: Some("/nonexistent:/usr/bin".into()),
                    ..here.clone()
                };
                assert_eq!(with_path.find("python3").unwrap(), py);
                assert!(with_path
                    .find("nosuchprogram")
                    .unwrap_err()
                    .to_string()
                    .contains("no program 'nosuchprogram' on $PATH"));
                // The recorded command, given with its directory.
                let cmd = Places {
                    command: Some("/usr/bin/python3".into()),
                    path_env: None,
                    ..here.clone()
                };
                assert_eq!(cmd.find("python3").unwrap(), py);
            }
            Err(_) => skip_or_fail("no /usr/bin/python3"),
        }
        assert_eq!(
            here.find("/usr/lib/x86_64-linux-gnu/libc.so.6").unwrap(),
            libc
        );
        assert!(here.find("/nonexistent/x").is_err());
    }
}
