//! A cache of the running kernel's parsed symbols, so that only the first analysis of a boot
//! pays for /proc/kallsyms (the kernel formats ~120k lines: about 40 ms of CPU, a third of a
//! whole report).
//!
//! The cache is valid for one boot (`/proc/sys/kernel/random/boot_id`: KASLR moves the kernel
//! at each boot) and one set of loaded modules (their names and addresses in /proc/modules).
//! It holds kernel addresses, secret to unprivileged users: it lives in the user's own cache
//! directory (`$BPFPERF_CACHE_DIR`, else `$XDG_CACHE_HOME/bpfperf`, else
//! `~/.cache/bpfperf`), created 0700, the file 0600, written whole then renamed into place.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use super::elf::Bytes;
use super::kallsyms::Kallsyms;

/// Version 2: the table holds ends (entries without a name) where code of another kind
/// begins; version 3: `_text` and `_stext` where another alias shares their address. Older
/// tables are built again.
const MAGIC: &[u8; 8] = b"BPKSYMS3";

/// Where the cache lives, if a directory is known.
pub(super) fn dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BPFPERF_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("bpfperf"))
}

/// What the cached symbols must match: this boot and these modules.
fn validity() -> Option<u64> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let modules = std::fs::read_to_string("/proc/modules").unwrap_or_default();
    let mut h = rustc_hash::FxHasher::default();
    boot.trim().hash(&mut h);
    for line in modules.lines() {
        // Name and load address; use counts change all the time.
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.first(), f.get(5)).hash(&mut h);
    }
    Some(h.finish())
}

/// The cached symbols, if valid for the running kernel: the file memory-mapped as it is.
pub fn load() -> Option<Kallsyms> {
    let key = validity()?;
    let file = std::fs::File::open(dir()?.join("kallsyms")).ok()?;
    // SAFETY: the file is the user's own (0600 in a 0700 directory) and only ever replaced
    // by rename, never written in place, so the mapping does not change under us.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    decode(Bytes::Mapped(map), key)
}

/// Caches `k` for the running kernel. Failing to write is not an error (the cache only
/// saves time).
pub fn store(k: &Kallsyms) {
    let (Some(dir), Some(key)) = (dir(), validity()) else {
        return;
    };
    if std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .is_err()
    {
        return;
    }
    let tmp = dir.join(format!(".kallsyms.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&encode(k, key)));
    if written.is_err() || std::fs::rename(&tmp, dir.join("kallsyms")).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

fn encode(k: &Kallsyms, key: u64) -> Vec<u8> {
    let table = k.table();
    let mut b = Vec::with_capacity(16 + table.len());
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&key.to_le_bytes());
    b.extend_from_slice(table);
    b
}

/// Reads what [`encode`] wrote for `key`; `None` if it is not that, whole and consistent.
fn decode(b: Bytes, key: u64) -> Option<Kallsyms> {
    if b.get(..8)? != MAGIC || b.get(8..16)? != key.to_le_bytes() {
        return None;
    }
    Kallsyms::from_table(b, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_another_boot_or_damage() {
        let k = Kallsyms::parse(
            "ffffffff81000000 T _text\nffffffff81000100 t schedule\nffffffff81000200 D data\n\
             ffffffffc0001000 t bpf_prog_1234_on_cpu\t[bpf]\n",
        )
        .unwrap();
        let b = encode(&k, 7);
        let decode = |b: &[u8], key| decode(Bytes::Owned(b.to_vec()), key);
        let back = decode(&b, 7).unwrap();
        assert_eq!(
            back.lookup(0xffffffff81000150),
            Some(("schedule", 0xffffffff81000100))
        );
        assert_eq!(back.address_of("_text"), Some(0xffffffff81000000));
        assert_eq!(
            back.address_of("bpf_prog_1234_on_cpu"),
            None,
            "BPF programs come and go"
        );
        assert!(decode(&b, 8).is_none(), "another boot");
        assert!(decode(&b[..b.len() - 1], 7).is_none(), "cut short");
        let mut bad = b.clone();
        bad[16 + 16 + 8] = 0xff; // a name range out of bounds
        assert!(decode(&bad, 7).is_none(), "bad name range");
    }
}
