//! Events assembled from what was found: what each attaches, its payload, its filter, its
//! name, id and format, and the entry and exit of pairs (return probes, --latency).

use std::path::Path;

use bpf::trace::{TraceAttach, TraceEvent, TracePayload, PROBE_ARGS};

use super::filter::Parsed;
use super::formats::{self, Arg};
use super::naming::{self, Names};
use super::request::{Host, Traced};
use super::symbols::{Binary, Missing};
use super::tracepoints::Tracepoint;
use super::{kprobes, syscalls, usdt};

/// The events so far.
pub struct Builder<'h> {
    host: &'h Host,
    stacks: bool,
    pub events: Vec<Traced>,
    names: Names,
    /// Probes' formats made so far (their ids follow PROBE_TRACEPOINT_ID_BASE).
    made_up: u64,
    /// Syscalls (number, exit) attached the cheaper way: one event each.
    syscalls: Vec<(u32, bool)>,
}

/// A probe to add: where it attaches (entry and return), its group and event name.
struct Probe {
    entry: TraceAttach,
    exit: Option<TraceAttach>,
    group: String,
    event: String,
    args: Vec<Arg>,
}

impl<'h> Builder<'h> {
    pub fn new(host: &'h Host, stacks: bool) -> Builder<'h> {
        Builder {
            host,
            stacks,
            events: Vec::new(),
            names: Names::default(),
            made_up: 0,
            syscalls: Vec::new(),
        }
    }

    fn event(
        &self,
        name: &str,
        attach: TraceAttach,
        payload: TracePayload,
        common_type: u64,
    ) -> TraceEvent {
        TraceEvent {
            name: name.into(),
            attach,
            payload,
            filter: None,
            stacks: self.stacks,
            entry: None,
            entry_only: false,
            common_type: common_type as u16,
            hist: None,
        }
    }

    /// Where `tp` attaches: a syscall tracepoint the cheaper way (see [`syscalls`]) the first
    /// time it is asked for, else through perf.
    fn attach_tracepoint(&mut self, tp: &Tracepoint) -> TraceAttach {
        if let Some(TraceAttach::Syscall { nr, exit }) = syscalls::attach_of(tp) {
            if !self.syscalls.contains(&(nr, exit)) {
                self.syscalls.push((nr, exit));
                return TraceAttach::Syscall { nr, exit };
            }
        }
        TraceAttach::Tracepoint {
            system: tp.system.clone(),
            name: tp.name.clone(),
        }
    }

    /// A tracepoint, with the filter compiled against its format.
    pub fn tracepoint(&mut self, tp: &Tracepoint, filter: Option<&Parsed>) -> anyhow::Result<()> {
        let name = tp.full_name();
        let attach = self.attach_tracepoint(tp);
        let mut bpf = self.event(&name, attach, tp.payload()?, tp.format.id);
        bpf.filter = filter.map(|f| f.compile(&name, &tp.format)).transpose()?;
        self.events.push(Traced {
            bpf,
            name,
            id: tp.format.id,
            system: tp.system.clone(),
            format_text: tp.text.clone(),
            latency: false,
            written: true,
        });
        Ok(())
    }

    /// `--latency ENTRY,EXIT`: the entry kept in the kernel, the exit sending the entry's
    /// record with the time between. The sample is the entry's record (its id, its format),
    /// so the filter reads the entry's fields.
    pub fn latency(
        &mut self,
        entry: &Tracepoint,
        exit: &Tracepoint,
        filter: Option<&Parsed>,
    ) -> anyhow::Result<()> {
        let name = if entry.system == exit.system {
            format!("{}->{}", entry.full_name(), exit.name)
        } else {
            format!("{}->{}", entry.full_name(), exit.full_name())
        };
        let id = entry.format.id;
        let attach = self.attach_tracepoint(entry);
        let mut first = self.event(&entry.full_name(), attach, entry.payload()?, id);
        first.entry_only = true;
        let attach = self.attach_tracepoint(exit);
        let mut second = self.event(&name, attach, exit.payload()?, id);
        second.filter = filter
            .map(|f| f.compile(&name, &entry.format))
            .transpose()?;
        self.pair(first, second, &name, id, &entry.system, entry.text.clone());
        Ok(())
    }

    /// Pushes a pair's entry (kept in the kernel, not written) and its exit (written, its
    /// samples weighing the time between).
    fn pair(
        &mut self,
        entry: TraceEvent,
        mut exit: TraceEvent,
        name: &str,
        id: u64,
        system: &str,
        format_text: Vec<u8>,
    ) {
        let at = self.events.len();
        exit.entry = Some(at);
        self.events.push(Traced {
            name: entry.name.clone(),
            bpf: entry,
            id,
            system: system.into(),
            format_text: Vec::new(),
            latency: false,
            written: false,
        });
        self.events.push(Traced {
            bpf: exit,
            name: name.into(),
            id,
            system: system.into(),
            format_text,
            latency: true,
            written: true,
        });
    }

    fn next_id(&mut self) -> u64 {
        self.made_up += 1;
        format::events::PROBE_TRACEPOINT_ID_BASE + self.made_up - 1
    }

    /// A probe and its made-up format: alone (entry), or as a pair whose exit is a return
    /// probe. A pair's entry carries the return's id in its header: the exit sends the
    /// entry's payload, so that is the id the sample's RAW holds.
    fn probe(&mut self, p: Probe, filter: Option<&Parsed>) -> anyhow::Result<()> {
        let id = self.next_id();
        let name = self.names.take(&p.group, &p.event, p.exit.is_some());
        let event_part = name
            .split_once(':')
            .map_or(name.as_str(), |(_, e)| e)
            .to_string();
        let Some(exit) = p.exit else {
            let text = formats::entry(&event_part, id, &p.args);
            let mut bpf = self.event(&name, p.entry, TracePayload::Args(p.args.len() as u32), id);
            bpf.filter = filter
                .map(|f| f.compile(&name, &parse(&text)))
                .transpose()?;
            self.events.push(Traced {
                bpf,
                name,
                id,
                system: p.group,
                format_text: text.into_bytes(),
                latency: false,
                written: true,
            });
            return Ok(());
        };
        let text = formats::ret(&event_part, id);
        let entry_name = format!("{}:{}", p.group, p.event);
        let mut first = self.event(
            &entry_name,
            p.entry,
            TracePayload::Args(PROBE_ARGS as u32),
            id,
        );
        first.entry_only = true;
        let mut second = self.event(&name, exit, TracePayload::Return, id);
        second.filter = filter
            .map(|f| f.compile(&name, &parse(&text)))
            .transpose()?;
        self.pair(first, second, &name, id, &p.group, text.into_bytes());
        Ok(())
    }

    /// A probe's PATH, found (see [`super::libraries`]).
    fn binary(&self, word: &str, path: &str) -> anyhow::Result<std::path::PathBuf> {
        self.host
            .places
            .find(path)
            .map_err(|e| anyhow::anyhow!("{word}: {e}"))
    }

    /// `uprobe:PATH:FUNCTION[+OFFSET]`, `uretprobe:PATH:FUNCTION`.
    pub fn uprobe(
        &mut self,
        word: &str,
        path: &str,
        function: &str,
        offset: u64,
        ret: bool,
        filter: Option<&Parsed>,
    ) -> anyhow::Result<()> {
        let path = self.binary(word, path)?;
        let bin = Binary::open(&path).map_err(|e| anyhow::anyhow!("{word}: {e}"))?;
        let shown = path.display();
        let (address, size) = match function
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
        {
            Some(a) => (a, 0),
            None => match bin.function(function, &self.host.debug_root) {
                Ok(f) => (f.address, f.size),
                Err(m) => return Err(missing(word, function, &path, m)),
            },
        };
        anyhow::ensure!(
            size == 0 || offset < size,
            "{word}: +{offset} is past the end of {function} ({size} bytes)"
        );
        let at = address + offset;
        let file_offset = bin.file_offset(at).ok_or_else(|| {
            anyhow::anyhow!("{word}: address {at:#x} lies in no loaded part of {shown}")
        })?;
        let attach = |ret| TraceAttach::Uprobe {
            path: path.clone(),
            offset: file_offset,
            ret,
        };
        let probe = Probe {
            entry: attach(false),
            exit: ret.then(|| attach(true)),
            group: naming::uprobe_group(&path),
            event: naming::event(function),
            args: vec![Arg::Signed; PROBE_ARGS],
        };
        self.probe(probe, filter)
    }

    /// `usdt:PATH:[PROVIDER:]NAME`.
    pub fn usdt(
        &mut self,
        word: &str,
        path: &str,
        provider: Option<&str>,
        name: &str,
        filter: Option<&Parsed>,
    ) -> anyhow::Result<()> {
        let path = self.binary(word, path)?;
        let data =
            std::fs::read(&path).map_err(|e| anyhow::anyhow!("{word}: {}: {e}", path.display()))?;
        let probes =
            usdt::probes(&data).map_err(|e| anyhow::anyhow!("{word}: {}: {e}", path.display()))?;
        let p = usdt::find(&probes, provider, name, &path.display().to_string())
            .map_err(|e| anyhow::anyhow!("{word}: {e}"))?;
        let probe = Probe {
            entry: TraceAttach::Usdt {
                path: path.clone(),
                provider: p.provider.clone(),
                name: p.name.clone(),
            },
            exit: None,
            group: naming::usdt_group(&p.provider),
            event: p.name.clone(),
            args: p.arg_types(PROBE_ARGS),
        };
        self.probe(probe, filter)
    }

    /// `kprobe:FUNCTION`, `kretprobe:FUNCTION`.
    pub fn kprobe(
        &mut self,
        word: &str,
        function: &str,
        ret: bool,
        filter: Option<&Parsed>,
    ) -> anyhow::Result<()> {
        if !self.host.kprobes {
            return Err(kprobes::absent(word, function, &self.host.tracefs.all()?));
        }
        let kallsyms = std::fs::read_to_string(&self.host.kallsyms).unwrap_or_default();
        kprobes::check_function(word, function, &kallsyms)?;
        let attach = |ret| TraceAttach::Kprobe {
            function: function.into(),
            ret,
        };
        let probe = Probe {
            entry: attach(false),
            exit: ret.then(|| attach(true)),
            group: naming::KPROBE_GROUP.into(),
            event: naming::event(function),
            args: vec![Arg::Signed; PROBE_ARGS],
        };
        self.probe(probe, filter)
    }
}

/// A format made here: it parses (the tests say so).
fn parse(text: &str) -> format::TraceFormat {
    format::TraceFormat::parse(text).expect("made-up formats parse")
}

/// Why a function could not be probed, and what to do.
fn missing(word: &str, function: &str, path: &Path, m: Missing) -> anyhow::Error {
    let path = path.display();
    match m {
        Missing::NotFound { closest, stripped: None } => {
            anyhow::anyhow!("{word}: no function '{function}' in {path}; the closest: {}", closest.join(", "))
        }
        Missing::NotFound { closest, stripped: Some(debug) } => anyhow::anyhow!(
            "{word}: {path} is stripped (no .symtab) and has no debug file ({debug}), and '{function}' is not \
             among the functions it exports (closest: {}); install its debug symbols (Debian: its package's \
             -dbgsym, from the debian-debug archive) or give the function's address: uprobe:{path}:0xADDRESS",
            closest.join(", ")
        ),
        Missing::Imported => anyhow::anyhow!(
            "{word}: {path} calls '{function}' but does not define it: probe the library that does (e.g. uprobe:libc:{function})"
        ),
        Missing::Ifunc { implementations } => {
            let which = if implementations.is_empty() {
                "its implementations are named in the library's debug symbols (install them: Debian's \
                 -dbgsym package, libc6-dbg for libc)"
                    .to_string()
            } else {
                implementations.join(", ")
            };
            anyhow::anyhow!(
                "{word}: '{function}' in {path} is an indirect function (GNU ifunc): its symbol is the \
                 resolver, run once when the library is loaded; probe the implementation chosen at run time \
                 instead: {which}"
            )
        }
    }
}
