//! GNU build ids of ELF files and note sections.

use std::path::Path;

use object::{Object, ObjectSection};

/// The build id of an ELF file, if it has one.
pub fn of_file(path: &Path) -> Option<Vec<u8>> {
    of_bytes(&std::fs::read(path).ok()?)
}

/// The build id of an ELF file's bytes, if it has one.
pub fn of_bytes(data: &[u8]) -> Option<Vec<u8>> {
    let obj = object::File::parse(data).ok()?;
    if let Ok(Some(id)) = obj.build_id() {
        return Some(id.to_vec());
    }
    let notes = obj.section_by_name(".note.gnu.build-id")?.data().ok()?;
    from_notes(notes)
}

/// Finds NT_GNU_BUILD_ID in a sequence of ELF notes (4-byte aligned, little-endian).
pub fn from_notes(mut b: &[u8]) -> Option<Vec<u8>> {
    let align4 = |n: usize| n.div_ceil(4) * 4;
    while b.len() >= 12 {
        let namesz = u32::from_le_bytes(b[0..4].try_into().ok()?) as usize;
        let descsz = u32::from_le_bytes(b[4..8].try_into().ok()?) as usize;
        let kind = u32::from_le_bytes(b[8..12].try_into().ok()?);
        let name_end = 12 + align4(namesz);
        let desc_end = name_end.checked_add(align4(descsz))?;
        if desc_end > b.len() {
            return None;
        }
        if kind == 3 && b.get(12..12 + namesz)?.starts_with(b"GNU") {
            return Some(b[name_end..name_end + descsz].to_vec());
        }
        b = &b[desc_end..];
    }
    None
}
