//! What is asked (the words of `-e`, `--filter`, `--latency`), what each event resolves to,
//! and where they are looked for (this machine's tracefs, kallsyms, libraries).

use std::path::{Path, PathBuf};

use super::kprobes;
use super::libraries::Places;
use super::tracepoints::{self, Tracefs};

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
    pub(super) fn this_machine(req: &Request) -> Host {
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
