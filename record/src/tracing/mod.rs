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
mod spec;
mod symbols;
mod syscalls;
#[cfg(test)]
mod testing;
mod tracepoints;
mod usdt;

use std::path::{Path, PathBuf};

use bpf::trace::MAX_TRACE_EVENTS;

use build::Builder;
use libraries::Places;
use spec::Spec;
use tracepoints::Tracefs;

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Each `-e` that is not one of record's own events, with the `--filter` that followed
    /// it (perf's rule: a filter applies to the `-e` before it).
    pub events: Vec<(String, Option<String>)>,
    /// `--latency ENTRY,EXIT` pairs of tracepoints (globs not allowed), with a `--filter`
    /// that followed.
    pub latency: Vec<(String, String, Option<String>)>,
    /// Take kernel and user stacks with each event.
    pub stacks: bool,
    /// Processes being recorded (`-p`): a library name is looked for in their mappings first.
    pub pids: Vec<u32>,
    /// The command being recorded (a probe's PATH may name a program found on $PATH).
    pub command: Option<PathBuf>,
}

/// One event the generic programs attach, and what perf.data says of it.
#[derive(Debug, Clone)]
pub struct Traced {
    /// What the BPF side attaches; `bpf.entry` indexes the Vec [`resolve`] returns, and
    /// `bpf.common_type` is [`Traced::id`].
    pub bpf: bpf::TraceEvent,
    /// The event's name in the file: `syscalls:sys_enter_openat`, `probe_libc:getaddrinfo`,
    /// `probe_libc:getaddrinfo__return`, `sdt_python:function__entry`,
    /// `syscalls:sys_enter_read->sys_exit_read` (a --latency pair).
    pub name: String,
    /// Its tracepoint id (the attr's config, the payload's common_type): the kernel's, or one
    /// made up from [`format::events::PROBE_TRACEPOINT_ID_BASE`] for a probe.
    pub id: u64,
    /// Its format file, as TRACING_DATA carries it: system and text (empty for a pair's
    /// entry, which is not written).
    pub system: String,
    pub format_text: Vec<u8>,
    /// Samples weigh nanoseconds (period = latency): a return probe, a --latency pair.
    pub latency: bool,
    /// Written to the file (a pair's entry is only kept in the kernel for its exit).
    pub written: bool,
}

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

/// The system facts resolving reads (a made-up tracefs and places in tests).
#[derive(Debug, Clone)]
pub(crate) struct Host {
    pub tracefs: Tracefs,
    /// Whether the kernel offers kprobes.
    pub kprobes: bool,
    /// `/proc/kallsyms`.
    pub kallsyms: PathBuf,
    /// Where separate debug files live (`/usr/lib/debug`).
    pub debug_root: PathBuf,
    pub places: Places,
}

impl Host {
    fn this_machine(req: &Request) -> Host {
        let tracefs = tracepoints::default_root();
        Host {
            tracefs: Tracefs {
                root: tracefs.to_path_buf(),
            },
            kprobes: kprobes::available(Path::new("/sys"), tracefs),
            kallsyms: "/proc/kallsyms".into(),
            debug_root: "/usr/lib/debug".into(),
            places: Places::host(&req.pids, req.command.as_deref()),
        }
    }
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
