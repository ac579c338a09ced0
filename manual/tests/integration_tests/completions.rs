//! The completions as a user's bash uses them: typed into a real bash in tmux, TAB pressed.

use std::time::Duration;

use crate::common::{have, names, prefix, runs, wait_for, Bash};

fn tmux_ok() -> bool {
    have(runs("tmux", &["-V"]), "tmux")
}

#[test]
fn install_puts_completions_for_each_shell() {
    let p = prefix();
    let cmds = bpfperf_manual::commands();
    let bins: Vec<String> = cmds.iter().map(|c| c.get_name().to_string()).collect();
    let expect = |f: fn(&str) -> String| {
        let mut v: Vec<String> = bins.iter().map(|b| f(b)).collect();
        v.sort();
        v
    };
    assert_eq!(
        names(&p.join("share/bash-completion/completions")),
        expect(|b| b.to_string())
    );
    assert_eq!(
        names(&p.join("share/zsh/site-functions")),
        expect(|b| format!("_{b}"))
    );
    assert_eq!(
        names(&p.join("share/fish/vendor_completions.d")),
        expect(|b| format!("{b}.fish"))
    );
    for b in &bins {
        let zsh =
            std::fs::read_to_string(p.join(format!("share/zsh/site-functions/_{b}"))).unwrap();
        assert!(zsh.starts_with(&format!("#compdef {b}")), "_{b}: {zsh:.80}");
        let fish =
            std::fs::read_to_string(p.join(format!("share/fish/vendor_completions.d/{b}.fish")))
                .unwrap();
        assert!(fish.contains(&format!("complete -c {b} ")), "{b}.fish");
    }
    // analyze's, at least: a subcommand and a flag of one in each shell's file.
    for (file, words) in [
        (
            "share/bash-completion/completions/analyze",
            ["report", "--call-graph"],
        ),
        (
            "share/zsh/site-functions/_analyze",
            ["report", "--call-graph"],
        ),
        (
            "share/fish/vendor_completions.d/analyze.fish",
            ["report", "call-graph"],
        ),
    ] {
        let text = std::fs::read_to_string(p.join(file)).unwrap();
        for w in words {
            assert!(text.contains(w), "{file}: no {w}");
        }
    }
}

/// The bash file sourced by hand: `analyze rep<TAB>` becomes `analyze report`, and a
/// subcommand's flags complete too.
#[test]
fn bash_completes_analyze_subcommands_and_flags() {
    if !tmux_ok() {
        return;
    }
    let p = prefix();
    let bash = Bash::start("analyze", p);
    bash.run(&format!(
        "source {}",
        p.join("share/bash-completion/completions/analyze")
            .display()
    ));
    assert_eq!(bash.complete("analyze rep"), "$ analyze report");
    assert_eq!(
        bash.complete("analyze report --call-g"),
        "$ analyze report --call-graph"
    );
    assert_eq!(bash.complete("analyze flameg"), "$ analyze flamegraph");
}

/// As a user's shell finds it: bash-completion, told of PREFIX/share (XDG_DATA_DIRS, as
/// /usr/local/share is by default), loads PREFIX/share/bash-completion/completions/analyze on
/// the first TAB after `analyze`. Proves the file's place and name, not only its text.
#[test]
fn bash_completion_loads_the_installed_file() {
    let loader = std::path::Path::new("/usr/share/bash-completion/bash_completion");
    if !tmux_ok() || !have(loader.is_file(), "bash-completion") {
        return;
    }
    let p = prefix();
    let bash = Bash::start("loader", p);
    bash.run(&format!(
        "export XDG_DATA_DIRS={}/share; source {}",
        p.display(),
        loader.display()
    ));
    assert_eq!(bash.complete("analyze rep"), "$ analyze report");
    bash.run("complete -p analyze");
    assert!(
        wait_for(Duration::from_secs(5), || bash
            .screen()
            .contains("-F _analyze analyze")
            .then_some(()))
        .is_some(),
        "bash-completion did not load analyze's completion:\n{}",
        bash.screen()
    );
}

/// `record --call-g<TAB>` becomes `record --call-graph`.
#[test]
fn bash_completes_record_flags() {
    if !tmux_ok() {
        return;
    }
    let p = prefix();
    let bash = Bash::start("record", p);
    bash.run(&format!(
        "source {}",
        p.join("share/bash-completion/completions/record").display()
    ));
    assert_eq!(bash.complete("record --call-g"), "$ record --call-graph");
}
