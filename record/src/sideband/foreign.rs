//! Files of processes in other mount namespaces (containers): the path a mapping names is
//! the process's, not ours. Such a file is read while its process lives, through
//! `/proc/PID/map_files/START-END` (the mapped file itself) or `/proc/PID/root/PATH`, and
//! copied into perf's build-id cache (`$PERF_BUILDID_DIR`, else `~/.debug`:
//! `PATH/BUILDID/elf` and the `.build-id/xx/rest` link), where analyze, `analyze archive` and
//! perf find it by the build id the recording lists.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Whether the file at `path` here is not the one mapped (device `maj:min`, inode `ino`).
pub fn is_foreign(path: &str, maj: u32, min: u32, ino: u64) -> bool {
    match std::fs::metadata(path) {
        Ok(m) => {
            let dev = m.dev();
            m.ino() != ino || libc::major(dev) != maj || libc::minor(dev) != min
        }
        Err(_) => true,
    }
}

/// The bytes of the file process `pid` mapped at `start..end` from `path`, if it can still be
/// read.
fn read_mapped(pid: u32, start: u64, end: u64, path: &str) -> Option<Vec<u8>> {
    let map_files = format!("/proc/{pid}/map_files/{start:x}-{end:x}");
    std::fs::read(map_files)
        .or_else(|_| std::fs::read(format!("/proc/{pid}/root{path}")))
        .ok()
}

/// Where perf's build-id cache is.
pub fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("PERF_BUILDID_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug")))
}

/// Reads the file process `pid` maps at `start..end` from `path` (its path, in its mount
/// namespace), and caches it under its build id; the build id, if it has one.
pub fn cache(pid: u32, start: u64, end: u64, path: &str) -> Option<Vec<u8>> {
    let bytes = read_mapped(pid, start, end, path)?;
    let id = crate::sideband::buildid::of_bytes(&bytes)?;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(root) = cache_dir() {
        let _ = store(&root, path, &hex, &bytes);
    }
    Some(id)
}

fn store(root: &Path, path: &str, id: &str, bytes: &[u8]) -> std::io::Result<()> {
    let dir = root.join(path.trim_start_matches('/')).join(id);
    std::fs::create_dir_all(&dir)?;
    let elf = dir.join("elf");
    if !elf.exists() {
        let tmp = dir.join(format!(".elf.{}", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &elf)?;
    }
    let links = root.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&links)?;
    let link = links.join(&id[2..]);
    if std::fs::symlink_metadata(&link).is_err() {
        let target = format!("../../{}/{id}", path.trim_start_matches('/'));
        std::os::unix::fs::symlink(target, &link)?;
    }
    Ok(())
}
