//! Inline frames by name alone, without source lines: one pass over a compilation unit's
//! entries for all the addresses it holds.
//!
//! addr2line parses a unit's whole line program (and keeps its rows) before it answers
//! anything there, because each frame it gives has a location. Views without source lines
//! (folded stacks, flame graphs) need only the names: for a Rust release build, whose units
//! are large, the line programs were most of symbolizing (ripgrep recorded by perf: 42 ms,
//! 15 without them) and of its memory (70 MiB peak, 55 without). Here a unit's entries are
//! read once, attributes skipped but for the ranges of functions and inlined calls, and
//! subtrees that hold none of the addresses are passed over; units are found as addr2line
//! finds them (`.debug_aranges`, else their root entry's ranges). Names follow addr2line's
//! rules (linkage name, else name, else the abstract origin's or specification's), so the
//! frames are the ones addr2line would give.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use addr2line::gimli;

type Slice<'a> = gimli::EndianSlice<'a, gimli::LittleEndian>;
type Offset = gimli::UnitOffset<usize>;

/// How deep `DW_AT_abstract_origin`/`DW_AT_specification` chains are followed for a name.
const NAME_DEPTH: usize = 16;

/// The compilation units of one `.debug_info`, each parsed (abbreviations, bases) once, when
/// a walk or a name first needs it, by whichever thread gets there first.
pub struct Units<'a> {
    dwarf: gimli::Dwarf<Slice<'a>>,
    /// In `.debug_info` order: a reference's unit is found by binary search.
    headers: Vec<gimli::UnitHeader<Slice<'a>>>,
    parsed: Vec<OnceLock<Option<gimli::Unit<Slice<'a>>>>>,
    /// Each abbreviation table the units use, by its offset: units share them (a Rust
    /// program's 939 units, most read only for their root entry's ranges, share 191 tables).
    tables: Vec<AbbreviationTable>,
}

/// What is worked out of one abbreviation table, each when first needed.
struct AbbreviationTable {
    /// Its offset in `.debug_abbrev`.
    at: usize,
    /// Parsed.
    parsed: OnceLock<Option<Arc<gimli::Abbreviations>>>,
    /// Its codes, sorted, each with whether its entries may give address ranges
    /// ([`codes_with_code`]).
    with_code: OnceLock<Vec<(u64, bool)>>,
}

impl<'a> Units<'a> {
    /// The units of `dwarf`'s `.debug_info`, up to the first header that does not parse.
    pub fn new(dwarf: gimli::Dwarf<Slice<'a>>) -> Units<'a> {
        let mut headers = Vec::new();
        let mut iter = dwarf.units();
        while let Ok(Some(h)) = iter.next() {
            headers.push(h);
        }
        let parsed = headers.iter().map(|_| OnceLock::new()).collect();
        let mut offsets: Vec<usize> = headers.iter().map(|h| h.debug_abbrev_offset().0).collect();
        offsets.sort_unstable();
        offsets.dedup();
        Units {
            dwarf,
            headers,
            parsed,
            tables: offsets
                .into_iter()
                .map(|at| AbbreviationTable {
                    at,
                    parsed: OnceLock::new(),
                    with_code: OnceLock::new(),
                })
                .collect(),
        }
    }

    /// The abbreviation table of unit `header`.
    fn table_of(&self, header: &gimli::UnitHeader<Slice<'a>>) -> Option<&AbbreviationTable> {
        let at = header.debug_abbrev_offset().0;
        let i = self.tables.binary_search_by_key(&at, |t| t.at).ok()?;
        Some(&self.tables[i])
    }

    /// The abbreviations of unit `header`, parsed once for all the units that share them.
    fn abbreviations_of(
        &self,
        header: &gimli::UnitHeader<Slice<'a>>,
    ) -> Option<Arc<gimli::Abbreviations>> {
        let table = self.table_of(header)?;
        let at = gimli::DebugAbbrevOffset(table.at);
        table
            .parsed
            .get_or_init(|| self.dwarf.debug_abbrev.abbreviations(at).ok().map(Arc::new))
            .clone()
    }

    pub fn len(&self) -> usize {
        self.headers.len()
    }

    /// The bytes of unit `i`, header included.
    pub fn bytes(&self, i: usize) -> &'a [u8] {
        use gimli::Section;
        let Some(h) = self.headers.get(i) else {
            return &[];
        };
        let info = self.dwarf.debug_info.reader().slice();
        let at = h.offset().0;
        info.get(at..at.saturating_add(h.length_including_self()))
            .unwrap_or(&[])
    }

    /// Where unit `i` starts in `.debug_info`.
    pub fn start(&self, i: usize) -> usize {
        self.headers[i].offset().0
    }

