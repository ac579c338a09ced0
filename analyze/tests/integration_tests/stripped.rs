//! Stripped binaries (every Debian binary: tar, xz, liblzma): frames that no symbol names are
//! named by the function their unwind tables delimit, `FILE!0xSTART`, in every view and
//! export (`--no-unknown-names` keeps perf's `[unknown]`); a hint says which binaries are
//! stripped.
//!
//! The program is a fixture copied to a temporary path and stripped (`strip` keeps its build
//! id), recorded by record (DWARF stack copies), then analyzed with the stripped copy and with
//! the unstripped one put back at its path (same build id: the names perf would print).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::archive::build_id_of;
use crate::common::{analyze_env, can_record, fixture, record_ours, Tmp};
use crate::folded::{parse_folded, Folded};

/// `analyze ARGS` with `env`: its standard output and standard error, asserting success.
fn run(args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let out = analyze_env(args, env);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "analyze {args:?}: {err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

fn folded(file: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Folded, String) {
    let mut args = vec!["report", "--folded", "-i", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (text, err) = run(&args, env);
    (parse_folded(&text), err)
}

/// A fixture program (an inlined helper in a hot loop) at DIR/hot, stripped, recorded; its
/// unstripped copy at DIR/full.
struct Stripped {
    recording: PathBuf,
    hot: PathBuf,
    full: PathBuf,
}

fn record_stripped(dir: &Path) -> Stripped {
    let full = dir.join("full");
    let hot = dir.join("hot");
    std::fs::copy(fixture("inline-nofp"), &full).unwrap();
    let st = Command::new("strip")
        .arg("-o")
        .arg(&hot)
        .arg(&full)
        .status()
        .unwrap();
    assert!(st.success(), "strip");
    assert_eq!(build_id_of(&hot), build_id_of(&full));
    let recording = dir.join("rec.data");
    record_ours(
        &recording,
        &["--no-off-cpu", "--no-io", "--no-wakeups"],
        &hot,
        &["0.5"],
    );
    Stripped {
        recording,
        hot,
        full,
    }
}

/// The functions of `binary` by name: their start (SVMA), from its symbol table.
fn functions(binary: &Path) -> BTreeMap<String, u64> {
    let out = Command::new("nm")
        .args(["--defined-only"])
        .arg(binary)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (addr, kind, name) = (f.next()?, f.next()?, f.next()?);
            let addr = u64::from_str_radix(addr, 16).ok()?;
            matches!(kind, "T" | "t").then(|| (name.to_string(), addr))
        })
        .collect()
}

/// Every frame of `f` renamed by `rename` (stacks that become equal merge).
fn renamed(f: &Folded, rename: impl Fn(&str) -> String) -> Folded {
    let mut out = Folded::new();
    for (k, v) in f {
        let key: Vec<String> = k.split(';').map(&rename).collect();
        *out.entry(key.join(";")).or_insert(0) += v;
    }
    out
}

