//! Writing perf.data through a growing memory map.
//!
//! The file is always readable: the header's data size is updated after each
//! [`PerfFileWriter::finish_round`], and the feature bitmap stays empty until
//! [`PerfFileWriter::finish`] writes the features. A writer killed at any moment leaves a file
//! that perf and [`crate::PerfFileReader`] open, holding every record up to the last round.
//!
//! Tracepoint events are the exception to "the header is final from the start": perf refuses a
//! file with a tracepoint attr but no TRACING_DATA (which only [`PerfFileWriter::finish`] writes),
//! so until then they stand in the header as software BPF_OUTPUT events, whose RAW data perf
//! shows as a hex dump. `finish` turns them into tracepoints once their formats are written.

mod attr;
mod compress;
mod features;
mod records;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub use attr::EventAttr;
use compress::Compressor;
pub use features::{BuildIdEntry, Features};
use records::Encoder;
pub use records::{Mmap2File, Sample, SampleId, SideBand, UserRegs};

use crate::constants::{
    attr_flag, event_type, sw_event, ATTR_SIZE, FILE_HEADER_SIZE, RECORD_HEADER_SIZE,
};
use crate::Error;

/// The map grows in steps of at least this many bytes.
const GROW_MIN: u64 = 4 << 20;
/// ...and at most this many, so a long recording does not reserve gigabytes at once.
const GROW_MAX: u64 = 256 << 20;
/// How far ahead of the writes the map's pages are faulted in.
const PREFAULT: usize = 1 << 20;

/// Kept free at the end of the file for the feature sections `finish` writes (and the LOST
/// records of what did not fit), so that a recording that filled its filesystem can still be
/// finished. On a filesystem with less room, halved down to [`FINISH_RESERVE_MIN`]: the
/// features of a recording are a few KiB (6 KiB with block I/O's formats).
const FINISH_RESERVE: u64 = 1 << 20;
const FINISH_RESERVE_MIN: u64 = 64 << 10;

/// Header offset of the attribute section.
const ATTRS_OFFSET: u64 = FILE_HEADER_SIZE;
/// One attribute section entry: the attr and the (offset, size) of its ids.
const ATTR_ENTRY: u64 = ATTR_SIZE + 16;

/// Writes a perf.data file: attributes first, then records in rounds, then features.
pub struct PerfFileWriter {
    path: PathBuf,
    file: File,
    map: memmap2::MmapMut,
    attrs: Vec<EventAttr>,
    data_offset: u64,
    /// End of the records written so far.
    len: u64,
    /// End of the records covered by the header (the last finished round).
    committed: u64,
    encoder: Encoder,
    times: Option<(u64, u64)>,
    records_in_round: u64,
    /// With `-z`: records go through it into COMPRESSED records.
    compressor: Option<Compressor>,
    /// Its output, before it goes into the map.
    packed: Vec<u8>,
    /// The filesystem is full: the records that did not fit, and every later one, are
    /// dropped (and counted in `dropped`).
    full: bool,
    /// Room kept for `finish` (see [`FINISH_RESERVE`]).
    finish_reserve: u64,
    /// Samples dropped for want of room, by attr index: `finish` writes a LOST record for
    /// each event that lost some.
    dropped: Vec<u64>,
    /// Pages of the map below this offset were given back (see [`PerfFileWriter::commit`]).
    released: usize,
    /// Pages of the map below this offset were faulted in ahead of the writes (see
    /// [`PerfFileWriter::prefault`]).
    populated: usize,
}

impl EventAttr {
    /// The attr as the header holds it until `finish`: tracepoints as software BPF_OUTPUT.
    fn before_finish(&self) -> EventAttr {
        let mut a = self.clone();
        if a.type_ == event_type::TRACEPOINT {
            a.type_ = event_type::SOFTWARE;
            a.config = sw_event::BPF_OUTPUT;
        }
        a
    }
}