    /// Unit `i`, parsed.
    pub fn get(&self, i: usize) -> Option<gimli::UnitRef<'_, Slice<'a>>> {
        let unit = self.parsed.get(i)?.get_or_init(|| {
            let header = self.headers[i];
            without_lines(&self.dwarf, header, self.abbreviations_of(&header)?)
        });
        unit.as_ref().map(|u| u.unit_ref(&self.dwarf))
    }

    /// The unit holding `.debug_info` offset `at`.
    pub fn holding(&self, at: usize) -> Option<usize> {
        let i = self.headers.partition_point(|h| h.offset().0 <= at);
        i.checked_sub(1)
            .filter(|&i| at < self.start(i) + self.headers[i].length_including_self())
    }

    /// Whether unit `i`'s root entry may give address ranges: its abbreviation has a low pc,
    /// high pc or ranges attribute, or cannot be read here (then it is read in full). Units
    /// without code (a Rust program's type and metadata units: 748 of ripgrep's 939, none in
    /// `.debug_aranges`) are passed over unparsed; reading each one's root for nothing was
    /// 1.5 ms of every Rust report (its `main` and allocator shims have no DWARF, so their
    /// addresses are looked for in every unit `.debug_aranges` leaves out).
    pub fn may_hold_code(&self, i: usize) -> bool {
        use gimli::Reader;
        let Some(header) = self.headers.get(i) else {
            return false;
        };
        let Some(code) = header
            .range_from(header.root_offset()..)
            .ok()
            .and_then(|mut root| root.read_uleb128().ok())
        else {
            return true;
        };
        let Some(table) = self.table_of(header) else {
            return true;
        };
        let codes = table
            .with_code
            .get_or_init(|| codes_with_code(&self.dwarf, table.at));
        match codes.binary_search_by_key(&code, |(c, _)| *c) {
            Ok(k) => codes[k].1,
            Err(_) => true,
        }
    }

    /// The address ranges unit `i`'s root entry gives.
    pub fn ranges(&self, i: usize) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let unit = self.get(i);
        if let Some(mut ranges) = unit.and_then(|u| u.unit_ranges().ok()) {
            while let Ok(Some(r)) = ranges.next() {
                if r.begin != 0 && r.begin < r.end {
                    out.push((r.begin, r.end));
                }
            }
        }
        out
    }
}

/// Each code of the abbreviation table at `at` in `.debug_abbrev`, sorted, with whether its
/// entries may give address ranges (a low pc, high pc or ranges attribute): read in one pass
/// over the table's bytes, nothing parsed into tables. Units share tables (ripgrep's 939 units,
/// 191 tables), and a unit's root entry is anywhere in its table; what cannot be read ends the
/// list (codes not in it are taken to have code).
fn codes_with_code(dwarf: &gimli::Dwarf<Slice<'_>>, at: usize) -> Vec<(u64, bool)> {
    use gimli::{Reader, Section};
    let mut out = Vec::new();
    let Some(table) = dwarf.debug_abbrev.reader().slice().get(at..) else {
        return out;
    };
    let mut rest = gimli::EndianSlice::new(table, gimli::LittleEndian);
    // Each entry: code, tag, children flag, then (name, form[, implicit constant]) pairs up
    // to (0, 0); the table ends with code 0. Every step reads a byte at least.
    let mut entry = || -> gimli::Result<Option<(u64, bool)>> {
        let code = rest.read_uleb128()?;
        if code == 0 {
            return Ok(None);
        }
        rest.read_uleb128()?;
        rest.read_u8()?;
        let mut pcs = false;
        loop {
            let name = rest.read_uleb128()?;
            let form = rest.read_uleb128()?;
            if name == 0 && form == 0 {
                return Ok(Some((code, pcs)));
            }
            if form == u64::from(gimli::DW_FORM_implicit_const.0) {
                rest.read_sleb128()?;
            }
            pcs |= [
                gimli::DW_AT_low_pc,
                gimli::DW_AT_high_pc,
                gimli::DW_AT_ranges,
            ]
            .iter()
            .any(|a| u64::from(a.0) == name);
        }
    };
    while let Ok(Some(code)) = entry() {
        out.push(code);
    }
    out.sort_unstable_by_key(|(c, _)| *c);
    out
}

