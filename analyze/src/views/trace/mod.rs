//! `analyze trace`: one line per event of the traced events, in time order, as perf script
//! and bcc's `trace` print them:
//!
//! ```text
//! 9511.861152 dd 29755/29755 [001] syscalls:sys_enter_write: fd=1 buf=0x55e6d05d1000 count=100
//! ```
//!
//! time (`secs.usecs`, perf script's), command, pid/tid, [cpu], event, then the event's own
//! fields as `name=value`: numbers in decimal, addresses (a `*` type, a probe's
//! `__probe_ip`) in hex, text as it is, other arrays as `[1,2,3]`, `?` where the payload is
//! too short for the field. Fields whose names start with `__` (`__syscall_nr`,
//! `__probe_ip`) are left out unless asked for or the event has no others (perf's probes
//! without arguments); a latency event ends with `latency=NS`. `-F` chooses the fields
//! (common ones and `latency` too); a bcc-like format (see [`printf`]) replaces them. With
//! stacks (`-g`), each line is followed by its sample's stack as perf script prints it, and
//! a blank line.

pub mod print_fmt;
pub mod printf;

use std::borrow::Cow;
use std::io::{self, Write};

use format::{Field, FieldKind, Value};

use crate::read::fields::{Quantity, LATENCY};
use crate::read::{RawSample, Recording, Weighed};
use crate::symbolize::Symbolized;
use crate::Error;
use print_fmt::{number_arg, KernelNames, PrintFmt};
use printf::{Arg, Conv, Printf};

/// What each line shows after its event's name.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The fields to show (`-F`): each must be a field of one of the events at least; an event
    /// without it shows the others. Empty: the event's own fields (and its latency).
    pub fields: Vec<String>,
    /// A bcc-like format and its arguments (`--format`) instead of the fields.
    pub format: Option<String>,
}

/// What a format argument reads.
#[derive(Debug, Clone, Copy)]
enum Source<'r> {
    Quantity(Quantity<'r>),
    Comm,
    Pid,
    Tid,
    Cpu,
    /// The sample's time, ns.
    Time,
    Event,
}

impl Source<'_> {
    fn is_text(&self) -> bool {
        match self {
            Source::Quantity(Quantity::Field(f)) => !matches!(f.kind, FieldKind::Int),
            Source::Comm | Source::Event => true,
            _ => false,
        }
    }

    /// Whether it reads an array's bytes (for an address's conversion: `%pI4`, `%pIS`).
    fn is_bytes(&self) -> bool {
        matches!(self, Source::Quantity(Quantity::Field(f))
            if matches!(f.kind, FieldKind::Array | FieldKind::DataLoc | FieldKind::RelLoc))
    }
}

/// How one event's lines end.
#[derive(Debug)]
enum Tail<'r> {
    Fields(Vec<Quantity<'r>>),
    Format(Vec<Source<'r>>),
}

/// The lines of a recording's traced events, each event's fields resolved once.
pub struct Lines<'r> {
    rec: &'r Recording,
    /// By event; `None` for an event not shown.
    tails: Vec<Option<Tail<'r>>>,
    printf: Option<Printf>,
    /// Kernel addresses' names, for a format's `%pS` (none by default: hex).
    names: Box<KernelNames<'r>>,
}

impl std::fmt::Debug for Lines<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines")
            .field("tails", &self.tails)
            .field("printf", &self.printf)
            .finish_non_exhaustive()
    }
}

