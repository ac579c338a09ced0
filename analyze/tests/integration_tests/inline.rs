//! Inline frames: a `static inline` helper inlined into a hot function shows under it, with
//! its file:line; --no-inline removes it; analyze script marks it `(inlined)` as perf script
//! does. perf script (without --inline) shows only the outer function: this is where we
//! differ from perf on purpose.

use std::collections::BTreeMap;

use crate::common::{analyze, fixture, perf_ok, perf_record, Tmp};
use crate::folded::{perf_script_with, run_ok};

#[test]
fn inlined_helper_shows_under_its_caller() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("inline");
    // -O2 -g (the helper inlined as the optimizer wants it) and -O1 -g with frame pointers.
    for program in ["inline-nofp", "inline-fp"] {
        check(&dir, program);
    }
}

fn check(dir: &Tmp, program: &str) {
    let file = dir.0.join(format!("{program}.data"));
    perf_record(&file, &["-F", "999", "-g"], &fixture(program), &["0.5"]);
    let f = file.to_str().unwrap();

    let folded = String::from_utf8(analyze(&["report", "--folded", "-i", f]).stdout).unwrap();
    let weight = |needle: &str, text: &str| -> u64 {
        text.lines()
            .filter(|l| l.contains(needle))
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum()
    };
    let total = weight("", &folded);
    let inlined = weight(";hot_loop;mix_step", &folded);
    assert!(
        inlined * 100 >= total * 30,
        "{program}: mix_step under hot_loop in {inlined} of {total}:\n{folded}"
    );
    assert!(
        folded.lines().all(|l| !l.contains(";mix_step;hot_loop")),
        "inline frame is the callee, not the caller"
    );

    // analyze script marks the inline frame as perf script marks one, `(inlined)` in place
    // of its object (tools that read that text tell the two apart by it); the frame it is
    // inlined into, at the same address, keeps its object.
    let script = String::from_utf8(analyze(&["script", "-i", f]).stdout).unwrap();
    let helper: Vec<&str> = script
        .lines()
        .filter(|l| l.contains(" mix_step+") || l.contains(" mix_step "))
        .collect();
    assert!(!helper.is_empty(), "{program}: no mix_step line:\n{script}");
    assert!(
        helper.iter().all(|l| l.ends_with(" (inlined)")),
        "{program}: {:?}",
        &helper[..helper.len().min(3)]
    );
    assert!(
        script
            .lines()
            .filter(|l| l.contains(" hot_loop+"))
            .all(|l| l.ends_with(&format!("{program})"))),
        "{program}: hot_loop keeps its object"
    );

    let plain =
        String::from_utf8(analyze(&["report", "--folded", "--no-inline", "-i", f]).stdout).unwrap();
    assert_eq!(
        weight("mix_step", &plain),
        0,
        "--no-inline removes it:\n{plain}"
    );
    assert_eq!(
        weight(";hot_loop", &plain),
        weight(";hot_loop", &folded),
        "its samples stay with hot_loop"
    );

    let lines =
        String::from_utf8(analyze(&["report", "--sort", "srcline", "-i", f]).stdout).unwrap();
    let source =
        std::fs::read_to_string(crate::common::root().join("fixtures/programs/inline.c")).unwrap();
    let helper_lines: Vec<usize> = source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("x ^= x >>") || l.contains("x *= 0xff"))
        .map(|(i, _)| i + 1)
        .collect();
    assert!(
        helper_lines
            .iter()
            .any(|n| lines.contains(&format!("inline.c:{n}"))),
        "srcline of the inlined helper ({helper_lines:?}):\n{lines}"
    );
}