/// Unit `header` with what names and ranges need (its abbreviations; the bases of
/// `.debug_addr`, `.debug_rnglists` and `.debug_str_offsets`; its low pc) and nothing else:
/// [`gimli::Unit::new`] also reads its name, directory and line program header, which for
/// the hundreds of units of a Rust program read only for their ranges touched megabytes of
/// `.debug_line` and `.debug_str`.
fn without_lines<'a>(
    dwarf: &gimli::Dwarf<Slice<'a>>,
    header: gimli::UnitHeader<Slice<'a>>,
    abbreviations: Arc<gimli::Abbreviations>,
) -> Option<gimli::Unit<Slice<'a>>> {
    let encoding = header.encoding();
    let mut unit = gimli::Unit {
        abbreviations,
        name: None,
        comp_dir: None,
        low_pc: 0,
        str_offsets_base: gimli::DebugStrOffsetsBase::default_for_encoding_and_file(
            encoding,
            dwarf.file_type,
        ),
        addr_base: gimli::DebugAddrBase(0),
        loclists_base: gimli::DebugLocListsBase::default_for_encoding_and_file(
            encoding,
            dwarf.file_type,
        ),
        rnglists_base: gimli::DebugRngListsBase::default_for_encoding_and_file(
            encoding,
            dwarf.file_type,
        ),
        line_program: None,
        dwo_id: None,
        header,
    };
    let mut low_pc = None;
    {
        let mut cursor = unit.header.entries(&unit.abbreviations);
        cursor.next_dfs().ok()?;
        for attr in cursor.current()?.attrs() {
            match (attr.name(), attr.value()) {
                (gimli::DW_AT_low_pc, v) => low_pc = Some(v),
                (
                    gimli::DW_AT_addr_base | gimli::DW_AT_GNU_addr_base,
                    gimli::AttributeValue::DebugAddrBase(b),
                ) => unit.addr_base = b,
                (
                    gimli::DW_AT_rnglists_base | gimli::DW_AT_GNU_ranges_base,
                    gimli::AttributeValue::DebugRngListsBase(b),
                ) => unit.rnglists_base = b,
                (gimli::DW_AT_str_offsets_base, gimli::AttributeValue::DebugStrOffsetsBase(b)) => {
                    unit.str_offsets_base = b
                }
                _ => {}
            }
        }
    }
    if let Some(v) = low_pc {
        unit.low_pc = dwarf.attr_address(&unit, v).ok()??;
    }
    Some(unit)
}

/// A function's name as DWARF gives it: where it lies in `.debug_str` (read later, all of a
/// file's in one pass in offset order: read as met, names scattered over the section would map
/// it whole), or the name itself where it lies elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    InStr(usize),
    Read(String),
}

/// The functions at one address, outermost first: raw names as DWARF spells them.
pub type Chain = Vec<Option<Name>>;

/// The functions at each of `svmas` in unit `i`, outermost first (the function, then the
/// calls inlined into it, each inside the one before): raw names as DWARF spells them. An
/// address no function of the unit covers gets none. A damaged unit gives what was read
/// before the damage.
pub fn names(units: &Units<'_>, i: usize, svmas: &[u64]) -> Vec<Chain> {
    let Some(unit) = units.get(i) else {
        return vec![Vec::new(); svmas.len()];
    };
    let mut found: Vec<Vec<Offset>> = vec![Vec::new(); svmas.len()];
    let mut sorted: Vec<(u64, usize)> = svmas.iter().enumerate().map(|(k, &a)| (a, k)).collect();
    sorted.sort_unstable();
    // An error ends the walk: what was found before it stands.
    let _ = walk(unit, sorted, &mut found);
    let mut names: HashMap<Offset, Option<Name>> = HashMap::new();
    found
        .into_iter()
        .map(|chain| {
            chain
                .into_iter()
                .map(|at| {
                    names
                        .entry(at)
                        .or_insert_with(|| name(units, i, at, NAME_DEPTH))
                        .clone()
                })
                .collect()
        })
        .collect()
}

/// Where addresses are being looked for: the entries below one at `depth`.
struct Scope {
    depth: isize,
    /// The addresses (with their index) not yet claimed by an entry at this level, sorted.
    addrs: Vec<(u64, usize)>,
    /// Inside a function: inlined calls count, nested functions do not (as addr2line).
    in_function: bool,
}

/// Reads the unit's entries in order, appending to `found[i]` each function or inlined call
/// whose ranges hold address `i`.
fn walk(
    unit: gimli::UnitRef<'_, Slice<'_>>,
    addrs: Vec<(u64, usize)>,
    found: &mut [Vec<Offset>],
) -> gimli::Result<()> {
    let mut entries = Cursor::new(unit)?;
    let mut scopes = vec![Scope {
        depth: isize::MIN,
        addrs,
        in_function: false,
    }];
    while !entries.is_empty() {
        let depth = entries.next_depth();
        let offset = entries.next_offset();
        let Some(abbrev) = entries.read_abbreviation()? else {
            continue;
        };
        while scopes.len() > 1 && scopes.last().is_some_and(|s| s.depth >= depth) {
            scopes.pop();
        }
        let scope = scopes.last_mut().expect("the unit's scope is never popped");
        if scope.addrs.is_empty() {
            if scopes.len() == 1 {
                // Every address is claimed: nothing later in the unit can change that.
                return Ok(());
            }
            skip_subtree(&mut entries, abbrev, depth)?;
            continue;
        }
        let counts = match abbrev.tag() {
            gimli::DW_TAG_subprogram => !scope.in_function,
            gimli::DW_TAG_inlined_subroutine => scope.in_function,
            _ => false,
        };
        if !counts {
            if abbrev.tag() == gimli::DW_TAG_subprogram {
                skip_subtree(&mut entries, abbrev, depth)?;
            } else {
                // Blocks, namespaces, types: what they hold is looked at as the scope's own.
                entries.skip_attributes(abbrev)?;
            }
            continue;
        }
        let ranges = entries.read_ranges(abbrev, offset)?;
        let inside = claim(&mut scope.addrs, &ranges);
        if inside.is_empty() {
            skip_subtree_children(&mut entries, abbrev, depth)?;
            continue;
        }
        for &(_, i) in &inside {
            found[i].push(offset);
        }
        if abbrev.has_children() {
            scopes.push(Scope {
                depth,
                addrs: inside,
                in_function: true,
            });
        }
    }
    Ok(())
}

