//! The command line: record's options ([`command`], for man pages and completions too), what
//! they ask for as the session takes it, and the summary line printed at the end.

mod args;
mod config;
mod filters;
mod parse;
mod summary;
#[cfg(test)]
mod tests;

pub use args::Args;
pub use parse::parse_args;
pub use summary::print_summary;

/// record's command line as clap defines it (help text, options, values): what `record`
/// parses, and what a man page or shell completions are generated from.
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}
