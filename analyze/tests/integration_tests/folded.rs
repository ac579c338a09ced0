//! `analyze report --folded` against perf's own view of the same file: the stacks `perf
//! script` prints, folded by stackcollapse-perf.pl's rules, weight for weight.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::{analyze, fixture, perf_ok, perf_record, Tmp};

/// Folds `perf script` output as stackcollapse-perf.pl does: comm, then the frames root
/// first, symbol names without offsets, one count per sample.
pub fn fold_perf_script(file: &Path) -> BTreeMap<String, u64> {
    let out = Command::new("perf")
        .args(["script", "-i"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf script: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut folded = BTreeMap::new();
    let mut comm: Option<String> = None;
    let mut frames: Vec<String> = Vec::new();
    let mut flush = |comm: &mut Option<String>, frames: &mut Vec<String>| {
        if let Some(c) = comm.take() {
            let mut key = c;
            for f in frames.iter().rev() {
                key.push(';');
                key.push_str(f);
            }
            *folded.entry(key).or_insert(0) += 1;
        }
        frames.clear();
    };
    for line in text.lines() {
        if line.trim().is_empty() {
            flush(&mut comm, &mut frames);
        } else if line.starts_with('\t') {
            let rest = line.trim().split_once(' ').map_or("", |x| x.1);
            let sym = rest.rfind(" (").map_or(rest, |i| &rest[..i]);
            let sym = sym.rfind("+0x").map_or(sym, |i| &sym[..i]);
            frames.push(sym.to_string());
        } else {
            flush(&mut comm, &mut frames);
            comm = Some(line.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    flush(&mut comm, &mut frames);
    folded
}

fn ours(file: &Path, extra: &[&str]) -> BTreeMap<String, u64> {
    let mut args = vec![
        "report",
        "--folded",
        "--no-inline",
        "-i",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = analyze(&args);
    assert!(
        out.status.success(),
        "analyze: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

/// The share of the total weight on which both foldings agree.
fn agreement(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> f64 {
    let total: u64 = b.values().sum();
    let same: u64 = b
        .iter()
        .map(|(k, v)| a.get(k).copied().unwrap_or(0).min(*v))
        .sum();
    same as f64 / total.max(1) as f64
}

#[test]
fn folded_matches_perf_script_on_perf_recordings() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("folded");
    let busy = fixture("busy-fp");
    for (name, args) in [
        ("fp.data", &["-F", "999", "-g"][..]),
        ("z.data", &["-z", "-F", "999", "-g"]),
        (
            "two.data",
            &["-e", "cpu-clock", "-e", "task-clock", "-F", "499", "-g"],
        ),
    ] {
        let file = dir.0.join(name);
        perf_record(&file, args, &busy, &["0.5", "2"]);
        let theirs = fold_perf_script(&file);
        let ours = ours(&file, &[]);
        let a = agreement(&ours, &theirs);
        let total: u64 = theirs.values().sum();
        assert_eq!(
            ours.values().sum::<u64>(),
            total,
            "{name}: same number of samples"
        );
        eprintln!(
            "{name}: {:.2}% of {total} samples fold the same as perf script",
            a * 100.0
        );
        if a < 0.98 {
            let diff: Vec<_> = theirs
                .iter()
                .filter(|(k, v)| ours.get(*k) != Some(v))
                .take(8)
                .collect();
            let mine: Vec<_> = ours
                .iter()
                .filter(|(k, v)| theirs.get(*k) != Some(v))
                .take(8)
                .collect();
            panic!(
                "{name}: only {:.1}% of the weight agrees\nperf: {diff:#?}\nours: {mine:#?}",
                a * 100.0
            );
        }
    }
}
