//! Folded stacks, as stackcollapse-perf.pl prints them: `comm;root;...;leaf COUNT`, one line per
//! unique stack, sorted bytewise.
//!
//! Frames are named as stackcollapse-perf.pl names them (its defaults, no pid/tid): an
//! unknown function in a known file is `[file name]`, `;` becomes `:`, quotes go; spaces in
//! the command name become `_`. Unlike stackcollapse-perf.pl, names are not cut at their first
//! `(`: perf and we print names without parameters already (the demangler leaves them out), so
//! what a `(` starts is part of the name: `std::_Function_handler<double (double), ...>`,
//! `main::{lambda(double)#1}`, Go's `main.(*T).Run`.

use std::borrow::Cow;
use std::io::{self, Write};

use rayon::prelude::*;

use rustc_hash::FxHashMap;

use crate::aggregate::{Profile, Stack};
use crate::symbolize::FrameInfo;

/// A frame's name in folded output: an unknown function is named by its file, in brackets
/// (`[libc.so.6]`), a file already in brackets as it is (`[kernel.kallsyms]`, `[vdso]`).
pub fn frame_name(f: &FrameInfo) -> Cow<'_, str> {
    let name: Cow<str> = if f.is_unknown() && f.dso != crate::UNKNOWN {
        let file = f.dso.rsplit('/').next().unwrap_or(&f.dso);
        if file.starts_with('[') && file.ends_with(']') {
            Cow::Owned(file.to_string())
        } else {
            format!("[{file}]").into()
        }
    } else {
        Cow::Borrowed(&f.function)
    };
    tidy(name)
}

/// stackcollapse-perf.pl's `tidy_generic`, less its cut at `(`.
fn tidy(name: Cow<'_, str>) -> Cow<'_, str> {
    if !name.contains([';', '"', '\'']) {
        return name;
    }
    let mut s = name.replace(';', ":");
    s.retain(|c| c != '"' && c != '\'');
    s.into()
}

/// What flamegraph.pl's colours need added to a frame's name (with `--kernel-annotate`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Annotation {
    None,
    /// `_[k]`: a kernel frame.
    Kernel,
    /// `_[i]`: an inlined frame.
    Inlined,
}

impl Annotation {
    /// Frame `i` (root first) of `s`'s.
    fn of(profile: &Profile, s: &Stack, i: usize, kernel_annotate: bool) -> Annotation {
        if !kernel_annotate {
            Annotation::None
        } else if s.is_kernel(i) {
            Annotation::Kernel
        } else if profile.frames[s.frames[i] as usize].inlined {
            Annotation::Inlined
        } else {
            Annotation::None
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Annotation::None => "",
            Annotation::Kernel => "_[k]",
            Annotation::Inlined => "_[i]",
        }
    }
}

/// The names lines are spelled from, each distinct spelling once (command names, frame
/// names with their annotation), and the codes that sort lines without spelling them.
///
/// A line `a;b;c` is the pieces `a;`, `b;`, `c` + end. Where no name holds a `;` (frame
/// names cannot: `tidy`), no piece begins another, so lines compare as the sequences of
/// their pieces do, piece by piece: each piece is coded by its rank among all pieces in byte
/// order (the end below every byte), big-endian, and lines compare as their codes do. A deep
/// stack's code is a fifth of its text, and lines that share most of their text (a program's
/// deep stacks, tens of frames a stack and thousands of stacks) made comparing spelled lines
/// the longest stage of a folded report.
struct Names<'p> {
    text: Vec<Cow<'p, str>>,
    /// Per command, per frame: its name (annotated: as a kernel frame, as an inlined one).
    comm: Vec<u32>,
    plain: Vec<u32>,
    kernel: Vec<u32>,
    inlined: Vec<u32>,
    /// The code of each name as a line's last piece, and as one followed by `;`.
    last: Vec<u32>,
    more: Vec<u32>,
    /// The name of each code.
    name_of: Vec<u32>,
}

