//! Feature sections written after the data section when a recording is finished.

use crate::constants::{feature, misc};
use crate::writer::EventAttr;

/// One entry of the BUILD_ID feature: which file has which build id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildIdEntry {
    /// -1 for the kernel, else the pid of the process that mapped the file.
    pub pid: i32,
    /// The kernel or a user-space file.
    pub kernel: bool,
    /// At most 20 bytes.
    pub build_id: Vec<u8>,
    pub filename: String,
}

/// Facts about the recording, written as feature sections by [`super::PerfFileWriter::finish`].
/// EVENT_DESC is always written, from the attributes; SAMPLE_TIME defaults to the range of the
/// sample times the writer saw.
#[derive(Debug, Clone, Default)]
pub struct Features {
    pub hostname: Option<String>,
    pub os_release: Option<String>,
    pub version: Option<String>,
    pub arch: Option<String>,
    /// (CPUs available, CPUs online).
    pub nr_cpus: Option<(u32, u32)>,
    pub cmdline: Option<Vec<String>>,
    pub sample_time: Option<(u64, u64)>,
    /// Resolution of the sample clock in nanoseconds.
    pub clockid_res_ns: Option<u64>,
    pub build_ids: Vec<BuildIdEntry>,
    /// A TRACING_DATA blob (see [`crate::TracingData`]); needed when an event is a tracepoint.
    pub tracing_data: Option<Vec<u8>>,
}

/// A string as perf stores it: u32 length (NUL included, padded to 64), then the bytes.
fn put_string(out: &mut Vec<u8>, s: &str) {
    let len = (s.len() + 1).div_ceil(64) * 64;
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.resize(out.len() + len - s.len(), 0);
}

fn string_section(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_string(&mut out, s);
    out
}

fn build_id_section(entries: &[BuildIdEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        // struct perf_record_header_build_id, then the file name padded to 64.
        let name_len = (e.filename.len() + 1).div_ceil(64) * 64;
        let size = 8 + 4 + 24 + name_len;
        let m = if e.kernel { misc::KERNEL } else { misc::USER } | misc::BUILD_ID_SIZE;
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&m.to_le_bytes());
        out.extend_from_slice(&(size as u16).to_le_bytes());
        out.extend_from_slice(&e.pid.to_le_bytes());
        let n = e.build_id.len().min(20);
        let mut id = [0u8; 24];
        id[..n].copy_from_slice(&e.build_id[..n]);
        id[20] = n as u8;
        out.extend_from_slice(&id);
        out.extend_from_slice(e.filename.as_bytes());
        out.resize(out.len() + name_len - e.filename.len(), 0);
    }
    out
}

fn event_desc_section(attrs: &[EventAttr]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(attrs.len() as u32).to_le_bytes());
    out.extend_from_slice(&(crate::constants::ATTR_SIZE as u32).to_le_bytes());
    for a in attrs {
        out.extend_from_slice(&a.to_bytes());
        out.extend_from_slice(&(a.ids.len() as u32).to_le_bytes());
        put_string(&mut out, &a.name);
        for id in &a.ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    out
}

/// The sections to write, by feature bit, in ascending order.
pub(crate) fn sections(
    f: &Features,
    attrs: &[EventAttr],
    seen_times: Option<(u64, u64)>,
) -> Vec<(u32, Vec<u8>)> {
    let mut s = Vec::new();
    if let Some(td) = &f.tracing_data {
        s.push((feature::TRACING_DATA, td.clone()));
    }
    if !f.build_ids.is_empty() {
        s.push((feature::BUILD_ID, build_id_section(&f.build_ids)));
    }
    if let Some(v) = &f.hostname {
        s.push((feature::HOSTNAME, string_section(v)));
    }
    if let Some(v) = &f.os_release {
        s.push((feature::OSRELEASE, string_section(v)));
    }
    if let Some(v) = &f.version {
        s.push((feature::VERSION, string_section(v)));
    }
    if let Some(v) = &f.arch {
        s.push((feature::ARCH, string_section(v)));
    }
    if let Some((avail, online)) = f.nr_cpus {
        let mut b = avail.to_le_bytes().to_vec();
        b.extend_from_slice(&online.to_le_bytes());
        s.push((feature::NRCPUS, b));
    }
    if let Some(args) = &f.cmdline {
        let mut b = (args.len() as u32).to_le_bytes().to_vec();
        for a in args {
            put_string(&mut b, a);
        }
        s.push((feature::CMDLINE, b));
    }
    s.push((feature::EVENT_DESC, event_desc_section(attrs)));
    if let Some((first, last)) = f.sample_time.or(seen_times) {
        let mut b = first.to_le_bytes().to_vec();
        b.extend_from_slice(&last.to_le_bytes());
        s.push((feature::SAMPLE_TIME, b));
    }
    if let Some(res) = f.clockid_res_ns {
        s.push((feature::CLOCKID, res.to_le_bytes().to_vec()));
    }
    s
}
