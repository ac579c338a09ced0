//! `--aggregate` of traced events, and `--hist`: what record changes in each written event so
//! that its samples can stand for many events counted in the kernel. Its format gains two
//! u64 fields after the fixed ones: `bpfperf_count` ([`format::events::COUNT_FIELD`]), the
//! events the sample stands for, and `bpfperf_alone` ([`format::events::ALONE_FIELD`]), why
//! an event was written alone ([`Alone`]). A sample made of counts holds a payload of zeros
//! but for its header, the count and, with a histogram of a field, the bucket's lower bound
//! in that field; an event written alone gets the fields too (count 1), its dynamic data
//! moved 16 bytes further.

use bpf::TraceHist;
use format::{FieldKind, TraceFormat};

use super::request::Traced;

/// `--hist latency`: the histogram of a pair's latency (as analyze hist names it).
pub const LATENCY: &str = "latency";

/// Bytes the two fields add.
const ADDED: usize = 16;

/// Why an event was written alone (`bpfperf_alone`; 0: counted in the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Alone {
    /// Its user stack was copied for analyze to unwind (DWARF mode, no tables in the kernel
    /// yet): a copy cannot be counted.
    StackCopy = 1,
    /// The kernel's maps had no room for it.
    NoRoom = 2,
}

/// How the samples of one aggregated event are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    /// Where the count lies in the payload: right after the fixed fields.
    pub count_at: usize,
    /// The `__data_loc` (false) and `__rel_loc` (true) fields: (offset, relative).
    pub data_locs: Vec<(usize, bool)>,
    /// With a histogram of a field: its offset, size and signedness.
    pub hist_field: Option<(usize, usize, bool)>,
    /// The payload's common_type.
    pub id: u16,
}

/// Prepares `traced` for counting in the kernel: each written event's format gains the count
/// field, and with `hist` (a field's name, or `latency`) the events that have it are counted
/// per power-of-two bucket of it. Returns each event's layout (None: not written). An error
/// if no event has the field `hist` names.
pub fn prepare(traced: &mut [Traced], hist: Option<&str>) -> anyhow::Result<Vec<Option<Counted>>> {
    let mut out = Vec::with_capacity(traced.len());
    let mut histograms = 0;
    let mut seen = Vec::new();
    for t in traced.iter_mut() {
        if !t.written {
            out.push(None);
            continue;
        }
        let text = String::from_utf8_lossy(&t.format_text).into_owned();
        let f = TraceFormat::parse(&text)
            .map_err(|e| anyhow::anyhow!("{}: its format: {e}", t.name))?;
        let end = f
            .fields
            .iter()
            .map(|f| f.offset + f.size)
            .max()
            .unwrap_or(8);
        // Right after the fixed fields, where the dynamic data begins: unaligned maybe (perf
        // and analyze read fields at any offset), but nothing of the payload in between.
        let count_at = end;
        let mut c = Counted {
            count_at,
            data_locs: f
                .fields
                .iter()
                .filter_map(|f| match f.kind {
                    FieldKind::DataLoc => Some((f.offset, false)),
                    FieldKind::RelLoc => Some((f.offset, true)),
                    _ => None,
                })
                .collect(),
            hist_field: None,
            id: t.id as u16,
        };
        match hist {
            Some(LATENCY) if t.latency => {
                t.bpf.hist = Some(TraceHist::Latency);
                histograms += 1;
            }
            Some(name) => {
                let field = f.fields.iter().find(|x| {
                    x.name == name && x.kind == FieldKind::Int && matches!(x.size, 1 | 2 | 4 | 8)
                });
                if let Some(x) = field {
                    t.bpf.hist = Some(TraceHist::Field {
                        offset: x.offset as u32,
                        size: x.size as u32,
                        signed: x.signed,
                    });
                    c.hist_field = Some((x.offset, x.size, x.signed));
                    histograms += 1;
                } else {
                    let names: Vec<&str> = f
                        .fields
                        .iter()
                        .filter(|x| x.kind == FieldKind::Int && !x.name.starts_with("common_"))
                        .map(|x| x.name.as_str())
                        .collect();
                    seen.push(format!("{}: {}", t.name, names.join(", ")));
                }
            }
            None => {}
        }
        t.format_text = with_count_field(&text, count_at).into_bytes();
        out.push(Some(c));
    }
    if let (Some(name), 0) = (hist, histograms) {
        anyhow::bail!(
            "--hist {name}: no traced event has a numeric field {name}{} (their fields: {})",
            if name == LATENCY {
                " or is a latency (--latency, uretprobe:)"
            } else {
                ""
            },
            seen.join("; ")
        );
    }
    Ok(out)
}

/// The format text with the count field's line after the last field's.
fn with_count_field(text: &str, offset: usize) -> String {
    let line = format!(
        "\tfield:u64 {};\toffset:{offset};\tsize:8;\tsigned:0;\n\tfield:u64 {};\toffset:{};\tsize:8;\tsigned:0;\n",
        format::events::COUNT_FIELD,
        format::events::ALONE_FIELD,
        offset + 8
    );
    let mut out = String::with_capacity(text.len() + line.len());
    let mut rest = text;
    let mut at = 0;
    let mut last = None;
    for l in text.split_inclusive('\n') {
        at += l.len();
        if l.trim_start().starts_with("field:") {
            last = Some(at);
        }
    }
    if let Some(at) = last {
        out.push_str(&text[..at]);
        rest = &text[at..];
    }
    out.push_str(&line);
    out.push_str(rest);
    out
}

