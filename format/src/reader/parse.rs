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