impl<'r> Lines<'r> {
    /// The lines of `events` (indices into the recording's events) as `o` asks; an error for
    /// a field no event has, or a format that does not fit an event.
    pub fn new(rec: &'r Recording, events: &[usize], o: &Options) -> Result<Lines<'r>, Error> {
        let mut tails: Vec<Option<Tail>> = (0..rec.events.len()).map(|_| None).collect();
        let printf = match &o.format {
            Some(spec) => Some(Printf::parse(spec).map_err(|why| Error::BadFormat {
                format: spec.clone(),
                why,
            })?),
            None => None,
        };
        for &e in events {
            let tail = match &printf {
                Some(p) => Tail::Format(format_sources(rec, e, p, o)?),
                None if o.fields.is_empty() => Tail::Fields(default_fields(rec, e)),
                None => Tail::Fields(
                    o.fields
                        .iter()
                        .filter_map(|f| Quantity::of(rec, e, f).ok())
                        .collect(),
                ),
            };
            tails[e] = Some(tail);
        }
        // A field of -F that no event has is a mistake (of one event: say its fields).
        for f in &o.fields {
            if !events.iter().any(|&e| Quantity::of(rec, e, f).is_ok()) {
                return Err(Quantity::of(rec, events[0], f).expect_err("no event has it"));
            }
        }
        Ok(Lines {
            rec,
            tails,
            printf,
            names: Box::new(|_| None),
        })
    }

    /// These lines, naming the kernel addresses a format prints with `%pS` or `%ps` by
    /// `names` (see `pipeline::kernel_namer`).
    pub fn naming_kernel(self, names: Box<KernelNames<'r>>) -> Lines<'r> {
        Lines { names, ..self }
    }

    /// Writes the line of sample `s` (of an event these lines show; others: nothing).
    pub fn write(&self, s: &RawSample, out: &mut impl Write) -> io::Result<()> {
        let Some(Some(tail)) = self.tails.get(s.event) else {
            return Ok(());
        };
        let rec = self.rec;
        write!(
            out,
            "{}.{:06} {} {}/{} [{:03}] {}:",
            s.time / 1_000_000_000,
            s.time % 1_000_000_000 / 1000,
            comm(rec, s),
            s.pid,
            s.tid,
            s.cpu,
            rec.events[s.event]
        )?;
        match tail {
            Tail::Fields(fields) => {
                write_fields(fields, s, out)?;
                writeln!(out)
            }
            Tail::Format(sources) => {
                let Some(p) = &self.printf else {
                    return writeln!(out);
                };
                let args: Vec<Arg> = sources
                    .iter()
                    .zip(p.convs())
                    .map(|(src, conv)| arg(rec, s, src, conv, &self.names))
                    .collect();
                writeln!(out, " {}", p.render(&args))
            }
        }
    }
}

/// ` name=value` for each of `fields` in sample `s`.
fn write_fields(fields: &[Quantity<'_>], s: &RawSample, out: &mut impl Write) -> io::Result<()> {
    for q in fields {
        write!(out, " {}=", q.name())?;
        match (q, q.value(s)) {
            (_, None) => write!(out, "?")?,
            (Quantity::Field(f), Some(v)) => write!(out, "{}", field_text(f, &v))?,
            (Quantity::Latency, Some(v)) => write!(out, "{v}")?,
        }
    }
    Ok(())
}

/// What perf script prints after a traced event's name: the text of its print format
/// (see [`print_fmt`]), or, where that format uses what analyze does not evaluate, its
/// fields as `trace` prints them.
pub struct Payloads<'r> {
    /// By event; `None` for events without a format (sampling events).
    by_event: Vec<Option<Payload<'r>>>,
    /// Kernel addresses' names, for `%pS`.
    names: Box<KernelNames<'r>>,
}

enum Payload<'r> {
    PrintFmt(PrintFmt),
    Fields(Vec<Quantity<'r>>),
}

impl<'r> Payloads<'r> {
    /// Each traced event's of `rec`, its print format parsed once; `names` names the kernel
    /// addresses formats print with `%pS` or `%ps`.
    pub fn new(rec: &'r Recording, names: Box<KernelNames<'r>>) -> Payloads<'r> {
        let by_event = (0..rec.events.len())
            .map(|e| {
                let format = rec.format(e)?;
                Some(match PrintFmt::of(format) {
                    Some(p) => Payload::PrintFmt(p),
                    None => Payload::Fields(default_fields(rec, e)),
                })
            })
            .collect();
        Payloads { by_event, names }
    }

    /// Writes ` TEXT` for sample `s` if its event is traced; nothing otherwise.
    pub fn write(&self, s: &RawSample, out: &mut impl Write) -> io::Result<()> {
        match self.by_event.get(s.event) {
            Some(Some(Payload::PrintFmt(p))) => {
                let raw = s.raw.as_deref().unwrap_or_default();
                write!(out, " {}", p.render(raw, &self.names))
            }
            Some(Some(Payload::Fields(fields))) => write_fields(fields, s, out),
            _ => Ok(()),
        }
    }
}

/// Writes the line of every sample of `samples` (in their order: time); with `stacks` (the
/// pipeline's symbolized timeline of the same selection), each sample's stack under its
/// line as perf script prints it, then a blank line.
pub fn write(
    lines: &Lines<'_>,
    samples: &[Weighed<'_>],
    stacks: Option<&Symbolized>,
    out: &mut impl Write,
) -> io::Result<()> {
    for (i, (s, _)) in samples.iter().enumerate() {
        lines.write(s, out)?;
        if let Some(sym) = stacks {
            if let Some(t) = sym.timeline.get(i) {
                super::script::write_frames(sym, &sym.stacks[t.stack as usize], out)?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

fn comm<'a>(rec: &'a Recording, s: &RawSample) -> &'a str {
    rec.comms.get(s.comm as usize).map_or("", String::as_str)
}

/// The event's own fields but those named `__...` (unless it has no others: perf's probes
/// carry only `__probe_ip`, or `__probe_func` and `__probe_ret_ip`), then its latency.
fn default_fields(rec: &Recording, e: usize) -> Vec<Quantity<'_>> {
    let own: Vec<&Field> = rec
        .format(e)
        .map(|f| f.own_fields().collect())
        .unwrap_or_default();
    let hidden = |f: &&Field| f.name.starts_with("__");
    let mut fields: Vec<Quantity> = if own.iter().all(hidden) {
        own.into_iter().map(Quantity::Field).collect()
    } else {
        own.into_iter()
            .filter(|f| !hidden(f))
            .map(Quantity::Field)
            .collect()
    };
    if rec.is_latency(e) && fields.iter().all(|q| q.name() != LATENCY) {
        fields.push(Quantity::Latency);
    }
    fields
}

/// What each argument of the format reads in event `e`'s samples: a field of the event
/// (also `args->NAME`), else `comm`, `pid`, `tid`, `cpu`, `time` (ns), `event` or `latency`
/// (`$comm` ... always mean the thread's, even where the event has a field of that name).
fn format_sources<'r>(
    rec: &'r Recording,
    e: usize,
    p: &Printf,
    o: &Options,
) -> Result<Vec<Source<'r>>, Error> {
    let mut sources = Vec::new();
    for (name, conv) in p.args.iter().zip(p.convs()) {
        let special = |n: &str| match n {
            "comm" => Some(Source::Comm),
            "pid" => Some(Source::Pid),
            "tid" => Some(Source::Tid),
            "cpu" => Some(Source::Cpu),
            "time" => Some(Source::Time),
            "event" => Some(Source::Event),
            _ => None,
        };
        let source = match name.strip_prefix('$').and_then(special) {
            Some(s) => s,
            None => match Quantity::of(rec, e, name) {
                Ok(q) => Source::Quantity(q),
                Err(err) => special(name).ok_or(err)?,
            },
        };
        if conv.kind.numeric()
            && source.is_text()
            && !(conv.kind.takes_bytes() && source.is_bytes())
        {
            return Err(Error::BadFormat {
                format: o.format.clone().unwrap_or_default(),
                why: format!(
                    "{name} of {} is text: print it with %s, not a number's conversion",
                    rec.events[e]
                ),
            });
        }
        sources.push(source);
    }
    Ok(sources)
}

/// What a format argument hands its conversion `conv` for sample `s`: an array's bytes to an
/// address's conversion, a kernel address's name (by `names`) to `%pS`.
fn arg<'a>(
    rec: &'a Recording,
    s: &RawSample,
    src: &Source<'_>,
    conv: Conv,
    names: &KernelNames,
) -> Arg<'a> {
    match src {
        Source::Comm => Arg::Text(comm(rec, s).into()),
        Source::Event => Arg::Text(rec.events[s.event].as_str().into()),
        Source::Pid => Arg::Number(s.pid.into()),
        Source::Tid => Arg::Number(s.tid.into()),
        Source::Cpu => Arg::Number(s.cpu.into()),
        Source::Time => Arg::Number(s.time.into()),
        Source::Quantity(q) => match q.value(s) {
            None => Arg::Text("?".into()),
            Some(Value::Bytes(b)) if conv.kind.takes_bytes() => Arg::Bytes(Cow::Owned(b)),
            Some(v) => match v.as_i128() {
                Some(n) => number_arg(n, conv.kind, names),
                None => Arg::Text(Cow::Owned(value_text(&v))),
            },
        },
    }
}

