//! What the tests share: the installed prefix, tools they need, a shell in tmux.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Whether a tool a test needs is here (`ok`); under CI its absence fails the test, elsewhere
/// the test is skipped with one line saying so.
pub fn have(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} must be here under CI (scripts/setup installs it)"
        );
        eprintln!("skipping: no {what}");
    }
    ok
}

/// Whether `program` runs (`program ARGS` exits, whatever its status).
pub fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// The prefix `scripts/install` put bpfperf in, installed once per run from the binaries this
/// test run built (`BPFPERF_INSTALL_FROM`: the script's own release build is left out).
pub fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("manual-install");
        let _ = std::fs::remove_dir_all(&prefix);
        // target/debug: this crate's binary, and record's and analyze's (`cargo test
        // --workspace` builds every package's binaries for its tests).
        let built = Path::new(env!("CARGO_BIN_EXE_bpfperf-manual"))
            .parent()
            .unwrap();
        let out = Command::new("bash")
            .arg(root().join("scripts/install"))
            .arg(&prefix)
            .env("BPFPERF_INSTALL_FROM", built)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/install {} failed:\n{}",
            prefix.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        prefix
    })
}

/// The files in `dir`, by name, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Waits up to `limit` for `f` to give something.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An interactive `bash --norc --noprofile` in a tmux server of its own (a real terminal: what
/// readline completes on TAB is what a user sees), with PREFIX/bin first on PATH and nothing
/// of the machine's or user's shell setup.
pub struct Bash {
    socket: String,
}

impl Bash {
    pub fn start(tag: &str, prefix: &Path) -> Bash {
        let t = Bash {
            socket: format!("bpfperf-manual-{tag}-{}", std::process::id()),
        };
        let shell = format!(
            "env -i HOME={home} TERM=screen LANG=C.UTF-8 INPUTRC=/dev/null PATH={prefix}/bin:/usr/bin:/bin \
             bash --norc --noprofile",
            home = prefix.display(),
            prefix = prefix.display(),
        );
        let st = t
            .cmd()
            .args(["new-session", "-d", "-x", "150", "-y", "30", &shell])
            .status()
            .unwrap();
        assert!(st.success(), "tmux new-session");
        t.run("PS1='$ '");
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    pub fn screen(&self) -> String {
        let out = self.cmd().args(["capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The last line of the screen with anything on it.
    pub fn last_line(&self) -> String {
        let s = self.screen();
        s.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim_end()
            .to_string()
    }

    fn keys(&self, keys: &[&str]) {
        let st = self.cmd().arg("send-keys").args(keys).status().unwrap();
        assert!(st.success(), "tmux send-keys {keys:?}");
    }

    /// Runs `line` and waits for the next prompt.
    pub fn run(&self, line: &str) {
        let marker = format!("done-{}", line.len());
        self.keys(&[&format!("{line}; echo {marker}"), "Enter"]);
        wait_for(Duration::from_secs(10), || {
            let s = self.screen();
            let mut lines = s.lines().filter(|l| !l.trim().is_empty()).rev();
            (lines.next().map(str::trim_end) == Some("$") && lines.next() == Some(marker.as_str()))
                .then_some(())
        })
        .unwrap_or_else(|| panic!("`{line}` did not finish:\n{}", self.screen()));
    }

    /// Types `text`, presses TAB and returns the line once it has changed (or as it is after
    /// 10 s), then clears it.
    pub fn complete(&self, text: &str) -> String {
        self.keys(&["-l", text]);
        let typed = format!("$ {text}");
        wait_for(Duration::from_secs(10), || {
            (self.last_line() == typed).then_some(())
        })
        .unwrap_or_else(|| panic!("`{text}` was not typed:\n{}", self.screen()));
        self.keys(&["Tab"]);
        let line = wait_for(Duration::from_secs(10), || {
            let l = self.last_line();
            (l != typed).then_some(l)
        })
        .unwrap_or_else(|| self.last_line());
        self.keys(&["C-u"]);
        line
    }
}

impl Drop for Bash {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
    }
}
