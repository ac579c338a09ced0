//! Archives: a recording with what analyzing it needs, in one zstd-compressed tar, laid out as
//! perf's build-id cache is (so `perf --buildid-dir DIR` reads it unpacked):
//!
//! ```text
//! perf.data
//! MANIFEST                                   build id, kind, size, bytes kept, path
//! .build-id/7e/68e3...  -> ../../usr/bin/tar/7e68e3...
//! usr/bin/tar/7e68e3.../elf                  the binary, what analysis does not read zeroed
//! usr/lib/.../libc.so.6/<id>/debug           its separate debug file, if there was one
//! [kernel.kallsyms]/<id>/kallsyms            the kernel's symbols when it was recorded
//! tmp/perf-PID.map, .../jit-PID.dump         JIT code's names, at their own paths
//! ```
//!
//! Read in place: the tar is inflated into memory entry by entry (never to disk), with a
//! bound on the total, and its files are served by build id ([`Archive::elf`]).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The zstd frame magic, little-endian.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The most an archive may inflate to in memory: a bomb or a damaged size field must not
/// take the machine's memory.
const MAX_UNPACKED: u64 = 16 << 30;

/// The name of the recording inside an archive.
pub const PERF_DATA: &str = "perf.data";
pub const MANIFEST: &str = "MANIFEST";

/// An archive, read into memory.
pub struct Archive {
    pub path: PathBuf,
    files: HashMap<String, Arc<[u8]>>,
    /// Build id (hex) -> its directory (`usr/bin/tar/7e68...`).
    by_build_id: HashMap<String, String>,
    /// Original path -> build id, from the MANIFEST ([`listed_build_ids`]).
    listed: HashMap<String, Vec<u8>>,
}

/// Whether `path` is an archive (a zstd stream) rather than a perf.data file.
pub fn is_archive(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == ZSTD_MAGIC
}

impl Archive {
    /// Reads the archive at `path`. Errors name the file and what is wrong with it.
    pub fn open(path: &Path) -> Result<Archive, String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let file = std::fs::File::open(path).map_err(|e| at(&e))?;
        let decoder = zstd::Decoder::new(file).map_err(|e| at(&e))?;
        let mut tar = tar::Archive::new(decoder);
        let mut files = HashMap::new();
        let mut by_build_id = HashMap::new();
        let mut total = 0u64;
        for entry in tar.entries().map_err(|e| at(&e))? {
            let mut entry = entry.map_err(|e| at(&format!("damaged archive: {e}")))?;
            let name = entry
                .path()
                .map_err(|e| at(&e))?
                .to_string_lossy()
                .into_owned();
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let size = entry.header().size().map_err(|e| at(&e))?;
            total = total.saturating_add(size);
            if total > MAX_UNPACKED {
                return Err(at(&format!(
                    "unpacks to more than {} GiB (at {name}); not read",
                    MAX_UNPACKED >> 30
                )));
            }
            let mut bytes = Vec::with_capacity(size.min(1 << 30) as usize);
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| at(&format!("{name}: {e}")))?;
            if let Some((dir, id)) = build_id_dir(&name) {
                by_build_id.insert(id.to_string(), dir.to_string());
            }
            files.insert(name, Arc::from(bytes));
        }
        if !files.contains_key(PERF_DATA) {
            return Err(at(&"an archive without perf.data"));
        }
        let listed = files
            .get(MANIFEST)
            .map_or_else(HashMap::new, |m| listed_build_ids(m));
        Ok(Archive {
            path: path.to_path_buf(),
            files,
            by_build_id,
            listed,
        })
    }

    /// The recording.
    pub fn perf_data(&self) -> Vec<u8> {
        self.files[PERF_DATA].to_vec()
    }

    fn file(&self, build_id: &str, name: &str) -> Option<Arc<[u8]>> {
        let dir = self.by_build_id.get(build_id)?;
        self.files.get(&format!("{dir}/{name}")).cloned()
    }

    /// The binary of that build id (hex), if archived.
    pub fn elf(&self, build_id: &str) -> Option<Arc<[u8]>> {
        self.file(build_id, "elf")
    }

    /// Its separate debug file, if one was archived.
    pub fn debug(&self, build_id: &str) -> Option<Arc<[u8]>> {
        self.file(build_id, "debug")
    }

    /// The kernel's symbols (`/proc/kallsyms` text) as archived, and the kernel's build id.
    pub fn kallsyms(&self) -> Option<(String, Arc<[u8]>)> {
        self.files.iter().find_map(|(name, bytes)| {
            let rest = name.strip_prefix("[kernel.kallsyms]/")?;
            let id = rest.strip_suffix("/kallsyms")?;
            Some((id.to_string(), bytes.clone()))
        })
    }

    /// A file archived by its original path (JIT maps and jitdump files: `tmp/perf-PID.map`).
    pub fn file_at(&self, path: &str) -> Option<Arc<[u8]>> {
        self.files.get(path.trim_start_matches('/')).cloned()
    }

    pub fn manifest(&self) -> Option<&[u8]> {
        self.files.get(MANIFEST).map(|b| &b[..])
    }

    /// The build id the MANIFEST gives the binary archived from `path`.
    pub fn listed_build_id(&self, path: &str) -> Option<&[u8]> {
        self.listed.get(path).map(Vec::as_slice)
    }
}

