//! Keeping a large recording's resident pages in check. A memory-mapped file's pages count in
//! the reader's resident memory once touched, so a pass over a 1 GB file would hold 1 GB.
//! Passes that go a chunk per thread give back the pages each chunk is done with
//! ([`PageBudget::done_with`]: a chunk per thread mapped, however many threads); the others
//! report how far they went, and every [`BUDGET`] bytes the whole mapping's pages are given
//! back. They stay in the page cache: touching them again maps them back, about 35 ms per
//! GB. An input no larger than the budget keeps its pages until the last pass over it ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::splice::Storage;

/// Bytes of the input gone through between two givings back.
pub const BUDGET: u64 = 64 << 20;

/// A huge folio of the page cache: what one touch of an input held in them maps, and the
/// block pages are given back in ([`PageBudget::done_with`]).
pub const HUGE_PAGE: usize = 2 << 20;

/// Counts the bytes passes over one input went through, and gives its pages back every
/// [`BUDGET`] of them. Shared by the threads of a parallel pass.
pub struct PageBudget {
    storage: Arc<Storage>,
    /// Bytes gone through, by every pass so far.
    walked: AtomicU64,
    /// `walked` when the pages were last given back (claimed by the thread that gives them
    /// back, before it does).
    given_back_at: AtomicU64,
}

impl PageBudget {
    pub(crate) fn new(storage: Arc<Storage>) -> PageBudget {
        PageBudget {
            storage,
            walked: AtomicU64::new(0),
            given_back_at: AtomicU64::new(0),
        }
    }

    /// Says that a pass went through `bytes` more bytes of the input (call it per chunk of
    /// records, not per record: it is one atomic add); every [`BUDGET`] of them the pages are
    /// given back.
    pub fn went_through(&self, bytes: u64) {
        if self.keeps_all() {
            return;
        }
        // The thread that claims a giving back moves the mark first: the others count from
        // there even while it has not given the pages back yet (a thread preempted between
        // the two would otherwise leave the mark behind, and nobody would give back until it
        // ran again: 16 threads on 2 CPUs held 350 MB of a 400 MB input).
        let walked = self.walked.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let at = self.given_back_at.load(Ordering::Relaxed);
        if walked.saturating_sub(at) >= BUDGET
            && self
                .given_back_at
                .compare_exchange(at, walked, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            give_back(&self.storage);
        }
    }

    /// The end of a pass that another pass over the input follows: gives the pages back
    /// unless the whole input is within the budget. Mapping a small input's pages again in
    /// the next pass cost more than the passes' own work (a 48 MB DWARF recording: five
    /// givings back and the faults after them took half of a report's CPU time), and holding
    /// all of it holds no more than the budget.
    pub fn pass_done(&self) {
        if !self.keeps_all() {
            self.give_back();
        }
    }

    /// Counts the budget from now.
    fn mark_given_back(&self) {
        let walked = self.walked.load(Ordering::Relaxed);
        self.given_back_at.store(walked, Ordering::Relaxed);
    }

    /// Whether every page of the input stays mapped until its last pass (it is no larger
    /// than the budget): then [`PageBudget::done_with`], [`PageBudget::went_through`] and
    /// [`PageBudget::pass_done`] give nothing back; [`PageBudget::last_pass_done`] does.
    pub fn keeps_all(&self) -> bool {
        self.storage.len() as u64 <= BUDGET
    }

    /// Says that a pass is done with `bytes` (a slice of the input) and does not come back
    /// to them: their pages are given back now, unless the whole input is within the budget.
    ///
    /// A pass that goes through the input a chunk per thread, each giving back its chunk's
    /// pages, keeps no more than a chunk per thread mapped, however many threads. Giving
    /// the whole mapping back every [`BUDGET`] bytes took milliseconds with 16 threads
    /// faulting pages in beside it, and the pages they mapped meanwhile stayed: a 400 MB
    /// input held 260 MB at 16 threads, 55 MB at one.
    pub fn done_with(&self, bytes: &[u8]) {
        self.give_back_blocks(bytes, false);
    }

