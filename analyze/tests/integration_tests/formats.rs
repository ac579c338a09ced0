//! Files perf 6.1 reads in formats other than today's: the original `PERFFILE` (version 1)
//! layout and recordings with hardware traces (AUXTRACE records, whose trace bytes follow the
//! record outside its size). `analyze info` must count what `perf report --stats` counts, and
//! every sample must be read.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::{analyze, elsewhere, fixture, perf_ok, perf_record, Tmp};
use crate::folded::{fold_script, parse_folded, perf_script, run_ok};

/// Record counts by type from `perf report --stats` (the "Aggregated stats" block).
fn perf_stats(file: &Path) -> BTreeMap<String, u64> {
    let out = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf report --stats -i {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut m = BTreeMap::new();
    // "           MMAP events:         56  (21.8%)", up to the per-event blocks.
    for l in text.lines().skip_while(|l| !l.contains("Aggregated stats")) {
        if l.trim_end().ends_with("stats:") && !l.contains("Aggregated") {
            break;
        }
        let words: Vec<&str> = l.split_whitespace().collect();
        if let [name, "events:", n, ..] = words[..] {
            if name != "TOTAL" {
                m.insert(name.to_string(), n.parse().unwrap());
            }
        }
    }
    assert!(!m.is_empty(), "no counts in perf report --stats:\n{text}");
    m
}

/// Record counts by type from `analyze info`'s "by type:" line.
fn info_stats(file: &Path) -> BTreeMap<String, u64> {
    let text = run_ok(&["info", "-i", file.to_str().unwrap()]);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("by type:"))
        .unwrap_or_else(|| panic!("no 'by type:' line in\n{text}"));
    line.split(',')
        .map(|pair| {
            let (name, n) = pair.trim().rsplit_once(' ').unwrap();
            (name.to_string(), n.parse().unwrap())
        })
        .collect()
}

#[test]
fn intel_pt_recording_counts_equal_perfs_and_its_samples_are_read() {
    let Some(elsewhere) = elsewhere() else {
        return;
    };
    if !perf_ok() {
        return;
    }
    let file = elsewhere.join("intel_pt-4.14.data");
    let perf = perf_stats(&file);
    assert_eq!(perf.get("AUXTRACE"), Some(&2), "{perf:?}");
    assert_eq!(info_stats(&file), perf);

    // The samples carry no callchain: each is its IP frame. All 15 are there, each weighing
    // its period (cycles sampled at a frequency), and the hardware trace is said to be
    // skipped, once.
    let out = analyze(&["report", "--folded", "-i", file.to_str().unwrap()]);
    assert!(out.status.success());
    let folded = parse_folded(&String::from_utf8_lossy(&out.stdout));
    let script = Command::new("perf")
        .args(["script", "-F", "period,event", "-i"])
        .arg(&file)
        .output()
        .unwrap();
    let (periods, cycles) = String::from_utf8_lossy(&script.stdout)
        .lines()
        .filter_map(|l| l.trim().strip_suffix("cycles:"))
        .fold((0u64, 0u64), |(sum, n), p| {
            (sum + p.trim().parse::<u64>().unwrap(), n + 1)
        });
    assert_eq!(cycles, perf["SAMPLE"]);
    assert_eq!(folded.values().sum::<u64>(), periods);
    assert!(
        folded.keys().all(|k| k.split(';').count() == 2),
        "{folded:?}"
    );
    // Its kernel is not this one: unknown kernel frames, named once-bracketed.
    assert!(folded.contains_key("echo;[kernel.kallsyms]"), "{folded:?}");
    assert!(!folded.keys().any(|k| k.contains("[[")), "{folded:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("not decoded").count(),
        1,
        "the hardware trace note, once:\n{stderr}"
    );
}

/// perf's version 1 attribute ABI sizes (PERF_ATTR_SIZE_VER4) and file header (the early,
/// 72-byte one has no feature bitmap).
const V1_ATTR_SIZE: usize = 104;
const V1_ATTR_ENTRY: usize = V1_ATTR_SIZE + 16;

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// A `PERFFILE` (version 1) file with the samples of `modern` (a perf 6.1 file-mode
/// recording), laid out as perf's header.c defines version 1: magic "PERFFILE", endianness
/// told by the attribute size (an attr ABI size + the 16-byte id section), attrs at
/// PERF_ATTR_SIZE_VER4 with their own size field, and BUILD_ID as the only feature.
/// `short_header`: the 72-byte header of the first perf releases, without the feature bitmap.
fn version1(modern: &[u8], short_header: bool) -> Vec<u8> {
    let mut b = modern.to_vec();
    assert_eq!(&b[..8], b"PERFILE2");
    let attr_size = u64_at(&b, 16) as usize;
    let (attrs_off, attrs_size) = (u64_at(&b, 24) as usize, u64_at(&b, 32) as usize);
    let (data_off, data_size) = (u64_at(&b, 40) as usize, u64_at(&b, 48) as usize);
    let n = attrs_size / attr_size;
    let entries: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let e = &b[attrs_off + i * attr_size..attrs_off + (i + 1) * attr_size];
            let mut attr = e[..V1_ATTR_SIZE].to_vec();
            attr[4..8].copy_from_slice(&(V1_ATTR_SIZE as u32).to_le_bytes());
            attr.extend_from_slice(&e[attr_size - 16..]);
            attr
        })
        .collect();
    b[attrs_off..attrs_off + attrs_size].fill(0);
    for (i, e) in entries.iter().enumerate() {
        let at = attrs_off + i * V1_ATTR_ENTRY;
        b[at..at + V1_ATTR_ENTRY].copy_from_slice(e);
    }
    b[..8].copy_from_slice(b"PERFFILE");
    put_u64(&mut b, 16, V1_ATTR_ENTRY as u64);
    put_u64(&mut b, 32, (n * V1_ATTR_ENTRY) as u64);
    // Features: BUILD_ID alone (bit 2), its table entry moved first.
    let bits: Vec<usize> = (0..256)
        .filter(|i| b[72 + i / 8] & (1 << (i % 8)) != 0)
        .collect();
    let k = bits
        .iter()
        .position(|&bit| bit == 2)
        .expect("a BUILD_ID feature");
    let table = data_off + data_size;
    let entry = b[table + 16 * k..table + 16 * k + 16].to_vec();
    b[table..table + 16].copy_from_slice(&entry);
    b[72..104].fill(0);
    b[72] = 1 << 2;
    if !short_header {
        return b;
    }
    // The 72-byte header: what follows moves 32 bytes down, offsets with it.
    for i in 0..n {
        let ids = attrs_off + i * V1_ATTR_ENTRY + V1_ATTR_SIZE;
        let moved = u64_at(&b, ids) - 32;
        put_u64(&mut b, ids, moved);
    }
    put_u64(&mut b, 8, 72);
    put_u64(&mut b, 24, attrs_off as u64 - 32);
    put_u64(&mut b, 40, data_off as u64 - 32);
    let mut out = b[..72].to_vec();
    out.extend_from_slice(&b[104..table]);
    out
}

