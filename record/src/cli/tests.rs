use clap::Parser;

use super::args::Args;
use super::parse::attached_levels;
use crate::output::rotation::Switch;

fn parse(args: &[&str]) -> Result<Args, clap::Error> {
    Args::try_parse_from(std::iter::once("record").chain(args.iter().copied()))
}

#[test]
fn compression_level_is_attached_as_perf_takes_it() {
    let parse = |words: &[&str]| {
        let words = std::iter::once("record")
            .chain(words.iter().copied())
            .map(std::ffi::OsString::from);
        Args::try_parse_from(attached_levels(words)).unwrap()
    };
    let a = parse(&["-z", "true"]);
    assert_eq!(
        (a.compression_level, a.command),
        (Some(1), vec!["true".into()])
    );
    let a = parse(&["-z5", "-o", "x.data", "-F", "99", "true", "-z3"]);
    assert_eq!(a.compression_level, Some(5));
    assert_eq!(a.output.to_str(), Some("x.data"));
    assert_eq!(a.command, ["true", "-z3"]);
    let a = parse(&["--compression-level=9", "--", "-z4"]);
    assert_eq!(
        (a.compression_level, a.command),
        (Some(9), vec!["-z4".into()])
    );
    let a = parse(&["--compression-level", "3"]);
    assert_eq!(
        (a.compression_level, a.command),
        (Some(1), vec!["3".into()])
    );
}

#[test]
fn switch_output_alone_is_signal_and_takes_no_word_after_it() {
    let a = parse(&["--switch-output", "sleep", "1"]).unwrap();
    assert_eq!(a.switch_output, Some(Switch::Signal));
    assert_eq!(a.command, ["sleep", "1"]);
    // As perf: a mode only after '='; the word after is the command.
    let a = parse(&["--switch-output", "100M"]).unwrap();
    assert_eq!(a.switch_output, Some(Switch::Signal));
    assert_eq!(a.command, ["100M"]);
    let a = parse(&["--switch-output=100M", "true"]).unwrap();
    assert_eq!(a.switch_output, Some(Switch::Size(100 << 20)));
    let a = parse(&["--switch-output=30s", "--switch-max-files", "3", "true"]).unwrap();
    assert_eq!(
        a.switch_output,
        Some(Switch::Time(std::time::Duration::from_secs(30)))
    );
    assert_eq!(a.switch_max_files, Some(3));
    assert!(parse(&["true"]).unwrap().switch_output.is_none());
}

#[test]
fn switch_options_refuse_what_perf_would_misread() {
    let e = parse(&["--switch-output=10x", "true"]).unwrap_err();
    assert!(e.to_string().contains("10x"), "{e}");
    let e = parse(&["--switch-output=", "true"]).unwrap_err();
    assert!(e.to_string().contains("--switch-output"), "{e}");
    // A limit without rotation, a count that is none.
    let e = parse(&["--switch-max-files", "2", "true"]).unwrap_err();
    assert!(e.to_string().contains("--switch-output"), "{e}");
    let e = parse(&["--switch-output", "--switch-max-files", "two", "true"]).unwrap_err();
    assert!(e.to_string().contains("two"), "{e}");
    // One archive of many files: archive each with analyze archive instead.
    let e = parse(&["--switch-output", "--archive", "true"]).unwrap_err();
    assert!(e.to_string().contains("--archive"), "{e}");
}

#[test]
fn follow_takes_a_kind_and_a_rate() {
    let a = parse(&["--follow", "write:1/1000", "--follow", "send:1/3", "true"]).unwrap();
    let f = |send, rate| super::args::Follow { send, rate };
    use bpf::FollowRate::{OneIn, PerSecond};
    assert_eq!(a.follow, [f(false, OneIn(1000)), f(true, OneIn(3))]);
    let a = parse(&["--follow", "write:50/s", "true"]).unwrap();
    assert_eq!(a.follow, [f(false, PerSecond(50))]);
    for bad in [
        "write:0/s",
        "write:50/m",
        "write:/s",
        "write:1/0",
        "foo:1/10",
        "write",
        "write:2/10",
        "write:1/x",
        "send:1/-1",
    ] {
        let e = parse(&["--follow", bad, "true"]).unwrap_err().to_string();
        assert!(
            e.contains(bad.split(':').nth(1).unwrap_or(bad)) || e.contains("foo"),
            "{bad}: {e}"
        );
    }
}
