//! Checks the framing of a perf.data file before it is parsed, and repairs what can be repaired.
//!
//! linux-perf-data trusts the header. Files met in practice break that trust: perf killed while
//! recording leaves `data.size = 0`, a copy cut short ends in the middle of a record, pipe-mode
//! streams carry tracing data that the record sizes do not cover. This module walks the record
//! headers (not their bodies, so it costs little) and builds a view that linux-perf-data can read
//! from start to end, plus notes that say what was repaired.

use std::collections::BTreeMap;
use std::path::Path;

use super::splice::Piece;
use crate::constants::{record_type, FILE_HEADER_SIZE, PIPE_HEADER_SIZE, RECORD_HEADER_SIZE};
use crate::Error;

/// How the input is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// A seekable file with a header, attributes, a data section and feature sections.
    File,
    /// A stream as `perf record -o -` writes it: attributes and features arrive as records.
    Pipe,
}

/// What the scan found: the pieces of the repaired view and what it had to repair.
pub(crate) struct Scanned {
    pub mode: FileMode,
    pub pieces: Vec<Piece>,
    pub notes: Vec<String>,
    /// Pipe-mode tracing data (in file mode it is a feature section).
    pub tracing_data: Option<Vec<u8>>,
    /// Where the records start and end in the input (end is after the last whole record).
    pub records: std::ops::Range<u64>,
    /// The records walked, by type (those inside COMPRESSED records are not walked).
    pub record_counts: BTreeMap<u32, u64>,
    /// Whether the records were walked: `false` where [`Walk::Later`] left a data section
    /// the header says lies whole in the file unwalked (no notes or counts of its records).
    pub walked: bool,
}