impl<'p> Names<'p> {
    /// `None` if a name holds a `;` (a command's), which the codes cannot order.
    fn new(profile: &'p Profile, kernel_annotate: bool) -> Option<Names<'p>> {
        let mut text: Vec<Cow<'p, str>> = Vec::new();
        let mut ids: FxHashMap<Cow<'p, str>, u32> = FxHashMap::default();
        let mut intern = |t: Cow<'p, str>| -> u32 {
            *ids.entry(t.clone()).or_insert_with(|| {
                text.push(t);
                (text.len() - 1) as u32
            })
        };
        let comm = profile
            .comms
            .iter()
            .map(|c| intern(c.replace(' ', "_").into()))
            .collect();
        let names: Vec<Cow<str>> = profile.frames.iter().map(frame_name).collect();
        let plain = names.iter().map(|n| intern(n.clone())).collect();
        let mut annotated = |a: Annotation| -> Vec<u32> {
            if !kernel_annotate {
                return Vec::new();
            }
            names
                .iter()
                .map(|n| intern(format!("{n}{}", a.suffix()).into()))
                .collect()
        };
        let kernel = annotated(Annotation::Kernel);
        let inlined = annotated(Annotation::Inlined);
        if text.iter().any(|t| t.contains([';', '\0'])) {
            return None;
        }
        // Pieces: (name, whether `;` follows), in byte order.
        let piece = |&(t, more): &(u32, bool)| {
            let end: &[u8] = if more { b";" } else { b"" };
            text[t as usize].as_bytes().iter().chain(end)
        };
        let mut pieces: Vec<(u32, bool)> = (0..text.len() as u32)
            .flat_map(|t| [(t, false), (t, true)])
            .collect();
        pieces.par_sort_unstable_by(|a, b| piece(a).cmp(piece(b)));
        let (mut last, mut more) = (vec![0; text.len()], vec![0; text.len()]);
        for (code, &(t, m)) in pieces.iter().enumerate() {
            let to = if m { &mut more } else { &mut last };
            to[t as usize] = code as u32;
        }
        let name_of = pieces.iter().map(|&(t, _)| t).collect();
        Some(Names {
            text,
            comm,
            plain,
            kernel,
            inlined,
            last,
            more,
            name_of,
        })
    }

    /// The names of a stack's line: its command, then its frames, root first.
    fn of<'s>(&'s self, profile: &'s Profile, s: &'s Stack) -> impl Iterator<Item = u32> + 's {
        let annotate = !self.kernel.is_empty();
        let frames = s.frames.iter().enumerate().map(move |(i, &f)| {
            let f = f as usize;
            match Annotation::of(profile, s, i, annotate) {
                Annotation::None => self.plain[f],
                Annotation::Kernel => self.kernel[f],
                Annotation::Inlined => self.inlined[f],
            }
        });
        std::iter::once(self.comm[s.comm as usize]).chain(frames)
    }

    /// A stack's code: its pieces' codes, big-endian.
    fn code(&self, profile: &Profile, s: &Stack) -> Vec<u8> {
        let n = s.frames.len() + 1;
        let mut code = Vec::with_capacity(4 * n);
        for (i, name) in self.of(profile, s).enumerate() {
            let c = if i + 1 < n {
                self.more[name as usize]
            } else {
                self.last[name as usize]
            };
            code.extend_from_slice(&c.to_be_bytes());
        }
        code
    }

    /// Writes the line a code stands for to `out`.
    fn spell(&self, code: &[u8], out: &mut String) {
        let names = code.chunks_exact(4).map(|c| {
            let code = u32::from_be_bytes(c.try_into().expect("chunks of 4"));
            &*self.text[self.name_of[code as usize] as usize]
        });
        spell_line(names, out);
    }
}

/// Writes `names` joined by `;` to `out`.
fn spell_line<'a>(names: impl Iterator<Item = &'a str>, out: &mut String) {
    for (i, n) in names.enumerate() {
        if i > 0 {
            out.push(';');
        }
        out.push_str(n);
    }
}

/// The folded lines. `kernel_annotate` adds `_[k]` to kernel frames and `_[i]` to inlined
/// ones (flamegraph.pl colours them). Threads of one command fold together; stacks that
/// spell the same (one name, two functions) are one line.
pub fn folded(profile: &Profile, kernel_annotate: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let _ = each_line(profile, kernel_annotate, &mut |l| {
        lines.push(l.to_string());
        Ok(())
    });
    lines
}

/// Writes the folded lines to `out`, a line at a time (a program's thousands of deep stacks
/// are megabytes of text: not held at once).
pub fn write(profile: &Profile, kernel_annotate: bool, out: &mut dyn Write) -> io::Result<()> {
    each_line(profile, kernel_annotate, &mut |l| writeln!(out, "{l}"))
}

/// Calls `each` with every folded line, in order.
fn each_line(
    profile: &Profile,
    kernel_annotate: bool,
    each: &mut dyn FnMut(&str) -> io::Result<()>,
) -> io::Result<()> {
    let mut counted = |line: &mut String, weight: u64| {
        line.push(' ');
        line.push_str(&weight.to_string());
        each(line)
    };
    match Names::new(profile, kernel_annotate) {
        Some(names) => {
            let mut coded: Vec<(Vec<u8>, u64)> = profile
                .stacks
                .par_iter()
                .map(|s| (names.code(profile, s), s.weight))
                .collect();
            coded.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let mut line = String::new();
            for (code, weight) in merge_equal(coded) {
                line.clear();
                names.spell(&code, &mut line);
                counted(&mut line, weight)?;
            }
        }
        None => {
            let mut spelled: Vec<(String, u64)> = profile
                .stacks
                .par_iter()
                .map(|s| (spell_slowly(profile, s, kernel_annotate), s.weight))
                .collect();
            spelled.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
            for (mut line, weight) in merge_equal(spelled) {
                counted(&mut line, weight)?;
            }
        }
    }
    Ok(())
}

