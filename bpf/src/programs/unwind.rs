//! unwind.bpf.c / unwind.bpf.h: the tables the kernel unwinds user stacks with. User space
//! appends each file's rows and page index to the arrays through the maps' mappings (no
//! system call per row) and installs each process's mappings in `unwind_procs`.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use libbpf_rs::MapCore;

use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::{Error, Options};

/// Mappings with a table per process (UNWIND_MAPPINGS).
pub const MAPPINGS: usize = types::bpfperf_limits::BPFPERF_UNWIND_MAPPINGS.0 as usize;

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) -> Result<(), Error> {
    let on = o.stack_copy_bytes > 0 && o.unwind_in_kernel;
    super::rodata(open).unwind_enabled = on;
    if !on {
        // One block each: nothing unwinds in the kernel (29 MiB otherwise).
        let m = &mut open.maps;
        super::unused(
            [&mut m.unwind_rows, &mut m.unwind_pages],
            "size the unwind tables",
        )?;
    }
    Ok(())
}

/// How a row finds the CFA (the caller's stack pointer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cfa {
    /// No rule the kernel's unwinder follows: the stack ends here.
    Unknown,
    /// rsp + offset.
    Rsp(i32),
    /// rbp + offset.
    Rbp(i32),
    /// A PLT entry's rule (rsp + 8, + 8 from its 11th byte on).
    Plt,
    /// The return address is undefined: the outermost frame.
    Outermost,
}

/// From `pc` (an SVMA of the file) until the next row: the CFA, and where the caller's rbp
/// was saved (an offset from the CFA), if it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub pc: u32,
    pub cfa: Cfa,
    pub rbp: Option<i16>,
}

impl Row {
    fn encode(&self) -> types::unwind_row {
        let (cfa, cfa_off) = match self.cfa {
            Cfa::Unknown => (types::unwind_cfa::CFA_UNKNOWN.0, 0),
            Cfa::Rsp(o) => (types::unwind_cfa::CFA_RSP.0, o),
            Cfa::Rbp(o) => (types::unwind_cfa::CFA_RBP.0, o),
            Cfa::Plt => (types::unwind_cfa::CFA_PLT.0, 0),
            Cfa::Outermost => (types::unwind_cfa::CFA_OUTERMOST.0, 0),
        };
        types::unwind_row {
            pc: self.pc,
            cfa: cfa as u8,
            rbp_saved: self.rbp.is_some() as u8,
            rbp_off: self.rbp.unwrap_or(0),
            cfa_off,
        }
    }
}

/// Where a file's table lies in the arrays (copied into each mapping of the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Table {
    pub first_row: u32,
    pub n_rows: u32,
    pub first_page: u32,
    pub n_pages: u32,
    pub base_page: u32,
}

/// A mapping of a file with a table, in a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// AVMA - SVMA.
    pub bias: u64,
    pub table: Table,
}

/// A mappable array map's elements as one flat array of `T`: blocks whose size is a
/// multiple of 8 lie back to back in the map's mapping. Its address range is reserved whole,
/// and the map's pages are mapped into it 1 MiB at a time as elements are written: a mapping
/// of a BPF array puts every page it covers in the process's memory at once (the rows'
/// 24 MiB, where a short recording's tables fill a few hundred KiB).
struct Mapped<T> {
    ptr: *mut T,
    len: usize,
    bytes: usize,
    /// Bytes from the start mapped from the map so far (the rest: reserved, inaccessible).
    mapped: usize,
    fd: OwnedFd,
}

/// What [`Mapped`] maps at a time.
const MAP_STEP: usize = 1 << 20;

impl<T> Mapped<T> {
    fn new(map: &libbpf_rs::Map<'_>, step: &'static str) -> Result<Mapped<T>, Error> {
        let bytes = map.value_size() as usize * map.max_entries() as usize;
        let fd = map
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::bpf(step)(e.into()))?;
        // SAFETY: a fresh reservation of address space; nothing else uses it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::bpf(step)(std::io::Error::last_os_error().into()));
        }
        Ok(Mapped {
            ptr: ptr.cast(),
            len: bytes / std::mem::size_of::<T>(),
            bytes,
            mapped: 0,
            fd,
        })
    }

    /// Elements `[0, end)`, their pages mapped from the map first; `None` past the map or
    /// where the mapping fails.
    fn slice_to(&mut self, end: usize) -> Option<&mut [T]> {
        if end > self.len {
            return None;
        }
        let want = end * std::mem::size_of::<T>();
        if want > self.mapped {
            let page = 4096;
            let upto = want.div_ceil(MAP_STEP) * MAP_STEP;
            let upto = upto.min(self.bytes.div_ceil(page) * page);
            // SAFETY: [mapped, upto) lies in this handle's own reservation; MAP_FIXED
            // replaces those reserved pages with the map's, at the same offset in the map.
            let p = unsafe {
                libc::mmap(
                    self.ptr.cast::<u8>().add(self.mapped).cast(),
                    upto - self.mapped,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    self.fd.as_raw_fd(),
                    self.mapped as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                return None;
            }
            self.mapped = upto;
        }
        // SAFETY: `end` elements of `T` in the mapped prefix, which lives as long as self.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr, end) })
    }
}

