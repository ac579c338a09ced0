//! `--filter EXPR`: perf's tracepoint filter language compiled, against one event's format,
//! into the postfix program the kernel runs before anything is copied (filter.bpf.h).
//!
//! Names are the event's fields (`common_pid` too; a probe's `arg1`..`arg6`, `ret`,
//! `__probe_ip`), then, where no field has the name, `comm` (the task's name), `pid` (the
//! process), `tid`, `cpu`. A field compares as C compares its type: unsigned fields as
//! unsigned numbers, a negative number given for one taken in the field's width (`dfd ==
//! -100` on an 8-byte unsigned field; the kernel's own filters refuse negative numbers there).
//! Strings (`char[N]`, `__data_loc char[]`, `comm`) compare with `==`, `!=` and `~`, against
//! `x`, `x*`, `*x` or `*x*`, over their first 64 bytes. Pointers (`const char * filename`)
//! are numbers: the record holds the address, not the text. The BPF side writes each
//! payload's common header again: `common_pid` is the thread id, and `common_flags` and
//! `common_preempt_count` read 0.

mod compile;
mod error;
mod parse;

#[cfg(test)]
mod interpret;
#[cfg(test)]
mod tests;

use bpf::trace::Filter;
use format::TraceFormat;

use error::Error;

/// A checked filter expression, compiled per event by [`Parsed::compile`].
#[derive(Debug, Clone)]
pub struct Parsed {
    text: String,
    expr: parse::Expr,
}

/// Parses `text` (syntax only: the fields are checked per event).
pub fn parse(text: &str) -> anyhow::Result<Parsed> {
    match parse::parse(text) {
        Ok(expr) => Ok(Parsed {
            text: text.to_string(),
            expr,
        }),
        Err(e) => Err(describe(None, text, &e)),
    }
}

impl Parsed {
    /// The filter for an event whose payload `format` describes; `event` names it in errors.
    pub fn compile(&self, event: &str, format: &TraceFormat) -> anyhow::Result<Filter> {
        compile::compile(&self.expr, format).map_err(|e| describe(Some(event), &self.text, &e))
    }
}

/// `EVENT: --filter 'TEXT': at column N: MESSAGE`, then the expression with a caret under
/// the column.
fn describe(event: Option<&str>, text: &str, e: &Error) -> anyhow::Error {
    let event = event.map(|e| format!("{e}: ")).unwrap_or_default();
    anyhow::anyhow!(
        "{event}--filter '{text}': at column {}: {}\n    {text}\n    {}^",
        e.column,
        e.message,
        " ".repeat(e.column.saturating_sub(1))
    )
}