/// A field's value as lines show it: addresses in hex, other numbers in decimal, text as it
/// is, other arrays as `[1,2,3]`.
fn field_text(f: &Field, v: &Value) -> String {
    match v {
        Value::Unsigned(n) if is_address(f) => format!("{n:#x}"),
        v => value_text(v),
    }
}

/// Whether a field holds an address: a pointer, or a probe's `__probe_ip`, `__probe_func`,
/// `__probe_ret_ip` (unsigned longs in their formats).
fn is_address(f: &Field) -> bool {
    f.type_name.contains('*') || f.name.starts_with("__probe_")
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => {
            let items: Vec<String> = b.iter().map(u8::to_string).collect();
            format!("[{}]", items.join(","))
        }
        v => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::testing::{recording, return_payload, sample, write_payload};

    fn text(lines: &Lines, samples: &[RawSample]) -> String {
        let mut out = Vec::new();
        for s in samples {
            lines.write(s, &mut out).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn lines_show_fields_or_a_format() {
        let rec = recording();
        let samples = [
            sample(
                1,
                7,
                9_511_861_152_600,
                1,
                &[],
                Some(write_payload(7, 1, 100)),
            ),
            sample(
                2,
                300,
                9_600_000_001_000,
                5_000,
                &[],
                Some(return_payload(300, "a.b", -2)),
            ),
            // Cut short: its count is unknown.
            sample(
                1,
                7,
                9_700_000_000_000,
                1,
                &[],
                Some(write_payload(7, 1, 100)[..34].to_vec()),
            ),
        ];
        let lines = Lines::new(&rec, &[1, 2], &Options::default()).unwrap();
        assert_eq!(
            text(&lines, &samples),
            "9511.861152 dd 7/7 [001] syscalls:sys_enter_write: fd=1 buf=0x5000 count=100\n\
             9600.000001 curl 300/300 [001] probe_libc:getaddrinfo__return: arg1=0 host=a.b ret=-2 latency=5000\n\
             9700.000000 dd 7/7 [001] syscalls:sys_enter_write: fd=1 buf=0x5000 count=?\n"
        );
        let o = Options {
            fields: vec!["count".into(), "latency".into(), "__syscall_nr".into()],
            ..Default::default()
        };
        let lines = Lines::new(&rec, &[1, 2], &o).unwrap();
        assert_eq!(
            text(&lines, &samples[..2]),
            "9511.861152 dd 7/7 [001] syscalls:sys_enter_write: count=100 __syscall_nr=1\n\
             9600.000001 curl 300/300 [001] probe_libc:getaddrinfo__return: latency=5000\n"
        );
        let o = Options {
            format: Some(r#""%s wrote %d bytes to %lu (%-4s)", comm, count, fd, $pid"#.into()),
            ..Default::default()
        };
        let lines = Lines::new(&rec, &[1], &o).unwrap();
        assert_eq!(
            text(&lines, &samples[..1]),
            "9511.861152 dd 7/7 [001] syscalls:sys_enter_write: dd wrote 100 bytes to 1 (7   )\n"
        );
    }

    #[test]
    fn probes_without_arguments_show_their_addresses() {
        let mut rec = recording();
        let text_format = "name: getpid\nID: 9\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
                           \tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n";
        rec.events[0] = "probe_libc:getpid".into();
        rec.formats[0] = Some(format::TraceFormat::parse(text_format).unwrap());
        let mut raw = vec![0u8; 16];
        raw[8..].copy_from_slice(&0x7f18_e960_74e0u64.to_le_bytes());
        let s = sample(0, 7, 1_000_000_000, 1, &[], Some(raw));
        let lines = Lines::new(&rec, &[0], &Options::default()).unwrap();
        assert_eq!(
            text(&lines, &[s]),
            "1.000000 dd 7/7 [001] probe_libc:getpid: __probe_ip=0x7f18e96074e0\n"
        );
    }

    #[test]
    fn bad_fields_and_formats_are_refused() {
        let rec = recording();
        let err = |o: Options| Lines::new(&rec, &[1], &o).unwrap_err().to_string();
        let e = err(Options {
            fields: vec!["bytes".into()],
            ..Default::default()
        });
        assert!(
            e.contains("has no field bytes (its fields: __syscall_nr, fd, buf, count)"),
            "{e}"
        );
        let e = err(Options {
            format: Some(r#""%d", bytes"#.into()),
            ..Default::default()
        });
        assert!(e.contains("no field bytes"), "{e}");
        let e = err(Options {
            format: Some(r#""%d", comm"#.into()),
            ..Default::default()
        });
        assert!(
            e.contains("comm of syscalls:sys_enter_write is text"),
            "{e}"
        );
        let e = err(Options {
            format: Some(r#""%d %d", count"#.into()),
            ..Default::default()
        });
        assert!(e.contains("2 conversion(s) and 1 argument(s)"), "{e}");
        // A field of one event only: the other event's lines go without it.
        let o = Options {
            fields: vec!["host".into()],
            ..Default::default()
        };
        assert!(Lines::new(&rec, &[1, 2], &o).is_ok());
    }
}
