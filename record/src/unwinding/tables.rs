//! A file's unwind table for the kernel's unwinder: its CFI (`.eh_frame`, else `.debug_frame`)
//! evaluated into rows (from each address on: where the CFA is, where the caller's rbp was
//! saved), with a page index for the kernel's lookup. What the rows cannot say (CFA
//! expressions other than the PLT's, a return address not at CFA - 8) ends the stack there.

use bpf::{Cfa, UnwindRow};
use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, EhFrame, LittleEndian, RegisterRule,
    UnwindContext, UnwindSection, X86_64,
};
use object::{Object, ObjectSection, ObjectSegment};

/// A PT_LOAD segment: where its bytes sit in the file and at which SVMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub file_offset: u64,
    pub file_size: u64,
    pub svma: u64,
}

/// What the kernel needs of a file: its rows (sorted by pc, gaps between functions as
/// `Cfa::Unknown` rows) and their page index; no rows for a file without CFI (its frames
/// follow the frame-pointer rule). `segments` place its mappings.
#[derive(Debug, Clone, Default)]
pub struct FileTable {
    pub rows: Vec<UnwindRow>,
    /// `pages[p]`: the row in effect at the start of page `base_page + p`; one more entry
    /// than pages.
    pub pages: Vec<u32>,
    pub base_page: u32,
    pub segments: Vec<Segment>,
}

impl FileTable {
    /// The bias (AVMA - SVMA) of a mapping of this file at `start..end` from file offset
    /// `pgoff`: by the PT_LOAD segment that covers most of the mapping's file range (lld
    /// starts a segment on the page where the one before it ends).
    pub fn bias(&self, start: u64, end: u64, pgoff: u64) -> Option<u64> {
        let file_end = pgoff.saturating_add(end.saturating_sub(start).max(1));
        let overlap = |s: &Segment| {
            let lo = pgoff.max(s.file_offset);
            let hi = file_end.min(s.file_offset.saturating_add(s.file_size.max(1)));
            hi.saturating_sub(lo)
        };
        let best = self
            .segments
            .iter()
            .filter(|s| overlap(s) > 0)
            .max_by_key(|s| (overlap(s), std::cmp::Reverse(s.file_offset)))?;
        Some(start.wrapping_sub(pgoff.wrapping_sub(best.file_offset).wrapping_add(best.svma)))
    }
}

/// One evaluated CFI row before packing: `start..end` and its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u64,
    end: u64,
    cfa: Cfa,
    rbp: Option<i16>,
}

/// Builds the table of the ELF file `bytes`; an error names what is wrong with the file.
pub fn build(bytes: &[u8]) -> Result<FileTable, String> {
    let obj = object::File::parse(bytes).map_err(|e| format!("not an ELF file: {e}"))?;
    if obj.architecture() != object::Architecture::X86_64 {
        return Err(format!("{:?}, not x86-64", obj.architecture()));
    }
    let segments = obj
        .segments()
        .map(|s| {
            let (file_offset, file_size) = s.file_range();
            Segment {
                file_offset,
                file_size,
                svma: s.address(),
            }
        })
        .collect();
    let mut bases = BaseAddresses::default();
    for (name, set) in [
        (
            ".text",
            BaseAddresses::set_text as fn(BaseAddresses, u64) -> BaseAddresses,
        ),
        (".got", BaseAddresses::set_got),
        (".eh_frame_hdr", BaseAddresses::set_eh_frame_hdr),
        (".eh_frame", BaseAddresses::set_eh_frame),
    ] {
        if let Some(s) = obj.section_by_name(name) {
            bases = set(bases, s.address());
        }
    }
    let mut spans = Vec::new();
    if let Some(s) = obj.section_by_name(".eh_frame").filter(|s| s.size() > 0) {
        let data = s
            .uncompressed_data()
            .map_err(|e| format!(".eh_frame: {e}"))?;
        evaluate(&EhFrame::new(&data, LittleEndian), &bases, &mut spans)
            .map_err(|e| format!(".eh_frame: {e}"))?;
    } else if let Some(s) = obj.section_by_name(".debug_frame").filter(|s| s.size() > 0) {
        let data = s
            .uncompressed_data()
            .map_err(|e| format!(".debug_frame: {e}"))?;
        let mut frame = DebugFrame::new(&data, LittleEndian);
        frame.set_address_size(8);
        evaluate(&frame, &bases, &mut spans).map_err(|e| format!(".debug_frame: {e}"))?;
    }
    let (rows, pages, base_page) = pack(spans)?;
    Ok(FileTable {
        rows,
        pages,
        base_page,
        segments,
    })
}

/// Every row of every FDE of `section`, as spans.
fn evaluate<'a, S>(section: &S, bases: &BaseAddresses, out: &mut Vec<Span>) -> gimli::Result<()>
where
    S: UnwindSection<gimli::EndianSlice<'a, LittleEndian>>,
{
    let mut ctx = UnwindContext::new();
    let mut entries = section.entries(bases);
    while let Some(entry) = entries.next()? {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        // A damaged FDE or CIE leaves its function without rows, not the file.
        let Ok(fde) = partial.parse(S::cie_from_offset) else {
            continue;
        };
        let Ok(mut table) = fde.rows(section, bases, &mut ctx) else {
            continue;
        };
        while let Ok(Some(row)) = table.next_row() {
            let cfa = match row.cfa() {
                CfaRule::RegisterAndOffset { register, offset } => {
                    let offset = i32::try_from(*offset).ok();
                    match (*register, offset) {
                        (X86_64::RSP, Some(o)) => Cfa::Rsp(o),
                        (X86_64::RBP, Some(o)) => Cfa::Rbp(o),
                        _ => Cfa::Unknown,
                    }
                }
                CfaRule::Expression(e) => match e.get(section) {
                    Ok(expr) if is_plt_rule(expr.0.slice()) => Cfa::Plt,
                    _ => Cfa::Unknown,
                },
            };
            let cfa = match row.register(X86_64::RA) {
                Some(RegisterRule::Undefined) => Cfa::Outermost,
                Some(RegisterRule::Offset(-8)) => cfa,
                _ => Cfa::Unknown,
            };
            let rbp = match row.register(X86_64::RBP) {
                Some(RegisterRule::Offset(o)) => i16::try_from(o).ok(),
                _ => None,
            };
            out.push(Span {
                start: row.start_address(),
                end: row.end_address(),
                cfa,
                rbp,
            });
        }
    }
    Ok(())
}

