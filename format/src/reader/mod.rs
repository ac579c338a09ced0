//! Reading perf.data: linux-perf-data, behind a scan that repairs what perf and cut copies leave.

mod event_name;
mod pages;
mod parse;
mod scan;
mod splice;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use linux_perf_data::{AttributeDescription, PerfFile, PerfFileRecord, PerfRecordIter};

pub use pages::{PageBudget, ScatteredReads, HUGE_PAGE};
pub use parse::{cmdline, parse_record, KsymbolRecord};
pub use scan::FileMode;
use scan::Walk;
use splice::{SpliceCursor, Storage};

use crate::Error;

/// The bytes of a reader's input (a memory map of the file, or what a pipe gave), shared,
/// with the page budget of the passes over them.
#[derive(Clone)]
pub struct InputBytes {
    storage: Arc<Storage>,
    pages: Arc<PageBudget>,
}

impl InputBytes {
    /// Where passes over these bytes say how far they went (see [`PageBudget`]).
    pub fn pages(&self) -> &PageBudget {
        &self.pages
    }
}

impl std::ops::Deref for InputBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.storage
    }
}

/// An open perf.data file (or pipe-mode stream), ready to iterate its records in time order.
///
/// ```no_run
/// # fn main() -> Result<(), format::Error> {
/// let mut reader = format::PerfFileReader::open("perf.data".as_ref())?;
/// for note in reader.notes() {
///     eprintln!("warning: {note}");
/// }
/// let mut samples = 0;
/// while let Some(record) = reader.next_record()? {
///     if let linux_perf_data::PerfFileRecord::EventRecord { record, .. } = record {
///         samples += (record.record_type.0 == 9) as u64;
///     }
/// }
/// # Ok(()) }
/// ```
pub struct PerfFileReader {
    path: PathBuf,
    mode: FileMode,
    perf_file: PerfFile,
    records: PerfRecordIter<SpliceCursor>,
    notes: Vec<String>,
    tracing_data: Option<Vec<u8>>,
    input_len: u64,
    records_range: std::ops::Range<u64>,
    record_counts: std::collections::BTreeMap<u32, u64>,
    storage: Arc<Storage>,
    pages: Arc<PageBudget>,
    /// Whether the records were walked as the file was opened (see [`PerfFileReader::open_unwalked`]).
    walked: bool,
}

/// Maps `file`. A recording still being written (by `record`, which finishes a round every
/// 20 ms and only then makes the header's data size cover it) may grow between the map and
/// the reading of its header: when the header's data section ends past the map and the file
/// is longer now, it is mapped again, so that a live reader sees every finished round rather
/// than a file "cut short".
fn map_whole_rounds(path: &Path, file: &File) -> Result<memmap2::Mmap, Error> {
    let mut tries = 0;
    loop {
        // SAFETY: the map is read-only; a file truncated under us would fault, as with any
        // mmap-based reader (perf's included). Recordings are not modified while analyzed;
        // record's writer only grows a file it is writing, and trims it at the end to no less
        // than what the header covered before.
        let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| Error::io(path, e))?;
        pages::ask_for_huge_pages(&map);
        let header = map.get(..crate::constants::FILE_HEADER_SIZE as usize);
        let declared_end = header
            .filter(|h| &h[..8] == b"PERFILE2" && h[8..16] == 104u64.to_le_bytes())
            .map(|h| {
                let at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap());
                at(40).saturating_add(at(48))
            });
        let grew = || file.metadata().is_ok_and(|m| m.len() > map.len() as u64);
        tries += 1;
        if tries == 3 || declared_end.is_none_or(|end| end <= map.len() as u64) || !grew() {
            return Ok(map);
        }
    }
}

impl PerfFileReader {
    /// Opens `path` through a memory map; `-` reads a pipe-mode stream from standard input.
    pub fn open(path: &Path) -> Result<Self, Error> {
        Self::open_with(path, Walk::Now)
    }

    /// Opens `path` as [`PerfFileReader::open`] does, but leaves the records unwalked where
    /// the header says they lie whole in the file, for a reader that walks
    /// [`PerfFileReader::record_bytes`] itself (checking each record's size as it goes): a
    /// million records took a tenth of a report to walk twice. Until the records are walked
    /// ([`PerfFileReader::walked`], or the first [`PerfFileReader::next_record`]), the notes
    /// and record counts say nothing of them (a damaged record, hardware traces).
    pub fn open_unwalked(path: &Path) -> Result<Self, Error> {
        Self::open_with(path, Walk::Later)
    }

