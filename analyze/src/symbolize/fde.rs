//! Names for code that no symbol covers: the function that holds it, as the file's unwind
//! tables delimit it. Every function a compiler emits has a frame description entry (FDE) in
//! `.eh_frame` (or `.debug_frame`) giving its start and length, and stripping keeps them (they
//! are needed to unwind and to throw), so a stripped binary still says where each of its
//! functions begins and ends. Such a function is named `FILE!0xSVMA` (the file's name and its
//! FDE's start): one name per function, where perf prints `[unknown]` for all of a file's.
//!
//! Where `.eh_frame_hdr` indexes `.eh_frame` (every linker writes one), an address's FDE is
//! found by binary search in it: a profile looks up a few addresses of a library of thousands
//! of functions (parsing all of libstdc++'s FDEs for one was 0.4 ms of a 6.5 ms report).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

use addr2line::gimli::{self, UnwindSection};
use object::{Object, ObjectSection};

use crate::files::{eh_frame_hdr_fits, ElfData};

/// The functions an ELF file's unwind tables delimit.
pub(super) enum FdeRanges {
    /// Every FDE's (start, end) SVMAs, sorted.
    Listed(Vec<(u64, u64)>),
    /// `.eh_frame_hdr`'s sorted table of `.eh_frame`'s FDEs, searched per address: the
    /// sections' SVMAs and places in the file, and the bases their pointers are relative to.
    Indexed {
        hdr: (u64, Range<usize>),
        frames: (u64, Range<usize>),
        text: u64,
        got: u64,
    },
}

impl FdeRanges {
    /// `.eh_frame` of `elf` indexed by its `.eh_frame_hdr` where that fits it; else every
    /// range of `.eh_frame`, else of `.debug_frame`; empty where it has neither or they
    /// cannot be read.
    fn of(elf: &ElfData) -> FdeRanges {
        let Ok(obj) = object::File::parse(&*elf.bytes) else {
            return FdeRanges::Listed(Vec::new());
        };
        FdeRanges::indexed(elf, &obj).unwrap_or_else(|| FdeRanges::listed(&obj))
    }

    /// `.eh_frame` of `elf` (parsed: `obj`) indexed by its `.eh_frame_hdr`, where that fits
    /// it.
    fn indexed(elf: &ElfData, obj: &object::File<'_>) -> Option<FdeRanges> {
        // As stored (loaded sections are never compressed), wholly in the file, not empty.
        let stored = |name: &str| {
            let (svmas, place) = elf.stored_section(obj, name).ok()??;
            (!place.is_empty()).then_some((svmas, place))
        };
        let (hdr, frames) = (stored(".eh_frame_hdr")?, stored(".eh_frame")?);
        eh_frame_hdr_fits(&elf.bytes[hdr.1.clone()], hdr.0.start, &frames.0).then(|| {
            FdeRanges::Indexed {
                hdr: (hdr.0.start, hdr.1),
                frames: (frames.0.start, frames.1),
                text: address(obj, ".text"),
                got: address(obj, ".got"),
            }
        })
    }

    /// Every range of `.eh_frame`, else of `.debug_frame`, of `obj`.
    fn listed(obj: &object::File<'_>) -> FdeRanges {
        let section = |name: &str| {
            let s = obj.section_by_name(name)?;
            let data = s.uncompressed_data().ok()?;
            (!data.is_empty()).then_some((s.address(), data))
        };
        let mut ranges = Vec::new();
        if let Some((svma, data)) = section(".eh_frame") {
            let bases = gimli::BaseAddresses::default()
                .set_eh_frame(svma)
                .set_text(address(obj, ".text"))
                .set_got(address(obj, ".got"));
            let mut eh = gimli::EhFrame::new(&data, gimli::LittleEndian);
            eh.set_address_size(8);
            collect(&eh, &bases, &mut ranges);
        } else if let Some((_, data)) = section(".debug_frame") {
            let mut debug = gimli::DebugFrame::new(&data, gimli::LittleEndian);
            debug.set_address_size(8);
            collect(&debug, &gimli::BaseAddresses::default(), &mut ranges);
        }
        ranges.sort_unstable();
        ranges.dedup();
        FdeRanges::Listed(ranges)
    }

    /// The function holding `svma` of `elf` (the file these ranges are of): its (start,
    /// end).
    pub(super) fn lookup(&self, elf: &ElfData, svma: u64) -> Option<(u64, u64)> {
        match self {
            FdeRanges::Listed(ranges) => holding(ranges, svma),
            FdeRanges::Indexed {
                hdr,
                frames,
                text,
                got,
            } => {
                let le = gimli::LittleEndian;
                let bases = gimli::BaseAddresses::default()
                    .set_eh_frame_hdr(hdr.0)
                    .set_eh_frame(frames.0)
                    .set_text(*text)
                    .set_got(*got);
                let index = gimli::EhFrameHdr::new(&elf.bytes[hdr.1.clone()], le)
                    .parse(&bases, 8)
                    .ok()?;
                let mut eh = gimli::EhFrame::new(&elf.bytes[frames.1.clone()], le);
                eh.set_address_size(8);
                let fde = index
                    .table()?
                    .fde_for_address(&eh, &bases, svma, gimli::EhFrame::cie_from_offset)
                    .ok()?;
                let (start, len) = (fde.initial_address(), fde.len());
                // As in a listed table: no zero-length entries, none of discarded code.
                (len > 0 && start > 0).then(|| (start, start.saturating_add(len)))
            }
        }
    }
}