/// Whether a CFA expression is the one of PLT entries (x86-64 psABI): rsp + 8, plus 8 once
/// the instruction pointer is at or past byte 11 of the entry's 16:
/// `DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_lit11; DW_OP_ge;
/// DW_OP_lit3; DW_OP_shl; DW_OP_plus`.
fn is_plt_rule(expr: &[u8]) -> bool {
    expr == [
        0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
    ]
}

/// Rows from spans: sorted, overlaps resolved in favour of the later start, gaps between
/// functions closed by `Unknown` rows, equal neighbours merged; and the page index.
fn pack(mut spans: Vec<Span>) -> Result<(Vec<UnwindRow>, Vec<u32>, u32), String> {
    spans.retain(|s| s.start < s.end);
    spans.sort_by_key(|s| (s.start, s.end));
    let Some(last) = spans.iter().map(|s| s.end).max() else {
        return Ok((Vec::new(), Vec::new(), 0));
    };
    if last > u32::MAX as u64 {
        return Err(format!("code up to {last:#x}, past the tables' 4 GiB"));
    }
    let mut rows: Vec<UnwindRow> = Vec::with_capacity(spans.len() + spans.len() / 4);
    let mut covered_to = 0u64;
    for s in &spans {
        if !rows.is_empty() && s.start > covered_to {
            rows.push(UnwindRow {
                pc: covered_to as u32,
                cfa: Cfa::Unknown,
                rbp: None,
            });
        }
        let row = UnwindRow {
            pc: s.start as u32,
            cfa: s.cfa,
            rbp: s.rbp,
        };
        match rows.last_mut() {
            // Two rows at one address: the later (an overlapping FDE's) stands.
            Some(prev) if prev.pc == row.pc => *prev = row,
            Some(prev) if prev.cfa == row.cfa && prev.rbp == row.rbp => {}
            _ => rows.push(row),
        }
        covered_to = covered_to.max(s.end);
    }
    rows.push(UnwindRow {
        pc: covered_to as u32,
        cfa: Cfa::Unknown,
        rbp: None,
    });
    rows.dedup_by(|b, a| a.cfa == b.cfa && a.rbp == b.rbp);
    let base_page = rows[0].pc >> 12;
    let last_page = rows[rows.len() - 1].pc >> 12;
    let n_pages = (last_page - base_page + 1) as usize;
    let mut pages = Vec::with_capacity(n_pages + 1);
    let mut r = 0usize;
    for p in 0..=n_pages as u32 {
        let page_start = (base_page + p) << 12;
        while r + 1 < rows.len() && rows[r + 1].pc <= page_start {
            r += 1;
        }
        pages.push(r as u32);
    }
    Ok((rows, pages, base_page))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pc: u32, cfa: Cfa) -> UnwindRow {
        UnwindRow { pc, cfa, rbp: None }
    }

    #[test]
    fn gaps_become_unknown_rows_and_the_page_index_finds_each_row() {
        let spans = vec![
            Span {
                start: 0x1000,
                end: 0x1004,
                cfa: Cfa::Rsp(8),
                rbp: None,
            },
            Span {
                start: 0x1004,
                end: 0x1010,
                cfa: Cfa::Rsp(16),
                rbp: Some(-16),
            },
            Span {
                start: 0x3000,
                end: 0x3008,
                cfa: Cfa::Rsp(8),
                rbp: None,
            },
        ];
        let (rows, pages, base) = pack(spans).unwrap();
        assert_eq!(
            rows,
            vec![
                row(0x1000, Cfa::Rsp(8)),
                UnwindRow {
                    pc: 0x1004,
                    cfa: Cfa::Rsp(16),
                    rbp: Some(-16)
                },
                row(0x1010, Cfa::Unknown),
                row(0x3000, Cfa::Rsp(8)),
                row(0x3008, Cfa::Unknown),
            ]
        );
        assert_eq!(base, 1);
        // Pages 1, 2, 3 and the entry past the last: the row in effect at each start.
        assert_eq!(pages, vec![0, 2, 3, 4]);
    }

    #[test]
    fn the_tables_of_this_machines_libc_cover_its_functions() {
        let libc = std::fs::read("/usr/lib/x86_64-linux-gnu/libc.so.6").unwrap();
        let t = build(&libc).unwrap();
        assert!(t.rows.len() > 5000, "{} rows", t.rows.len());
        assert!(t.rows.windows(2).all(|w| w[0].pc < w[1].pc));
        // __libc_start_call_main, or _start's equivalent in libc, ends a stack somewhere.
        assert!(t.rows.iter().any(|r| r.cfa == Cfa::Outermost));
        // The PLT rule is recognised where libc has one.
        assert!(t.rows.iter().filter(|r| r.cfa == Cfa::Unknown).count() < t.rows.len() / 2);
    }
}
