//! A `Read + Seek` view made of pieces of a mapped file and a few owned byte strings.
//!
//! The reader uses it to hand linux-perf-data a repaired file without copying the data: a
//! patched header in front of the mapped records, a data section cut at the last whole record,
//! pipe-mode tracing data spliced out of the record stream.

use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::sync::Arc;

/// The bytes of the whole input: a memory map of a file, or bytes read from a pipe.
pub(crate) enum Storage {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Storage {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// One piece of the view.
#[derive(Debug, Clone)]
pub(crate) enum Piece {
    /// A range of the storage.
    Stored(Range<usize>),
    /// Bytes that replace part of the storage (a patched header).
    Owned(Vec<u8>),
}

impl Piece {
    fn len(&self) -> usize {
        match self {
            Piece::Stored(r) => r.len(),
            Piece::Owned(v) => v.len(),
        }
    }
}

/// The concatenation of `pieces`, readable and seekable.
pub(crate) struct SpliceCursor {
    storage: Arc<Storage>,
    pieces: Vec<Piece>,
    /// Start offset of each piece in the view.
    starts: Vec<u64>,
    len: u64,
    pos: u64,
}

impl SpliceCursor {
    pub(crate) fn new(storage: Arc<Storage>, pieces: Vec<Piece>) -> Self {
        let mut starts = Vec::with_capacity(pieces.len());
        let mut len = 0u64;
        for p in &pieces {
            starts.push(len);
            len += p.len() as u64;
        }
        SpliceCursor {
            storage,
            pieces,
            starts,
            len,
            pos: 0,
        }
    }

    /// The piece holding view offset `pos`, and the offset inside it.
    fn locate(&self, pos: u64) -> Option<(usize, usize)> {
        if pos >= self.len {
            return None;
        }
        let i = self.starts.partition_point(|&s| s <= pos) - 1;
        Some((i, (pos - self.starts[i]) as usize))
    }
}

impl Read for SpliceCursor {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some((i, inner)) = self.locate(self.pos) else {
            return Ok(0);
        };
        let bytes: &[u8] = match &self.pieces[i] {
            Piece::Stored(r) => &self.storage[r.clone()],
            Piece::Owned(v) => v,
        };
        let n = buf.len().min(bytes.len() - inner);
        buf[..n].copy_from_slice(&bytes[inner..inner + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for SpliceCursor {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let new = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = new.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad seek"))?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_pieces_and_seeks() {
        let storage = Arc::new(Storage::Owned(b"0123456789".to_vec()));
        let pieces = vec![
            Piece::Owned(b"ab".to_vec()),
            Piece::Stored(2..5),
            Piece::Stored(8..10),
        ];
        let mut c = SpliceCursor::new(storage, pieces);
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        assert_eq!(all, b"ab23489");
        c.seek(SeekFrom::Start(3)).unwrap();
        let mut two = [0u8; 2];
        c.read_exact(&mut two).unwrap();
        assert_eq!(&two, b"34");
    }
}
