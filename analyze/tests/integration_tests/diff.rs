//! `analyze diff`: two recordings of busy, the second with hash_loop doing twice the work
//! (busy's third argument): hash_loop's share rises and it is drawn as a regression (red),
//! spin_inner's falls (blue). Frame pointers with perf, DWARF with record.

use std::path::Path;

use crate::common::*;

/// A frame's title and fill in the SVG: ("hash_loop (616 samples, 62.54%; +18.17%)", (r, g, b)).
fn frames<'a>(svg: &'a str, name: &str) -> Vec<(&'a str, (u8, u8, u8))> {
    svg.split("<title>")
        .skip(1)
        .filter(|t| t.starts_with(&format!("{name} (")))
        .map(|t| {
            let title = t.split("</title>").next().unwrap();
            let fill = t
                .split("fill=\"rgb(")
                .nth(1)
                .unwrap()
                .split(')')
                .next()
                .unwrap();
            let c: Vec<u8> = fill.split(',').map(|x| x.trim().parse().unwrap()).collect();
            (title, (c[0], c[1], c[2]))
        })
        .collect()
}

/// The share of the samples a frame's title gives: `hash_loop (61 samples, 27.48%; +13.21%)`.
fn share(title: &str) -> f64 {
    title
        .split(", ")
        .nth(1)
        .and_then(|s| s.split('%').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no share in {title}"))
}

fn check(dir: &Tmp, before: &Path, after: &Path, how: &str) {
    let svg = dir.0.join(format!("{how}.svg"));
    let out = analyze(&[
        "diff",
        "-i",
        before.to_str().unwrap(),
        "-i",
        after.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{how}:\n{table}");
    // The table: hash_loop's self share rises by more than 10 points, among the first rows.
    let row = |name: &str| -> Vec<f64> {
        table
            .lines()
            .take(6)
            .find(|l| l.split_whitespace().last() == Some(name))
            .unwrap_or_else(|| panic!("{how}: {name} not among the first rows:\n{table}"))
            .split_whitespace()
            .take(6)
            .map(|x| x.trim_end_matches('%').parse().unwrap())
            .collect()
    };
    let hash = row("hash_loop");
    assert!(
        hash[2] > 10.0 && hash[1] > hash[0],
        "{how}: hash_loop {hash:?}"
    );
    let spin = row("spin_inner");
    assert!(spin[2] < -10.0, "{how}: spin_inner {spin:?}");

    // The flame graph: hash_loop red with a + change, spin_inner blue with a - change.
    let svg = std::fs::read_to_string(&svg).unwrap();
    // The frames that carry the function (5% of the samples or more) are red; a stray stack
    // of a sample or two (taken while the machine was busy: an early stack copy, say) may
    // change by too little to be colored.
    let hash: Vec<_> = frames(&svg, "hash_loop")
        .into_iter()
        .filter(|(title, _)| share(title) >= 5.0)
        .collect();
    assert!(!hash.is_empty(), "{how}: no hash_loop frame");
    for (title, (r, g, b)) in &hash {
        assert!(title.contains("; +"), "{how}: {title}");
        assert!(
            *r == 255 && g < &200 && g == b,
            "{how}: {title} is not red: {r},{g},{b}"
        );
    }
    let spin: Vec<_> = frames(&svg, "spin_inner")
        .into_iter()
        .filter(|(title, _)| share(title) >= 5.0)
        .collect();
    assert!(!spin.is_empty(), "{how}: no spin_inner frame");
    for (title, (r, g, b)) in spin {
        assert!(title.contains("; -"), "{how}: {title}");
        assert!(
            b == 255 && r < 200 && r == g,
            "{how}: {title} is not blue: {r},{g},{b}"
        );
    }

    // --folded: inferno's differential lines, `stack BEFORE AFTER`, BEFORE normalized to
    // AFTER's total; --no-normalize keeps the counts.
    let folded = |extra: &[&str]| -> Vec<(String, u64, u64)> {
        let mut args = vec!["diff", "--folded", "-i", before.to_str().unwrap()];
        args.extend_from_slice(&["-i", after.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let out = analyze(&args);
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let mut w = l.rsplitn(3, ' ');
                let a = w.next().unwrap().parse().unwrap();
                let b = w.next().unwrap().parse().unwrap();
                (w.next().unwrap().to_string(), b, a)
            })
            .collect()
    };
    let sums =
        |rows: &[(String, u64, u64)]| rows.iter().fold((0, 0), |(b, a), r| (b + r.1, a + r.2));
    let normalized = folded(&[]);
    let (nb, na) = sums(&normalized);
    let (rb, ra) = sums(&folded(&["--no-normalize"]));
    assert_eq!(na, ra, "{how}: AFTER's counts as they are");
    // Each line's normalized count is rounded: the total is off by up to half a sample a
    // line (on a busy machine few samples spread over many lines), else within 2%.
    assert!(
        nb.abs_diff(na) * 50 <= na || nb.abs_diff(na) * 2 <= normalized.len() as u64,
        "{how}: BEFORE normalized: {nb} vs {na} ({} lines)",
        normalized.len()
    );
    eprintln!("{how}: before {rb} samples (normalized {nb}), after {ra}");
}

#[test]
fn a_function_twice_as_slow_rises_and_is_red() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("diff");
    let (before, after) = (dir.0.join("before.data"), dir.0.join("after.data"));
    let bin = fixture("busy-fp");
    perf_record(&before, &["-g", "-F", "999"], &bin, &["0.6", "2"]);
    perf_record(&after, &["-g", "-F", "999"], &bin, &["0.6", "2", "2"]);
    check(&dir, &before, &after, "perf-fp");
    // Different sample counts (a third more after): normalized by total, not by count.
    if can_record() {
        let bin = fixture("busy-nofp");
        let (before, after) = (
            dir.0.join("before-dwarf.data"),
            dir.0.join("after-dwarf.data"),
        );
        record_ours(&before, &["-F", "999"], &bin, &["0.6", "2"]);
        record_ours(&after, &["-F", "999"], &bin, &["0.8", "2", "2"]);
        check(&dir, &before, &after, "record-dwarf");
    }
    let one = analyze(&["diff", "-i", before.to_str().unwrap()]);
    assert!(!one.status.success());
    assert!(String::from_utf8_lossy(&one.stderr).contains("-i BEFORE -i AFTER"));
}