/// Sorted lines, those equal merged with their weights summed.
fn merge_equal<T: PartialEq>(sorted: Vec<(T, u64)>) -> Vec<(T, u64)> {
    let mut merged: Vec<(T, u64)> = Vec::with_capacity(sorted.len());
    for (line, weight) in sorted {
        match merged.last_mut() {
            Some(last) if last.0 == line => last.1 += weight,
            _ => merged.push((line, weight)),
        }
    }
    merged
}

/// A stack's line spelled out, for a profile whose names [`Names`] cannot code.
fn spell_slowly(profile: &Profile, s: &Stack, kernel_annotate: bool) -> String {
    let mut line = profile.comms[s.comm as usize].replace(' ', "_");
    for (i, &f) in s.frames.iter().enumerate() {
        line.push(';');
        line.push_str(&frame_name(&profile.frames[f as usize]));
        line.push_str(Annotation::of(profile, s, i, kernel_annotate).suffix());
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(function: &str, dso: &str) -> FrameInfo {
        FrameInfo::new(function, dso)
    }

    /// The lines spelled out and sorted as text, the way `folded` sorted them before it
    /// coded them.
    fn spelled_and_sorted(p: &Profile, annotate: bool) -> Vec<String> {
        let mut lines: Vec<(String, u64)> = p
            .stacks
            .iter()
            .map(|s| (spell_slowly(p, s, annotate), s.weight))
            .collect();
        lines.sort();
        merge_equal(lines)
            .into_iter()
            .map(|(l, w)| format!("{l} {w}"))
            .collect()
    }

    #[test]
    fn coded_lines_sort_as_their_text() {
        // Names that begin others, followed by bytes below and above `;`, lines that end
        // where others go on, two functions of one name, kernel and inlined frames.
        let names = ["a", "a.b", "a:c", "ab", "a b", "b", "a"];
        let mut p = Profile {
            comms: vec!["prog".into(), "prog 2".into()],
            frames: names.iter().map(|n| f(n, "x")).collect(),
            ..Default::default()
        };
        p.frames[2].inlined = true;
        let mut weight = 0;
        let mut stack = |comm: u32, frames: &[u32], user_len: u32| {
            weight += 1;
            Stack {
                comm,
                pid: 1,
                tid: 1,
                frames: frames.to_vec(),
                user_len,
                weight,
                count: 1,
            }
        };
        p.stacks = vec![
            stack(0, &[0], 1),
            stack(0, &[1], 1),
            stack(0, &[0, 5], 2),
            stack(0, &[0, 1], 1),
            stack(0, &[1, 0], 2),
            stack(0, &[2, 3, 4], 3),
            stack(0, &[3], 1),
            stack(0, &[4, 0], 1),
            stack(0, &[6, 5], 2),
            stack(1, &[0], 1),
            stack(1, &[0, 2], 2),
        ];
        for annotate in [false, true] {
            assert_eq!(folded(&p, annotate), spelled_and_sorted(&p, annotate));
        }
        // Frames 0 and 6 spell the same: their stacks are one line.
        assert!(folded(&p, false).contains(&"prog;a;b 12".to_string()));
        // A `;` in a command name: spelled out, still in order.
        p.comms[1] = "pro;g".into();
        assert!(Names::new(&p, false).is_none());
        assert_eq!(folded(&p, false), spelled_and_sorted(&p, false));
    }

    #[test]
    fn names_follow_stackcollapse_perf() {
        assert_eq!(
            frame_name(&f("[unknown]", "/usr/lib/libc.so.6")),
            "[libc.so.6]"
        );
        assert_eq!(frame_name(&f("[unknown]", "[unknown]")), "[unknown]");
        assert_eq!(
            frame_name(&f("[unknown]", "[kernel.kallsyms]")),
            "[kernel.kallsyms]"
        );
        assert_eq!(frame_name(&f("[unknown]", "[vdso]")), "[vdso]");
        assert_eq!(
            frame_name(&f(
                "std::_Function_handler<double (double), main::{lambda(double)#1}>::_M_invoke",
                "x"
            )),
            "std::_Function_handler<double (double), main::{lambda(double)#1}>::_M_invoke"
        );
        assert_eq!(
            frame_name(&f("(anonymous namespace)::bar", "x")),
            "(anonymous namespace)::bar"
        );
        assert_eq!(frame_name(&f("main.(*T).Run", "x")), "main.(*T).Run");
        assert_eq!(frame_name(&f("a;b'c\"", "x")), "a:bc");
    }
}