#[test]
fn version1_files_read_as_perf_reads_them() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("formats-v1");
    let modern = dir.0.join("modern.data");
    perf_record(
        &modern,
        &["-F", "999", "-g"],
        &fixture("busy-fp"),
        &["0.3", "2"],
    );
    let bytes = std::fs::read(&modern).unwrap();
    for short_header in [false, true] {
        let file = dir.0.join(format!("v1-{short_header}.data"));
        std::fs::write(&file, version1(&bytes, short_header)).unwrap();
        // perf 6.1 reads it, and sees every sample of the original.
        let perf = perf_stats(&file);
        assert_eq!(perf, perf_stats(&modern), "short header: {short_header}");
        assert_eq!(info_stats(&file), perf, "short header: {short_header}");
        let theirs = fold_script(&perf_script(&file), None);
        let ours = run_ok(&[
            "report",
            "--folded",
            "--no-inline",
            "-i",
            file.to_str().unwrap(),
        ]);
        assert_eq!(parse_folded(&ours), theirs, "short header: {short_header}");
    }
}

/// Rewrites the ARCH feature of a perf.data file in place (`arch` no longer than the text it
/// replaces, within the section's padding).
fn set_arch(bytes: &mut [u8], arch: &str) {
    const ARCH_BIT: usize = 6;
    let (data_off, data_size) = (u64_at(bytes, 40) as usize, u64_at(bytes, 48) as usize);
    assert!(
        bytes[72 + ARCH_BIT / 8] & (1 << (ARCH_BIT % 8)) != 0,
        "no ARCH feature"
    );
    let k = (0..ARCH_BIT)
        .filter(|i| bytes[72 + i / 8] & (1 << (i % 8)) != 0)
        .count();
    let entry = data_off + data_size + 16 * k;
    let (at, size) = (
        u64_at(bytes, entry) as usize,
        u64_at(bytes, entry + 8) as usize,
    );
    // u32 length, then the NUL-padded string.
    let text = &mut bytes[at + 4..at + size];
    assert!(arch.len() < text.len());
    text.fill(0);
    text[..arch.len()].copy_from_slice(arch.as_bytes());
}

/// busy.c's own functions. Compared whole: kernel names such as `_raw_spin_unlock` contain
/// their words.
const USER_FRAMES: [&str; 5] = [
    "worker",
    "spin_outer",
    "spin_inner",
    "hash_loop",
    "run_threads",
];

/// Stack copies from another architecture are not unwound as if they were x86-64's: no
/// made-up user frames, one warning saying so, kernel frames kept.
#[test]
fn foreign_arch_stack_copies_are_not_unwound() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("formats-arch");
    let file = dir.0.join("dwarf.data");
    perf_record(
        &file,
        &["-F", "499", "--call-graph", "dwarf"],
        &fixture("busy-nofp"),
        &["0.3", "2"],
    );
    let folded_of = |file: &Path| {
        let out = analyze(&["report", "--folded", "-i", file.to_str().unwrap()]);
        assert!(out.status.success());
        (
            parse_folded(&String::from_utf8_lossy(&out.stdout)),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (native, _) = folded_of(&file);
    assert!(native.keys().any(|k| k.contains(";worker;")), "{native:?}");

    let mut bytes = std::fs::read(&file).unwrap();
    set_arch(&mut bytes, "aarch64");
    let foreign = dir.0.join("aarch64.data");
    std::fs::write(&foreign, bytes).unwrap();
    let (folded, stderr) = folded_of(&foreign);
    assert_eq!(
        folded.values().sum::<u64>(),
        native.values().sum::<u64>(),
        "every sample is still there"
    );
    assert!(
        !folded
            .keys()
            .any(|k| k.split(';').any(|f| USER_FRAMES.contains(&f))),
        "user frames made up from another architecture's registers: {folded:?}"
    );
    assert!(
        stderr.contains("stack copies of an aarch64 recording are not unwound"),
        "{stderr}"
    );
}
