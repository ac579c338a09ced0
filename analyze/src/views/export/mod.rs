//! Profiles in the formats other tools read: pprof (Pyroscope, Parca, `go tool pprof`), the
//! Firefox Profiler's processed format, and speedscope's JSON. Each is a consumer of the
//! pipeline's output ([`crate::aggregate::Profile`] or, where times matter,
//! [`crate::symbolize::Symbolized`]); nothing here reads files.

pub mod firefox;
pub mod firefox_requests;
pub mod pprof;
mod pprof_proto;
pub mod spans;
pub mod speedscope;

use std::collections::HashMap;
use std::ops::Range;

use crate::symbolize::FrameInfo;

/// What the exports need beside the stacks.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// What the weights measure, as sample types and tracks name it: `samples` for the
    /// sampling event, else `offcpu`, `io`, `runq`, `fault`, `wall`.
    pub measure: String,
    /// The selected event as views name it (`cpu-clock`, `off-CPU`).
    pub event: String,
    /// Build ids (lowercase hex) by file path.
    pub build_ids: HashMap<String, String>,
    /// The recording's span in ns of its clock (first and last sample).
    pub span: (u64, u64),
    /// Whether frames carry `file:line` and inlined functions as their own frames.
    pub lines: bool,
    pub inline: bool,
    /// The recording's file name, for titles.
    pub name: String,
}

/// A stack's physical frames, root first: each a real function followed by what was inlined
/// into it at that address (`FrameInfo::inlined`), as ranges of `frames`.
pub fn physical_frames(frames: &[u32], table: &[FrameInfo]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for (i, &f) in frames.iter().enumerate() {
        match out.last_mut() {
            Some(r) if table[f as usize].inlined => r.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// `file:line` split into its file and line (0 if there is none).
pub fn file_and_line(srcline: &str) -> (&str, i64) {
    match srcline.rsplit_once(':') {
        Some((file, line)) => match line.parse() {
            Ok(n) => (file, n),
            Err(_) => (srcline, 0),
        },
        None => (srcline, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str, inlined: bool) -> FrameInfo {
        FrameInfo {
            function: name.into(),
            dso: "a.out".into(),
            srcline: None,
            inlined,
            by_address: false,
        }
    }

    #[test]
    fn inlined_frames_join_the_real_frame_before_them() {
        let table = vec![
            frame("main", false),
            frame("helper", true),
            frame("leaf", false),
        ];
        assert_eq!(physical_frames(&[0, 1, 2], &table), vec![0..2, 2..3]);
        assert_eq!(physical_frames(&[1, 2], &table), vec![0..1, 1..2]);
        assert_eq!(file_and_line("/src/a.c:12"), ("/src/a.c", 12));
        assert_eq!(file_and_line("a.c:?"), ("a.c:?", 0));
    }
}