/// Skips the attributes of an entry whose abbreviation was just read, and its children.
fn skip_subtree(
    entries: &mut Cursor<'_, '_>,
    abbrev: &gimli::Abbreviation,
    depth: isize,
) -> gimli::Result<()> {
    entries.skip_attributes(abbrev)?;
    skip_subtree_children(entries, abbrev, depth)
}

/// Skips the children of an entry whose attributes were just read.
fn skip_subtree_children(
    entries: &mut Cursor<'_, '_>,
    abbrev: &gimli::Abbreviation,
    depth: isize,
) -> gimli::Result<()> {
    if !abbrev.has_children() {
        return Ok(());
    }
    while !entries.is_empty() && entries.next_depth() > depth {
        if let Some(a) = entries.read_abbreviation()? {
            entries.skip_attributes(a)?;
        }
    }
    Ok(())
}

/// How many bytes an abbreviation's attributes take.
#[derive(Clone, Copy)]
enum Size {
    /// Not worked out yet.
    Unknown,
    /// The same for every entry: every form has a fixed size.
    Fixed(usize),
    /// Read form by form.
    Variable,
}

/// A unit's entries in order, as [`gimli::EntriesRaw`] reads them, but attributes skipped by
/// sizes worked out once per abbreviation: most entries of a unit are types, members and
/// variables whose attributes all have fixed sizes, and skipping them form by form was
/// most of the walk.
#[derive(Clone)]
struct Cursor<'u, 'a> {
    unit: gimli::UnitRef<'u, Slice<'a>>,
    /// The bytes from the next entry on.
    input: Slice<'a>,
    /// The unit offset of the next entry.
    next: usize,
    /// The depth of the next entry (the root's is 0).
    depth: isize,
    /// The abbreviation code of the entry just read.
    code: u64,
    /// By abbreviation code - 1 (codes are mostly small and dense; larger ones are read
    /// form by form).
    learned: Vec<Learned>,
}

/// What is worked out once per abbreviation of a unit, when first needed.
#[derive(Clone, Copy)]
struct Learned {
    size: Size,
    ranges_at: RangesAt,
}

/// Where the address ranges of an abbreviation's entries are, worked out once per
/// abbreviation: each range attribute's byte offset from the entry's first attribute, and
/// its form.
#[derive(Clone, Copy)]
enum RangesAt {
    /// Not worked out yet.
    Unknown,
    /// At fixed offsets (every attribute before each has a fixed size), in forms read here.
    Direct {
        low: Option<(usize, gimli::DwForm)>,
        high: Option<(usize, gimli::DwForm)>,
        list: Option<(usize, gimli::DwForm)>,
    },
    /// Read attribute by attribute, as gimli parses them.
    Parsed,
}

impl RangesAt {
    /// Where the range attributes of `abbrev`'s entries are, in a unit of `header`'s. DWARF
    /// 4 and later only: before, a constant could stand for an offset.
    fn of(abbrev: &gimli::Abbreviation, header: &gimli::UnitHeader<Slice<'_>>) -> RangesAt {
        if header.version() < 4 {
            return RangesAt::Parsed;
        }
        let (mut low, mut high, mut list) = (None, None, None);
        // The offset of the next attribute; `None` past one of variable size.
        let mut at = Some(0usize);
        for spec in abbrev.attributes() {
            let here = at;
            at = at.and_then(|a| a.checked_add(spec.size(header)?));
            let (slot, forms): (_, &[gimli::DwForm]) = match spec.name() {
                gimli::DW_AT_low_pc => (
                    &mut low,
                    &[
                        gimli::DW_FORM_addr,
                        gimli::DW_FORM_addrx,
                        gimli::DW_FORM_addrx1,
                        gimli::DW_FORM_addrx2,
                        gimli::DW_FORM_addrx4,
                    ],
                ),
                gimli::DW_AT_high_pc => (
                    &mut high,
                    &[
                        gimli::DW_FORM_addr,
                        gimli::DW_FORM_addrx,
                        gimli::DW_FORM_addrx1,
                        gimli::DW_FORM_addrx2,
                        gimli::DW_FORM_addrx4,
                        gimli::DW_FORM_data1,
                        gimli::DW_FORM_data2,
                        gimli::DW_FORM_data4,
                        gimli::DW_FORM_data8,
                        gimli::DW_FORM_udata,
                    ],
                ),
                gimli::DW_AT_ranges => (
                    &mut list,
                    &[gimli::DW_FORM_sec_offset, gimli::DW_FORM_rnglistx],
                ),
                _ => continue,
            };
            match here {
                Some(a) if forms.contains(&spec.form()) => *slot = Some((a, spec.form())),
                _ => return RangesAt::Parsed,
            }
        }
        RangesAt::Direct { low, high, list }
    }
}

