//! Records and feature sections parsed as linux-perf-data parses them, without the panics and
//! the unbounded allocations it has on damaged input (found by scripts/fuzz).

use linux_perf_data::linux_perf_event_reader::{EventRecord, RawEventRecord, RecordType};
use linux_perf_data::{Endianness, Feature, PerfFile};

/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an MMAP2 record carries a build id instead of an inode.
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// Parses `raw`. An MMAP2 record whose build id claims more than 20 bytes is an error here:
/// linux-perf-event-reader asserts on it.
pub fn parse_record<'a>(raw: &RawEventRecord<'a>) -> Result<EventRecord<'a>, std::io::Error> {
    if raw.record_type == RecordType::MMAP2 && raw.misc & MISC_MMAP_BUILD_ID != 0 {
        // pid, tid (4 + 4), addr, len, pgoff (8 + 8 + 8), then the build id's size.
        let size = raw.data.get(32..33).map(|b| b.as_slice()[0]);
        if size.is_none_or(|s| s > 20) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "MMAP2 record with a build id longer than 20 bytes",
            ));
        }
    }
    raw.parse()
}

/// The CMDLINE feature, if it is whole: linux-perf-data reserves room for as many strings as
/// the section's count says, whatever the section's size (a damaged count asked for 500 GB).
pub fn cmdline(pf: &PerfFile) -> Option<Vec<String>> {
    let data = pf.feature_section_data(Feature::CMDLINE)?;
    let count = data.get(..4)?;
    let count = match pf.endian() {
        Endianness::LittleEndian => u32::from_le_bytes(count.try_into().ok()?),
        Endianness::BigEndian => u32::from_be_bytes(count.try_into().ok()?),
    } as usize;
    // Each string is at least its 4-byte length.
    if count > data.len() / 4 {
        return None;
    }
    let list = pf.cmdline().ok()??;
    Some(list.iter().map(|s| s.to_string()).collect())
}

/// A PERF_RECORD_KSYMBOL: a kernel symbol registered (or, with
/// [`crate::ksymbol::FLAG_UNREGISTER`], gone) at run time, such as a BPF program's JIT-ed code.
/// linux-perf-data passes these records through unparsed (`EventRecord::Raw`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KsymbolRecord {
    pub addr: u64,
    pub len: u32,
    /// [`crate::ksymbol::TYPE_BPF`] or [`crate::ksymbol::TYPE_OOL`].
    pub ksym_type: u16,
    pub flags: u16,
    /// `bpf_prog_<tag>_<name>` for BPF code, as kallsyms names it.
    pub name: String,
}

impl KsymbolRecord {
    /// Reads the body of a KSYMBOL record (after its header; a sample_id trailer may follow the
    /// name's padding). `None` if it is not one, or is cut short.
    pub fn parse(raw: &RawEventRecord) -> Option<KsymbolRecord> {
        if raw.record_type.0 != crate::record_type::KSYMBOL {
            return None;
        }
        let data = raw.data.as_slice();
        let (head, name) = (data.get(..16)?, &data[16..]);
        // Fixed-size fields, read in the file's byte order.
        let field = |at: usize, n: usize| {
            let b = &head[at..at + n];
            let fold = |v: u64, &x: &u8| (v << 8) | u64::from(x);
            match raw.parse_info.endian {
                Endianness::LittleEndian => b.iter().rev().fold(0, fold),
                Endianness::BigEndian => b.iter().fold(0, fold),
            }
        };
        let end = name.iter().position(|&c| c == 0)?;
        Some(KsymbolRecord {
            addr: field(0, 8),
            len: field(8, 4) as u32,
            ksym_type: field(12, 2) as u16,
            flags: field(14, 2) as u16,
            name: String::from_utf8_lossy(&name[..end]).into_owned(),
        })
    }
}
