//! `analyze info`: Python processes of a recording whose samples carry no Python frames.
//! record names such a process at the end, with why (no layout for its version, a damaged
//! `_Py_DebugOffsets`, ...); the file keeps what shows it: a mapping of `pythonX.Y` or
//! `libpythonX.Y.so`, samples, and no synthetic mapping of Python frames (record writes one,
//! an anonymous mapping from 0x2000_0000_0000 on, before a process's first sample with them).

use std::collections::{BTreeMap, BTreeSet};

/// Samples of a Python process, none with Python frames, that make it noted (a process that
/// ran a moment may have had none in Python code).
const NOTED_SAMPLES: u64 = 20;

/// `pythonX.Y`, `libpythonX.Y[m|d].so...`: `pythonX.Y`.
fn python_of(path: &str) -> Option<String> {
    let base = path.rsplit('/').next()?;
    let rest = base
        .strip_prefix("python")
        .or_else(|| base.strip_prefix("libpython"))?;
    let (major, rest) = rest.split_once('.')?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let tail = rest[digits.len()..].trim_start_matches(['m', 'd', 'u']);
    let ok = matches!(major, "2" | "3")
        && !digits.is_empty()
        && (tail.is_empty() || tail.starts_with(".so"));
    ok.then(|| format!("python{major}.{digits}"))
}

/// What the walk over a recording's records saw of Python processes.
#[derive(Debug, Default)]
pub struct PythonSeen {
    /// pid -> `pythonX.Y`.
    python: BTreeMap<u32, String>,
    /// Processes with Python frames (their synthetic mapping).
    framed: BTreeSet<u32>,
    /// Samples per Python process.
    samples: BTreeMap<u32, u64>,
}

impl PythonSeen {
    /// An executable mapping of `path` at `start` in `pid`.
    pub fn mapped(&mut self, pid: u32, start: u64, path: &str) {
        if format::python::is_python_frame(start) && path == "//anon" {
            self.framed.insert(pid);
        } else if let Some(p) = python_of(path) {
            self.python.entry(pid).or_insert(p);
        }
    }

    /// Whether a Python process was seen (samples are worth parsing).
    pub fn any(&self) -> bool {
        !self.python.is_empty()
    }

    /// Whether samples of `pid` are to be counted ([`PythonSeen::sampled`]).
    pub fn wants(&self, pid: u32) -> bool {
        self.python.contains_key(&pid)
    }

    pub fn sampled(&mut self, pid: u32) {
        *self.samples.entry(pid).or_default() += 1;
    }

    /// A note per Python process sampled without Python frames.
    pub fn notes(&self) -> Vec<String> {
        self.python
            .iter()
            .filter(|(pid, _)| !self.framed.contains(pid))
            .filter_map(|(pid, p)| {
                let n = *self.samples.get(pid).filter(|&&n| n >= NOTED_SAMPLES)?;
                Some(format!(
                    "{p} (pid {pid}): Python frames not read ({n} samples, none with them; \
                     record said why when the recording ended)"
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_processes_without_frames_are_noted() {
        let mut s = PythonSeen::default();
        s.mapped(
            1,
            0x7f00_0000_0000,
            "/root/.pyenv/versions/2.7.18/bin/python2.7",
        );
        s.mapped(2, 0x7f00_0000_0000, "/usr/lib/libpython3.12.so.1.0");
        s.mapped(2, format::python::SYNTHETIC_BASE, "//anon");
        s.mapped(3, 0x5555_0000_0000, "/usr/bin/python3");
        s.mapped(4, 0x7f00_0000_0000, "/usr/lib/libpython3.7m.so.1.0");
        for _ in 0..NOTED_SAMPLES {
            for pid in [1, 2, 3] {
                if s.wants(pid) {
                    s.sampled(pid);
                }
            }
        }
        s.mapped(5, 0x7f00_0000_0000, "/usr/bin/python3.11");
        s.sampled(5);
        assert_eq!(
            s.notes(),
            [
                "python2.7 (pid 1): Python frames not read (20 samples, none with them; record \
              said why when the recording ended)"
            ]
        );
    }
}