/// Codes above this are not remembered in [`Cursor::learned`].
const MAX_REMEMBERED_CODE: u64 = 1 << 16;

impl<'u, 'a> Cursor<'u, 'a> {
    fn new(unit: gimli::UnitRef<'u, Slice<'a>>) -> gimli::Result<Cursor<'u, 'a>> {
        let root = unit.header.root_offset();
        Ok(Cursor {
            input: unit.header.range_from(root..)?,
            next: root.0,
            depth: 0,
            code: 0,
            learned: Vec::new(),
            unit,
        })
    }

    fn is_empty(&self) -> bool {
        self.input.is_empty()
    }

    fn next_depth(&self) -> isize {
        self.depth
    }

    fn next_offset(&self) -> Offset {
        gimli::UnitOffset(self.next)
    }

    /// Reads the next entry's abbreviation (`None`: the null entry that ends a list of
    /// children); its attributes are to be skipped or read next.
    fn read_abbreviation(&mut self) -> gimli::Result<Option<&'u gimli::Abbreviation>> {
        use gimli::Reader;
        let before = self.input.len();
        let code = self.input.read_uleb128()?;
        self.next += before - self.input.len();
        if code == 0 {
            self.depth -= 1;
            return Ok(None);
        }
        let abbrev = self
            .unit
            .abbreviations
            .get(code)
            .ok_or(gimli::Error::InvalidAbbreviationCode(code))?;
        if abbrev.has_children() {
            self.depth += 1;
        }
        self.code = code;
        Ok(Some(abbrev))
    }

    /// What is learned of the abbreviation of the entry just read; `None` for a code too
    /// large to remember.
    fn learned(&mut self) -> Option<&mut Learned> {
        let i = usize::try_from(self.code.checked_sub(1)?).ok()?;
        if self.code > MAX_REMEMBERED_CODE {
            return None;
        }
        if self.learned.len() <= i {
            let unknown = Learned {
                size: Size::Unknown,
                ranges_at: RangesAt::Unknown,
            };
            self.learned.resize(i + 1, unknown);
        }
        Some(&mut self.learned[i])
    }

    /// Skips the attributes of the entry whose abbreviation, `abbrev`, was just read.
    fn skip_attributes(&mut self, abbrev: &gimli::Abbreviation) -> gimli::Result<()> {
        use gimli::Reader;
        let size = match self.learned().map(|l| l.size) {
            Some(Size::Fixed(n)) => Some(n),
            Some(Size::Variable) => None,
            Some(Size::Unknown) | None => {
                let fixed = abbrev
                    .attributes()
                    .iter()
                    .map(|spec| spec.size(&self.unit.header))
                    .sum::<Option<usize>>();
                if let Some(l) = self.learned() {
                    l.size = fixed.map_or(Size::Variable, Size::Fixed);
                }
                fixed
            }
        };
        let before = self.input.len();
        match size {
            Some(n) => self.input.skip(n)?,
            None => {
                for spec in abbrev.attributes() {
                    skip_form(&mut self.input, spec.form(), &self.unit.header)?;
                }
            }
        }
        self.next += before - self.input.len();
        Ok(())
    }

    /// Reads the attributes of the entry at `offset`, whose abbreviation `abbrev` was just
    /// read, for its address ranges. Empty ranges, and those at 0 (the tombstone a linker
    /// leaves for a discarded function), are left out.
    ///
    /// Where the abbreviation's range attributes lie at fixed offsets (functions and inlined
    /// calls put them first), only they are read, and the rest skipped by size: parsing every
    /// attribute of every function a walk passes was a third of a Rust report's inline walk.
    fn read_ranges(
        &mut self,
        abbrev: &gimli::Abbreviation,
        offset: Offset,
    ) -> gimli::Result<Vec<(u64, u64)>> {
        let at = match self.learned().map(|l| l.ranges_at) {
            Some(RangesAt::Unknown) | None => {
                let at = RangesAt::of(abbrev, &self.unit.header);
                if let Some(l) = self.learned() {
                    l.ranges_at = at;
                }
                at
            }
            Some(at) => at,
        };
        let (low, high, size, list) = match at {
            RangesAt::Direct { low, high, list } => {
                let unit = self.unit;
                let value = |at: Option<(usize, gimli::DwForm)>| {
                    at.map(|(at, form)| direct_value(self.input, at, form, &unit.header))
                        .transpose()
                };
                let (low, high, list) = (value(low)?, value(high)?, value(list)?);
                self.skip_attributes(abbrev)?;
                let (mut size, mut high_at) = (None, None);
                match high {
                    Some(gimli::AttributeValue::Udata(n)) => size = Some(n),
                    Some(v) => high_at = unit.attr_address(v)?,
                    None => {}
                }
                let low = low.map(|v| unit.attr_address(v)).transpose()?.flatten();
                let list = list
                    .map(|v| unit.attr_ranges_offset(v))
                    .transpose()?
                    .flatten();
                (low, high_at, size, list)
            }
            RangesAt::Unknown | RangesAt::Parsed => self.parse_ranges(offset)?,
        };
        self.ranges(low, high, size, list)
    }

    /// The range attributes of the entry at `offset` (low pc, high pc as an address or a
    /// size, range list), every attribute parsed by gimli; the cursor is moved past them.
    #[allow(clippy::type_complexity)]
    fn parse_ranges(
        &mut self,
        offset: Offset,
    ) -> gimli::Result<(
        Option<u64>,
        Option<u64>,
        Option<u64>,
        Option<gimli::RangeListsOffset<usize>>,
    )> {
        let unit = self.unit;
        let mut entries = unit.entries_raw(Some(offset))?;
        let abbrev = entries
            .read_abbreviation()?
            .ok_or(gimli::Error::NoEntryAtGivenOffset(offset.0 as u64))?;
        let (mut low, mut high, mut size, mut list) = (None, None, None, None);
        for spec in abbrev.attributes() {
            let attr = entries.read_attribute(*spec)?;
            match (attr.name(), attr.value()) {
                (gimli::DW_AT_low_pc, v) => low = unit.attr_address(v)?,
                (gimli::DW_AT_high_pc, gimli::AttributeValue::Udata(n)) => size = Some(n),
                (gimli::DW_AT_high_pc, v) => high = unit.attr_address(v)?,
                (gimli::DW_AT_ranges, v) => list = unit.attr_ranges_offset(v)?,
                _ => {}
            }
        }
        // On past the attributes just read.
        self.next = entries.next_offset().0;
        self.input = unit.header.range_from(entries.next_offset()..)?;
        Ok((low, high, size, list))
    }

    /// The ranges a low pc, a high pc (or a size) and a range list give.
    fn ranges(
        &self,
        low: Option<u64>,
        high: Option<u64>,
        size: Option<u64>,
        list: Option<gimli::RangeListsOffset<usize>>,
    ) -> gimli::Result<Vec<(u64, u64)>> {
        let unit = self.unit;
        let mut out = Vec::new();
        if let Some(list) = list {
            let mut ranges = unit.ranges(list)?;
            while let Some(r) = ranges.next()? {
                out.push((r.begin, r.end));
            }
        } else if let Some(low) = low {
            if let Some(end) = high.or_else(|| size.map(|n| low.wrapping_add(n))) {
                out.push((low, end));
            }
        }
        out.retain(|&(begin, end)| begin != 0 && begin < end);
        Ok(out)
    }
}

