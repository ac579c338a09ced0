//! `-z`: records packed into PERF_RECORD_COMPRESSED records of zstd frames, as `perf record -z`
//! writes them.
//!
//! Records are gathered up to [`CHUNK`] bytes and each chunk becomes one complete zstd frame in
//! one COMPRESSED record (a record's size is 16 bits, so a chunk's frame must fit in one). A
//! chunk may end inside a record: perf and linux-perf-data carry the rest over to the next
//! COMPRESSED record. Readers decompress one record into a buffer of the HEADER_COMPRESSED
//! feature's `mmap_len`, which is [`CHUNK`].

use crate::constants::RECORD_HEADER_SIZE;

/// Uncompressed bytes per COMPRESSED record. Its worst-case frame (zstd's compress bound,
/// CHUNK + CHUNK/256 + a few dozen bytes) plus the header fits in a 16-bit record size.
pub const CHUNK: usize = 60 * 1024;
/// PERF_RECORD_COMPRESSED.
const COMPRESSED: u32 = 81;
/// HEADER_COMPRESSED's compressor type for zstd.
const ZSTD: u32 = 1;

pub struct Compressor {
    cctx: zstd_safe::CCtx<'static>,
    level: i32,
    /// Encoded records not yet compressed.
    pending: Vec<u8>,
    frame: Vec<u8>,
    /// Totals, for the ratio perf shows.
    raw_bytes: u64,
    packed_bytes: u64,
}

impl Compressor {
    pub fn new(level: i32) -> Compressor {
        Compressor {
            cctx: zstd_safe::CCtx::create(),
            level,
            pending: Vec::with_capacity(CHUNK * 2),
            frame: Vec::with_capacity(zstd_safe::compress_bound(CHUNK)),
            raw_bytes: 0,
            packed_bytes: 0,
        }
    }

    /// Takes encoded records; returns whether a chunk is ready for [`Compressor::drain`].
    pub fn push(&mut self, records: &[u8]) -> bool {
        self.pending.extend_from_slice(records);
        self.pending.len() >= CHUNK
    }

    /// Compresses whole chunks (and with `all`, the rest) into COMPRESSED records appended
    /// to `out`.
    pub fn drain(&mut self, out: &mut Vec<u8>, all: bool) -> Result<(), String> {
        let mut done = 0;
        while self.pending.len() - done >= CHUNK || (all && done < self.pending.len()) {
            let end = (done + CHUNK).min(self.pending.len());
            let chunk = &self.pending[done..end];
            self.frame.clear();
            self.cctx
                .compress(&mut self.frame, chunk, self.level)
                .map_err(|code| format!("zstd: {}", zstd_safe::get_error_name(code)))?;
            let size = RECORD_HEADER_SIZE as usize + self.frame.len();
            let size = u16::try_from(size).map_err(|_| format!("zstd frame of {size} bytes"))?;
            out.extend_from_slice(&COMPRESSED.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&self.frame);
            self.raw_bytes += chunk.len() as u64;
            self.packed_bytes += size as u64;
            done = end;
        }
        self.pending.drain(..done);
        Ok(())
    }

    /// The HEADER_COMPRESSED feature: version, type, level, ratio, mmap_len (u32 each).
    pub fn feature_section(&self) -> Vec<u8> {
        let ratio = self.raw_bytes.checked_div(self.packed_bytes).unwrap_or(0) as u32;
        [0, ZSTD, self.level as u32, ratio, CHUNK as u32]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_become_frames_that_decompress_to_the_records() {
        let mut c = Compressor::new(1);
        let records: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut out = Vec::new();
        assert!(c.push(&records));
        c.drain(&mut out, true).unwrap();
        // Walk the COMPRESSED records and decompress them in a row.
        let (mut at, mut back) = (0, Vec::new());
        while at < out.len() {
            let kind = u32::from_le_bytes(out[at..at + 4].try_into().unwrap());
            let size = u16::from_le_bytes(out[at + 6..at + 8].try_into().unwrap()) as usize;
            assert_eq!(kind, COMPRESSED);
            let mut part = vec![0u8; CHUNK];
            let n = zstd_safe::decompress(&mut part[..], &out[at + 8..at + size]).unwrap();
            assert!(n <= CHUNK);
            back.extend_from_slice(&part[..n]);
            at += size;
        }
        assert_eq!(back, records);
        assert!(c.feature_section().len() == 20);
    }
}
