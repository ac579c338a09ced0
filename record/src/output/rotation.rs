//! Recordings that rotate, as `perf record --switch-output` writes them: the file at the
//! output path is finished (features and all), moved to `OUTPUT.<timestamp>`, and a new one
//! begun there, on SIGUSR2, at a size or after a time; the last file is moved to its
//! timestamped name too when recording ends. With a limit, only the last N files are kept.
//!
//! Each file stands alone: it starts with what its reader needs of the processes and kernel
//! code that earlier files described (see [`crate::sideband::known`]), as perf synthesizes them again
//! into each new file.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;

/// When to go on to the next file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// On SIGUSR2.
    Signal,
    /// Once the file holds this many bytes.
    Size(u64),
    /// Once the file is this old.
    Time(Duration),
}

/// `--switch-output` and `--switch-max-files`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub switch: Switch,
    /// Files kept (the oldest are deleted); 0 keeps them all.
    pub max_files: usize,
}

/// perf's `--switch-output[=MODE]` argument: `signal`; a size, a number with one of B, K,
/// M, G (powers of 1024); a time, a number with one of s, m, h, d. The unit letters are
/// perf's, case included (`10m` is ten minutes); unlike perf, nothing may follow the unit
/// and the number must be above 0 (perf reads `5Mx` as 5M and takes `0M` as no limit).
pub fn parse_switch_output(s: &str) -> Result<Switch, String> {
    if s == "signal" {
        return Ok(Switch::Signal);
    }
    let bad = || {
        format!(
            "--switch-output={s}: expected signal, a size (a number with B, K, M or G: 100M) \
             or a time (a number with s, m, h or d: 30s)"
        )
    };
    let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (number, unit) = s.split_at(digits);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let (multiplier, time) = match unit {
        "B" => (1, false),
        "K" => (1 << 10, false),
        "M" => (1 << 20, false),
        "G" => (1 << 30, false),
        "s" => (1, true),
        "m" => (60, true),
        "h" => (60 * 60, true),
        "d" => (24 * 60 * 60, true),
        _ => return Err(bad()),
    };
    let value = n.checked_mul(multiplier).ok_or_else(bad)?;
    if value == 0 {
        return Err(format!("--switch-output={s}: must be above 0"));
    }
    Ok(if time {
        Switch::Time(Duration::from_secs(value))
    } else {
        Switch::Size(value)
    })
}

/// perf's timestamp of a rotated file: local time to the hundredth of a second,
/// `YYYYMMDDHHMMSScc` (tools/perf/util/time-utils.c, fetch_current_timestamp).
pub fn timestamp(at: SystemTime) -> String {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs() as libc::time_t;
    // SAFETY: a zeroed tm is a valid out buffer; localtime_r only writes it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&secs, &mut tm) };
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        since.subsec_millis() / 10
    )
}

/// `path` with `.suffix` added to its name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// A rotating recording's files: when to switch, and which are kept.
pub struct Rotation {
    options: Options,
    output: PathBuf,
    /// When the current file was begun, and its size then (header and the state it starts
    /// with): a file is switched for its size only once it holds records of its own.
    started: Instant,
    base: u64,
    /// Files written and kept, oldest first.
    kept: VecDeque<PathBuf>,
    /// Files written.
    pub files: u64,
}

impl Rotation {
    pub fn new(options: Options, output: &Path) -> Rotation {
        Rotation {
            options,
            output: output.into(),
            started: Instant::now(),
            base: 0,
            kept: VecDeque::new(),
            files: 0,
        }
    }

    /// Whether the current file, `bytes` long, is done. Takes a pending SIGUSR2.
    pub fn due(&self, bytes: u64) -> bool {
        let signalled = crate::host::take_switch_request();
        match self.options.switch {
            Switch::Signal => signalled,
            Switch::Size(size) => bytes >= size && bytes > self.base,
            Switch::Time(age) => self.started.elapsed() >= age,
        }
    }

    /// Files kept.
    pub fn kept(&self) -> u64 {
        self.kept.len() as u64
    }

    /// A new file was begun, `bytes` long before its own records.
    pub fn begun(&mut self, bytes: u64) {
        self.started = Instant::now();
        self.base = bytes;
    }