/// When a file's records are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// As the file is opened.
    Now,
    /// Not at all where the header says the data section lies whole in the file: a reader
    /// that walks the records itself, checking them as it goes, need not pay for two walks
    /// (a million records took a tenth of a report).
    Later,
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(b[off..off + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

/// One step of the record walk.
enum Step {
    /// A whole record of this many bytes (tracing data included).
    Record { len: u64, kind: u32 },
    /// The walk stops here, for this reason.
    Stop(String),
}

/// Looks at the record starting at `off`, whose data may not go past `end`.
fn step(bytes: &[u8], off: u64, end: u64) -> Step {
    if off + RECORD_HEADER_SIZE > end {
        return Step::Stop(format!(
            "{} bytes at the end do not hold a whole record header",
            end - off
        ));
    }
    let o = off as usize;
    let kind = u32_at(bytes, o);
    let size = u16_at(bytes, o + 6) as u64;
    if size < RECORD_HEADER_SIZE {
        return Step::Stop(format!(
            "record of type {kind} has size {size}, less than its header"
        ));
    }
    let mut len = size;
    if kind == record_type::HEADER_TRACING_DATA {
        // Pipe mode: `size` covers the header and a u32 length; the tracing data follows,
        // padded to 8 bytes.
        if off + 12 > end {
            return Step::Stop("tracing data record cut short".into());
        }
        let data_len = u32_at(bytes, o + 8) as u64;
        len = size + data_len.div_ceil(8) * 8;
    } else if kind == record_type::AUXTRACE {
        // `size` covers the record; the trace bytes follow, as many as its first field says.
        if off + 16 > end {
            return Step::Stop("AUXTRACE record cut short".into());
        }
        let trace_len = u64_at(bytes, o + 8);
        len = match size.checked_add(trace_len) {
            Some(len) => len,
            None => {
                return Step::Stop(format!(
                    "AUXTRACE record says {trace_len} bytes of trace follow it"
                ))
            }
        };
    }
    if off.checked_add(len).is_none_or(|e| e > end) {
        return Step::Stop(format!(
            "record of type {kind} needs {len} bytes, only {} remain",
            end - off
        ));
    }
    Step::Record { len, kind }
}

/// The records the walk met, by type, and the bytes of hardware trace among them (AUXTRACE
/// records, which are skipped, not decoded).
struct Tally<'a> {
    /// Counts of the types below [`Tally::LISTED`] (the kernel's and perf's), by type.
    listed: [u64; Tally::LISTED],
    /// Counts of the other types.
    others: BTreeMap<u32, u64>,
    trace_bytes: u64,
    /// Bytes walked since the input's pages were last given back (see [`super::pages`]).
    walked: u64,
    give_back: &'a dyn Fn(),
}

impl<'a> Tally<'a> {
    /// Types counted in an array: a million records counted in a map took a third of the walk.
    const LISTED: usize = 128;

    fn new(give_back: &'a dyn Fn()) -> Self {
        Tally {
            listed: [0; Tally::LISTED],
            others: BTreeMap::new(),
            trace_bytes: 0,
            walked: 0,
            give_back,
        }
    }

    fn count(&mut self, kind: u32, len: u64) {
        match self.listed.get_mut(kind as usize) {
            Some(n) => *n += 1,
            None => *self.others.entry(kind).or_insert(0) += 1,
        }
        if kind == record_type::AUXTRACE {
            self.trace_bytes += len;
        }
        self.walked += len;
        if self.walked >= super::pages::BUDGET {
            (self.give_back)();
            self.walked = 0;
        }
    }

    /// The records counted, by type.
    fn by_type(&self) -> BTreeMap<u32, u64> {
        let listed = (0..Tally::LISTED as u32).zip(self.listed);
        let mut all = self.others.clone();
        all.extend(listed.filter(|&(_, n)| n > 0));
        all
    }

    /// What to say of the hardware traces, once per file.
    fn note(&self) -> Option<String> {
        let records = self.listed[record_type::AUXTRACE as usize];
        if records == 0 {
            return None;
        }
        Some(format!(
            "{records} AUXTRACE records ({} bytes) hold hardware traces (Intel PT, CoreSight) that are not decoded; every sample is read",
            self.trace_bytes
        ))
    }
}

/// Checks and repairs the input's framing, walking the records now or, where `walk` allows
/// and the header says they lie whole, not (see [`Walk`]); `give_back` is called as the walk
/// goes through the records, to give the pages it touched back (see [`super::pages`]).
pub(crate) fn scan(
    path: &Path,
    bytes: &[u8],
    give_back: &dyn Fn(),
    walk: Walk,
) -> Result<Scanned, Error> {
    let file_len = bytes.len() as u64;
    if bytes.is_empty() {
        return Err(Error::Empty { path: path.into() });
    }
    if bytes.len() < 16 {
        return Err(Error::damaged(
            path,
            0,
            format!("file has {file_len} bytes, too few for a perf.data header"),
        ));
    }
    let magic = &bytes[..8];
    let (big_endian, version1) = match magic {
        b"PERFILE2" => (false, false),
        b"2ELIFREP" => (true, false),
        b"PERFFILE" => {
            check_version1_little_endian(path, bytes)?;
            (false, true)
        }
        _ => {
            return Err(Error::BadMagic {
                path: path.into(),
                found: String::from_utf8_lossy(magic).into_owned(),
            })
        }
    };
    let header_size = if big_endian {
        u64::from_be_bytes(bytes[8..16].try_into().unwrap())
    } else {
        u64_at(bytes, 8)
    };
    let mode = match header_size {
        PIPE_HEADER_SIZE => FileMode::Pipe,
        FILE_HEADER_SIZE => FileMode::File,
        VERSION1_SHORT_HEADER_SIZE if version1 => FileMode::File,
        other => {
            return Err(Error::damaged(
                path,
                8,
                format!("header size is {other}, expected 104 (file) or 16 (pipe)"),
            ))
        }
    };
    if big_endian {
        // Big-endian files are rare (perf on s390x, ppc64); hand them over unrepaired.
        return Ok(Scanned {
            mode,
            pieces: vec![Piece::Stored(0..bytes.len())],
            notes: vec![],
            tracing_data: None,
            records: header_size..file_len,
            record_counts: BTreeMap::new(),
            walked: true,
        });
    }
    let mut scanned = match mode {
        FileMode::Pipe => scan_pipe(bytes, give_back),
        FileMode::File => scan_file(path, bytes, header_size, give_back, walk)?,
    };
    if version1 {
        // The view's header is rebuilt or copied first: give it the current magic.
        match scanned.pieces.first_mut() {
            Some(Piece::Owned(header)) => header[..8].copy_from_slice(b"PERFILE2"),
            _ => unreachable!("the scans put the header in an owned piece first"),
        }
        scanned
            .notes
            .push("written by an early perf (PERFFILE, version 1 of the format)".into());
    }
    Ok(scanned)
}

/// The header of version 1 files from 2009-2010 perf: no feature bitmap.
const VERSION1_SHORT_HEADER_SIZE: u64 = 72;

/// Checks that a version 1 (`PERFFILE`) file is little-endian, the only kind read here. Its
/// magic does not tell; perf tells by the attribute size, which must be one of the attr ABI
/// sizes (VER0..VER4) plus the 16-byte id section, in one byte order or the other (pipe mode:
/// the 16-byte header size).
fn check_version1_little_endian(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    const ATTR_SIZES: [u64; 5] = [80, 88, 96, 112, 120];
    let matches = |big: bool| {
        let word = |off: usize| {
            let v = u64_at(bytes, off);
            if big {
                v.swap_bytes()
            } else {
                v
            }
        };
        word(8) == PIPE_HEADER_SIZE || (bytes.len() >= 24 && ATTR_SIZES.contains(&word(16)))
    };
    if matches(false) {
        Ok(())
    } else if matches(true) {
        Err(Error::damaged(
            path,
            0,
            "a big-endian PERFFILE (version 1) file: not supported",
        ))
    } else {
        Err(Error::damaged(
            path,
            16,
            "a PERFFILE (version 1) file whose attribute size is none of perf's (80, 88, 96, 112, 120)",
        ))
    }
}

fn scan_pipe(bytes: &[u8], give_back: &dyn Fn()) -> Scanned {
    let end = bytes.len() as u64;
    let mut notes = Vec::new();
    let mut pieces = vec![Piece::Owned(bytes[..PIPE_HEADER_SIZE as usize].to_vec())];
    let mut tracing_data = None;
    let mut piece_start = PIPE_HEADER_SIZE;
    let mut off = PIPE_HEADER_SIZE;
    let mut tally = Tally::new(give_back);
    while off < end {
        match step(bytes, off, end) {
            Step::Record { len, kind } => {
                tally.count(kind, len);
                if kind == record_type::HEADER_TRACING_DATA {
                    let o = off as usize;
                    let data_len = u32_at(bytes, o + 8) as usize;
                    let body = o + u16_at(bytes, o + 6) as usize;
                    tracing_data = Some(bytes[body..body + data_len].to_vec());
                    pieces.push(Piece::Stored(piece_start as usize..off as usize));
                    piece_start = off + len;
                }
                off += len;
            }
            Step::Stop(why) => {
                notes.push(format!(
                    "stream cut short at offset {off}: {why}; everything before it is read"
                ));
                break;
            }
        }
    }
    pieces.push(Piece::Stored(piece_start as usize..off as usize));
    pieces.retain(|p| !matches!(p, Piece::Stored(r) if r.is_empty()));
    notes.extend(tally.note());
    Scanned {
        mode: FileMode::Pipe,
        pieces,
        notes,
        tracing_data,
        records: PIPE_HEADER_SIZE..off,
        record_counts: tally.by_type(),
        walked: true,
    }
}

/// `header_size` is 104, or 72 for the early version 1 files without a feature bitmap.
fn scan_file(
    path: &Path,
    bytes: &[u8],
    header_size: u64,
    give_back: &dyn Fn(),
    walk: Walk,
) -> Result<Scanned, Error> {
    let file_len = bytes.len() as u64;
    if file_len < header_size {
        return Err(Error::damaged(
            path,
            0,
            format!("file has {file_len} bytes, the perf.data header needs {header_size} (file cut short?)"),
        ));
    }
    let attr_size = u64_at(bytes, 16);
    let (attrs_off, attrs_size) = (u64_at(bytes, 24), u64_at(bytes, 32));
    let (data_off, data_size) = (u64_at(bytes, 40), u64_at(bytes, 48));
    let past_end = |off: u64, size: u64| off.checked_add(size).is_none_or(|e| e > file_len);

    if !(16 + 64..=4096).contains(&attr_size) {
        return Err(Error::damaged(
            path,
            16,
            format!("attribute size {attr_size} is not plausible"),
        ));
    }
    if attrs_size == 0 {
        return Err(Error::damaged(
            path,
            32,
            "no events: the header lists none (perf record stopped before it wrote its header?)"
                .to_string(),
        ));
    }
    if attrs_size % attr_size != 0 {
        return Err(Error::damaged(
            path,
            32,
            format!("attribute section size {attrs_size} is not a multiple of the attribute size {attr_size}"),
        ));
    }
    if past_end(attrs_off, attrs_size) {
        return Err(Error::damaged(
            path,
            24,
            format!("attribute section (offset {attrs_off}, {attrs_size} bytes) ends past the end of the file ({file_len} bytes)"),
        ));
    }
    for i in 0..attrs_size / attr_size {
        let ids_at = attrs_off + (i + 1) * attr_size - 16;
        let (ids_off, ids_size) = (
            u64_at(bytes, ids_at as usize),
            u64_at(bytes, ids_at as usize + 8),
        );
        if past_end(ids_off, ids_size) {
            return Err(Error::damaged(
                path,
                ids_at,
                format!("id list of attribute {i} (offset {ids_off}, {ids_size} bytes) ends past the end of the file"),
            ));
        }
    }
    if data_off < header_size || data_off > file_len {
        return Err(Error::damaged(
            path,
            40,
            format!("data section offset {data_off} lies outside the file ({file_len} bytes)"),
        ));
    }

    let mut notes = Vec::new();
    let mut keep_features = header_size == FILE_HEADER_SIZE;
    let declared_end = data_off.saturating_add(data_size);
    let mut end = declared_end;
    if data_size == 0 {
        end = file_len;
        keep_features = false;
        if file_len > data_off {
            notes.push(format!(
                "header says the data section is empty (the recording was interrupted?): read the {} bytes after offset {data_off} instead",
                file_len - data_off
            ));
        }
    } else if declared_end > file_len {
        end = file_len;
        keep_features = false;
        notes.push(format!(
            "file cut short: the data section should end at offset {declared_end}, the file ends at {file_len}"
        ));
    }

    let mut off = data_off;
    let mut tally = Tally::new(give_back);
    let walked = walk == Walk::Now || data_size == 0 || declared_end > file_len;
    if !walked {
        off = end;
    }
    while off < end {
        match step(bytes, off, end) {
            Step::Record { len, kind } => {
                tally.count(kind, len);
                off += len
            }
            Step::Stop(why) => {
                notes.push(format!(
                    "records end early at offset {off}: {why}; everything before it is read"
                ));
                keep_features = false;
                break;
            }
        }
    }

    notes.extend(tally.note());

    // The feature sections that survive, as (bit, range in the input).
    let mut kept: Vec<(u32, std::ops::Range<usize>)> = Vec::new();
    if keep_features {
        let bits: Vec<u32> = (0..256u32)
            .filter(|b| bytes[72 + (b / 8) as usize] & (1 << (b % 8)) != 0)
            .collect();
        let table = declared_end;
        if past_end(table, bits.len() as u64 * 16) {
            notes.push(format!("feature table at offset {table} ends past the end of the file: features (names, build ids, host facts) ignored"));
        } else {
            for (k, &bit) in bits.iter().enumerate() {
                let at = (table + k as u64 * 16) as usize;
                let (fo, fs) = (u64_at(bytes, at), u64_at(bytes, at + 8));
                if past_end(fo, fs) {
                    notes.push(format!("feature section {bit} (offset {fo}, {fs} bytes) ends past the end of the file: ignored"));
                } else if bit == EVENT_DESC_BIT
                    && !event_desc_is_whole(&bytes[fo as usize..(fo + fs) as usize])
                {
                    notes.push(format!("event descriptions (EVENT_DESC, offset {fo}) are damaged: events are named from the attribute section"));
                } else {
                    kept.push((bit, fo as usize..(fo + fs) as usize));
                }
            }
        }
    }
    if !kept.iter().any(|(bit, _)| *bit == EVENT_DESC_BIT) {
        // linux-perf-data takes event ids only from EVENT_DESC: without it, records of a
        // file with several events could not be told apart. Make one from the attr section.
        kept.push((EVENT_DESC_BIT, 0..0));
        kept.sort_by_key(|(bit, _)| *bit);
    }

    // The view: patched header, the records, then a fresh feature table and the sections. A
    // 72-byte header grows to 104 bytes: what follows it moves by `shift`.
    let data_end = off as usize;
    let shift = FILE_HEADER_SIZE - header_size;
    let mut header = bytes[..header_size as usize].to_vec();
    header.resize(FILE_HEADER_SIZE as usize, 0);
    header[8..16].copy_from_slice(&FILE_HEADER_SIZE.to_le_bytes());
    for (offset_at, size_at) in [(24, 32), (40, 48), (56, 64)] {
        if u64_at(&header, size_at) != 0 {
            let moved = u64_at(&header, offset_at) + shift;
            header[offset_at..offset_at + 8].copy_from_slice(&moved.to_le_bytes());
        }
    }
    header[48..56].copy_from_slice(&(off - data_off).to_le_bytes());
    let mut bitmap = [0u8; 32];
    for (bit, _) in &kept {
        bitmap[(bit / 8) as usize] |= 1 << (bit % 8);
    }
    header[72..104].copy_from_slice(&bitmap);
    let mut pieces = vec![
        Piece::Owned(header),
        Piece::Stored(header_size as usize..data_end),
    ];
    let mut table = Vec::new();
    let mut sections = Vec::new();
    let mut at = data_end as u64 + shift + kept.len() as u64 * 16;
    for (bit, range) in kept {
        let piece = if bit == EVENT_DESC_BIT && range.is_empty() {
            Piece::Owned(event_desc_from_attrs(
                bytes, attr_size, attrs_off, attrs_size,
            ))
        } else {
            Piece::Stored(range)
        };
        let len = match &piece {
            Piece::Owned(v) => v.len() as u64,
            Piece::Stored(r) => r.len() as u64,
        };
        table.extend_from_slice(&at.to_le_bytes());
        table.extend_from_slice(&len.to_le_bytes());
        at += len;
        sections.push(piece);
    }
    pieces.push(Piece::Owned(table));
    pieces.extend(sections);
    Ok(Scanned {
        mode: FileMode::File,
        pieces,
        notes,
        tracing_data: None,
        records: data_off..off,
        record_counts: tally.by_type(),
        walked,
    })
}

const EVENT_DESC_BIT: u32 = crate::constants::feature::EVENT_DESC;

/// Whether an EVENT_DESC section holds the events its count says (each: an attr, an id
/// count, a name, the ids), so that parsing it neither runs past it nor reserves room for
/// billions of events (linux-perf-data reserves the count first).
fn event_desc_is_whole(section: &[u8]) -> bool {
    const ATTR_SIZE_VER0: u64 = 64;
    let len = section.len() as u64;
    if len < 8 {
        return false;
    }
    let (nr, attr_size) = (u32_at(section, 0), u32_at(section, 4) as u64);
    if attr_size < ATTR_SIZE_VER0 {
        return false;
    }
    let mut off = 8u64;
    for _ in 0..nr {
        // Each event takes at least attr_size + 8 bytes: the loop ends within the section.
        off += attr_size;
        if off + 8 > len {
            return false;
        }
        let nr_ids = u32_at(section, off as usize) as u64;
        let name_len = u32_at(section, off as usize + 4) as u64;
        off += 8 + name_len + nr_ids * 8;
        if off > len {
            return false;
        }
    }
    true
}

/// An EVENT_DESC section built from the attr section: each attr, its ids, and an empty name
/// (the reader names such events the way perf does).
fn event_desc_from_attrs(bytes: &[u8], attr_size: u64, attrs_off: u64, attrs_size: u64) -> Vec<u8> {
    let count = attrs_size / attr_size;
    let attr_len = attr_size - 16;
    let mut out = Vec::new();
    out.extend_from_slice(&(count as u32).to_le_bytes());
    out.extend_from_slice(&(attr_len as u32).to_le_bytes());
    for i in 0..count {
        let at = (attrs_off + i * attr_size) as usize;
        let start = out.len();
        out.extend_from_slice(&bytes[at..at + attr_len as usize]);
        // The attr's own size: early perf left it 0 (perf reads that as VER0, 64 bytes); it
        // must not claim more than its slot.
        let size = u32_at(&out, start + 4);
        let size = if size == 0 {
            64
        } else {
            size.min(attr_len as u32)
        };
        out[start + 4..start + 8].copy_from_slice(&size.to_le_bytes());
        let ids_at = at + attr_len as usize;
        let (ids_off, ids_size) = (
            u64_at(bytes, ids_at) as usize,
            u64_at(bytes, ids_at + 8) as usize,
        );
        out.extend_from_slice(&((ids_size / 8) as u32).to_le_bytes());
        out.extend_from_slice(&4u32.to_le_bytes());
        out.extend_from_slice(&[0u8; 4]);
        out.extend_from_slice(&bytes[ids_off..ids_off + ids_size / 8 * 8]);
    }
    out
}