#[test]
fn stripped_functions_are_named_by_their_unwind_tables_in_every_view() {
    if !can_record() {
        return;
    }
    let dir = Tmp::new("stripped-names");
    let s = record_stripped(&dir.0);
    let file = s.recording.to_str().unwrap();

    // Stripped: the program's own functions by address, one name per function.
    let (stripped, err) = folded(&s.recording, &["--no-inline"], &[]);
    let by_address: Vec<&str> = stripped
        .keys()
        .flat_map(|k| k.split(';'))
        .filter(|f| f.starts_with("hot!0x"))
        .collect();
    assert!(by_address.len() >= 3, "{stripped:?}");
    assert!(
        !stripped.keys().any(|k| k.contains("[hot]")),
        "{stripped:?}"
    );
    // The summary counts them apart from [unknown]; the hint names the stripped program.
    assert!(err.contains("named by address"), "{err}");
    let hint: Vec<&str> = err.lines().filter(|l| l.contains("hint:")).collect();
    assert!(
        hint.len() == 2 && hint[0].contains("stripped binaries") && hint[0].contains("(hot "),
        "{err}"
    );

    // perf's names: [hot] for each of them, nothing else changed.
    let (plain, err) = folded(&s.recording, &["--no-inline", "--no-unknown-names"], &[]);
    let as_perf = renamed(&stripped, |f| {
        if f.starts_with("hot!0x") {
            "[hot]".into()
        } else {
            f.into()
        }
    });
    assert_eq!(plain, as_perf, "{err}");

    // Each function's name is its symbol's address: put the unstripped copy (same build id)
    // back and the names it gives, as addresses, are the stripped names.
    let syms = functions(&s.full);
    let hot_loop = syms["hot_loop"];
    assert!(
        stripped
            .keys()
            .any(|k| k.ends_with(&format!(";hot!{hot_loop:#x}"))),
        "hot_loop at {hot_loop:#x}: {stripped:?}"
    );
    for v in [
        ("script", vec!["script", "-i", file]),
        ("report", vec!["report", "-i", file]),
        ("annotate", vec!["annotate", "--stdio", "-i", file]),
    ] {
        let (text, _) = run(&v.1, &[]);
        assert!(
            text.contains(&format!("hot!{hot_loop:#x}")),
            "{}: {text}",
            v.0
        );
    }
    // script prints the offset into the function, as for a symbol.
    let (script, _) = run(&["script", "-i", file], &[]);
    assert!(
        script.contains(&format!("hot!{hot_loop:#x}+0x")),
        "{script}"
    );
    // annotate disassembles it.
    let name = format!("hot!{hot_loop:#x}");
    let (annotated, err) = run(&["annotate", &name, "--stdio", "-i", file], &[]);
    assert!(annotated.contains("xor"), "{annotated}{err}");
    // The flame graph and every export.
    let svg = dir.0.join("flame.svg");
    run(
        &["flamegraph", "-i", file, "-o", svg.to_str().unwrap()],
        &[],
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains(&name), "flame graph");
    for format in ["speedscope", "firefox", "pprof"] {
        let out = dir.0.join(format!("profile.{format}"));
        run(
            &[
                "export",
                "--format",
                format,
                "-i",
                file,
                "-o",
                out.to_str().unwrap(),
            ],
            &[],
        );
        let mut bytes = std::fs::read(&out).unwrap();
        if format == "pprof" {
            let mut text = Vec::new();
            use std::io::Read;
            flate2::read::GzDecoder::new(&bytes[..])
                .read_to_end(&mut text)
                .unwrap();
            bytes = text;
        }
        assert!(
            bytes.windows(name.len()).any(|w| w == name.as_bytes()),
            "{format} export lacks {name}"
        );
    }

    let (stripped_script, _) = run(&["script", "--no-inline", "-i", file], &[]);
    std::fs::copy(&s.full, &s.hot).unwrap();
    let (unstripped, err) = folded(&s.recording, &["--no-inline"], &[]);
    assert!(!err.contains("hint:"), "{err}");
    assert!(
        unstripped.keys().any(|k| k.contains(";hot_loop")),
        "{unstripped:?}"
    );
    // Frame for frame, sample for sample: the program's frames named by their symbols'
    // addresses are the stripped names (offsets included); all others are unchanged.
    let (unstripped_script, _) = run(&["script", "--no-inline", "-i", file], &[]);
    let in_hot = format!(" ({})", s.hot.display());
    let expected: Vec<String> = unstripped_script
        .lines()
        .map(|l| {
            let Some(frame) = l.strip_suffix(&in_hot) else {
                return l.to_string();
            };
            let (addr, symbol) = frame.trim_start().split_once(' ').unwrap();
            let (name, offset) = match symbol.rsplit_once("+0x") {
                Some((n, o)) => (n, format!("+0x{o}")),
                None => (symbol, String::new()),
            };
            let start = syms.get(name).unwrap_or_else(|| panic!("{name} in {l}"));
            let indent = &frame[..frame.len() - frame.trim_start().len()];
            format!("{indent}{addr} hot!{start:#x}{offset}{in_hot}")
        })
        .collect();
    assert_eq!(stripped_script.lines().collect::<Vec<_>>(), expected);
}