    fn open_with(path: &Path, walk: Walk) -> Result<Self, Error> {
        let storage = if path.as_os_str() == "-" {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(path, e))?;
            Storage::Owned(bytes)
        } else {
            let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
            if meta.is_dir() {
                return Err(Error::IsDirectory { path: path.into() });
            }
            let file = File::open(path).map_err(|e| Error::io(path, e))?;
            if meta.len() == 0 {
                return Err(Error::Empty { path: path.into() });
            }
            Storage::Mapped(map_whole_rounds(path, &file)?)
        };
        Self::from_storage(path, Arc::new(storage), walk)
    }

    /// Reads perf.data held in memory (`name` is used in messages).
    pub fn from_bytes(name: &Path, bytes: Vec<u8>) -> Result<Self, Error> {
        Self::from_storage(name, Arc::new(Storage::Owned(bytes)), Walk::Now)
    }

    /// This reader with its records walked: their framing checked (a damaged or cut-short
    /// record ends them, with a note), counted by type.
    pub fn walked(self) -> Result<Self, Error> {
        if self.walked {
            return Ok(self);
        }
        self.opened_walked()
    }

    /// This reader's input opened again, its records walked.
    fn opened_walked(&self) -> Result<Self, Error> {
        Self::from_storage(&self.path, self.storage.clone(), Walk::Now)
    }

    /// Whether the records were walked (see [`PerfFileReader::open_unwalked`]).
    pub fn is_walked(&self) -> bool {
        self.walked
    }

    fn from_storage(path: &Path, storage: Arc<Storage>, walk: Walk) -> Result<Self, Error> {
        let scanned = scan::scan(path, &storage, &|| pages::give_back(&storage), walk)?;
        let input_len = storage.len() as u64;
        let cursor = SpliceCursor::new(storage.clone(), scanned.pieces);
        let parsed = match scanned.mode {
            FileMode::File => linux_perf_data::PerfFileReader::parse_file(cursor),
            FileMode::Pipe => linux_perf_data::PerfFileReader::parse_pipe(cursor),
        };
        let parsed = parsed.map_err(|cause| Error::Parse {
            path: path.into(),
            cause,
        })?;
        let tracing_data = scanned.tracing_data.or_else(|| {
            parsed
                .perf_file
                .feature_section_data(linux_perf_data::Feature::TRACING_DATA)
                .map(<[u8]>::to_vec)
        });
        Ok(PerfFileReader {
            path: path.into(),
            mode: scanned.mode,
            perf_file: parsed.perf_file,
            records: parsed.record_iter,
            notes: scanned.notes,
            tracing_data,
            input_len,
            records_range: scanned.records,
            record_counts: scanned.record_counts,
            pages: Arc::new(PageBudget::new(storage.clone())),
            storage,
            walked: scanned.walked,
        })
    }

    /// The next record in time order, or `None` at the end.
    pub fn next_record(&mut self) -> Result<Option<PerfFileRecord<'_>>, Error> {
        if !self.walked {
            *self = self.opened_walked()?;
        }
        let path = &self.path;
        self.records
            .next_record(&mut self.perf_file)
            .map_err(|cause| Error::Parse {
                path: path.clone(),
                cause,
            })
    }

    /// Header facts: attributes, features, endianness.
    pub fn perf_file(&self) -> &PerfFile {
        &self.perf_file
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn mode(&self) -> FileMode {
        self.mode
    }

    /// Size of the input in bytes.
    pub fn input_len(&self) -> u64 {
        self.input_len
    }

    /// Offsets of the first record and of the end of the last whole record (unwalked: of
    /// the data section the header declares).
    pub fn records_range(&self) -> std::ops::Range<u64> {
        self.records_range.clone()
    }

    /// In file mode, the records as they lie in the file, up to the last whole one, for a
    /// reader that walks them itself (in parallel, say). COMPRESSED records are left as they
    /// are: such a reader must handle them or use [`PerfFileReader::next_record`]. Unwalked
    /// (see [`PerfFileReader::open_unwalked`]): the data section the header declares, whose
    /// records the caller checks, turning to [`PerfFileReader::walked`] where one is damaged.
    pub fn record_bytes(&self) -> Option<&[u8]> {
        let r = &self.records_range;
        (self.mode == FileMode::File)
            .then(|| self.storage.get(r.start as usize..r.end as usize))
            .flatten()
    }

    /// The whole input, shared: what [`PerfFileReader::record_bytes`] borrows from, for data
    /// that must outlive the reader (stack copies, say) without being copied.
    pub fn input(&self) -> InputBytes {
        InputBytes {
            storage: self.storage.clone(),
            pages: self.pages.clone(),
        }
    }

    /// The records of the input by type, as they lie in it: FINISHED_ROUND and COMPRESSED
    /// records (which [`PerfFileReader::next_record`] consumes) counted, the records inside
    /// COMPRESSED ones not. Empty for big-endian files, and until the records are walked.
    pub fn record_counts(&self) -> &std::collections::BTreeMap<u32, u64> {
        &self.record_counts
    }

    /// What the reader had to repair (cut-short data, an interrupted recording): one sentence
    /// each; of the records themselves only once they are walked.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The TRACING_DATA blob, from the feature section or from a pipe-mode record.
    pub fn tracing_data(&self) -> Option<&[u8]> {
        self.tracing_data.as_deref()
    }

    /// The event's name: from EVENT_DESC when present, else made the way perf names events.
    pub fn event_name(&self, attr_index: usize) -> String {
        let attrs: &[AttributeDescription] = self.perf_file.event_attributes();
        match attrs.get(attr_index) {
            Some(desc) => match desc.name.as_deref() {
                Some(name) if !name.is_empty() => name.to_string(),
                _ => event_name::derive(&desc.attr, self.tracing_data()),
            },
            None => format!("event{attr_index}"),
        }
    }
}