/// The value of the attribute at byte `at` of `attrs` (an entry's attributes), of `form`
/// (one [`RangesAt::of`] accepts), as gimli gives a range attribute's: an address, an index
/// into `.debug_addr` or `.debug_rnglists`, a size (`Udata`) or an offset of a range list.
fn direct_value<'a>(
    attrs: Slice<'a>,
    at: usize,
    form: gimli::DwForm,
    header: &gimli::UnitHeader<Slice<'a>>,
) -> gimli::Result<gimli::AttributeValue<Slice<'a>>> {
    use gimli::{AttributeValue as V, Reader};
    let mut r = attrs;
    r.skip(at)?;
    let index = |n: u64| gimli::DebugAddrIndex(n as usize);
    Ok(match form {
        gimli::DW_FORM_addr => V::Addr(r.read_address(header.address_size())?),
        gimli::DW_FORM_addrx => V::DebugAddrIndex(index(r.read_uleb128()?)),
        gimli::DW_FORM_addrx1 => V::DebugAddrIndex(index(r.read_u8()?.into())),
        gimli::DW_FORM_addrx2 => V::DebugAddrIndex(index(r.read_u16()?.into())),
        gimli::DW_FORM_addrx4 => V::DebugAddrIndex(index(r.read_u32()?.into())),
        gimli::DW_FORM_data1 => V::Udata(r.read_u8()?.into()),
        gimli::DW_FORM_data2 => V::Udata(r.read_u16()?.into()),
        gimli::DW_FORM_data4 => V::Udata(r.read_u32()?.into()),
        gimli::DW_FORM_data8 => V::Udata(r.read_u64()?),
        gimli::DW_FORM_udata => V::Udata(r.read_uleb128()?),
        gimli::DW_FORM_sec_offset => {
            V::RangeListsRef(gimli::RawRangeListsOffset(r.read_offset(header.format())?))
        }
        gimli::DW_FORM_rnglistx => {
            V::DebugRngListsIndex(gimli::DebugRngListsIndex(r.read_uleb128()? as usize))
        }
        _ => return Err(gimli::Error::UnknownForm(form)),
    })
}

