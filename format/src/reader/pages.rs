//! Keeping a large recording's resident pages in check. A memory-mapped file's pages count in
//! the reader's resident memory once touched, so a pass over a 1 GB file would hold 1 GB. The
//! passes report how far they went; every [`BUDGET`] bytes the mapping's pages are given back.
//! They stay in the page cache: touching them again maps them back, about 35 ms per GB.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::splice::Storage;

/// Bytes of the input gone through between two givings back.
pub const BUDGET: u64 = 64 << 20;

/// Counts the bytes passes over one input went through, and gives its pages back every
/// [`BUDGET`] of them. Shared by the threads of a parallel pass.
pub struct PageBudget {
    storage: Arc<Storage>,
    since: AtomicU64,
}

impl PageBudget {
    pub(crate) fn new(storage: Arc<Storage>) -> PageBudget {
        PageBudget {
            storage,
            since: AtomicU64::new(0),
        }
    }

    /// Says that a pass went through `bytes` more bytes of the input (call it per chunk of
    /// records, not per record: it is one atomic add).
    pub fn went_through(&self, bytes: u64) {
        self.went_through_within(bytes, BUDGET);
    }

    /// [`PageBudget::went_through`] for a pass that holds more memory as it goes (records it
    /// keeps): the pages are given back every `budget` bytes, a smaller budget than
    /// [`BUDGET`].
    pub fn went_through_within(&self, bytes: u64, budget: u64) {
        let before = self.since.fetch_add(bytes, Ordering::Relaxed);
        if before < budget && before + bytes >= budget {
            self.give_back();
        }
    }

    /// Gives every mapped page of the input back now (the end of a pass).
    pub fn give_back(&self) {
        self.since.store(0, Ordering::Relaxed);
        give_back(&self.storage);
    }
}

/// Drops the mapping's page table entries; nothing for input held in memory.
pub(crate) fn give_back(storage: &Storage) {
    if let Storage::Mapped(map) = storage {
        // SAFETY: the map is a read-only file mapping, so dropping its pages loses nothing:
        // the next read of them maps the file's pages again, with the same contents.
        // Threads reading it meanwhile only take a page fault.
        let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
    }
}