impl<T> Drop for Mapped<T> {
    fn drop(&mut self) {
        // SAFETY: reserved in `new` (and partly mapped since), not used after this.
        unsafe { libc::munmap(self.ptr.cast(), self.bytes) };
    }
}

/// The unwinder's tables, for filling from another thread than the profiler's: the arrays
/// through their maps' mappings, the process map through its own descriptor.
pub struct Tables {
    rows: Mapped<types::unwind_row>,
    pages: Mapped<u32>,
    procs: OwnedFd,
    next_row: u32,
    next_page: u32,
}

// SAFETY: the mappings are plain shared memory that the programs only read; this handle is
// their one writer.
unsafe impl Send for Tables {}

impl Tables {
    pub(crate) fn new(skel: &BpfperfSkel<'_>) -> Result<Tables, Error> {
        let rows = Mapped::new(&skel.maps.unwind_rows, "map the unwind rows")?;
        let pages = Mapped::new(&skel.maps.unwind_pages, "map the unwind page index")?;
        let procs = skel
            .maps
            .unwind_procs
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::bpf("unwind process map")(e.into()))?;
        Ok(Tables {
            rows,
            pages,
            procs,
            next_row: 0,
            next_page: 0,
        })
    }

    /// Rows and page-index entries still free.
    pub fn room(&self) -> (u32, u32) {
        (
            self.rows.len as u32 - self.next_row,
            self.pages.len as u32 - self.next_page,
        )
    }

    /// Appends a file's rows (sorted by pc) and its page index (`pages[p]`: the row in effect
    /// at the start of page `base_page + p`, relative to the first row; one more entry than
    /// pages); `None` when the arrays are full (or their pages could not be mapped).
    pub fn add(&mut self, rows: &[Row], pages: &[u32], base_page: u32) -> Option<Table> {
        let n_rows = u32::try_from(rows.len()).ok()?;
        let n_pages = u32::try_from(pages.len().checked_sub(1)?).ok()?;
        let (rows_free, pages_free) = self.room();
        if n_rows > rows_free || n_pages + 1 > pages_free {
            return None;
        }
        let table = Table {
            first_row: self.next_row,
            n_rows,
            first_page: self.next_page,
            n_pages,
            base_page,
        };
        // These slots are past every table installed so far: no program reads them yet.
        let rows_end = table.first_row as usize + rows.len();
        let row_slots = &mut self.rows.slice_to(rows_end)?[table.first_row as usize..];
        for (slot, row) in row_slots.iter_mut().zip(rows) {
            *slot = row.encode();
        }
        let pages_end = table.first_page as usize + pages.len();
        self.pages.slice_to(pages_end)?[table.first_page as usize..].copy_from_slice(pages);
        self.next_row += n_rows;
        self.next_page += n_pages + 1;
        Some(table)
    }

    /// An empty table: a file without CFI, whose frames follow the frame-pointer rule.
    pub fn frame_pointers() -> Table {
        Table::default()
    }

    /// Installs `mappings` (sorted by start, at most [`MAPPINGS`]) as process `tgid`'s.
    pub fn set_process(&self, tgid: u32, mappings: &[Mapping]) -> Result<(), Error> {
        let mut value = types::unwind_proc {
            n: mappings.len().min(MAPPINGS) as u32,
            ..Default::default()
        };
        for (slot, m) in value.maps.iter_mut().zip(mappings) {
            *slot = types::unwind_mapping {
                start: m.start,
                end: m.end,
                bias: m.bias,
                first_row: m.table.first_row,
                n_rows: m.table.n_rows,
                first_page: m.table.first_page,
                n_pages: m.table.n_pages,
                base_page: m.table.base_page,
                _pad: 0,
            };
        }
        // SAFETY: a generated plain-old-data struct viewed as its bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                &value as *const types::unwind_proc as *const u8,
                std::mem::size_of::<types::unwind_proc>(),
            )
        };
        let key = tgid.to_ne_bytes();
        // SAFETY: key and value are buffers of the map's key and value sizes.
        let r = unsafe {
            libbpf_rs::libbpf_sys::bpf_map_update_elem(
                self.procs.as_raw_fd(),
                key.as_ptr().cast(),
                bytes.as_ptr().cast(),
                0,
            )
        };
        if r < 0 {
            return Err(Error::bpf("install a process's unwind tables")(
                std::io::Error::last_os_error().into(),
            ));
        }
        Ok(())
    }

    /// Forgets process `tgid` (it exited).
    pub fn forget_process(&self, tgid: u32) {
        let key = tgid.to_ne_bytes();
        // SAFETY: key is a buffer of the map's key size.
        unsafe {
            libbpf_rs::libbpf_sys::bpf_map_delete_elem(self.procs.as_raw_fd(), key.as_ptr().cast());
        }
    }
}

/// The process map, from the loaded skeleton (for tests: whether a process has tables).
pub fn has_process(skel: &BpfperfSkel<'_>, tgid: u32) -> bool {
    matches!(
        skel.maps
            .unwind_procs
            .lookup(&tgid.to_ne_bytes(), libbpf_rs::MapFlags::ANY),
        Ok(Some(_))
    )
}
