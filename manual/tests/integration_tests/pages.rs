//! The man pages as `man` shows them: one per binary and per subcommand of every command the
//! generator knows, each rendered by `man -l` without a warning, each listing its options.

use std::process::Command;

use crate::common::{have, names, prefix, runs};

fn man_ok() -> bool {
    have(runs("man", &["--version"]), "man (man-db)")
}

/// `man -l PAGE` at a fixed width, groff's warnings on: (status, page text, warnings).
fn man(page: &std::path::Path) -> (bool, String, String) {
    let out = Command::new("man")
        .args(["--warnings=w", "-l"])
        .arg(page)
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("LANG", "C.UTF-8")
        .env_remove("LC_ALL")
        .env_remove("MANOPT")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The text without spaces, line breaks and the hyphens groff breaks words with, so that an
/// option split across lines (`--no-un‐` / `known-names`) is found.
fn joined(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && *c != '\u{2010}')
        .collect()
}

#[test]
fn install_puts_a_page_per_binary_and_subcommand() {
    let dir = prefix().join("share/man/man1");
    let mut expected: Vec<String> = bpfperf_manual::pages(&bpfperf_manual::commands())
        .unwrap()
        .into_iter()
        .map(|p| p.file)
        .collect();
    expected.sort();
    assert_eq!(names(&dir), expected);
    for cmd in bpfperf_manual::commands() {
        let mut cmd = cmd;
        cmd.build();
        let name = cmd.get_name().to_string();
        assert!(
            expected.contains(&format!("{name}.1")),
            "no page for {name}"
        );
        for s in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let page = format!("{name}-{}.1", s.get_name());
            assert!(
                expected.contains(&page),
                "no {page} for `{name} {}`",
                s.get_name()
            );
        }
    }
    // analyze's subcommands, at least, each have theirs.
    for sub in ["report", "flamegraph", "top", "trace", "annotate"] {
        assert!(
            expected.contains(&format!("analyze-{sub}.1")),
            "{expected:?}"
        );
    }
}

#[test]
fn every_page_renders_without_warnings_and_lists_its_options() {
    if !man_ok() {
        return;
    }
    let dir = prefix().join("share/man/man1");
    let mut problems = Vec::new();
    let mut rendered = 0;
    for cmd in bpfperf_manual::commands() {
        let mut cmd = cmd.disable_help_subcommand(true);
        cmd.build();
        let bin = cmd.get_name().to_string();
        let mut each: Vec<(String, &clap::Command)> = vec![(bin.clone(), &cmd)];
        each.extend(
            cmd.get_subcommands()
                .map(|s| (format!("{bin}-{}", s.get_name()), s)),
        );
        for (name, c) in each {
            let page = dir.join(format!("{name}.1"));
            let (ok, text, warnings) = man(&page);
            rendered += 1;
            if !ok || !warnings.is_empty() {
                problems.push(format!("{name}: man -l failed or warned: {warnings}"));
                continue;
            }
            let first = text.lines().next().unwrap_or("");
            if !first.starts_with(&format!("{name}(1)")) {
                problems.push(format!("{name}: header line {first:?}"));
            }
            for section in ["NAME", "SYNOPSIS", "OPTIONS"] {
                if !text.lines().any(|l| l == section) {
                    problems.push(format!("{name}: no {section} section"));
                }
            }
            let flat = joined(&text);
            for arg in c.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = arg.get_long() {
                    if !flat.contains(&format!("--{long}")) {
                        problems.push(format!("{name}: --{long} not on the page"));
                    }
                }
            }
            if name != bin && !flat.contains(&format!("SEEALSO{bin}(1)")) {
                problems.push(format!("{name}: SEE ALSO does not start with {bin}(1)"));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    let pages = names(&dir).len();
    assert_eq!(rendered, pages, "every installed page rendered");
    eprintln!("{rendered} pages rendered by man -l without warnings");
}

#[test]
fn report_page_says_what_report_help_says() {
    if !man_ok() {
        return;
    }
    let (_, text, _) = man(&prefix().join("share/man/man1/analyze-report.1"));
    let flat = joined(&text);
    // The flag's own help, word for word (not a hand-written summary of it).
    for words in [
        "-g,--call-graph[<caller|callee>]",
        "Draweachrow'scallgraph",
        "SortbyTotal",
        "[default:perf.data]",
    ] {
        assert!(
            flat.contains(words),
            "{words} not in analyze-report(1):\n{text}"
        );
    }
}

/// Every binary scripts/install installs has its page and completions.
#[test]
fn every_installed_binary_has_its_page_and_completions() {
    let p = prefix();
    for bin in names(&p.join("bin")) {
        for file in [
            format!("share/man/man1/{bin}.1"),
            format!("share/bash-completion/completions/{bin}"),
            format!("share/zsh/site-functions/_{bin}"),
            format!("share/fish/vendor_completions.d/{bin}.fish"),
        ] {
            assert!(p.join(&file).is_file(), "{bin}: no {file}");
        }
    }
}