impl Counted {
    /// The payload of a sample standing for `count` events of thread `tid` in `bucket` (see
    /// [`bpf::AggregatedEvents::bucket`]).
    pub fn payload(&self, tid: u32, count: u64, bucket: u32) -> Vec<u8> {
        // One NUL byte after the fields: what every __data_loc field points at (an empty
        // string; with offset and length 0 perf prints what lies at the record's start).
        let nul = self.count_at + ADDED;
        let mut raw = vec![0u8; nul + usize::from(!self.data_locs.is_empty())];
        for &(off, relative) in &self.data_locs {
            let start = if relative { nul - (off + 4) } else { nul };
            if let Some(field) = raw.get_mut(off..off + 4) {
                field.copy_from_slice(&((start as u32 & 0xffff) | 1 << 16).to_le_bytes());
            }
        }
        raw[..2].copy_from_slice(&self.id.to_le_bytes());
        raw[4..8].copy_from_slice(&tid.to_le_bytes());
        raw[self.count_at..self.count_at + 8].copy_from_slice(&count.to_le_bytes());
        if let Some((off, size, signed)) = self.hist_field {
            let low: i64 = match bucket {
                0 if signed => -1,
                0 | 1 => 0,
                b => 1i64.wrapping_shl(b - 2),
            };
            if let Some(field) = raw.get_mut(off..off + size) {
                field.copy_from_slice(&low.to_le_bytes()[..size]);
            }
        }
        raw
    }

    /// The payload of an event written alone: the two fields (count 1, `why`) inserted after
    /// the fixed fields, the dynamic data after them, the fields that point at it moved on.
    pub fn alone(&self, raw: &[u8], why: Alone) -> Vec<u8> {
        let at = self.count_at;
        let mut out = Vec::with_capacity(raw.len().max(at) + ADDED);
        out.extend_from_slice(&raw[..raw.len().min(at)]);
        out.resize(at, 0);
        out.extend_from_slice(&1u64.to_le_bytes());
        out.extend_from_slice(&(why as u64).to_le_bytes());
        out.extend_from_slice(raw.get(at..).unwrap_or(&[]));
        for &(off, relative) in &self.data_locs {
            let Some(b) = out.get(off..off + 4) else {
                continue;
            };
            let loc = u32::from_le_bytes(b.try_into().expect("4 bytes"));
            let start = (loc & 0xffff) as usize + if relative { off + 4 } else { 0 };
            if start >= at && loc >> 16 != 0 {
                let moved = ((loc & 0xffff) + ADDED as u32) & 0xffff | (loc & 0xffff_0000);
                out[off..off + 4].copy_from_slice(&moved.to_le_bytes());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXIT_READ: &str = "name: sys_exit_read\nID: 700\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n\nprint fmt: \"0x%lx\", REC->ret\n";

    /// The count field goes after the last field, readable by the format parser, and a
    /// sample's payload holds the count and the bucket's lower bound.
    #[test]
    fn count_field_and_payloads() {
        let text = with_count_field(EXIT_READ, 24);
        let f = TraceFormat::parse(&text).unwrap();
        let c = f.fields.iter().find(|f| f.name == "bpfperf_count").unwrap();
        assert_eq!((c.offset, c.size, c.signed), (24, 8, false));
        assert!(text.ends_with("\nprint fmt: \"0x%lx\", REC->ret\n"));
        let counted = Counted {
            count_at: 24,
            data_locs: vec![],
            hist_field: Some((16, 8, true)),
            id: 700,
        };
        let raw = counted.payload(42, 1000, 9);
        assert_eq!(raw.len(), 40);
        let field = |n: &str| f.fields.iter().find(|f| f.name == n).unwrap().value(&raw);
        assert_eq!(field("ret"), Some(format::Value::Signed(128)));
        assert_eq!(field("bpfperf_count"), Some(format::Value::Unsigned(1000)));
        assert_eq!(field("common_pid"), Some(format::Value::Signed(42)));
        let neg = counted.payload(42, 3, 0);
        assert_eq!(
            f.fields
                .iter()
                .find(|f| f.name == "ret")
                .unwrap()
                .value(&neg),
            Some(format::Value::Signed(-1))
        );
    }

    /// An event written alone keeps its dynamic data readable after the count.
    #[test]
    fn alone_moves_dynamic_data() {
        let counted = Counted {
            count_at: 12,
            data_locs: vec![(8, false)],
            hist_field: None,
            id: 1,
        };
        let mut raw = vec![0u8; 12];
        raw[8..12].copy_from_slice(&(12u32 | 3 << 16).to_le_bytes());
        raw.extend_from_slice(b"ab\0");
        // A counted sample's strings are empty, not what lies at the record's start.
        let counted_raw = counted.payload(7, 5, 0);
        let loc = u32::from_le_bytes(counted_raw[8..12].try_into().unwrap());
        assert_eq!(((loc & 0xffff) as usize, loc >> 16), (28, 1));
        assert_eq!(counted_raw[28], 0);
        let out = counted.alone(&raw, Alone::NoRoom);
        assert_eq!(&out[12..20], &1u64.to_le_bytes());
        assert_eq!(&out[20..28], &2u64.to_le_bytes());
        let loc = u32::from_le_bytes(out[8..12].try_into().unwrap());
        assert_eq!(loc & 0xffff, 28);
        assert_eq!(&out[28..31], b"ab\0");
    }
}