/// The frame lines of `script` text (perf's or ours) at the addresses of `program`'s code
/// where a function is inlined: the inline frames (`mix_step+0x4d (inlined)`) and the frame
/// of the function they are inlined into (`hot_loop+0x4d (/.../inline-nofp)`), without the
/// address (perf 6.1 prints a DWARF-unwound user frame's address relative to its file),
/// counted. Left out: other files' lines (perf's DWARF unwinder also names libc's frames by
/// addr2line's function names, marked `(inlined)`, `__libc_start_main_impl+0x84 (inlined)`:
/// a difference named in fidelity.rs) and frames with nothing inlined (where the two
/// unwinders may part, at a process's exit).
fn program_frame_lines(script: &str, program: &str) -> BTreeMap<String, usize> {
    let own = format!("/{program})");
    let mut counts = BTreeMap::new();
    for sample in script.split("\n\n") {
        let frames: Vec<(&str, &str)> = sample
            .lines()
            .filter(|l| l.starts_with('\t'))
            .filter_map(|l| l.trim().split_once(' '))
            .collect();
        for (i, (addr, text)) in frames.iter().enumerate() {
            let keep = if text.ends_with(" (inlined)") {
                frames[i + 1..]
                    .iter()
                    .any(|(a, t)| a == addr && t.ends_with(&own))
            } else {
                text.ends_with(&own)
                    && frames[..i]
                        .iter()
                        .any(|(a, t)| a == addr && t.ends_with(" (inlined)"))
            };
            if keep {
                *counts.entry(text.to_string()).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// analyze script prints an inline frame as perf script prints one: the inlined function's
/// name, the offset of the address in the function it is inlined into (perf gives an inline
/// frame its outer symbol's start), and `(inlined)` in place of the object, which is how
/// tools reading that text tell it from a real frame. perf 6.1 prints inline frames in
/// DWARF-unwound stacks: compared line for line with its script on one such recording.
/// Before: `mix_step (inlined)` where perf prints `mix_step+0x4d (inlined)` (and before that,
/// `mix_step (/.../inline-nofp)`).
#[test]
fn script_prints_inline_frames_as_perf_script_does() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("inline-script");
    for program in ["inline-nofp", "inline-fp"] {
        let file = dir.0.join(format!("{program}.data"));
        perf_record(
            &file,
            &["-F", "999", "--call-graph", "dwarf"],
            &fixture(program),
            &["0.5"],
        );
        let perf = program_frame_lines(&perf_script_with(&file, &[]), program);
        let ours = program_frame_lines(&run_ok(&["script", "-i", file.to_str().unwrap()]), program);
        let inlined: usize = perf
            .iter()
            .filter(|(l, _)| l.starts_with("mix_step+") && l.ends_with(" (inlined)"))
            .map(|(_, n)| n)
            .sum();
        eprintln!(
            "{program}: {} lines of perf script at its inlined code, {inlined} of them mix_step's",
            perf.values().sum::<usize>()
        );
        assert!(
            inlined >= 10,
            "{program}: perf script prints {inlined} inline frames of mix_step: {perf:#?}"
        );
        assert_eq!(
            ours, perf,
            "{program}: analyze script's lines (left), perf script's (right)"
        );
    }
}

/// Views without source lines find inline frames by one pass over each unit's entries,
/// never parsing its line program; views with lines ask addr2line. The two must name the
/// same frames at every address: checked at every 8th byte of each function (up to 40 a
/// function) of Rust, C++ (g++ and clang++), C and Go programs and Debian's libc (its debug
/// file from libc6-dbg: thousands of units, read through .debug_aranges).
#[test]
fn inline_frames_without_lines_are_addr2lines() {
    use analyze::resolve::Lookup;
    use analyze::symbolize::{dwarf_file, symbolize_elf, Naming};
    use object::{Object, ObjectSymbol};

    let loader = analyze::files::Loader::new();
    let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6".to_string();
    let programs = [
        "rsprog-nofp",
        "cxxprog-g++-nofp",
        "cxxprog-clang++-nofp",
        "inline-nofp",
        "goprog",
    ];
    let mut paths: Vec<String> = programs
        .iter()
        .map(|p| fixture(p).to_string_lossy().into_owned())
        .collect();
    paths.push(libc.clone());
    let mut inlined_total = 0;
    for path in &paths {
        let elf = loader.elf(path, None).unwrap_or_else(|| panic!("{path}"));
        let debug = loader.debug_file(&elf);
        assert!(
            path != &libc || debug.is_some() || std::env::var_os("CI").is_none(),
            "libc6-dbg is missing (scripts/setup installs it)"
        );
        let symbols = {
            let named = debug.as_deref().unwrap_or(&elf);
            let obj = object::File::parse(&*named.bytes).unwrap();
            let mut s: Vec<(u64, u64)> = obj
                .symbols()
                .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
                .map(|s| (s.address(), s.size()))
                .collect();
            s.sort_unstable();
            s.dedup();
            s
        };
        // Inside each function, and in the bytes after it (padding, code no symbol covers:
        // in a unit's ranges but in none of its functions), some as return addresses.
        let lookups: Vec<Lookup> = symbols
            .iter()
            .flat_map(|&(at, size)| {
                let inside = (0..size.min(320)).step_by(8).map(move |o| at + o);
                inside.chain((0..24).step_by(4).map(move |o| at + size + o))
            })
            .enumerate()
            .map(|(i, addr)| Lookup {
                addr,
                is_return: i % 3 == 0,
            })
            .collect();
        // Names by address too: an address in no function must be [unknown] (or its
        // symbol's) either way, not named by address on one side only.
        let names = |lines: bool| -> Vec<Vec<(String, bool)>> {
            let naming = Naming {
                inline: true,
                by_address: true,
                lines,
            };
            let dwarf = dwarf_file(&elf, debug.as_deref(), true, lines);
            symbolize_elf(&elf, debug.as_deref(), path, &lookups, dwarf, naming)
                .into_iter()
                .map(|a| {
                    a.frames
                        .into_iter()
                        .map(|f| (f.function, f.inlined))
                        .collect()
                })
                .collect()
        };
        let (walked, by_addr2line) = (names(false), names(true));
        let inlined = walked.iter().filter(|f| f.len() > 1).count();
        for (i, (w, a)) in walked.iter().zip(&by_addr2line).enumerate() {
            let addr = lookups[i].addr;
            assert_eq!(w, a, "{path} at {addr:#x}");
        }
        eprintln!(
            "{path}: {} addresses, {inlined} with inline frames",
            lookups.len()
        );
        inlined_total += inlined;
    }
    assert!(
        inlined_total > 1000,
        "{inlined_total} addresses in inlined code"
    );
}
