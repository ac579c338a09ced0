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
    let Ok(dir) = std::fs::read_dir(info) else {
        return found;
    };
    // Each path as dpkg may list it: as it is, and without /usr (usrmerge).
    let mut wanted: Vec<(String, &str)> = Vec::new();
    for &p in &paths {
        wanted.push((p.to_string(), p));
        if let Some(short) = p.strip_prefix("/usr").filter(|s| s.starts_with('/')) {
            wanted.push((short.to_string(), p));
        }
    }
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(package) = name.to_str().and_then(|n| n.strip_suffix(".list")) else {
            continue;
        };
        let package = package.split(':').next().unwrap_or(package);
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for line in text.lines() {
            if let Some((_, original)) = wanted.iter().find(|(w, _)| w == line) {
                found
                    .entry(original.to_string())
                    .or_insert_with(|| package.to_string());
            }
        }
        if found.len() == paths.len() {
            break;
        }
    }
    found
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
}