    /// As [`PageBudget::done_with`], and the 2 MiB block the bytes end in too: for a task of
    /// a parallel pass that ends, whose last block no later chunk of its own gives back. Left
    /// mapped, each task's last block stayed until the pass ended (a 134 MB recording in huge
    /// folios, 16 threads: the walk's 32 parts held 116 MiB at the peak, 78 in small pages).
    /// A thread still reading in that block maps it again (one fault).
    pub fn done_with_through(&self, bytes: &[u8]) {
        self.give_back_blocks(bytes, true);
    }

    fn give_back_blocks(&self, bytes: &[u8], with_last: bool) {
        let Storage::Mapped(map) = &*self.storage else {
            return;
        };
        if self.keeps_all() {
            return;
        }
        let Some(at) = (bytes.as_ptr() as usize).checked_sub(map.as_ptr() as usize) else {
            return;
        };
        if at + bytes.len() > map.len() {
            return;
        }
        // Whole 2 MiB blocks: a file whose page cache holds huge folios (one that record
        // wrote through its map) is mapped a PMD at a time, and giving back part of one
        // splits it (slower than the pass's own reading). The block the bytes begin in is
        // given back with them; another thread still reading there maps it again.
        let end = at + bytes.len();
        let (start, end) = (
            at / HUGE_PAGE * HUGE_PAGE,
            if with_last {
                end.next_multiple_of(HUGE_PAGE).min(map.len())
            } else {
                end / HUGE_PAGE * HUGE_PAGE
            },
        );
        self.give_back_range(start, end);
    }

    /// Gives back the pages of the input's bytes `start..end` (nothing where it is empty).
    fn give_back_range(&self, start: usize, end: usize) {
        let Storage::Mapped(map) = &*self.storage else {
            return;
        };
        if start < end && end <= map.len() {
            // SAFETY: as in [`give_back`]: a read-only file mapping whose pages, dropped, are
            // mapped again with the same contents by the next read of them.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
    }

    /// A reader of records scattered over the input one at a time (see [`ScatteredReads`]).
    pub fn scattered(&self) -> ScatteredReads<'_> {
        ScatteredReads {
            pages: self,
            blocks: Vec::with_capacity(SCATTERED_BLOCKS),
        }
    }

    /// Gives every mapped page of the input back now.
    pub fn give_back(&self) {
        self.mark_given_back();
        give_back(&self.storage);
    }

    /// The end of the last pass over the input: gives every mapped page back on a thread of
    /// its own, which the work after the pass need not wait for (a 48 MB input's pages take
    /// about a millisecond to unmap, a tenth of a report on it).
    pub fn last_pass_done(&self) {
        self.mark_given_back();
        if !matches!(*self.storage, Storage::Mapped(_)) {
            return;
        }
        let storage = self.storage.clone();
        let beside = std::thread::Builder::new()
            .name("give back".into())
            .spawn(move || give_back(&storage));
        // No thread to be had (a process at its limit): here, then.
        if beside.is_err() {
            give_back(&self.storage);
        }
    }
}

/// The 2 MiB blocks a [`ScatteredReads`] keeps mapped before it gives them back: 8 MiB.
const SCATTERED_BLOCKS: usize = 4;

/// Reads of records that lie far apart in a large input, a few at a time (the side-band
/// records a timeline replays in time order: a few in each round of the file). Where the
/// input's page cache holds 2 MiB folios, each read maps its whole block: one record per
/// round mapped a 127 MiB recording whole (a report's peak 88 MiB, 60 in small pages). The
/// blocks read are given back every [`SCATTERED_BLOCKS`] of them, and the rest when the
/// reads end (dropped). Records read in turn from the same few blocks (time order
/// interleaving CPUs' buffers) map each once.
pub struct ScatteredReads<'a> {
    pages: &'a PageBudget,
    /// The blocks read since they were last given back, as offsets of their first byte.
    blocks: Vec<usize>,
}