/// For each function and inlined call of unit `i` (the entries a walk reads ranges of), its
/// ranges as [`Cursor::read_ranges`] reads them and as gimli parses
/// them, and where each left the cursor; and how many of the entries were read directly.
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub fn ranges_read_both_ways(
    units: &Units<'_>,
    i: usize,
) -> (
    usize,
    Vec<((Vec<(u64, u64)>, usize), (Vec<(u64, u64)>, usize))>,
) {
    let unit = units.get(i).expect("a unit that parses");
    let mut entries = Cursor::new(unit).unwrap();
    let (mut direct, mut out) = (0, Vec::new());
    while !entries.is_empty() {
        let offset = entries.next_offset();
        let Some(abbrev) = entries.read_abbreviation().unwrap() else {
            continue;
        };
        let walked = matches!(
            abbrev.tag(),
            gimli::DW_TAG_subprogram | gimli::DW_TAG_inlined_subroutine
        );
        if !walked {
            entries.skip_attributes(abbrev).unwrap();
            continue;
        }
        if matches!(RangesAt::of(abbrev, &unit.header), RangesAt::Direct { .. }) {
            direct += 1;
        }
        let mut parsed = entries.clone();
        let read = entries.read_ranges(abbrev, offset).unwrap();
        let (low, high, size, list) = parsed.parse_ranges(offset).unwrap();
        let gimlis = parsed.ranges(low, high, size, list).unwrap();
        out.push(((read, entries.next), (gimlis, parsed.next)));
    }
    (direct, out)
}

/// Skips one attribute of form `form`.
fn skip_form(
    input: &mut Slice<'_>,
    form: gimli::DwForm,
    header: &gimli::UnitHeader<Slice<'_>>,
) -> gimli::Result<()> {
    use gimli::Reader;
    // Its value is in the abbreviation, none in the entry (and gimli wants one given to
    // describe the form: it is only reached here through DW_FORM_indirect, in damaged DWARF).
    if form == gimli::DW_FORM_implicit_const {
        return Ok(());
    }
    if let Some(n) = gimli::AttributeSpecification::new(gimli::DW_AT_null, form, None).size(header)
    {
        return input.skip(n);
    }
    let n = match form {
        gimli::DW_FORM_block1 => input.read_u8()? as usize,
        gimli::DW_FORM_block2 => input.read_u16()? as usize,
        gimli::DW_FORM_block4 => input.read_u32()? as usize,
        gimli::DW_FORM_block | gimli::DW_FORM_exprloc => input.read_uleb128_u32()? as usize,
        gimli::DW_FORM_string => {
            input.read_null_terminated_slice()?;
            0
        }
        gimli::DW_FORM_sdata => {
            input.read_sleb128()?;
            0
        }
        gimli::DW_FORM_udata
        | gimli::DW_FORM_ref_udata
        | gimli::DW_FORM_strx
        | gimli::DW_FORM_addrx
        | gimli::DW_FORM_loclistx
        | gimli::DW_FORM_rnglistx
        | gimli::DW_FORM_GNU_addr_index
        | gimli::DW_FORM_GNU_str_index => {
            input.read_uleb128()?;
            0
        }
        gimli::DW_FORM_indirect => {
            // The form comes first.
            let form = gimli::DwForm(input.read_uleb128_u16()?);
            if form == gimli::DW_FORM_indirect {
                return Err(gimli::Error::UnknownForm(form));
            }
            return skip_form(input, form, header);
        }
        _ => return Err(gimli::Error::UnknownForm(form)),
    };
    input.skip(n)
}

/// Takes out of `addrs` (sorted) those within `ranges`, and gives them (sorted).
/// (Most entries hold none of them: that costs two binary searches a range, nothing more.)
fn claim(addrs: &mut Vec<(u64, usize)>, ranges: &[(u64, u64)]) -> Vec<(u64, usize)> {
    let spans: Vec<(usize, usize)> = ranges
        .iter()
        .map(|&(begin, end)| {
            let from = addrs.partition_point(|a| a.0 < begin);
            (from, addrs.partition_point(|a| a.0 < end).max(from))
        })
        .filter(|(from, to)| from < to)
        .collect();
    if spans.is_empty() {
        return Vec::new();
    }
    let mut taken = vec![false; addrs.len()];
    for (from, to) in spans {
        taken[from..to].fill(true);
    }
    let mut inside = Vec::new();
    let mut i = 0;
    addrs.retain(|&a| {
        let keep = !taken[i];
        i += 1;
        if !keep {
            inside.push(a);
        }
        keep
    });
    inside
}

