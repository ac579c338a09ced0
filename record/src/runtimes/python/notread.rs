//! Python processes whose frames record cannot read (a version or build it has no layout
//! for): named once each at the end of the recording, with the version found and why, never
//! left to show as bare `_PyEval_EvalFrameDefault` frames without a word.

use std::collections::BTreeMap;

/// Samples in the interpreter's eval loop, none with Python frames, that make a read process
/// said to be not read after all (its layout not this build's, a thread list it cannot
/// match: a PID namespace's thread ids before 3.11's pthread_t).
const IN_EVAL_UNREAD: u64 = 20;

/// `pythonX.Y`, `libpythonX.Y.so...` (with an ABI suffix such as 3.7's `m`, or `d`):
/// (X, Y).
pub fn version_of_path(path: &str) -> Option<(u32, u32)> {
    let base = path.rsplit('/').next()?;
    let rest = base
        .strip_prefix("python")
        .or_else(|| base.strip_prefix("libpython"))?;
    let (major, rest) = rest.split_once('.')?;
    let major: u32 = major.parse().ok()?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let minor: u32 = digits.parse().ok()?;
    let tail = rest[digits.len()..].trim_start_matches(['m', 'd', 'u']);
    if !(tail.is_empty() || tail.starts_with(".so")) || !(2..=3).contains(&major) {
        return None;
    }
    Some((major, minor))
}

/// `Py_Version` (PY_VERSION_HEX, 3.11 on) as `3.12.1` (`3.14.0a1` for a pre-release).
pub fn version_text(hex: u64) -> String {
    let (major, minor, micro) = (hex >> 24 & 0xff, hex >> 16 & 0xff, hex >> 8 & 0xff);
    let level = match hex >> 4 & 0xf {
        0xa => "a",
        0xb => "b",
        0xc => "rc",
        _ => "",
    };
    let serial = if level.is_empty() {
        String::new()
    } else {
        (hex & 0xf).to_string()
    };
    format!("{major}.{minor}.{micro}{level}{serial}")
}

/// Why a process's frames are not read, as last found (a later mapping of the same process
/// may know better: the `python3.12` executable of a shared build has no `_PyRuntime`, its
/// `libpython3.12.so` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    /// `python3.14`.
    pub program: String,
    pub why: String,
}

/// The processes missed so far, by pid, and those read: their samples counted.
#[derive(Debug, Default)]
pub struct NotRead {
    missed: BTreeMap<u32, Miss>,
    read: BTreeMap<u32, Read>,
}

/// A process whose frames are read: its samples (with frame-pointer stacks) that were in
/// the interpreter's eval loop, and those that came with Python frames.
#[derive(Debug, Clone, Default)]
struct Read {
    program: String,
    in_eval: u64,
    with_frames: u64,
}

impl NotRead {
    /// Notes `pid` as not read (replacing what an earlier mapping said).
    pub fn note(&mut self, pid: u32, major: u32, minor: u32, why: String) {
        self.missed.insert(
            pid,
            Miss {
                program: format!("python{major}.{minor}"),
                why,
            },
        );
    }

    /// A fork of a process not read: nor is the child; of one read: the child is.
    pub fn inherit(&mut self, pid: u32, ppid: u32) {
        if let Some(m) = self.missed.get(&ppid).cloned() {
            self.missed.insert(pid, m);
        }
        if let Some(r) = self.read.get(&ppid) {
            let program = r.program.clone();
            self.read.insert(
                pid,
                Read {
                    program,
                    ..Default::default()
                },
            );
        }
    }

    /// The process is read after all (another mapping of it had what was needed).
    pub fn read(&mut self, pid: u32, major: u32, minor: u32) {
        self.missed.remove(&pid);
        self.read.insert(
            pid,
            Read {
                program: format!("python{major}.{minor}"),
                ..Default::default()
            },
        );
    }

    /// `samples` samples of a read process with the same stack: in its eval loop or not,
    /// with Python frames or not.
    pub fn sampled(&mut self, pid: u32, samples: u64, in_eval: bool, with_frames: bool) {
        if let Some(r) = self.read.get_mut(&pid) {
            r.in_eval += in_eval as u64 * samples;
            r.with_frames += with_frames as u64 * samples;
        }
    }

    /// The lines to print at the end, one per process.
    pub fn lines(&self) -> Vec<String> {
        let unread = self
            .read
            .iter()
            .filter(|(_, r)| r.with_frames == 0 && r.in_eval >= IN_EVAL_UNREAD)
            .map(|(&pid, r)| {
                let why = format!(
                    "none found in its {} samples in the interpreter (its thread states or \
                     frames are not where this version's layout says)",
                    r.in_eval
                );
                (pid, r.program.clone(), why)
            });
        let mut lines: Vec<(u32, String, String)> = self
            .missed
            .iter()
            .map(|(&pid, m)| (pid, m.program.clone(), m.why.clone()))
            .chain(unread)
            .collect();
        lines.sort();
        lines
            .into_iter()
            .map(|(pid, program, why)| {
                format!("record: {program} (pid {pid}): Python frames not read: {why}")
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_paths_and_headers() {
        assert_eq!(version_of_path("/usr/bin/python3.11"), Some((3, 11)));
        assert_eq!(
            version_of_path("/root/.pyenv/versions/3.7.16/lib/libpython3.7m.so.1.0"),
            Some((3, 7))
        );
        assert_eq!(
            version_of_path("/root/.pyenv/versions/2.7.18/bin/python2.7"),
            Some((2, 7))
        );
        assert_eq!(version_of_path("/usr/bin/python3.11d"), Some((3, 11)));
        assert_eq!(version_of_path("/usr/bin/python3"), None);
        assert_eq!(
            version_of_path("/usr/lib/python3.11/lib-dynload/_hashlib.cpython-311.so"),
            None
        );
        assert_eq!(version_of_path("/usr/bin/python3.11-config"), None);
        assert_eq!(version_of_path("/usr/lib/libpython3.so"), None);
        assert_eq!(version_text(0x030c01f0), "3.12.1");
        assert_eq!(version_text(0x030e00a1), "3.14.0a1");
    }

    #[test]
    fn a_process_is_named_once_with_its_last_reason() {
        let mut n = NotRead::default();
        n.note(4242, 3, 14, "no _PyRuntime".into());
        n.note(4242, 3, 14, "no layout for 3.14".into());
        n.note(7, 3, 12, "no _PyRuntime".into());
        n.read(7, 3, 12);
        assert_eq!(
            n.lines(),
            ["record: python3.14 (pid 4242): Python frames not read: no layout for 3.14"]
        );
    }

    #[test]
    fn a_read_process_whose_samples_never_had_frames_is_named() {
        let mut n = NotRead::default();
        n.read(10, 3, 13);
        n.read(11, 3, 13);
        n.inherit(12, 11);
        for _ in 0..IN_EVAL_UNREAD {
            n.sampled(10, 1, true, false);
            n.sampled(11, 1, true, false);
        }
        // Counted in the kernel: one stack, its count.
        n.sampled(12, IN_EVAL_UNREAD, true, false);
        n.sampled(11, 1, true, true);
        assert_eq!(
            n.lines(),
            [
                "record: python3.13 (pid 10): Python frames not read: none found in its 20 \
                 samples in the interpreter (its thread states or frames are not where this \
                 version's layout says)",
                "record: python3.13 (pid 12): Python frames not read: none found in its 20 \
                 samples in the interpreter (its thread states or frames are not where this \
                 version's layout says)"
            ]
        );
    }
}