    /// Moves the finished file at the output path to its timestamped name (one no file has
    /// yet: two switches within a hundredth of a second wait for the next), and deletes the
    /// oldest files beyond the limit. Returns the new name.
    pub fn dump(&mut self) -> anyhow::Result<PathBuf> {
        let mut to = with_suffix(&self.output, &timestamp(SystemTime::now()));
        for _ in 0..100 {
            if !to.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            to = with_suffix(&self.output, &timestamp(SystemTime::now()));
        }
        std::fs::rename(&self.output, &to).with_context(|| {
            format!(
                "--switch-output: cannot rename {} to {}",
                self.output.display(),
                to.display()
            )
        })?;
        self.files += 1;
        self.kept.push_back(to.clone());
        while self.options.max_files > 0 && self.kept.len() > self.options.max_files {
            if let Some(old) = self.kept.pop_front() {
                if let Err(e) = std::fs::remove_file(&old) {
                    eprintln!("record: cannot remove {}: {e}", old.display());
                }
            }
        }
        Ok(to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_output_takes_perfs_modes_and_units() {
        assert_eq!(parse_switch_output("signal"), Ok(Switch::Signal));
        assert_eq!(parse_switch_output("512B"), Ok(Switch::Size(512)));
        assert_eq!(parse_switch_output("100K"), Ok(Switch::Size(100 << 10)));
        assert_eq!(parse_switch_output("100M"), Ok(Switch::Size(100 << 20)));
        assert_eq!(parse_switch_output("2G"), Ok(Switch::Size(2 << 30)));
        let secs = |s| Ok(Switch::Time(Duration::from_secs(s)));
        assert_eq!(parse_switch_output("30s"), secs(30));
        assert_eq!(parse_switch_output("5m"), secs(300));
        assert_eq!(parse_switch_output("1h"), secs(3600));
        assert_eq!(parse_switch_output("2d"), secs(2 * 86400));
    }

    #[test]
    fn switch_output_refuses_what_is_no_size_or_time_naming_it() {
        for bad in [
            "",
            "Signal",
            "100",
            "M",
            "10x",
            "100MB",
            "10k",
            "1g",
            "1.5G",
            " 5M",
            "5M ",
            "5Mx",
            "-1M",
            "+1M",
            "0M",
            "0s",
            "1S",
            "99999999999999999999G",
            "18446744073709551615G",
        ] {
            let e = parse_switch_output(bad).expect_err(bad);
            assert!(
                e.contains(&format!("--switch-output={bad}")),
                "{bad:?} not named in: {e}"
            );
        }
    }

    #[test]
    fn timestamps_are_perfs_local_time_to_the_hundredth() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_456);
        let t = timestamp(at);
        assert_eq!(t.len(), 16, "{t}");
        assert!(t.bytes().all(|b| b.is_ascii_digit()), "{t}");
        assert!(t.ends_with("45"), "{t}");
        // The seconds (no zone has a sub-minute offset).
        assert_eq!(&t[12..14], "20", "{t}");
        assert!(t.starts_with("2023111"), "{t}");
    }

    #[test]
    fn rotated_files_are_named_after_the_output_and_the_oldest_go() {
        let dir = std::env::temp_dir().join(format!("bpfperf-rotation-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let output = dir.join("perf.data");
        let mut r = Rotation::new(
            Options {
                switch: Switch::Signal,
                max_files: 2,
            },
            &output,
        );
        let mut names = Vec::new();
        for i in 0..4 {
            std::fs::write(&output, [i]).unwrap();
            names.push(r.dump().unwrap());
        }
        assert_eq!(r.files, 4);
        let mut left: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        left.sort();
        assert_eq!(left, names[2..], "the last two are kept");
        for (i, name) in names.iter().enumerate() {
            let n = name.file_name().unwrap().to_str().unwrap();
            let stamp = n.strip_prefix("perf.data.").unwrap();
            assert_eq!(stamp.len(), 16, "{n}");
            if i >= 2 {
                assert_eq!(std::fs::read(name).unwrap(), [i as u8]);
            }
        }
        // Distinct names although written within a few milliseconds.
        names.dedup();
        assert_eq!(names.len(), 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
