//! Which Debian package installed a file, and which Debian release this is: what a hint about
//! stripped binaries needs to name their `-dbgsym` packages. Read from dpkg's file lists
//! (`/var/lib/dpkg/info/PKG[:ARCH].list`) and `/etc/os-release`; nothing on other systems.

use std::collections::BTreeMap;
use std::path::Path;

/// The Debian release this machine runs: its codename (`bookworm`), if it is Debian.
pub fn debian_codename() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_string())
    };
    (field("ID")? == "debian").then(|| field("VERSION_CODENAME"))?
}

/// The package that installed each of `paths` (where dpkg knows one): `liblzma5` for
/// `/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1`. Packages that still install under `/lib`
/// and `/bin` are found by the merged `/usr` path too.
pub fn owners(paths: &[&str]) -> BTreeMap<String, String> {
    owners_in(Path::new("/var/lib/dpkg/info"), paths)
}

/// Where Debian packages install (the FHS's system directories); a path elsewhere (a build
/// directory, a home) is nobody's, and is not looked up in the thousands of file lists.
const SYSTEM_DIRS: [&str; 8] = [
    "/usr/", "/lib", "/bin/", "/sbin/", "/opt/", "/etc/", "/var/", "/boot/",
];

fn owners_in(info: &Path, paths: &[&str]) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let paths: Vec<&str> = paths
        .iter()
        .copied()
        .filter(|p| SYSTEM_DIRS.iter().any(|d| p.starts_with(d)))
        .collect();
    if paths.is_empty() {
        return found;
    }
    // Each path as dpkg may list it: as it is, and without /usr (usrmerge).
    let mut wanted: Vec<(String, &str)> = Vec::new();
    for &p in &paths {
        wanted.push((p.to_string(), p));
        if let Some(short) = p.strip_prefix("/usr").filter(|s| s.starts_with('/')) {
            wanted.push((short.to_string(), p));
        }
    }
    // Reads one package's list; true when every path has its owner.
    let mut read = |package: &str, list: &Path| {
        if let Ok(text) = std::fs::read_to_string(list) {
            for line in text.lines() {
                if let Some((_, original)) = wanted.iter().find(|(w, _)| w == line) {
                    found
                        .entry(original.to_string())
                        .or_insert_with(|| package.to_string());
                }
            }
        }
        found.len() == paths.len()
    };
    // A library's package is most often named after its soname (liblzma5 for liblzma.so.5,
    // libstdc++6 for libstdc++.so.6): those lists first, without listing the thousands.
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    for &p in &paths {
        for guess in soname_packages(p) {
            for list in [format!("{guess}.list"), format!("{guess}:{arch}.list")] {
                if read(&guess, &info.join(list)) {
                    return found;
                }
            }
        }
    }
    let Ok(dir) = std::fs::read_dir(info) else {
        return found;
    };
    let mut lists: Vec<(String, std::path::PathBuf)> = dir
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let package = name.to_str()?.strip_suffix(".list")?;
            let package = package.split(':').next().unwrap_or(package).to_string();
            Some((package, entry.path()))
        })
        .collect();
    // The lists of packages named after a file first (python3.11-minimal for
    // /usr/bin/python3.11): reading all 860 of a desktop's lists to find it took 14 ms, most of
    // a small report.
    let stems: Vec<&str> = paths.iter().map(|p| file_stem(p)).collect();
    lists.sort_by_key(|(package, _)| !stems.iter().any(|s| package.contains(s)));
    for (package, list) in &lists {
        if read(package, list) {
            break;
        }
    }
    found
}

/// The part of a file's name a package is likely named after: `python3.11` for
/// `/usr/bin/python3.11`, `liblzma` for `liblzma.so.5.4.1`.
fn file_stem(path: &str) -> &str {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.split_once(".so").map_or(base, |(stem, _)| stem)
}

/// The packages a library at `path` is likely installed by, from its name: `liblzma5`,
/// `liblzma-5` for `liblzma.so.5.4.1`, `libgcc-s1` for `libgcc_s.so.1`.
fn soname_packages(path: &str) -> Vec<String> {
    let base = path.rsplit('/').next().unwrap_or(path);
    let Some((stem, version)) = base.split_once(".so.") else {
        return Vec::new();
    };
    let major = version.split('.').next().unwrap_or("");
    if stem.is_empty() || major.is_empty() {
        return Vec::new();
    }
    // Package names have no underscores and no capitals: libgcc-s1 for libgcc_s.so.1.
    let stem = stem.replace('_', "-").to_lowercase();
    vec![format!("{stem}{major}"), format!("{stem}-{major}")]
}

/// The package that holds the debug symbols of package `package`'s files: its automatic
/// `-dbgsym` package (glibc's are in `libc6-dbg`).
pub fn debug_package(package: &str) -> String {
    match package {
        "libc6" | "libc-bin" => "libc6-dbg".into(),
        p => format!("{p}-dbgsym"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_found_with_and_without_usr() {
        let dir = std::env::temp_dir().join(format!("bpfperf-dpkg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("liblzma5:amd64.list"),
            "/.\n/lib\n/lib/x86_64-linux-gnu/liblzma.so.5.4.1\n",
        )
        .unwrap();
        // A list naming a path outside the system directories: such paths are not looked up.
        std::fs::write(dir.join("xz-utils.list"), "/usr/bin/xz\n/home/me/prog\n").unwrap();
        std::fs::write(dir.join("xz-utils.md5sums"), "/usr/bin/tar\n").unwrap();
        let found = owners_in(
            &dir,
            &[
                "/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1",
                "/usr/bin/xz",
                "/usr/bin/tar",
                "/home/me/prog",
            ],
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            found.get("/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1"),
            Some(&"liblzma5".to_string())
        );
        assert_eq!(found.get("/usr/bin/xz"), Some(&"xz-utils".to_string()));
        assert_eq!(found.get("/usr/bin/tar"), None);
        assert_eq!(found.get("/home/me/prog"), None);
        assert_eq!(debug_package("xz-utils"), "xz-utils-dbgsym");
        assert_eq!(debug_package("libc6"), "libc6-dbg");
    }

    #[test]
    fn packages_are_guessed_from_sonames() {
        assert_eq!(
            soname_packages("/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"),
            ["libstdc++6", "libstdc++-6"]
        );
        assert_eq!(
            soname_packages("/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"),
            ["libgcc-s1", "libgcc-s-1"]
        );
        assert_eq!(soname_packages("/usr/bin/xz"), Vec::<String>::new());
        assert_eq!(file_stem("/usr/bin/python3.11"), "python3.11");
        assert_eq!(
            file_stem("/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1"),
            "liblzma"
        );
        assert_eq!(soname_packages("/usr/lib/libfoo.so"), Vec::<String>::new());
    }
}