/// The build ids a MANIFEST gives binaries by their original paths (`elf` lines). A recording
/// lists only the files its samples' own addresses hit (perf's BUILD_ID feature): libc and
/// the others met only in call chains have none there, and were archived by the build id the
/// file had when the archive was made. Lines that are not whole are passed over.
pub fn listed_build_ids(manifest: &[u8]) -> HashMap<String, Vec<u8>> {
    let text = String::from_utf8_lossy(manifest);
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.splitn(5, '\t');
            let (id, kind, path) = (f.next()?, f.next()?, f.nth(2)?);
            (kind == "elf" && path.starts_with('/')).then_some(())?;
            Some((path.to_string(), super::elf::unhex(id)?))
        })
        .collect()
}

/// `usr/bin/tar/7e68.../elf` -> (`usr/bin/tar/7e68...`, `7e68...`).
fn build_id_dir(name: &str) -> Option<(&str, &str)> {
    let (dir, _file) = name.rsplit_once('/')?;
    let id = dir.rsplit('/').next()?;
    (id.len() >= 16 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some((dir, id))
}

/// Where a file of build id `id` goes in an archive or build-id cache: its path without the
/// leading `/`, then the id (`usr/bin/tar/7e68...`).
pub fn cache_dir(path: &str, id: &str) -> String {
    format!("{}/{id}", path.trim_start_matches('/'))
}

/// The `.build-id/xx/rest` link name of `id` and its target, as perf writes them.
pub fn build_id_link(path: &str, id: &str) -> (String, String) {
    (
        format!(".build-id/{}/{}", &id[..2], &id[2..]),
        format!("../../{}", cache_dir(path, id)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_lists_binaries_by_path_and_passes_over_what_is_not_whole() {
        let manifest = b"# bpfperf archive: build id, kind, size, bytes kept, original path\n\
            93ac61ec\telf\t1926232\t321603\t/usr/lib/x86_64-linux-gnu/libc.so.6\n\
            93ac61ec\tdebug\t4166896\t774657\t/root/.debug/libc.so.6/93ac61ec/debug\n\
            e0251283\telf\t8192\t3852\t[vdso]\n\
            48dc540c\tkallsyms\t5413828\t5629\t[kernel.kallsyms]\n\
            abc\telf\t1\t1\t/odd/digits\n\
            zz11\telf\t1\t1\t/not/hex\n\
            1234\telf\t1\n\
            0102\telf\t1\t1\t/with\ttab\n";
        let listed = listed_build_ids(manifest);
        assert_eq!(
            listed.get("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            Some(&vec![0x93, 0xac, 0x61, 0xec])
        );
        assert_eq!(listed.get("/with\ttab"), Some(&vec![1, 2]));
        assert_eq!(listed.len(), 2, "{listed:?}");
    }
}