/// The name of the entry at `at` of unit `i`: its linkage name, else its name, else (up to
/// `depth` links) that of its abstract origin or specification, in this unit or another.
fn name(units: &Units<'_>, i: usize, at: Offset, depth: usize) -> Option<Name> {
    let unit = units.get(i)?;
    let entry = unit.entry(at).ok()?;
    let (mut name, mut next) = (None, None);
    for attr in entry.attrs() {
        match attr.name() {
            gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
                if let Some(s) = string(unit, attr.value()) {
                    return Some(s);
                }
            }
            gimli::DW_AT_name => name = string(unit, attr.value()),
            gimli::DW_AT_abstract_origin | gimli::DW_AT_specification => next = Some(attr.value()),
            _ => {}
        }
    }
    if name.is_some() {
        return name;
    }
    let depth = depth.checked_sub(1)?;
    match next? {
        gimli::AttributeValue::UnitRef(o) => self::name(units, i, o, depth),
        gimli::AttributeValue::DebugInfoRef(o) => {
            let j = units.holding(o.0)?;
            self::name(units, j, gimli::UnitOffset(o.0 - units.start(j)), depth)
        }
        _ => None,
    }
}

/// The string attribute `value` names: where it starts in `.debug_str` if it lies there (and
/// the section holds that offset), else the string read.
fn string<'a>(
    unit: gimli::UnitRef<'_, Slice<'a>>,
    value: gimli::AttributeValue<Slice<'a>>,
) -> Option<Name> {
    use gimli::Section;
    let in_str = match value {
        gimli::AttributeValue::DebugStrRef(o) => Some(o),
        gimli::AttributeValue::DebugStrOffsetsIndex(k) => unit.string_offset(k).ok(),
        _ => None,
    };
    let str_len = unit.dwarf.debug_str.reader().slice().len();
    match in_str {
        Some(o) if o.0 < str_len => Some(Name::InStr(o.0)),
        Some(_) => None,
        None => unit
            .attr_string(value)
            .ok()
            .map(|s| Name::Read(s.to_string_lossy().into_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DWARF 4 unit header (64-bit addresses) followed by `entries`.
    fn unit(entries: &[u8]) -> Vec<u8> {
        let mut b = ((7 + entries.len()) as u32).to_le_bytes().to_vec();
        b.extend_from_slice(&4u16.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.push(8);
        b.extend_from_slice(entries);
        b
    }

    #[test]
    fn forms_are_skipped_by_their_sizes_and_damaged_indirection_is_refused() {
        let bytes = unit(&[]);
        let info = gimli::DebugInfo::new(&bytes, gimli::LittleEndian);
        let header = info.units().next().unwrap().unwrap();
        let skip = |data: &[u8], form| {
            let mut input = gimli::EndianSlice::new(data, gimli::LittleEndian);
            skip_form(&mut input, form, &header).map(|()| data.len() - input.len())
        };
        assert_eq!(skip(&[1, 2, 3, 4, 9], gimli::DW_FORM_data4), Ok(4));
        assert_eq!(skip(&[b'a', b'b', 0, 9], gimli::DW_FORM_string), Ok(3));
        assert_eq!(skip(&[2, 7, 7, 9], gimli::DW_FORM_exprloc), Ok(3));
        assert_eq!(skip(&[0x80, 0x01, 9], gimli::DW_FORM_udata), Ok(2));
        // Indirect: the form first (data2), then its value.
        assert_eq!(skip(&[0x05, 1, 2, 9], gimli::DW_FORM_indirect), Ok(3));
        // An indirect implicit constant (no value in the entry) takes no more than its form;
        // an indirect indirection is refused.
        assert_eq!(skip(&[0x21, 9], gimli::DW_FORM_indirect), Ok(1));
        assert!(skip(&[0x16, 0x16, 9], gimli::DW_FORM_indirect).is_err());
        assert!(skip(&[5, 1], gimli::DW_FORM_block1).is_err());
    }

    #[test]
    fn an_address_is_claimed_once_by_the_first_range_that_holds_it() {
        let mut addrs: Vec<(u64, usize)> =
            [10, 20, 30, 40].iter().map(|&a| (a, a as usize)).collect();
        assert!(claim(&mut addrs, &[(0, 10), (41, 50)]).is_empty());
        assert_eq!(
            claim(&mut addrs, &[(35, 45), (10, 21)]),
            [(10, 10), (20, 20), (40, 40)]
        );
        assert_eq!(addrs, [(30, 30)]);
        // A later, overlapping entry finds only what is left.
        assert_eq!(claim(&mut addrs, &[(0, 100)]), [(30, 30)]);
        assert!(addrs.is_empty());
    }
}
