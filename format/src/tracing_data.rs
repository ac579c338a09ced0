//! The TRACING_DATA blob: the tracefs format files that let `perf script` decode RAW samples.
//!
//! Layout (version 0.6, as perf writes it): magic `"\x17\x08Dtracing"`, version `"0.6\0"`,
//! u8 big-endian flag, u8 sizeof(long), u32 page size; `"header_page\0"` + u64 size + text;
//! `"header_event\0"` + u64 size + text; u32 count of ftrace formats, each u64 size + text;
//! u32 count of systems, each a NUL-terminated name, u32 count of formats, each u64 size + text;
//! u32 size + kallsyms; u32 size + printk formats; u64 size + saved cmdlines.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::trace_format::TraceFormat;

const MAGIC: &[u8] = b"\x17\x08Dtracing";

/// One event format file (`/sys/kernel/tracing/events/SYSTEM/NAME/format`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    pub system: String,
    pub text: Vec<u8>,
}

/// Builds a TRACING_DATA blob from format files.
#[derive(Debug, Clone, Default)]
pub struct TracingData {
    pub header_page: Vec<u8>,
    pub header_event: Vec<u8>,
    /// Event formats; systems are written in the order they first appear.
    pub events: Vec<EventFormat>,
    pub page_size: u32,
}

/// Reads a tracefs file whole. tracefs reports size 0 and some of its files (header_page) end
/// the stream after a short first read, so read with one large buffer, not `fs::read`.
pub fn read_tracefs_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

impl TracingData {
    /// Header files from a mounted tracefs (`/sys/kernel/tracing`), no events yet.
    pub fn from_tracefs(tracefs: &Path) -> std::io::Result<Self> {
        let events = tracefs.join("events");
        Ok(TracingData {
            header_page: read_tracefs_file(&events.join("header_page"))?,
            header_event: read_tracefs_file(&events.join("header_event"))?,
            events: Vec::new(),
            page_size: 4096,
        })
    }

    /// Adds a kernel event's format file (`events/SYSTEM/NAME/format`) and returns its id.
    pub fn add_tracefs_event(
        &mut self,
        tracefs: &Path,
        system: &str,
        name: &str,
    ) -> std::io::Result<u64> {
        let text = read_tracefs_file(
            &tracefs
                .join("events")
                .join(system)
                .join(name)
                .join("format"),
        )?;
        let id = String::from_utf8_lossy(&text)
            .lines()
            .find_map(|l| l.strip_prefix("ID:").and_then(|v| v.trim().parse().ok()))
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("no ID in format of {system}:{name}"),
                )
            })?;
        self.events.push(EventFormat {
            system: system.into(),
            text,
        });
        Ok(id)
    }

    /// The blob as perf 6.1 reads it (little-endian, 64-bit long).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(b"0.6\0");
        b.push(0); // little-endian
        b.push(8); // sizeof(long)
        b.extend_from_slice(&self.page_size.to_le_bytes());
        b.extend_from_slice(b"header_page\0");
        b.extend_from_slice(&(self.header_page.len() as u64).to_le_bytes());
        b.extend_from_slice(&self.header_page);
        b.extend_from_slice(b"header_event\0");
        b.extend_from_slice(&(self.header_event.len() as u64).to_le_bytes());
        b.extend_from_slice(&self.header_event);
        b.extend_from_slice(&0u32.to_le_bytes()); // ftrace formats
        let mut systems: Vec<&str> = Vec::new();
        for e in &self.events {
            if !systems.contains(&e.system.as_str()) {
                systems.push(&e.system);
            }
        }
        b.extend_from_slice(&(systems.len() as u32).to_le_bytes());
        for system in systems {
            b.extend_from_slice(system.as_bytes());
            b.push(0);
            let formats: Vec<_> = self.events.iter().filter(|e| e.system == system).collect();
            b.extend_from_slice(&(formats.len() as u32).to_le_bytes());
            for f in formats {
                b.extend_from_slice(&(f.text.len() as u64).to_le_bytes());
                b.extend_from_slice(&f.text);
            }
        }
        b.extend_from_slice(&0u32.to_le_bytes()); // kallsyms
        b.extend_from_slice(&0u32.to_le_bytes()); // printk formats
        b.extend_from_slice(&0u64.to_le_bytes()); // saved cmdlines
        b
    }
}

/// Reads the event formats of a TRACING_DATA blob: tracepoint id -> "system:name".
///
/// Returns what it could read before anything malformed; never panics.
pub fn tracepoint_names(blob: &[u8]) -> BTreeMap<u64, String> {
    formats(blob)
        .into_iter()
        .map(|(system, f)| (f.id, format!("{system}:{}", f.name)))
        .collect()
}

/// The event formats of a TRACING_DATA blob, with their systems, as far as the blob can be
/// read (a format file that does not parse is left out); never panics.
pub fn formats(blob: &[u8]) -> Vec<(String, TraceFormat)> {
    let mut out = Vec::new();
    let _ = parse_into(blob, &mut out);
    out
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
    big_endian: bool,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        let a: [u8; 4] = self.take(4)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
    fn u64(&mut self) -> Option<u64> {
        let a: [u8; 8] = self.take(8)?.try_into().ok()?;
        Some(if self.big_endian {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }
    fn cstr(&mut self) -> Option<&'a [u8]> {
        let rest = self.b.get(self.pos..)?;
        let n = rest.iter().position(|&c| c == 0)?;
        self.pos += n + 1;
        Some(&rest[..n])
    }
    fn sized(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
}

fn parse_into(blob: &[u8], out: &mut Vec<(String, TraceFormat)>) -> Option<()> {
    let mut c = Cursor {
        b: blob,
        pos: 0,
        big_endian: false,
    };
    if c.take(MAGIC.len())? != MAGIC {
        return None;
    }
    c.cstr()?; // version
    c.big_endian = c.take(1)?[0] != 0;
    c.take(1)?; // sizeof(long)
    c.u32()?; // page size
    if c.cstr()? != b"header_page" {
        return None;
    }
    c.sized()?;
    if c.cstr()? != b"header_event" {
        return None;
    }
    c.sized()?;
    for _ in 0..c.u32()? {
        c.sized()?;
    }
    for _ in 0..c.u32()? {
        let system = String::from_utf8_lossy(c.cstr()?).into_owned();
        for _ in 0..c.u32()? {
            let text = String::from_utf8_lossy(c.sized()?);
            if let Ok(f) = TraceFormat::parse(&text) {
                out.push((system.clone(), f));
            }
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_back_from_built_blob() {
        let td = TracingData {
            header_page: b"field: u64 timestamp;".to_vec(),
            header_event: b"# compressed entry header".to_vec(),
            page_size: 4096,
            events: vec![
                EventFormat {
                    system: "sched".into(),
                    text: b"name: sched_switch\nID: 316\nformat:\n".to_vec(),
                },
                EventFormat {
                    system: "bpfperf".into(),
                    text: b"name: block_io\nID: 60001\nformat:\n".to_vec(),
                },
            ],
        };
        let names = tracepoint_names(&td.to_bytes());
        assert_eq!(
            names.get(&316).map(String::as_str),
            Some("sched:sched_switch")
        );
        assert_eq!(
            names.get(&60001).map(String::as_str),
            Some("bpfperf:block_io")
        );
        // Cut anywhere: never panics, keeps what came before.
        let bytes = td.to_bytes();
        for cut in 0..bytes.len() {
            tracepoint_names(&bytes[..cut]);
        }
    }
}