impl PerfFileWriter {
    /// Creates `path` (mode 0600, replacing an existing file) and writes the header and
    /// attributes; the file appears at `path` only once they are in.
    pub fn create(path: &Path, attrs: Vec<EventAttr>) -> Result<Self, Error> {
        if attrs.is_empty() {
            return Err(Error::Write {
                path: path.into(),
                what: "no events to write".into(),
            });
        }
        let sid_all = attrs[0].flags & attr_flag::SAMPLE_ID_ALL;
        if attrs.len() > 1
            && attrs.iter().any(|a| {
                a.sample_type & crate::sample_type::IDENTIFIER == 0
                    || a.flags & attr_flag::SAMPLE_ID_ALL != sid_all
            })
        {
            return Err(Error::Write {
                path: path.into(),
                what: "with several events, each needs IDENTIFIER and the same sample_id_all"
                    .into(),
            });
        }
        // Written under a hidden name and renamed once it has its header: a writer killed
        // while creating it (before the header is in) leaves no file perf cannot open.
        // One left by a writer killed there is replaced; a new file, never one a link names.
        let partial = partial_path(path);
        let _ = std::fs::remove_file(&partial);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)
            .map_err(|e| Error::io(path, e))?;
        let w = Self::start(path, file, attrs).and_then(|w| {
            std::fs::rename(&partial, path).map_err(|e| Error::io(path, e))?;
            Ok(w)
        });
        if w.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        w
    }

    /// The header, attrs and an empty first round, written into the new `file`.
    fn start(path: &Path, file: File, attrs: Vec<EventAttr>) -> Result<Self, Error> {
        // Header | attrs (attr + ids section) | id arrays | data.
        let (attr_entry, attrs_offset) = (ATTR_ENTRY, ATTRS_OFFSET);
        let ids_offset = attrs_offset + attr_entry * attrs.len() as u64;
        let ids_total: u64 = attrs.iter().map(|a| a.ids.len() as u64 * 8).sum();
        let data_offset = (ids_offset + ids_total).div_ceil(8) * 8;

        let mut head = vec![0u8; data_offset as usize];
        let mut put = |off: u64, bytes: &[u8]| {
            head[off as usize..off as usize + bytes.len()].copy_from_slice(bytes)
        };
        put(0, b"PERFILE2");
        put(8, &FILE_HEADER_SIZE.to_le_bytes());
        put(16, &attr_entry.to_le_bytes());
        put(24, &attrs_offset.to_le_bytes());
        put(32, &(attr_entry * attrs.len() as u64).to_le_bytes());
        put(40, &data_offset.to_le_bytes());
        put(48, &0u64.to_le_bytes());
        let mut ids_at = ids_offset;
        for (i, a) in attrs.iter().enumerate() {
            let at = attrs_offset + attr_entry * i as u64;
            put(at, &a.before_finish().to_bytes());
            put(at + ATTR_SIZE, &ids_at.to_le_bytes());
            put(at + ATTR_SIZE + 8, &(a.ids.len() as u64 * 8).to_le_bytes());
            for id in &a.ids {
                put(ids_at, &id.to_le_bytes());
                ids_at += 8;
            }
        }

        let events = attrs.len();
        let mut w = PerfFileWriter {
            path: path.into(),
            map: memmap2::MmapMut::map_anon(0).map_err(|e| Error::io(path, e))?,
            file,
            attrs,
            data_offset,
            len: 0,
            committed: data_offset,
            encoder: Encoder::default(),
            times: None,
            records_in_round: 0,
            compressor: None,
            packed: Vec::new(),
            full: false,
            finish_reserve: FINISH_RESERVE,
            dropped: vec![0; events],
            released: 0,
            populated: 0,
        };
        // The data section starts with an empty round, covered by the header at once: a
        // writer killed before its first round leaves a file perf reads as empty, rather
        // than one whose data size 0 it refuses.
        w.encoder.finished_round();
        let round = std::mem::take(&mut w.encoder.buf);
        let first = data_offset + round.len() as u64;
        // Room for the features too; on a filesystem without it, the header and the empty
        // round alone: a file that holds what fit (nothing), full from the start.
        let full = match w.ensure_with_reserve(first) {
            Ok(()) => false,
            Err(Error::NoSpace { .. }) => {
                w.ensure(first)?;
                true
            }
            Err(e) => return Err(e),
        };
        w.map[..head.len()].copy_from_slice(&head);
        w.map[data_offset as usize..first as usize].copy_from_slice(&round);
        w.encoder.buf = round;
        w.encoder.buf.clear();
        w.len = first;
        w.commit();
        w.full = full;
        Ok(w)
    }

    /// Like [`PerfFileWriter::create`], with records compressed with zstd at `level` (1-22) into
    /// COMPRESSED records, as `perf record -z` writes them.
    pub fn create_compressed(
        path: &Path,
        attrs: Vec<EventAttr>,
        level: i32,
    ) -> Result<Self, Error> {
        if !(1..=22).contains(&level) {
            return Err(Error::Write {
                path: path.into(),
                what: format!("compression level {level}: zstd levels are 1 to 22"),
            });
        }
        let mut w = Self::create(path, attrs)?;
        w.compressor = Some(Compressor::new(level));
        Ok(w)
    }

    /// Grows the file and its map so that `need` bytes fit. The file's blocks are reserved
    /// first (fallocate): a page of a shared map that the filesystem cannot back is SIGBUS
    /// when touched, where a reservation fails with ENOSPC. When the usual step does not fit,
    /// half of it is tried, and so on down to just `need`: a nearly full filesystem still
    /// takes what fits on it (the first step, 4 MiB, is more than a small one has).
    fn ensure(&mut self, need: u64) -> Result<(), Error> {
        if need <= self.map.len() as u64 {
            return Ok(());
        }
        let cap = self.map.len() as u64;
        let step = cap.clamp(GROW_MIN, GROW_MAX).max(need - cap);
        let least = need.div_ceil(4096) * 4096;
        let mut wanted = (cap + step).div_ceil(4096) * 4096;
        let new_cap = loop {
            match self.reserve(cap, wanted) {
                Ok(()) => break wanted,
                Err(Error::NoSpace { .. }) if least < wanted => {
                    wanted = (cap + (wanted - cap) / 2).div_ceil(4096) * 4096;
                    wanted = wanted.max(least);
                }
                Err(e) => {
                    // Give back what a failed reservation may have taken.
                    let _ = self.file.set_len(cap);
                    return Err(e);
                }
            }
        };
        self.file
            .set_len(new_cap)
            .map_err(|e| Error::io(&self.path, e))?;
        // SAFETY: the file is ours (created and truncated above) and only this writer maps it.
        self.map = unsafe { memmap2::MmapMut::map_mut(&self.file) }
            .map_err(|e| Error::io(&self.path, e))?;
        self.populated = 0;
        Ok(())
    }

    /// [`PerfFileWriter::ensure`] for `need` bytes and the room `finish` needs; where that
    /// does not fit, with less room kept for `finish`, down to [`FINISH_RESERVE_MIN`].
    fn ensure_with_reserve(&mut self, need: u64) -> Result<(), Error> {
        loop {
            match self.ensure(need + self.finish_reserve) {
                Err(Error::NoSpace { .. }) if self.finish_reserve > FINISH_RESERVE_MIN => {
                    self.finish_reserve = (self.finish_reserve / 2).max(FINISH_RESERVE_MIN);
                }
                r => return r,
            }
        }
    }

    /// Faults in the map's pages up to `end` and [`PREFAULT`] beyond, in one call
    /// (MADV_POPULATE_WRITE) where a write would take a page fault per page: those faults
    /// were a fifth of record's CPU at 10 MB/s of records. Where the kernel cannot (before
    /// 5.14), the writes fault as before.
    fn prefault(&mut self, end: usize) {
        const PAGE: usize = 4096;
        if end <= self.populated {
            return;
        }
        let from = self.populated.max(self.len as usize / PAGE * PAGE);
        let to = end.saturating_add(PREFAULT).min(self.map.len());
        if to > from {
            let _ = self
                .map
                .advise_range(memmap2::Advice::PopulateWrite, from, to - from);
        }
        self.populated = to.max(end);
    }

    /// Reserves the file's blocks from `from` to `to`. Filesystems that cannot reserve are
    /// left to allocate as pages are written.
    fn reserve(&self, from: u64, to: u64) -> Result<(), Error> {
        use std::os::fd::AsRawFd;
        let (Ok(at), Ok(len)) = (i64::try_from(from), i64::try_from(to - from)) else {
            return Err(Error::NoSpace {
                path: self.path.clone(),
            });
        };
        // SAFETY: fallocate on our own open file descriptor.
        let r = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, at, len) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => Err(Error::NoSpace {
                path: self.path.clone(),
            }),
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => Ok(()),
            _ => Err(Error::io(&self.path, e)),
        }
    }

    /// Whether the filesystem filled: every record since the last finished round was dropped,
    /// and later ones are. [`PerfFileWriter::finish`] still writes a whole file.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Appends the encoded record: to the map, or to the compressor with `-z`. Whether it
    /// was kept (false: the filesystem is full).
    fn append_encoded(&mut self) -> Result<bool, Error> {
        if self.full {
            self.encoder.buf.clear();
            return Ok(false);
        }
        self.records_in_round += 1;
        let Some(c) = &mut self.compressor else {
            return self.append_to_map(false);
        };
        if c.push(&self.encoder.buf) {
            self.encoder.buf.clear();
            self.append_packed(false)?;
        }
        self.encoder.buf.clear();
        Ok(!self.full)
    }

    /// Copies the encoded bytes (or with `packed`, the compressor's output) to the map.
    fn append_to_map(&mut self, packed: bool) -> Result<bool, Error> {
        let buf = if packed {
            std::mem::take(&mut self.packed)
        } else {
            std::mem::take(&mut self.encoder.buf)
        };
        let n = buf.len() as u64;
        let r = if self.full {
            Ok(false)
        } else {
            match self.ensure_with_reserve(self.len + n) {
                Ok(()) => {
                    let at = self.len as usize;
                    self.prefault(at + n as usize);
                    self.map[at..at + n as usize].copy_from_slice(&buf);
                    self.len += n;
                    Ok(true)
                }
                Err(Error::NoSpace { .. }) => {
                    // Every whole record that fit stays: the header covers them now (a
                    // round cut short at the end of a file is one perf sorts as any).
                    self.full = true;
                    self.records_in_round = 0;
                    self.commit();
                    Ok(false)
                }
                Err(e) => Err(e),
            }
        };
        // Keep the buffers' capacity.
        let mut buf = buf;
        buf.clear();
        if packed {
            self.packed = buf;
        } else {
            self.encoder.buf = buf;
        }
        r
    }

    /// Compresses whole chunks (with `all`, everything pending) into the map.
    fn append_packed(&mut self, all: bool) -> Result<bool, Error> {
        let Some(c) = &mut self.compressor else {
            return Ok(true);
        };
        let mut packed = std::mem::take(&mut self.packed);
        let r = c.drain(&mut packed, all);
        self.packed = packed;
        r.map_err(|what| self.encoding_error(what))?;
        self.append_to_map(true)
    }

    fn attr(&self, attr_index: usize) -> Result<(&EventAttr, u64), Error> {
        let a = self.attrs.get(attr_index).ok_or_else(|| Error::Write {
            path: self.path.clone(),
            what: format!("no event with index {attr_index}"),
        })?;
        Ok((a, a.ids.first().copied().unwrap_or(0)))
    }

    fn encoding_error(&self, what: String) -> Error {
        Error::Write {
            path: self.path.clone(),
            what,
        }
    }

    /// Appends a SAMPLE of event `attr_index`.
    pub fn write_sample(&mut self, attr_index: usize, sample: &Sample) -> Result<(), Error> {
        let (attr, id) = self.attr(attr_index)?;
        let sample_type = attr.sample_type;
        if let Err(what) = self.encoder.sample(sample_type, id, sample) {
            self.encoder.buf.clear();
            return Err(self.encoding_error(what));
        }
        self.times = Some(match self.times {
            None => (sample.time, sample.time),
            Some((a, b)) => (a.min(sample.time), b.max(sample.time)),
        });
        if !self.append_encoded()? {
            self.dropped[attr_index] += 1;
        }
        Ok(())
    }

    /// Samples dropped so far for want of room, by attr index (see [`PerfFileWriter::is_full`]);
    /// `finish` counts them in LOST records.
    pub fn dropped_samples(&self) -> &[u64] {
        &self.dropped
    }

    /// Appends a non-sample record, with the sample_id trailer of event `attr_index`.
    pub fn write_side_band(
        &mut self,
        attr_index: usize,
        record: &SideBand,
        sample_id: &SampleId,
    ) -> Result<(), Error> {
        let (attr, id) = self.attr(attr_index)?;
        let (sample_type, sid_all) = (attr.sample_type, attr.flags & attr_flag::SAMPLE_ID_ALL != 0);
        if let Err(what) = self
            .encoder
            .side_band(sample_type, sid_all, id, record, sample_id)
        {
            self.encoder.buf.clear();
            return Err(self.encoding_error(what));
        }
        self.append_encoded().map(drop)
    }

    /// Appends a record that is already encoded (a kernel side-band record copied as it is).
    /// Its ids must belong to one of the attributes.
    pub fn write_raw(&mut self, record: &[u8]) -> Result<(), Error> {
        let size = record
            .get(6..8)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .unwrap_or(0);
        if size != record.len() || size < RECORD_HEADER_SIZE as usize || size % 8 != 0 {
            return Err(self.encoding_error(format!(
                "raw record of {} bytes has header size {size}; it must match and be 8-aligned",
                record.len()
            )));
        }
        self.encoder.buf.extend_from_slice(record);
        self.append_encoded().map(drop)
    }

    /// Ends a round: everything written so far may be sorted and flushed by readers, and is
    /// now covered by the header. Later records must not be older than this round's newest.
    pub fn finish_round(&mut self) -> Result<(), Error> {
        if self.records_in_round == 0 || self.full {
            return Ok(());
        }
        self.append_packed(true)?;
        // The round's end stays outside the compressed data, as perf writes it.
        self.encoder.finished_round();
        self.append_to_map(false)?;
        self.records_in_round = 0;
        self.commit();
        Ok(())
    }

    /// Makes the header's data size cover every record written so far, and gives back the
    /// map's pages of whole rounds: they are in the page cache, written back by the kernel;
    /// keeping them mapped made the recorder's resident size grow with the file (580 MiB
    /// for a 350 MB recording).
    fn commit(&mut self) {
        let size = self.len - self.data_offset;
        self.map[48..56].copy_from_slice(&size.to_le_bytes());
        self.committed = self.len;
        const PAGE: usize = 4096;
        const RELEASE_STEP: usize = 8 << 20;
        // The first page holds the header, rewritten at every commit.
        let from = self.released.max(PAGE);
        let to = self.committed as usize / PAGE * PAGE;
        if to >= from + RELEASE_STEP {
            // SAFETY: a shared file mapping: MADV_DONTNEED unmaps the pages, their contents
            // stay in the file (the page cache); no reference into that range is held.
            let _ = unsafe {
                self.map
                    .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
            };
            self.released = to;
        }
    }

    /// Bytes written so far (header, attributes and records).
    pub fn bytes_written(&self) -> u64 {
        self.len
    }

    /// The attributes the file was created with.
    pub fn attrs(&self) -> &[EventAttr] {
        &self.attrs
    }

    /// Writes a LOST record for each event that lost samples for want of room, in the room
    /// kept for `finish`, so that readers say what is missing (where not even that fits, the
    /// file holds what fit, uncounted).
    fn count_dropped(&mut self) -> Result<(), Error> {
        let time = self.times.map_or(0, |(_, last)| last);
        for i in 0..self.attrs.len() {
            let lost = self.dropped[i];
            if lost == 0 {
                continue;
            }
            let (attr, id) = self.attr(i)?;
            let (sample_type, sid_all) =
                (attr.sample_type, attr.flags & attr_flag::SAMPLE_ID_ALL != 0);
            let sid = SampleId {
                pid: u32::MAX,
                tid: u32::MAX,
                time,
                cpu: 0,
            };
            let record = SideBand::Lost { id, lost };
            if let Err(what) = self
                .encoder
                .side_band(sample_type, sid_all, id, &record, &sid)
            {
                self.encoder.buf.clear();
                return Err(self.encoding_error(what));
            }
            let buf = std::mem::take(&mut self.encoder.buf);
            let (at, n) = (self.len as usize, buf.len());
            if self.ensure(self.len + n as u64).is_ok() {
                self.map[at..at + n].copy_from_slice(&buf);
                self.len += n as u64;
            }
            self.encoder.buf = buf;
            self.encoder.buf.clear();
        }
        Ok(())
    }

    /// Finishes the last round, writes the feature sections and trims the file to its size.
    /// Returns the file size. When the filesystem has no room left for the features, the file
    /// is left without them (still whole: perf opens it) and the error is
    /// [`Error::NoSpace`].
    pub fn finish(mut self, features: &Features) -> Result<u64, Error> {
        self.finish_round()?;
        self.count_dropped()?;
        self.commit();
        let attrs: Vec<EventAttr> = if features.tracing_data.is_some() {
            self.attrs.clone()
        } else {
            self.attrs.iter().map(EventAttr::before_finish).collect()
        };
        let mut sections = features::sections(features, &attrs, self.times);
        if let Some(c) = &self.compressor {
            sections.push((crate::constants::feature::COMPRESSED, c.feature_section()));
            sections.sort_by_key(|(bit, _)| *bit);
        }
        let table_len = sections.len() as u64 * 16;
        let mut table = Vec::with_capacity(table_len as usize);
        let mut body = Vec::new();
        let mut bitmap = [0u8; 32];
        let mut at = self.len + table_len;
        for (bit, bytes) in &sections {
            bitmap[*bit as usize / 8] |= 1 << (bit % 8);
            table.extend_from_slice(&at.to_le_bytes());
            table.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            body.extend_from_slice(bytes);
            at += bytes.len() as u64;
        }
        let end = self.len + table.len() as u64 + body.len() as u64;
        if let Err(e) = self.ensure(end) {
            // No room for the features (a filesystem full from the start): the file stays
            // as its header says, every round that fit and no features, which perf opens.
            drop(self.map);
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        let l = self.len as usize;
        self.map[l..l + table.len()].copy_from_slice(&table);
        self.map[l + table.len()..end as usize].copy_from_slice(&body);
        self.map[72..104].copy_from_slice(&bitmap);
        if features.tracing_data.is_some() {
            // The tracepoints' formats are in: the stand-ins become tracepoints again.
            for (i, a) in self.attrs.iter().enumerate() {
                if a.type_ == event_type::TRACEPOINT {
                    let at = (ATTRS_OFFSET + ATTR_ENTRY * i as u64) as usize;
                    self.map[at..at + ATTR_SIZE as usize].copy_from_slice(&a.to_bytes());
                }
            }
        }
        // No msync: the shared mapping is the page cache, which readers see; waiting for the
        // disk (as perf does not) would add seconds to a large recording's finish.
        drop(self.map);
        self.file
            .set_len(end)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(end)
    }
}

/// Where a file is written until it has its header: `.NAME.partial` beside it.
fn partial_path(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(
        || std::ffi::OsString::from("perf.data"),
        |n| n.to_os_string(),
    );
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    hidden.push(".partial");
    path.with_file_name(hidden)
}
