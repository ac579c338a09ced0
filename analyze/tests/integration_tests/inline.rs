//! Inline frames: a `static inline` helper inlined into a hot function shows under it, with
//! its file:line; --no-inline removes it. perf script (without --inline) shows only the outer
//! function: this is where we differ from perf on purpose.

use crate::common::{analyze, fixture, perf_ok, perf_record, Tmp};

#[test]
fn inlined_helper_shows_under_its_caller() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("inline");
    // -O2 -g (the helper inlined as the optimizer wants it) and -O1 -g with frame pointers.
    for program in ["inline-nofp", "inline-fp"] {
        check(&dir, program);
    }
}

fn check(dir: &Tmp, program: &str) {
    let file = dir.0.join(format!("{program}.data"));
    perf_record(&file, &["-F", "999", "-g"], &fixture(program), &["0.5"]);
    let f = file.to_str().unwrap();

    let folded = String::from_utf8(analyze(&["report", "--folded", "-i", f]).stdout).unwrap();
    let weight = |needle: &str, text: &str| -> u64 {
        text.lines()
            .filter(|l| l.contains(needle))
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum()
    };
    let total = weight("", &folded);
    let inlined = weight(";hot_loop;mix_step", &folded);
    assert!(
        inlined * 100 >= total * 30,
        "{program}: mix_step under hot_loop in {inlined} of {total}:\n{folded}"
    );
    assert!(
        folded.lines().all(|l| !l.contains(";mix_step;hot_loop")),
        "inline frame is the callee, not the caller"
    );

    let plain =
        String::from_utf8(analyze(&["report", "--folded", "--no-inline", "-i", f]).stdout).unwrap();
    assert_eq!(
        weight("mix_step", &plain),
        0,
        "--no-inline removes it:\n{plain}"
    );
    assert_eq!(
        weight(";hot_loop", &plain),
        weight(";hot_loop", &folded),
        "its samples stay with hot_loop"
    );

    let lines =
        String::from_utf8(analyze(&["report", "--sort", "srcline", "-i", f]).stdout).unwrap();
    let source =
        std::fs::read_to_string(crate::common::root().join("fixtures/programs/inline.c")).unwrap();
    let helper_lines: Vec<usize> = source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("x ^= x >>") || l.contains("x *= 0xff"))
        .map(|(i, _)| i + 1)
        .collect();
    assert!(
        helper_lines
            .iter()
            .any(|n| lines.contains(&format!("inline.c:{n}"))),
        "srcline of the inlined helper ({helper_lines:?}):\n{lines}"
    );
}