impl ScatteredReads<'_> {
    /// Says that `bytes` (a record of the input) were read.
    pub fn read(&mut self, bytes: &[u8]) {
        let Storage::Mapped(map) = &*self.pages.storage else {
            return;
        };
        if self.pages.keeps_all() {
            return;
        }
        let Some(at) = (bytes.as_ptr() as usize).checked_sub(map.as_ptr() as usize) else {
            return;
        };
        if at >= map.len() {
            return;
        }
        let (first, last) = (at / HUGE_PAGE, (at + bytes.len().max(1) - 1) / HUGE_PAGE);
        for block in first..=last {
            if !self.blocks.contains(&block) {
                if self.blocks.len() == SCATTERED_BLOCKS {
                    self.give_back();
                }
                self.blocks.push(block);
            }
        }
    }

    fn give_back(&mut self) {
        for block in self.blocks.drain(..) {
            let start = block * HUGE_PAGE;
            let end = (start + HUGE_PAGE).min(self.pages.storage.len());
            self.pages.give_back_range(start, end);
        }
    }
}

impl Drop for ScatteredReads<'_> {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// Asks that the input's pages be read from disk, where this map is what reads them (the
/// file is not in the page cache), in 2 MiB pieces: such a piece is then mapped in one
/// fault, in this run and every later one, and unmapped as fast. A file written by `write`
/// sits in the cache in small pages, mapped 64 KiB a fault and unmapped a page at a time: a
/// 48 MB DWARF recording took 762 faults, 2-4 ms of a 10-14 ms report, and about as long
/// again to unmap; in 2 MiB pieces, 27 faults (0.1 ms). Reports of recordings read from disk
/// (median of 3-8, 2 threads), and every report after them: 48 MB DWARF 54 -> 37 ms, then
/// 10.3 -> 6.4 ms; the million-sample file (79 MB) 129 -> 70 ms, then 55 -> 44; 267 MB DWARF
/// 253 -> 129 ms, then 76 -> 30. Peak memory 50 -> 53 and 37 -> 40 MiB on the two larger
/// ones: the passes that keep a window of the input mapped give back whole 2 MiB blocks
/// (the walk's search and the sparse pass over merged samples were made to). Pages already
/// in the cache stay as they are.
pub(crate) fn ask_for_huge_pages(map: &memmap2::Mmap) {
    let _ = map.advise(memmap2::Advice::HugePage);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `len` bytes (a hole: its pages read as zeros), mapped.
    fn mapped(len: u64) -> Arc<Storage> {
        let path = std::env::temp_dir().join(format!("pages-{}-{len}", std::process::id()));
        let file = std::fs::File::create_new(&path).unwrap();
        file.set_len(len).unwrap();
        // SAFETY: the file is this test's own, unchanged while mapped.
        let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
        std::fs::remove_file(&path).unwrap();
        Arc::new(Storage::Mapped(map))
    }

    /// The field `name` (`Rss:`, `VmFlags:`) that /proc/self/smaps gives the mapping at
    /// `bytes`, trimmed.
    fn smaps_field(bytes: &[u8], name: &str) -> String {
        let start = format!("{:x}-", bytes.as_ptr() as usize);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&start));
        let value = lines.find_map(|l| l.strip_prefix(name)).unwrap();
        value.trim().to_string()
    }

    /// The flags /proc/self/smaps gives the mapping at `bytes`.
    fn vm_flags(bytes: &[u8]) -> String {
        smaps_field(bytes, "VmFlags:")
    }

    /// Huge pages are asked for: the mapping is marked `hg`.
    #[test]
    fn huge_pages_are_asked_for() {
        let storage = mapped(BUDGET + 4096);
        let Storage::Mapped(map) = &*storage else {
            unreachable!()
        };
        assert!(!vm_flags(map).split_whitespace().any(|f| f == "hg"));
        ask_for_huge_pages(map);
        let flags = vm_flags(map);
        assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
    }

    /// Reads a byte of every page of `bytes` (up to `len`), as a pass over them would.
    fn touch(bytes: &[u8], len: usize) -> u64 {
        std::hint::black_box(bytes[..len].iter().step_by(4096).map(|&b| b as u64).sum())
    }

    /// KiB of the mapping at `bytes` resident in this process, from /proc/self/smaps.
    fn resident_kib(bytes: &[u8]) -> u64 {
        let rss = smaps_field(bytes, "Rss:");
        rss.trim_end_matches("kB").trim().parse().unwrap()
    }

    #[test]
    fn a_small_input_keeps_its_pages_until_its_last_pass_ends() {
        let storage = mapped(1 << 20);
        let pages = PageBudget::new(storage.clone());
        touch(&storage, 1 << 20);
        pages.went_through(2 * BUDGET);
        pages.pass_done();
        assert_eq!(resident_kib(&storage), 1024);
        pages.give_back();
        assert_eq!(resident_kib(&storage), 0);
    }

    #[test]
    fn a_large_input_gives_its_pages_back_within_and_between_passes() {
        let storage = mapped(BUDGET + 4096);
        let pages = PageBudget::new(storage.clone());
        touch(&storage, 1 << 20);
        assert!(resident_kib(&storage) >= 1024);
        pages.pass_done();
        assert_eq!(resident_kib(&storage), 0);
        touch(&storage, 1 << 20);
        pages.went_through(BUDGET);
        assert_eq!(resident_kib(&storage), 0);
    }

    /// Records read one at a time far apart keep at most [`SCATTERED_BLOCKS`] blocks
    /// mapped, and none once the reads end; records read again from the blocks still held
    /// count once.
    #[test]
    fn scattered_reads_keep_a_few_blocks() {
        const MIB: usize = 1 << 20;
        let storage = mapped(BUDGET + 64 * MIB as u64);
        let pages = PageBudget::new(storage.clone());
        let blocks = |kib: u64| kib.div_ceil(HUGE_PAGE as u64 >> 10);
        {
            let mut reads = pages.scattered();
            // A record in every other block, and one across two blocks, as time order
            // reads them: back and forth between neighbours.
            // Each read maps its whole block, as a huge folio's would be.
            let read = |reads: &mut ScatteredReads, at: usize| {
                let block = at / HUGE_PAGE * HUGE_PAGE;
                touch(
                    &storage[block..],
                    (at + 64).next_multiple_of(HUGE_PAGE) - block,
                );
                reads.read(&storage[at..at + 64]);
            };
            for at in (0..100 * MIB).step_by(4 * MIB) {
                for at in [at, at + 2 * MIB + 100, at] {
                    read(&mut reads, at);
                }
                assert!(blocks(resident_kib(&storage)) <= SCATTERED_BLOCKS as u64);
            }
            read(&mut reads, 3 * HUGE_PAGE - 32);
            assert!(resident_kib(&storage) > 0);
        }
        assert_eq!(resident_kib(&storage), 0);
    }

    /// A pass done with bytes of a large input gives back the whole 2 MiB blocks they span
    /// (the block they begin in too), and nothing of a small input.
    #[test]
    fn parts_done_with_give_back_their_blocks() {
        const MIB: usize = 1 << 20;
        let storage = mapped(BUDGET + 8 * MIB as u64);
        let pages = PageBudget::new(storage.clone());
        touch(&storage, 8 * MIB);
        // 1.5 MiB..5.5 MiB: the blocks 0..2 and 2..4 MiB; 4..5.5 is not a whole block.
        // Bytes outside the input are passed over.
        pages.done_with(&storage[3 * MIB / 2..11 * MIB / 2]);
        pages.done_with(&[0u8; 16]);
        assert_eq!(resident_kib(&storage), 4 * 1024);
        // 4..5 MiB holds no whole block; 5 MiB + 100..7 MiB: the block 4..6.
        pages.done_with(&storage[4 * MIB..5 * MIB]);
        pages.done_with(&storage[5 * MIB + 100..7 * MIB]);
        assert_eq!(resident_kib(&storage), 2 * 1024);
        // 7..8 MiB: the block it begins in, 6..8.
        pages.done_with(&storage[7 * MIB..8 * MIB]);
        assert_eq!(resident_kib(&storage), 0);

        // Through: the block the bytes end in too; the input's end is where the last ends.
        touch(&storage, 8 * MIB);
        pages.done_with_through(&storage[3 * MIB..5 * MIB + 100]);
        assert_eq!(resident_kib(&storage), 4 * 1024);
        let len = storage.len();
        touch(&storage[len - 3 * MIB..], 3 * MIB);
        pages.done_with_through(&storage[len - 3 * MIB..len - 100]);
        assert_eq!(resident_kib(&storage), 4 * 1024);

        let small = mapped(4 * MIB as u64);
        let pages = PageBudget::new(small.clone());
        touch(&small, 4 * MIB);
        pages.done_with(&small);
        assert_eq!(resident_kib(&small), 4 * 1024);
    }
}
