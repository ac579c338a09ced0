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

use rayon::prelude::*;

use rustc_hash::FxHashMap;

use crate::aggregate::Profile;
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

/// The folded lines. `kernel_annotate` adds `_[k]` to kernel frames and `_[i]` to inlined
/// ones (flamegraph.pl colours them).
pub fn folded(profile: &Profile, kernel_annotate: bool) -> Vec<String> {
    // Merge by frame ids first (threads of one command fold together), then spell each once.
    let mut by_ids: FxHashMap<(u32, &[u32], u32), u64> = FxHashMap::default();
    for s in &profile.stacks {
        *by_ids.entry((s.comm, &s.frames, s.user_len)).or_insert(0) += s.weight;
    }
    let names: Vec<Cow<str>> = profile.frames.iter().map(frame_name).collect();
    // Spelled, then sorted, in parallel: a program's deep stacks (a recursive parser, tens of
    // frames a stack, thousands of stacks) make this the longest stage of a folded report.
    let mut lines: Vec<(String, u64)> = by_ids
        .into_par_iter()
        .map(|((comm, frames, user_len), weight)| {
            let comm = &profile.comms[comm as usize];
            // Room for the whole line, its count included: growing by doubling would copy.
            let len = comm.len()
                + frames
                    .iter()
                    .map(|&f| names[f as usize].len() + 5)
                    .sum::<usize>()
                + 21;
            let mut key = String::with_capacity(len);
            key.extend(comm.chars().map(|c| if c == ' ' { '_' } else { c }));
            for (i, &f) in frames.iter().enumerate() {
                key.push(';');
                key.push_str(&names[f as usize]);
                if kernel_annotate {
                    if i >= user_len as usize {
                        key.push_str("_[k]");
                    } else if profile.frames[f as usize].inlined {
                        key.push_str("_[i]");
                    }
                }
            }
            (key, weight)
        })
        .collect();
    lines.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // Stacks that spell the same (one name, two functions) are one line.
    let mut merged: Vec<(String, u64)> = Vec::with_capacity(lines.len());
    for (key, weight) in lines {
        match merged.last_mut() {
            Some(last) if last.0 == key => last.1 += weight,
            _ => merged.push((key, weight)),
        }
    }
    merged
        .into_par_iter()
        .map(|(mut key, weight)| {
            key.push(' ');
            key.push_str(&weight.to_string());
            key
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(function: &str, dso: &str) -> FrameInfo {
        FrameInfo {
            function: function.into(),
            dso: dso.into(),
            srcline: None,
            inlined: false,
            by_address: false,
        }
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
