//! Any event (`-e SYSTEM:NAME`, `uprobe:`, `uretprobe:`, `usdt:`, `kprobe:`, `kretprobe:`,
//! `--filter`, `--latency`): the user's words resolved into what the BPF side attaches
//! ([`bpf::TraceEvent`]) and what the file says of each event (its name, its tracepoint id
//! and the format file perf decodes its RAW payload with).
//!
//! One module a job: [`spec`] splits the words; [`tracepoints`] finds tracepoints and their
//! formats in tracefs; [`libraries`] finds a probe's binary, [`symbols`] its function and
//! [`usdt`] its USDT notes; [`kprobes`] checks the kernel; [`naming`] names probes as perf
//! does and [`formats`] writes their format files; [`filter`] compiles `--filter`; [`build`]
//! assembles the events, [`syscalls`] attaching syscall tracepoints the cheaper way.

pub mod aggregate;
mod build;
mod closest;
mod filter;
mod formats;
mod kprobes;
mod libraries;
mod naming;
mod request;
mod spec;
mod symbols;
mod syscalls;
#[cfg(test)]
mod testing;
mod tracepoints;
mod usdt;

use bpf::trace::MAX_TRACE_EVENTS;

use build::Builder;
pub(crate) use request::Host;
pub use request::{Request, Traced};
use spec::Spec;

/// Resolves `req` into events to attach, or one error saying what is wrong and what comes
/// closest (before anything is attached or run).
///
/// A pair (a return probe, a --latency pair) is two events: its entry, kept in the kernel
/// (`written` false, no format of its own: `format_text` empty), then its exit, whose
/// `bpf.entry` indexes the entry. Both carry the id of what is written (the exit sends the
/// entry's payload, whose header holds the entry's `common_type`): a return probe's made-up
/// id, a --latency pair's entry tracepoint's id.
pub fn resolve(req: &Request) -> anyhow::Result<Vec<Traced>> {
    resolve_on(req, &Host::this_machine(req))
}

pub(crate) fn resolve_on(req: &Request, host: &Host) -> anyhow::Result<Vec<Traced>> {
    let mut b = Builder::new(host, req.stacks);
    for (word, filter) in &req.events {
        let filter = filter
            .as_deref()
            .map(|f| filter::parse(f).map_err(|e| anyhow::anyhow!("{word}: {e}")))
            .transpose()?;
        let filter = filter.as_ref();
        match spec::parse(word)? {
            Spec::Tracepoint { system, name } => {
                let found = host.tracefs.find(&system, &name)?;
                too_many(b.events.len() + found.len())?;
                for (system, name) in found {
                    b.tracepoint(&host.tracefs.load(&system, &name)?, filter)?;
                }
            }
            Spec::Uprobe {
                path,
                function,
                offset,
                ret,
            } => b.uprobe(word, &path, &function, offset, ret, filter)?,
            Spec::Usdt {
                path,
                provider,
                name,
            } => b.usdt(word, &path, provider.as_deref(), &name, filter)?,
            Spec::Kprobe { function, ret } => b.kprobe(word, &function, ret, filter)?,
        }
    }
    for (entry, exit, filter) in &req.latency {
        let pair = format!("--latency {entry},{exit}");
        let filter = filter
            .as_deref()
            .map(|f| filter::parse(f).map_err(|e| anyhow::anyhow!("{pair}: {e}")))
            .transpose()?;
        let load = |word: &str| -> anyhow::Result<tracepoints::Tracepoint> {
            let whole = |s: &str| !s.contains(['*', '?', '[']);
            match spec::parse(word) {
                Ok(Spec::Tracepoint { system, name }) if whole(&system) && whole(&name) => {
                    host.tracefs.find(&system, &name)?;
                    host.tracefs.load(&system, &name)
                }
                _ => anyhow::bail!(
                    "{pair}: '{word}' is not a tracepoint named in full (SYSTEM:NAME, no globs)"
                ),
            }
        };
        b.latency(&load(entry)?, &load(exit)?, filter.as_ref())?;
    }
    too_many(b.events.len())?;
    Ok(b.events)
}

fn too_many(events: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        events <= MAX_TRACE_EVENTS,
        "{events} events asked for (a pair counts two), and at most {MAX_TRACE_EVENTS} can be attached at once"
    );
    Ok(())
}

#[cfg(test)]
mod tests;
