//! Reading the command line: perf's habits (`-z5`, a command after the options without
//! `--`), and an unknown option named with the closest one.

use clap::{CommandFactory, FromArgMatches};

use super::args::Args;
use super::filters::pair_filters;

/// The command line, or exit: an unknown option is an error naming it and the closest known
/// one, exit status 2, as perf refuses it (`unknown option`) rather than running it.
pub fn parse_args() -> Args {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let err = match Args::command().try_get_matches_from(attached_levels(std::env::args_os())) {
        Ok(m) => match Args::from_arg_matches(&m) {
            Ok(mut args) => match pair_filters(&mut args, &m) {
                Ok(()) => return args,
                Err(why) => {
                    eprintln!("record: {why}");
                    std::process::exit(2)
                }
            },
            Err(e) => e,
        },
        Err(e) => e,
    };
    let unknown = match (err.kind(), err.get(ContextKind::InvalidArg)) {
        (ErrorKind::UnknownArgument, Some(ContextValue::String(word))) => word.clone(),
        _ => err.exit(),
    };
    eprintln!("error: unknown option '{unknown}'");
    if let Some(close) = closest_option(&unknown) {
        eprintln!("  (the closest option is '{close}')");
    }
    eprintln!(
        "\n{}\nA command whose name starts with '-' goes after '--': record -- {unknown}\n\
         For more information, try '--help'.",
        Args::command().render_usage()
    );
    std::process::exit(2)
}

/// The command line with perf's attached short level, `-z5`, spelled `--compression-level=5`
/// (clap takes an optional value only after `=`), among record's own options: up to `--` or
/// the command's first word.
pub(super) fn attached_levels(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let cmd = Args::command();
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    let mut out = Vec::new();
    let mut args = args.into_iter();
    out.extend(args.next()); // the program's name
    while let Some(word) = args.next() {
        let Some(w) = word.to_str().map(str::to_string) else {
            out.push(word);
            break;
        };
        if w == "--" || !w.starts_with('-') || w == "-" {
            out.push(word);
            break;
        }
        let value_follows = if let Some(long) = w.strip_prefix("--") {
            !long.contains('=')
                && cmd
                    .get_arguments()
                    .find(|a| a.get_long() == Some(long))
                    .is_some_and(|a| {
                        takes_value(a) && a.get_num_args().is_none_or(|n| n.min_values() > 0)
                    })
        } else if let Some(level) = w
            .strip_prefix("-z")
            .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        {
            out.push(format!("--compression-level={level}").into());
            continue;
        } else {
            // A cluster of short options: a value follows if the last one takes one and
            // none is attached.
            let last = w.chars().last().unwrap_or('-');
            w.chars().count() == 2
                && cmd
                    .get_arguments()
                    .find(|a| a.get_short() == Some(last))
                    .is_some_and(|a| {
                        takes_value(a) && a.get_num_args().is_none_or(|n| n.min_values() > 0)
                    })
        };
        out.push(word);
        if value_follows {
            out.extend(args.next());
        }
    }
    out.extend(args);
    out
}

/// The option most like `word`: by edit distance among the long names (the short ones by
/// their letter in the other case, `-Z` for `-z`), with the other name of the same option.
fn closest_option(word: &str) -> Option<String> {
    let cmd = Args::command();
    let both = |a: &clap::Arg| match (a.get_short(), a.get_long()) {
        (Some(s), Some(l)) => format!("-{s}, --{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, Some(l)) => format!("--{l}"),
        (None, None) => String::new(),
    };
    let options = || cmd.get_arguments().filter(|a| !a.is_positional());
    if let Some(long) = word.strip_prefix("--") {
        let long = long.split('=').next().unwrap_or(long);
        options()
            .chain([&clap::Arg::new("help").long("help").short('h')])
            .filter_map(|a| Some((strsim::jaro_winkler(long, a.get_long()?), a)))
            .filter(|(score, _)| *score > 0.7)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, a)| both(a))
    } else {
        let c = word.strip_prefix('-')?.chars().next()?;
        let other = |s: char| s != c && s.eq_ignore_ascii_case(&c);
        options()
            .find(|a| a.get_short().is_some_and(other))
            .map(both)
    }
}
