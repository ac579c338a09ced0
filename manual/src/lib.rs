//! bpfperf's manual, made from the command lines its binaries parse: a man page per binary and
//! per subcommand (clap_mangen), and completions for bash, zsh and fish (clap_complete). Nothing
//! here is written by hand, so a flag the binaries take is a flag the pages list.
//!
//! [`write`] lays them out under one directory as `scripts/install` copies them:
//!
//! ```text
//! man/man1/analyze.1, analyze-report.1, ...   one page per binary and per subcommand
//! completions/bash/analyze                    bash-completion's name for a command's file
//! completions/zsh/_analyze                    zsh's (#compdef)
//! completions/fish/analyze.fish
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// The command line of every binary bpfperf installs.
pub fn commands() -> Vec<clap::Command> {
    vec![bpfperf_record::cli::command(), analyze::cli::command()]
}

/// The shells completions are written for.
pub const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// The name of `shell`'s completion file for the binary `bin`, under `completions/SHELL/`:
/// the names each shell's loader looks for (bash-completion: the command's name; zsh: `_` and
/// the name, found on `fpath`; fish: the name with `.fish`).
pub fn completion_file(shell: Shell, bin: &str) -> String {
    match shell {
        Shell::Zsh => format!("_{bin}"),
        Shell::Fish => format!("{bin}.fish"),
        _ => bin.to_string(),
    }
}

/// One man page: its file name (`analyze-report.1`) and its roff text.
pub struct Page {
    pub file: String,
    pub roff: Vec<u8>,
}

/// The pages of `commands`: one per binary and one per (non-hidden) subcommand, each named as
/// clap names a subcommand (`analyze-report`). Each ends with a SEE ALSO: a binary's page names
/// the other binaries (its own subcommands are listed above it), a subcommand's its binary,
/// its sibling subcommands and the other binaries.
pub fn pages(commands: &[clap::Command]) -> std::io::Result<Vec<Page>> {
    let version = env!("CARGO_PKG_VERSION");
    let bins: Vec<String> = commands.iter().map(|c| c.get_name().to_string()).collect();
    let mut pages = Vec::new();
    for cmd in commands {
        let mut cmd = cmd.clone().disable_help_subcommand(true);
        // Builds every subcommand's arguments (analyze defers them) and names them: each
        // subcommand's display name is `analyze-report`, its bin name `analyze report`.
        cmd.build();
        let bin = cmd.get_name().to_string();
        let subs: Vec<&clap::Command> =
            cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
        let others: Vec<String> = bins.iter().filter(|b| **b != bin).cloned().collect();
        pages.push(page(&cmd, version, &others)?);
        for s in &subs {
            let mut also = vec![bin.clone()];
            also.extend(
                subs.iter()
                    .filter(|t| t.get_name() != s.get_name())
                    .map(|t| display_name(t)),
            );
            also.extend(others.iter().cloned());
            pages.push(page(s, version, &also)?);
        }
    }
    Ok(pages)
}

fn display_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

fn page(cmd: &clap::Command, version: &str, see_also: &[String]) -> std::io::Result<Page> {
    let man = clap_mangen::Man::new(cmd.clone())
        .source(format!("bpfperf {version}"))
        .manual("bpfperf Manual");
    let file = man.get_filename();
    let mut roff = Vec::new();
    man.render(&mut roff)?;
    if !see_also.is_empty() {
        // Page names in bold, never hyphenated (`\%`), their hyphens hyphens (`\-`); the
        // line left-aligned (`.ad l`), not stretched between long names.
        writeln!(roff, ".SH \"SEE ALSO\"")?;
        writeln!(roff, ".ad l")?;
        let refs: Vec<String> = see_also
            .iter()
            .map(|p| format!("\\%\\fB{}\\fR(1)", p.replace('-', "\\-")))
            .collect();
        writeln!(roff, "{}", refs.join(", "))?;
    }
    Ok(Page { file, roff })
}

/// `shell`'s completion script for `cmd`.
pub fn completion(shell: Shell, cmd: &clap::Command) -> Vec<u8> {
    let mut cmd = cmd.clone();
    let bin = cmd.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, bin, &mut out);
    out
}

/// Writes the pages and completions of `commands` under `out` (see the crate's layout);
/// returns the files written.
pub fn write(out: &Path, commands: &[clap::Command]) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut put = |path: PathBuf, bytes: &[u8]| -> anyhow::Result<()> {
        let dir = path.parent().expect("a file under out");
        std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        std::fs::write(&path, bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        written.push(path);
        Ok(())
    };
    for p in pages(commands)? {
        put(out.join("man/man1").join(&p.file), &p.roff)?;
    }
    for cmd in commands {
        for shell in SHELLS {
            let file = completion_file(shell, cmd.get_name());
            put(
                out.join("completions").join(shell.to_string()).join(file),
                &completion(shell, cmd),
            )?;
        }
    }
    Ok(written)
}
