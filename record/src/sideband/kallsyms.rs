//! What record takes from /proc/kallsyms ([`symbols`]), kept for the rest of the boot: the
//! kernel writes that file's 120k lines anew on every read (about 40 ms of CPU here, and
//! record's parse of it more), while what record needs of it changes only when the kernel's
//! code does: a new boot, a module loaded or unloaded. The cache lives in /run/bpfperf (a tmpfs, root's, 0700;
//! the file 0600: kernel addresses are not for everyone), named by the boot, the user, the
//! address restriction and the loaded modules; a file that does not read back whole is
//! ignored and written anew.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::kernel::{parse_symbols, Symbols};

const DIR: &str = "/run/bpfperf";
const PREFIX: &str = "kallsyms-";

/// The cache file for this boot, user and set of modules; None where the boot is unknown.
fn path() -> Option<PathBuf> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let mut h = DefaultHasher::new();
    // Modules, with their addresses: a module loaded again lies elsewhere.
    std::fs::read("/proc/modules")
        .unwrap_or_default()
        .hash(&mut h);
    std::fs::read("/proc/sys/kernel/kptr_restrict")
        .unwrap_or_default()
        .hash(&mut h);
    let uid = unsafe { libc::geteuid() };
    Some(Path::new(DIR).join(format!("{PREFIX}{}-{uid}-{:016x}", boot.trim(), h.finish())))
}

/// What record needs of /proc/kallsyms: kept from an earlier start in this boot, or read
/// (and kept).
pub fn symbols() -> Symbols {
    let path = path();
    if let Some(kept) = path.as_deref().and_then(load) {
        return kept;
    }
    let Ok(text) = std::fs::read("/proc/kallsyms") else {
        return Symbols::default();
    };
    let symbols = parse_symbols(&text);
    if let (Some(path), true) = (&path, symbols.text.is_some()) {
        store(path, &symbols);
    }
    symbols
}

/// The symbols kept at `path` ([`path`]), if any.
fn load(path: &Path) -> Option<Symbols> {
    decode(&std::fs::read_to_string(path).ok()?)
}

/// Keeps `symbols` at `path` for the rest of the boot (where /run/bpfperf can be written),
/// in place of any kept before.
fn store(path: &Path, symbols: &Symbols) {
    if std::fs::DirBuilder::new().mode(0o700).create(DIR).is_err() && !Path::new(DIR).is_dir() {
        return;
    }
    if let Ok(old) = std::fs::read_dir(DIR) {
        for entry in old.flatten() {
            if entry.file_name().to_string_lossy().starts_with(PREFIX) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    // Written whole under another name, then renamed: a reader never sees half of it.
    let partial = path.with_extension("partial");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .and_then(|mut f| f.write_all(encode(symbols).as_bytes()));
    if written.is_err() || std::fs::rename(&partial, path).is_err() {
        let _ = std::fs::remove_file(&partial);
    }
}

/// One line a span: "text|fault|sock|glue START END" (hexadecimal), then "end".
fn encode(s: &Symbols) -> String {
    let mut out = String::new();
    let mut line = |kind: &str, (start, end): (u64, u64)| {
        out.push_str(&format!("{kind} {start:x} {end:x}\n"));
    };
    s.text.into_iter().for_each(|span| line("text", span));
    s.fault_fn.into_iter().for_each(|span| line("fault", span));
    s.sock_wait_fns.iter().for_each(|&span| line("sock", span));
    s.glue.iter().for_each(|&span| line("glue", span));
    out.push_str("end\n");
    out
}

fn decode(text: &str) -> Option<Symbols> {
    let mut s = Symbols::default();
    let mut lines = text.lines();
    for line in lines.by_ref() {
        if line == "end" {
            return lines.next().is_none().then_some(s);
        }
        let mut fields = line.split(' ');
        let kind = fields.next()?;
        let start = u64::from_str_radix(fields.next()?, 16).ok()?;
        let end = u64::from_str_radix(fields.next()?, 16).ok()?;
        if fields.next().is_some() || end <= start {
            return None;
        }
        match kind {
            "text" => s.text = Some((start, end)),
            "fault" => s.fault_fn = Some((start, end)),
            "sock" => s.sock_wait_fns.push((start, end)),
            "glue" => s.glue.push((start, end)),
            _ => return None,
        }
    }
    None // cut short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_read_back_as_written_and_a_damaged_file_is_refused() {
        let s = Symbols {
            text: Some((0xffff_ffff_8100_0000, 0xffff_ffff_8300_0000)),
            fault_fn: Some((0x10, 0x20)),
            sock_wait_fns: vec![(0x30, 0x40), (0x50, 0x60)],
            glue: vec![(0x70, 0x80)],
        };
        let text = encode(&s);
        let back = decode(&text).unwrap();
        assert_eq!(encode(&back), text);
        // Cut short, a field too many, a span that ends before it starts, an unknown line.
        assert!(decode(&text[..text.len() - 4]).is_none());
        assert!(decode("glue 70 80 90\nend\n").is_none());
        assert!(decode("glue 80 70\nend\n").is_none());
        assert!(decode("stack 70 80\nend\n").is_none());
        assert!(decode("end\nglue 70 80\n").is_none());
        assert!(decode("").is_none());
    }

    #[test]
    fn this_kernels_tracing_glue_is_found() {
        let s = symbols();
        if s.text.is_none() {
            return; // kallsyms hidden
        }
        assert!(s.glue.len() > 100, "{} glue functions", s.glue.len());
        assert!(s.glue.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}
