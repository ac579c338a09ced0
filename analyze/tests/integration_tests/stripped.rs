//! Stripped binaries (every Debian binary: tar, xz, liblzma): frames that no symbol names are
//! named by the function their unwind tables delimit, `FILE!0xSTART`, in every view and
//! export (`--no-unknown-names` keeps perf's `[unknown]`); a hint says which binaries are
//! stripped; and debuginfod is asked for the debug file of a stripped binary that is here.
//!
//! The program is a fixture copied to a temporary path and stripped (`strip` keeps its build
//! id), recorded by record (DWARF stack copies), then analyzed with the stripped copy, with the
//! unstripped one put back at its path (same build id: the names perf would print), and with
//! the debug file served by Debian's debuginfod.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::archive::{build_id_of, Server};
use crate::common::{analyze, analyze_env, can_record, fixture, record_ours, Tmp};
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

    // perf's names: [hot] for each of them, nothing else changed. (Any file's code named by
    // address is [FILE] for perf: a sample taken as the program exits passes through the end
    // of libc's `exit`, whose return address lies past it, `libc.so.6!0x3e680`.)
    let (plain, err) = folded(&s.recording, &["--no-inline", "--no-unknown-names"], &[]);
    let as_perf = renamed(&stripped, |f| match f.rsplit_once("!0x") {
        Some((file, hex)) if u64::from_str_radix(hex, 16).is_ok() => format!("[{file}]"),
        _ => f.into(),
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

#[test]
fn debuginfod_gives_the_debug_file_of_a_stripped_binary_that_is_here() {
    if !can_record() {
        return;
    }
    let dir = Tmp::new("stripped-debuginfod");
    let s = record_stripped(&dir.0);
    // The names and inline frames it has unstripped.
    std::fs::copy(&s.hot, dir.0.join("stripped")).unwrap();
    std::fs::copy(&s.full, &s.hot).unwrap();
    let (unstripped, _) = folded(&s.recording, &[], &[]);
    assert!(
        unstripped.keys().any(|k| k.ends_with(";hot_loop;mix_step")),
        "{unstripped:?}"
    );
    std::fs::rename(dir.0.join("stripped"), &s.hot).unwrap();

    // Its debug file as Debian ships one (-dbgsym), served by Debian's debuginfod.
    let served = dir.0.join("served");
    std::fs::create_dir(&served).unwrap();
    let st = Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&s.full)
        .arg(served.join("hot.debug"))
        .status()
        .unwrap();
    assert!(st.success(), "objcopy --only-keep-debug");
    std::fs::remove_file(&s.full).unwrap();
    let Some(server) = Server::start(&served, &dir.0.join("db.sqlite")) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}", server.1);
    let cache = dir.0.join("cache");
    let env = [
        ("DEBUGINFOD_URLS", url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", cache.to_str().unwrap()),
    ];
    let id = build_id_of(&s.hot);
    // The server scans its directory once started: ask until it serves the debug file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (got, err) = folded(&s.recording, &[], &env);
        if got.keys().any(|k| k.contains("hot_loop")) {
            assert_eq!(got, unstripped, "{err}");
            assert!(!err.contains("hint:"), "{err}");
            break;
        }
        let _ = std::fs::remove_dir_all(&cache);
        assert!(
            std::time::Instant::now() < deadline,
            "the debug file of {id} never came from debuginfod: {err}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(
        cache.join(&id).join("debuginfo").is_file(),
        "cached as elfutils caches"
    );
    assert!(
        !cache.join(&id).join("executable").exists(),
        "the binary is here: only its debug file is fetched"
    );
    // analyze info says where the binary and its debug file came from.
    let (info, _) = run(&["info", "-i", s.recording.to_str().unwrap()], &env);
    let line = info
        .lines()
        .find(|l| l.starts_with("  ") && l.contains(s.hot.to_str().unwrap()))
        .unwrap_or_else(|| panic!("{info}"));
    assert!(
        line.contains("(its path; debug file: debuginfod)"),
        "{line}"
    );
    // Without DEBUGINFOD_URLS the cache is not read: stripped names again.
    let out = analyze(&["report", "--folded", "-i", s.recording.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("hot_loop"));
}

/// A stripped Go program (`strip` removes `.symtab`, as Debian's packaging does to gofmt and
/// go): its functions are named from `.gopclntab`, the table Go's runtime names its own stack
/// traces with, where perf names them all `[unknown]`. The same recording analyzed with the
/// unstripped program put back at its path (its symbol table) gives the same stacks, but for
/// the `.abi0` suffix of assembly functions' symbols.
#[test]
fn stripped_go_functions_are_named_from_the_runtimes_table() {
    if !crate::common::perf_ok() {
        return;
    }
    let dir = Tmp::new("stripped-go");
    let full = dir.0.join("full");
    let prog = dir.0.join("goprog");
    std::fs::copy(fixture("goprog"), &full).unwrap();
    let st = Command::new("strip")
        .arg("-o")
        .arg(&prog)
        .arg(&full)
        .status()
        .unwrap();
    assert!(st.success(), "strip");
    let nm = Command::new("nm").arg(&prog).output().unwrap();
    assert!(
        !nm.status.success() || nm.stdout.is_empty(),
        "no symbols left"
    );
    let recording = dir.0.join("go.data");
    crate::common::perf_record(&recording, &["-F", "499", "-g"], &prog, &["0.4", "2"]);
    // perf: the program's frames are [unknown].
    let script = Command::new("perf")
        .args(["script", "-F", "ip,sym,dso", "-i"])
        .arg(&recording)
        .output()
        .unwrap();
    let script = String::from_utf8_lossy(&script.stdout);
    let ours_in_perf: Vec<&str> = script.lines().filter(|l| l.contains("/goprog)")).collect();
    let unknown = ours_in_perf
        .iter()
        .filter(|l| l.contains("[unknown]"))
        .count();
    assert!(!ours_in_perf.is_empty());
    assert_eq!(
        unknown,
        ours_in_perf.len(),
        "perf names some: {ours_in_perf:?}"
    );

    let (stripped, err) = folded(&recording, &["--no-inline"], &[]);
    let total: u64 = stripped.values().sum();
    let named: u64 = stripped
        .iter()
        .filter(|(k, _)| k.contains("main.") && !k.contains("[unknown]"))
        .map(|(_, v)| v)
        .sum();
    eprintln!("stripped Go: {named} of {total} samples on named main.* stacks\n{err}");
    assert!(named * 10 >= total * 9, "{stripped:#?}");
    // The symbol table's names, from the unstripped program at the same path.
    std::fs::copy(&full, &prog).unwrap();
    let (unstripped, _) = folded(&recording, &["--no-inline"], &[]);
    // The one difference: the symbol table names assembly functions by their ABI0 symbols
    // (`runtime.goexit.abi0`), the runtime's table as Go's stack traces do (`runtime.goexit`).
    let unstripped = renamed(&unstripped, |f| f.trim_end_matches(".abi0").to_string());
    assert_eq!(
        stripped, unstripped,
        "pclntab's names are the symbol table's"
    );
}
