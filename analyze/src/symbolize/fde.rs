//! Names for code that no symbol covers: the function that holds it, as the file's unwind
//! tables delimit it. Every function a compiler emits has a frame description entry (FDE) in
//! `.eh_frame` (or `.debug_frame`) giving its start and length, and stripping keeps them (they
//! are needed to unwind and to throw), so a stripped binary still says where each of its
//! functions begins and ends. Such a function is named `FILE!0xSVMA` (the file's name and its
//! FDE's start): one name per function, where perf prints `[unknown]` for all of a file's.

use std::collections::HashMap;
use std::sync::OnceLock;

use addr2line::gimli::{self, UnwindSection};
use object::{Object, ObjectSection};

use crate::files::ElfData;

/// The functions an ELF file's unwind tables delimit: (start, end) SVMAs, sorted.
pub(super) struct FdeRanges(Vec<(u64, u64)>);

impl FdeRanges {
    /// The ranges of `.eh_frame`, else of `.debug_frame`, of `elf`; empty where it has
    /// neither or they cannot be read.
    fn of(elf: &ElfData) -> FdeRanges {
        let Ok(obj) = object::File::parse(&*elf.bytes) else {
            return FdeRanges(Vec::new());
        };
        let section = |name: &str| {
            let s = obj.section_by_name(name)?;
            let data = s.uncompressed_data().ok()?;
            (!data.is_empty()).then_some((s.address(), data))
        };
        let address = |name: &str| obj.section_by_name(name).map(|s| s.address());
        let mut ranges = Vec::new();
        if let Some((svma, data)) = section(".eh_frame") {
            let bases = gimli::BaseAddresses::default()
                .set_eh_frame(svma)
                .set_text(address(".text").unwrap_or(0))
                .set_got(address(".got").unwrap_or(0));
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
        FdeRanges(ranges)
    }

    /// The function holding `svma`: its (start, end).
    pub(super) fn lookup(&self, svma: u64) -> Option<(u64, u64)> {
        let i = self.0.partition_point(|r| r.0 <= svma).checked_sub(1)?;
        // FDEs do not overlap; where a damaged table makes them, the nearest start wins, and
        // a few before it are tried for one that holds the address.
        self.0[i.saturating_sub(4)..=i]
            .iter()
            .rev()
            .find(|r| svma < r.1)
            .copied()
    }
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

/// The unwind-table functions of `elf` (found on first use).
pub(super) fn ranges(elf: &ElfData) -> &FdeRanges {
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
        let r = FdeRanges(vec![(0x1000, 0x1010), (0x1010, 0x1080), (0x2000, 0x2100)]);
        assert_eq!(r.lookup(0xfff), None);
        assert_eq!(r.lookup(0x1000), Some((0x1000, 0x1010)));
        assert_eq!(r.lookup(0x1010), Some((0x1010, 0x1080)));
        assert_eq!(r.lookup(0x107f), Some((0x1010, 0x1080)));
        // Between functions (padding, or code without an FDE): nothing.
        assert_eq!(r.lookup(0x1080), None);
        assert_eq!(r.lookup(0x20ff), Some((0x2000, 0x2100)));
        assert_eq!(r.lookup(0x2100), None);
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
    fn this_test_binary_has_unwind_table_functions() {
        // The test binary is not stripped, but its FDEs are there all the same.
        let exe = std::env::current_exe().unwrap();
        let loader = crate::files::Loader::default();
        let elf = loader.elf(&exe.to_string_lossy(), None).unwrap();
        let r = ranges(&elf);
        assert!(r.0.len() > 100, "{} FDEs", r.0.len());
        assert!(r.0.windows(2).all(|w| w[0] <= w[1]));
    }
}
