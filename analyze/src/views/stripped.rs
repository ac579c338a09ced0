//! The hint about stripped binaries: when many frames have no symbol name, which binaries
//! are stripped (most frames first) and how to get their symbols. Debian's binaries are all
//! stripped; their symbols are in `-dbgsym` packages of the debug archive and on
//! debuginfod.debian.net.

use crate::symbolize::Stats;

/// The share of all frames above which the hint is given.
pub const HINT_SHARE: f64 = 0.10;

/// A stripped file and the frames in it without a symbol name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stripped {
    pub path: String,
    pub frames: u64,
    /// The Debian package that installed it, if dpkg knows one.
    pub package: Option<String>,
}

/// The stripped files of `stats` with frames that have no symbol name, most frames first,
/// if together they hold more than [`HINT_SHARE`] of the frames.
pub fn stripped_files(stats: &Stats) -> Vec<Stripped> {
    let mut files: Vec<(&String, u64)> = stats
        .unnamed_by_file
        .iter()
        .filter(|(_, (_, stripped))| *stripped)
        .map(|(path, (n, _))| (path, *n))
        .collect();
    let unnamed: u64 = files.iter().map(|f| f.1).sum();
    if stats.frames == 0 || (unnamed as f64) <= HINT_SHARE * stats.frames as f64 {
        return Vec::new();
    }
    files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let paths: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    let owners = crate::files::packages::owners(&paths);
    files
        .into_iter()
        .map(|(path, frames)| Stripped {
            package: owners.get(path).cloned(),
            path: path.clone(),
            frames,
        })
        .collect()
}

/// The hint's lines, if it is due (see [`stripped_files`]): which binaries are stripped and
/// how to get their symbols. `codename` is the Debian release (`bookworm`), if this is Debian;
/// `debuginfod_set`, whether `DEBUGINFOD_URLS` names servers already.
pub fn hint(stats: &Stats, codename: Option<&str>, debuginfod_set: bool) -> Vec<String> {
    let files = stripped_files(stats);
    if files.is_empty() {
        return Vec::new();
    }
    let share = |n: u64| 100.0 * n as f64 / stats.frames as f64;
    let total: u64 = files.iter().map(|f| f.frames).sum();
    let named: Vec<String> = files
        .iter()
        .take(8)
        .map(|f| {
            let file = f.path.rsplit('/').next().unwrap_or(&f.path);
            format!("{file} {:.0}%", share(f.frames))
        })
        .collect();
    let more = match files.len().saturating_sub(8) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let named_how = if stats.by_address_frames > 0 {
        "; they are named by their function's address (FILE!0xSTART)"
    } else {
        ""
    };
    let mut lines = vec![format!(
        "{:.0}% of the frames are in stripped binaries, without symbols ({}{more}){named_how}",
        share(total),
        named.join(", ")
    )];
    lines.push(how_to_get_symbols(&files, codename, debuginfod_set));
    lines
}

/// The hint's second line: where the symbols of `files` are. On Debian, their packages'
/// `-dbgsym` packages in the debug archive, and Debian's debuginfod server; elsewhere, and
/// for files no package installed, their debug files.
fn how_to_get_symbols(files: &[Stripped], codename: Option<&str>, debuginfod_set: bool) -> String {
    let file_name = |f: &Stripped| f.path.rsplit('/').next().unwrap_or(&f.path).to_string();
    let mut packages: Vec<String> = files
        .iter()
        .filter_map(|f| f.package.as_deref())
        .map(crate::files::packages::debug_package)
        .collect();
    packages.sort();
    packages.dedup();
    let unpackaged: Vec<String> = files
        .iter()
        .filter(|f| f.package.is_none())
        .map(file_name)
        .collect();
    let mut ways: Vec<String> = Vec::new();
    match codename {
        Some(codename) if !packages.is_empty() => {
            if !debuginfod_set {
                ways.push(
                    "DEBUGINFOD_URLS=https://debuginfod.debian.net (analyze fetches them)".into(),
                );
            }
            ways.push(format!(
                "`apt install {}` once the debug archive is among apt's sources \
                 (deb http://deb.debian.org/debian-debug {codename}-debug main)",
                packages.join(" ")
            ));
        }
        _ if unpackaged.len() < files.len() => {
            if !debuginfod_set {
                ways.push("DEBUGINFOD_URLS naming your distribution's debuginfod server".into());
            }
            ways.push("their -dbgsym (or -debuginfo) packages".into());
        }
        _ => {}
    }
    if !unpackaged.is_empty() {
        ways.push(format!(
            "for {} (in no package): build id-named debug files under \
             /usr/lib/debug/.build-id, a debuginfod server that has them, or unstripped builds",
            unpackaged.join(", ")
        ));
    }
    let mut line = format!("their symbols: {}", ways.join("; or "));
    if debuginfod_set {
        line.push_str(" (the servers in DEBUGINFOD_URLS did not have them)");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(frames: u64, files: &[(&str, u64, bool)]) -> Stats {
        Stats {
            frames,
            unnamed_by_file: files
                .iter()
                .map(|(p, n, s)| (p.to_string(), (*n, *s)))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn debian_packages_get_their_dbgsym_packages_and_debians_server() {
        let files = [
            Stripped {
                path: "/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1".into(),
                frames: 300,
                package: Some("liblzma5".into()),
            },
            Stripped {
                path: "/usr/bin/xz".into(),
                frames: 200,
                package: Some("xz-utils".into()),
            },
        ];
        let line = how_to_get_symbols(&files, Some("bookworm"), false);
        assert!(
            line.contains("DEBUGINFOD_URLS=https://debuginfod.debian.net")
                && line.contains("`apt install liblzma5-dbgsym xz-utils-dbgsym`")
                && line.contains("bookworm-debug main"),
            "{line}"
        );
        let line = how_to_get_symbols(&files, Some("bookworm"), true);
        assert!(
            !line.contains("debuginfod.debian.net") && line.contains("did not have them"),
            "{line}"
        );
    }

    #[test]
    fn the_hint_names_stripped_files_most_frames_first_above_a_tenth() {
        let s = stats(
            1000,
            &[
                ("/opt/x/tar", 50, true),
                ("/opt/x/liblzma.so.5", 300, true),
                ("/opt/x/unstripped", 400, false),
            ],
        );
        let lines = hint(&s, Some("bookworm"), false);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("35% of the frames are in stripped binaries")
                && lines[0].contains("(liblzma.so.5 30%, tar 5%)"),
            "{lines:?}"
        );
        // No package installed these: no Debian package to name.
        assert!(
            !lines[1].contains("debuginfod.debian.net") && lines[1].contains("tar"),
            "{lines:?}"
        );
        // A tenth or less: nothing said.
        let s = stats(1000, &[("/opt/x/tar", 100, true), ("/opt/y", 500, false)]);
        assert!(hint(&s, Some("bookworm"), false).is_empty());
    }
}
