//! Any event (`-e SYSTEM:NAME`, `uprobe:`, `uretprobe:`, `usdt:`, `kprobe:`, `kretprobe:`,
//! `--filter`, `--latency`): the user's words resolved into what the BPF side attaches
//! ([`bpf::TraceEvent`]) and what the file says of each event (its name, its tracepoint id
//! and the format file perf decodes its RAW payload with).

mod closest;
mod filter;
mod formats;
mod kprobes;
mod libraries;
mod naming;
mod spec;
mod symbols;
#[cfg(test)]
mod testing;
mod tracepoints;
mod usdt;

use std::path::PathBuf;

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
    /// Its format file, as TRACING_DATA carries it: system and text.
    pub system: String,
    pub format_text: Vec<u8>,
    /// Samples weigh nanoseconds (period = latency): a return probe, a --latency pair.
    pub latency: bool,
    /// Written to the file (a pair's entry is only kept in the kernel for its exit).
    pub written: bool,
}

/// Resolves `req` into events to attach, or one error saying what is wrong and what comes
/// closest (before anything is attached or run).
pub fn resolve(req: &Request) -> anyhow::Result<Vec<Traced>> {
    anyhow::ensure!(
        req.events.is_empty() && req.latency.is_empty(),
        "any event: not built yet"
    );
    Ok(Vec::new())
}