/// The SVMA of section `name` of `obj` (0: none), a base that unwind tables' pointers may be
/// relative to.
fn address(obj: &object::File<'_>, name: &str) -> u64 {
    obj.section_by_name(name).map_or(0, |s| s.address())
}

/// The range of `ranges` (sorted) that holds `svma`. FDEs do not overlap; where a damaged
/// table makes them, the nearest start wins, and a few before it are tried for one that
/// holds the address.
fn holding(ranges: &[(u64, u64)], svma: u64) -> Option<(u64, u64)> {
    let i = ranges.partition_point(|r| r.0 <= svma).checked_sub(1)?;
    ranges[i.saturating_sub(4)..=i]
        .iter()
        .rev()
        .find(|r| svma < r.1)
        .copied()
}

/// Every FDE's range in `section`; entries that cannot be parsed are skipped (a damaged
/// table ends the walk).
fn collect<'d, S>(section: &S, bases: &gimli::BaseAddresses, out: &mut Vec<(u64, u64)>)
where
    S: UnwindSection<gimli::EndianSlice<'d, gimli::LittleEndian>>,
    S::Offset: Eq + std::hash::Hash,
{
    let mut cies: HashMap<S::Offset, Option<gimli::CommonInformationEntry<_>>> = HashMap::new();
    let mut entries = section.entries(bases);
    while let Ok(Some(entry)) = entries.next() {
        let gimli::CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let fde = partial.parse(|s, b, offset| {
            cies.entry(offset)
                .or_insert_with(|| s.cie_from_offset(b, offset).ok())
                .clone()
                .ok_or(gimli::Error::NoEntryAtGivenOffset(0))
        });
        let Ok(fde) = fde else { continue };
        let (start, len) = (fde.initial_address(), fde.len());
        // Zero-length entries and those of discarded code (start 0) name nothing.
        if len > 0 && start > 0 {
            out.push((start, start.saturating_add(len)));
        }
    }
}

/// A file's unwind-table functions, found once and kept with the file
/// ([`ElfData::derived`]).
#[derive(Default)]
struct Kept(OnceLock<FdeRanges>);

/// The function holding `svma` of `elf` as its unwind tables delimit it: (start, end).
pub(super) fn lookup(elf: &ElfData, svma: u64) -> Option<(u64, u64)> {
    ranges(elf).lookup(elf, svma)
}

/// The unwind-table functions of `elf` (found on first use).
fn ranges(elf: &ElfData) -> &FdeRanges {
    elf.derived
        .get::<Kept>()
        .0
        .get_or_init(|| FdeRanges::of(elf))
}

/// The name of the function at `start` of the file `dso` (a path: its last component is
/// kept), as functions without symbols are named: `liblzma.so.5.4.1!0x12ab0`.
pub fn address_name(dso: &str, start: u64) -> String {
    let file = dso.rsplit('/').next().unwrap_or(dso);
    format!("{file}!{start:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_the_range_that_holds_an_address() {
        let r = [(0x1000, 0x1010), (0x1010, 0x1080), (0x2000, 0x2100)];
        assert_eq!(holding(&r, 0xfff), None);
        assert_eq!(holding(&r, 0x1000), Some((0x1000, 0x1010)));
        assert_eq!(holding(&r, 0x1010), Some((0x1010, 0x1080)));
        assert_eq!(holding(&r, 0x107f), Some((0x1010, 0x1080)));
        // Between functions (padding, or code without an FDE): nothing.
        assert_eq!(holding(&r, 0x1080), None);
        assert_eq!(holding(&r, 0x20ff), Some((0x2000, 0x2100)));
        assert_eq!(holding(&r, 0x2100), None);
    }

    #[test]
    fn names_are_the_file_name_and_the_start() {
        assert_eq!(
            address_name("/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1", 0x12ab0),
            "liblzma.so.5.4.1!0x12ab0"
        );
        assert_eq!(address_name("[vdso]", 0x900), "[vdso]!0x900");
    }

    #[test]
    fn the_index_finds_what_every_fde_listed_finds() {
        // The test binary (not stripped, but its FDEs are there all the same) and libc.
        let exe = std::env::current_exe().unwrap();
        let loader = crate::files::Loader::default();
        for path in [&*exe.to_string_lossy(), "/lib/x86_64-linux-gnu/libc.so.6"] {
            let elf = loader.elf(path, None).unwrap();
            let obj = object::File::parse(&*elf.bytes).unwrap();
            let FdeRanges::Listed(listed) = FdeRanges::listed(&obj) else {
                unreachable!()
            };
            assert!(listed.len() > 100, "{path}: {} FDEs", listed.len());
            assert!(listed.windows(2).all(|w| w[0] <= w[1]));
            let indexed = FdeRanges::indexed(&elf, &obj).expect("an .eh_frame_hdr that fits");
            assert!(matches!(ranges(&elf), FdeRanges::Indexed { .. }));
            for &(start, end) in &listed {
                for svma in [start - 1, start, start + (end - start) / 2, end - 1, end] {
                    assert_eq!(
                        indexed.lookup(&elf, svma),
                        holding(&listed, svma),
                        "{path}: {svma:#x}"
                    );
                }
            }
        }
    }
}
