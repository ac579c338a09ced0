//! DWARF for inline frames and source lines, loaded only as far as the lookups need.
//!
//! Debian's libc debug file holds 4,000 compilation units (6 MB of `.debug_info`, compressed
//! on disk); a profile looks up a dozen addresses there. Where `.debug_aranges` names the
//! units that hold the lookups, only those units are parsed (one addr2line context each) and
//! `.debug_info` is inflated only as far as the last of them. Otherwise (no aranges, an
//! address they do not cover, a unit whose entries may point into other units) the whole
//! file is parsed in one context.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use addr2line::gimli::{self, Reader as _};
use object::{Object, ObjectSection};
use rayon::prelude::*;

use super::inlines;
use crate::files::dwarf_cache::{self, DwarfCache};
use crate::files::ElfData;

/// The DWARF sections addr2line reads for inline frames and lines, besides `.debug_info`.
/// The others stay unloaded (debug files compress them: inflating location lists and macros
/// cost a tenth of a report).
const SECTIONS: [gimli::SectionId; 9] = {
    use gimli::SectionId::*;
    [
        DebugAbbrev,
        DebugAddr,
        DebugAranges,
        DebugLine,
        DebugLineStr,
        DebugRanges,
        DebugRngLists,
        DebugStr,
        DebugStrOffsets,
    ]
};

type Slice<'a> = gimli::EndianSlice<'a, gimli::LittleEndian>;

/// `.debug_info` and [`SECTIONS`]: what [`Inflated`] holds, in that order.
const ALL: [gimli::SectionId; 10] = {
    let mut all = [gimli::SectionId::DebugInfo; 10];
    let mut i = 0;
    while i < SECTIONS.len() {
        all[i + 1] = SECTIONS[i];
        i += 1;
    }
    all
};

/// A file's compressed DWARF sections inflated whole, when the driver asked for them early
/// ([`prefetch`]): loaded while the recording is read, they cost the lookups nothing later.
/// Inflated once, they are kept in the cache of inflated DWARF ([`dwarf_cache`]) by build id,
/// and later runs map them from there instead.
///
/// One slot per section, filled once by whichever job gets there first, the others waiting.
/// Filling one is sequential code: a rayon job that waits for a slot whose filler is itself
/// waiting on rayon jobs could be the very job that filler waits for (a deadlock, seen).
#[derive(Default)]
struct Inflated {
    requested: AtomicBool,
    /// The sections from the cache, looked up once ([`cached`]).
    cached: OnceLock<Option<DwarfCache>>,
    /// `None` in a slot: the section is not compressed (or absent).
    sections: [OnceLock<Option<Vec<u8>>>; ALL.len()],
}

/// Inflates the compressed DWARF sections of `file` whole, in parallel (once; [`Loaded::load`]
/// waits for a section under way, or inflates it itself if it was not started).
pub(super) fn prefetch(file: &ElfData) {
    file.derived
        .get::<Inflated>()
        .requested
        .store(true, Ordering::Release);
    if cached(file).is_some() {
        return;
    }
    (0..ALL.len()).into_par_iter().for_each(|i| {
        inflated(file, i);
    });
    store(file);
}

/// The most a debug file's compressed DWARF may inflate to for a lookup that did not ask for
/// it early to inflate it whole and cache it (libc's: 8.6 MB). Larger files (a compiler's
/// hundreds of MB) inflate only the units the lookups need, each run.
const CACHE_WHOLE_MAX: usize = 64 << 20;

/// Whether the lookups in `file` should inflate its DWARF whole and cache it rather than
/// inflate only the units they need: the recording did not list it (perf lists only the files
/// its samples' own addresses hit, not libc met in unwound call chains), yet each later run
/// would inflate the same units again. Files with a build id (the cache's key) whose
/// compressed sections inflate to at most [`CACHE_WHOLE_MAX`].
fn worth_caching(file: &ElfData, obj: &object::File<'_>) -> bool {
    if file.build_id.is_none() {
        return false;
    }
    let mut total = 0usize;
    for id in ALL {
        if let Section::Zlib { size, .. } = Section::open(obj, id) {
            total = total.saturating_add(size);
        }
    }
    total > 0 && total <= CACHE_WHOLE_MAX
}

/// The compressed sections of `file` inflated, from the cache, if it holds exactly those, each
/// as long as the file's compression header says.
fn cached(file: &ElfData) -> Option<&DwarfCache> {
    file.derived
        .get::<Inflated>()
        .cached
        .get_or_init(|| {
            let obj = object::File::parse(&*file.bytes).ok()?;
            let cache = dwarf_cache::load(&file.build_id_hex()?, fingerprint(&obj))?;
            let mut compressed = 0;
            for id in ALL {
                if let Section::Zlib { size, .. } = Section::open(&obj, id) {
                    if cache.section(id.name()).map(<[u8]>::len) != Some(size) {
                        return None;
                    }
                    compressed += 1;
                }
            }
            (compressed > 0 && compressed == cache.lengths().count()).then_some(cache)
        })
        .as_ref()
}

/// Puts the sections of `file` inflated into the cache, when it has a build id, something was
/// compressed, and each compressed section inflated to the length its header gives (not a
/// damaged or reduced file's).
fn store(file: &ElfData) {
    let (Some(id), Ok(obj)) = (file.build_id_hex(), object::File::parse(&*file.bytes)) else {
        return;
    };
    let mut sections: Vec<(&str, &[u8])> = Vec::new();
    for (i, &section) in ALL.iter().enumerate() {
        if let Section::Zlib { size, .. } = Section::open(&obj, section) {
            match inflated(file, i) {
                Some(bytes) if bytes.len() == size => sections.push((section.name(), bytes)),
                _ => return,
            }
        }
    }
    if !sections.is_empty() {
        dwarf_cache::store(&id, fingerprint(&obj), &sections);
    }
}

/// What tells apart files with one build id (a debug file and an archive's reduced copy of
/// it): each compressed section's name, sizes and the ends of its compressed bytes.
fn fingerprint(obj: &object::File<'_>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    for id in ALL {
        let Some(c) = obj
            .section_by_name(id.name())
            .and_then(|s| s.compressed_data().ok())
            .filter(|c| c.format == object::CompressionFormat::Zlib)
        else {
            continue;
        };
        let ends = 256.min(c.data.len());
        (id.name(), c.data.len(), c.uncompressed_size).hash(&mut h);
        c.data[..ends].hash(&mut h);
        c.data[c.data.len() - ends..].hash(&mut h);
    }
    h.finish()
}

/// Section `ALL[i]` of `file` inflated whole, if it is compressed (from the cache, if it has
/// the file's).
fn inflated(file: &ElfData, i: usize) -> Option<&[u8]> {
    if let Some(cache) = cached(file) {
        return cache.section(ALL[i].name());
    }
    file.derived.get::<Inflated>().sections[i]
        .get_or_init(|| {
            let obj = object::File::parse(&*file.bytes).ok()?;
            match Section::open(&obj, ALL[i]) {
                s @ Section::Zlib { .. } => Some(s.full().into_owned()),
                Section::Ready(_) => None,
            }
        })
        .as_deref()
}

/// One file's DWARF sections, inflated as far as its lookups need.
pub struct Loaded<'a> {
    sections: Vec<(gimli::SectionId, Cow<'a, [u8]>)>,
    info: Cow<'a, [u8]>,
    /// The units to parse alone, or `None` for the whole file.
    units: Option<Vec<Unit>>,
    /// The file, for giving back the pages of what was read ([`Loaded::give_back`]).
    file: &'a ElfData,
}

/// A compilation unit that holds lookups: where it lies in `.debug_info`, and the address
/// ranges `.debug_aranges` gives it.
struct Unit {
    at: usize,
    len: usize,
    ranges: Vec<(u64, u64)>,
}

impl<'a> Loaded<'a> {
    /// Loads the DWARF of `file` that looking up `svmas` needs.
    pub fn load(file: &'a ElfData, svmas: &[u64]) -> Option<Loaded<'a>> {
        Loaded::load_units(file, Some(svmas))
    }

    /// All of the DWARF of `file`, whatever the lookups (tests compare the two).
    #[cfg(test)]
    fn load_whole(file: &'a ElfData) -> Option<Loaded<'a>> {
        Loaded::load_units(file, None)
    }

    fn load_units(file: &'a ElfData, svmas: Option<&[u64]>) -> Option<Loaded<'a>> {
        let obj = object::File::parse(&*file.bytes).ok()?;
        let requested = file
            .derived
            .get::<Inflated>()
            .requested
            .load(Ordering::Acquire);
        if requested || cached(file).is_some() {
            return Some(Loaded::from_whole(file, &obj, svmas));
        }
        if worth_caching(file, &obj) {
            // Inflated whole once, and mapped from the cache by every later run.
            prefetch(file);
            return Some(Loaded::from_whole(file, &obj, svmas));
        }
        let aranges = Section::open(&obj, gimli::SectionId::DebugAranges).full();
        let units = svmas.and_then(|svmas| units_holding(&aranges, svmas));
        let whole_info = units.as_ref().is_none_or(|held| !held.missing.is_empty());
        let mut info = Section::open(&obj, gimli::SectionId::DebugInfo);
        let (_, mut sections) = rayon::join(
            || match &units {
                // Addresses aranges leave out are looked for in every unit they do not list.
                Some(held) if !held.missing.is_empty() => info.inflate_to(usize::MAX),
                Some(Held { units, .. }) => {
                    // Each unit's length is in its header: inflate up to the last header,
                    // then up to the last unit's end.
                    let last = units.iter().map(|u| u.at).max().unwrap_or(0);
                    info.inflate_to(last + 12);
                    let end = units
                        .iter()
                        .map(|u| {
                            let len = unit_length(info.bytes(), u.at).unwrap_or(0);
                            u.at.saturating_add(len)
                        })
                        .max()
                        .unwrap_or(0);
                    info.inflate_to(end);
                }
                None => info.inflate_to(usize::MAX),
            },
            || {
                SECTIONS
                    .par_iter()
                    .filter(|&&id| id != gimli::SectionId::DebugAranges)
                    .map(|&id| (id, Section::open(&obj, id).full()))
                    .collect::<Vec<_>>()
            },
        );
        sections.push((gimli::SectionId::DebugAranges, aranges));
        let narrowed = units.is_some();
        let mut loaded = Loaded {
            sections,
            info: info.into_bytes(),
            units: None,
            file,
        };
        loaded.units = units.and_then(|held| loaded.narrowed(held));
        // A unit may refer to entries of units left out: then parse the whole file.
        if narrowed && loaded.units.is_none() && !whole_info {
            let mut info = Section::open(&obj, gimli::SectionId::DebugInfo);
            info.inflate_to(usize::MAX);
            loaded.info = info.into_bytes();
        }
        Some(loaded)
    }

    /// From sections inflated whole: no inflating left, only the choice of units.
    fn from_whole(file: &'a ElfData, obj: &object::File<'a>, svmas: Option<&[u64]>) -> Loaded<'a> {
        let get = |id: gimli::SectionId| -> Cow<'a, [u8]> {
            let i = ALL.iter().position(|&have| have == id).expect("one of ALL");
            match inflated(file, i) {
                Some(bytes) => Cow::Borrowed(bytes),
                None => Section::open(obj, id).full(),
            }
        };
        let sections: Vec<(gimli::SectionId, Cow<'a, [u8]>)> =
            SECTIONS.iter().map(|&id| (id, get(id))).collect();
        let info = get(gimli::SectionId::DebugInfo);
        let mut loaded = Loaded {
            sections,
            info,
            units: None,
            file,
        };
        let aranges = loaded.section(gimli::SectionId::DebugAranges);
        let units = svmas.and_then(|svmas| units_holding(aranges, svmas));
        loaded.units = units.and_then(|held| loaded.narrowed(held));
        loaded
    }

    /// `units` (those aranges say hold the lookups) with those of the units aranges do not
    /// list whose own ranges hold the addresses aranges left out (`missing`: an address in
    /// no unit at all, a PLT stub say, needs none), each with its length, if each can be
    /// parsed alone; `None` (the whole file) otherwise.
    fn narrowed(&self, held: Held) -> Option<Vec<Unit>> {
        let Held {
            mut units,
            missing,
            listed,
        } = held;
        if !missing.is_empty() {
            units.extend(self.unlisted_units_holding(&missing, &listed)?);
            units.sort_unstable_by_key(|u| u.at);
            units.dedup_by_key(|u| u.at);
        }
        for u in units.iter_mut() {
            u.len = unit_length(&self.info, u.at).unwrap_or(0);
        }
        let abbrev = self.section(gimli::SectionId::DebugAbbrev);
        can_narrow(&self.info, abbrev, &units).then_some(units)
    }

    /// The units `.debug_aranges` does not list (`listed`: those it does, sorted) whose root
    /// entries' ranges hold one of `svmas` (as addr2line looks them up), with those ranges.
    fn unlisted_units_holding(&self, svmas: &[u64], listed: &[usize]) -> Option<Vec<Unit>> {
        let units = inlines::Units::new(self.dwarf(&self.info, false)?);
        let found = (0..units.len())
            .into_par_iter()
            .filter(|&u| listed.binary_search(&units.start(u)).is_err() && units.may_hold_code(u))
            .filter_map(|u| {
                let ranges = units.ranges(u);
                let holds = |&(s, e): &(u64, u64)| svmas.iter().any(|&a| s <= a && a < e);
                ranges.iter().any(holds).then(|| Unit {
                    at: units.start(u),
                    len: 0,
                    ranges,
                })
            })
            .collect();
        Some(found)
    }

    fn section(&self, id: gimli::SectionId) -> &[u8] {
        if id == gimli::SectionId::DebugInfo {
            return &self.info;
        }
        self.sections
            .iter()
            .find(|(have, _)| *have == id)
            .map_or(&[][..], |(_, bytes)| &bytes[..])
    }

    /// The DWARF of `info` (all of `.debug_info`, or one unit of it `alone`) with the other
    /// sections loaded. A unit alone: offsets in `.debug_info` start at it, so its ranges are
    /// found in the unit itself rather than in `.debug_aranges`.
    fn dwarf<'s>(&'s self, info: &'s [u8], alone: bool) -> Option<gimli::Dwarf<Slice<'s>>> {
        let sections = gimli::DwarfSections::load(|id| -> Result<&[u8], gimli::Error> {
            Ok(match id {
                gimli::SectionId::DebugInfo => info,
                gimli::SectionId::DebugAranges if alone => &[],
                id => self.section(id),
            })
        })
        .ok()?;
        Some(sections.borrow(|s| gimli::EndianSlice::new(s, gimli::LittleEndian)))
    }

    /// The frames at each of `svmas`, innermost first, as [`Frames::find`] gives them but for
    /// their lines (none): names only, each unit read once for all its addresses and its line
    /// program left alone ([`inlines`]).
    pub fn names(&self, svmas: &[u64]) -> Option<Vec<Vec<Frame>>> {
        // Per DWARF (the whole file, or each unit alone): its units, and the addresses (by
        // index in svmas) each unit answers.
        type UnitsAsked = Vec<(usize, Vec<usize>)>;
        let mut jobs: Vec<(inlines::Units<'_>, UnitsAsked)> = Vec::new();
        match &self.units {
            Some(units) => {
                let ranges: Vec<(u64, u64, usize)> = units
                    .iter()
                    .enumerate()
                    .flat_map(|(i, u)| u.ranges.iter().map(move |&(s, e)| (s, e, i)))
                    .collect();
                let per_unit = by_range(ranges, svmas, units.len());
                for (unit, ks) in units.iter().zip(per_unit) {
                    if ks.is_empty() {
                        continue;
                    }
                    let info = self.info.get(unit.at..unit.at.saturating_add(unit.len));
                    if let Some(dwarf) = info.and_then(|i| self.dwarf(i, true)) {
                        jobs.push((inlines::Units::new(dwarf), vec![(0, ks)]));
                    }
                }
            }
            None => {
                let units = inlines::Units::new(self.dwarf(&self.info, false)?);
                let per_unit = self.whole_file_units(&units, svmas);
                // Every unit's root was read for its ranges: their pages are given back (the
                // units walked map theirs again).
                self.give_back(&self.info);
                self.give_back(self.section(gimli::SectionId::DebugRanges));
                self.give_back(self.section(gimli::SectionId::DebugRngLists));
                let per_unit = per_unit
                    .into_iter()
                    .enumerate()
                    .filter(|(_, ks)| !ks.is_empty());
                let per_unit = per_unit.collect();
                jobs.push((units, per_unit));
            }
        }
        let found: Vec<Vec<(Vec<usize>, Vec<inlines::Chain>)>> = jobs
            .par_iter()
            .map(|(units, per_unit)| {
                per_unit
                    .par_iter()
                    .map(|(u, ks)| {
                        let addrs: Vec<u64> = ks.iter().map(|&k| svmas[k]).collect();
                        let chains = inlines::names(units, *u, &addrs);
                        // Walked: the unit's pages are given back.
                        self.give_back(units.bytes(*u));
                        (ks.clone(), chains)
                    })
                    .collect()
            })
            .collect();
        let strings = self.strings(found.iter().flatten().flat_map(|(_, chains)| {
            chains.iter().flatten().filter_map(|name| match name {
                Some(inlines::Name::InStr(at)) => Some(*at),
                _ => None,
            })
        }));
        let read = |name: inlines::Name| match name {
            inlines::Name::InStr(at) => strings
                .binary_search_by_key(&at, |(have, _)| *have)
                .ok()
                .map(|i| strings[i].1.clone()),
            inlines::Name::Read(s) => Some(s),
        };
        // Done with the DWARF (names followed across units, ranges read in the walks).
        self.give_back(&self.info);
        for (_, bytes) in &self.sections {
            self.give_back(bytes);
        }
        let mut out: Vec<Vec<Frame>> = (0..svmas.len()).map(|_| Vec::new()).collect();
        for (ks, chains) in found.into_iter().flatten() {
            for (k, mut chain) in ks.into_iter().zip(chains) {
                // In a unit's code but no function of it: one nameless frame, as addr2line
                // gives (a location, no function), so that the symbol names it or, without
                // one, it is [unknown] rather than named by address.
                if chain.is_empty() {
                    chain.push(None);
                }
                out[k] = chain
                    .into_iter()
                    .rev()
                    .map(|name| Frame {
                        name: name.and_then(read),
                        file: None,
                        line: None,
                    })
                    .collect();
            }
        }
        Some(out)
    }

    /// For each unit of the whole file, the indices of the `svmas` it answers: by
    /// `.debug_aranges`, and for the addresses they leave out, by the ranges the root entry
    /// of each unit they do not list gives (as addr2line decides).
    fn whole_file_units(&self, units: &inlines::Units<'_>, svmas: &[u64]) -> Vec<Vec<usize>> {
        let mut listed = vec![false; units.len()];
        let aranges = arange_entries(self.section(gimli::SectionId::DebugAranges));
        let mut ranges: Vec<(u64, u64, usize)> = aranges
            .into_iter()
            .filter_map(|(begin, end, at)| {
                let u = units.holding(at)?;
                listed[u] = true;
                Some((begin, end, u))
            })
            .collect();
        ranges.sort_unstable();
        if svmas.iter().any(|&a| holder(&ranges, a).is_none()) {
            let more: Vec<(u64, u64, usize)> = (0..units.len())
                .into_par_iter()
                .filter(|&u| !listed[u] && units.may_hold_code(u))
                .flat_map_iter(|u| units.ranges(u).into_iter().map(move |(s, e)| (s, e, u)))
                .collect();
            ranges.extend(more);
        }
        by_range(ranges, svmas, units.len())
    }

    /// The strings of `.debug_str` at offsets `at`, sorted by offset: read in one pass in
    /// that order, each MiB's pages given back once passed.
    fn strings(&self, at: impl Iterator<Item = usize>) -> Vec<(usize, String)> {
        const STEP: usize = 1 << 20;
        let mut at: Vec<usize> = at.collect();
        at.sort_unstable();
        at.dedup();
        let section = self.section(gimli::SectionId::DebugStr);
        let mut given_back = 0;
        let strings = at
            .into_iter()
            .filter_map(|o| {
                if o >= given_back + STEP {
                    let upto = o / STEP * STEP;
                    self.give_back(&section[given_back..upto]);
                    given_back = upto;
                }
                let rest = section.get(o..)?;
                let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                Some((o, String::from_utf8_lossy(&rest[..len]).into_owned()))
            })
            .collect();
        self.give_back(section);
        strings
    }

    /// Unmaps the pages of `part` (bytes of the file or of its cached inflated sections)
    /// from this process ([`crate::files::Bytes::give_back`]).
    fn give_back(&self, part: &[u8]) {
        for bytes in mapped(self.file) {
            bytes.give_back(part);
        }
    }

    /// How many compilation units are parsed alone (`None`: the whole file).
    #[cfg(test)]
    fn narrowed_units(&self) -> Option<usize> {
        self.units.as_ref().map(Vec::len)
    }
}

/// Unmaps from this process the pages of `file` and of its cached inflated sections, once its
/// lookups are done: what was read stays in the page cache ([`crate::files::Bytes::give_back`]).
pub(super) fn give_back(file: &ElfData) {
    for bytes in mapped(file) {
        bytes.give_back_all();
    }
}

/// The bytes the DWARF of `file` is read from: the file's, and its cached inflated sections'
/// where the cache was opened.
fn mapped(file: &ElfData) -> impl Iterator<Item = &crate::files::Bytes> {
    let cache = file.derived.get::<Inflated>().cached.get();
    std::iter::once(&file.bytes).chain(cache.into_iter().flatten().map(DwarfCache::bytes))
}

/// Looks up inline frames and lines in a [`Loaded`] file.
pub struct Frames<'s> {
    contexts: Vec<addr2line::Context<Slice<'s>>>,
    /// (start, end, context) sorted by start; empty when one context covers everything.
    ranges: Vec<(u64, u64, usize)>,
}

/// A frame at an address: the function's name (raw, as DWARF spells it) and `file:line`.
pub struct Frame {
    pub name: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

impl<'s> Frames<'s> {
    pub fn new(loaded: &'s Loaded<'_>) -> Option<Frames<'s>> {
        let context = |info: &'s [u8], alone: bool| {
            addr2line::Context::from_dwarf(loaded.dwarf(info, alone)?).ok()
        };
        match &loaded.units {
            None => Some(Frames {
                contexts: vec![context(&loaded.info, false)?],
                ranges: Vec::new(),
            }),
            Some(units) => {
                let mut contexts = Vec::new();
                let mut ranges = Vec::new();
                for u in units {
                    let unit = loaded.info.get(u.at..u.at.saturating_add(u.len));
                    let Some(c) = unit.and_then(|unit| context(unit, true)) else {
                        continue;
                    };
                    ranges.extend(u.ranges.iter().map(|&(s, e)| (s, e, contexts.len())));
                    contexts.push(c);
                }
                ranges.sort_unstable();
                Some(Frames { contexts, ranges })
            }
        }
    }

    /// The frames at `svma`, innermost (inlined) first, the real function last.
    pub fn find(&self, svma: u64) -> Vec<Frame> {
        let context = if self.ranges.is_empty() {
            self.contexts.first()
        } else {
            holder(&self.ranges, svma).and_then(|c| self.contexts.get(c))
        };
        let mut out = Vec::new();
        let Some(Ok(mut iter)) = context.map(|c| c.find_frames(svma).skip_all_loads()) else {
            return out;
        };
        while let Ok(Some(f)) = iter.next() {
            out.push(Frame {
                name: f
                    .function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok())
                    .map(|n| n.into_owned()),
                file: f.location.as_ref().and_then(|l| l.file.map(str::to_string)),
                line: f.location.as_ref().and_then(|l| l.line),
            });
        }
        out
    }
}

/// Of `ranges` (start, end, what), sorted, the `what` of the last one starting at or before
/// `a`, if it holds `a`: how an address is given its unit everywhere here.
fn holder(ranges: &[(u64, u64, usize)], a: u64) -> Option<usize> {
    let i = ranges.partition_point(|r| r.0 <= a).checked_sub(1)?;
    let (_, end, what) = ranges[i];
    (a < end).then_some(what)
}

/// For each of `count` units, the indices of the `svmas` that `ranges` (start, end, unit) put
/// in it ([`holder`]).
fn by_range(mut ranges: Vec<(u64, u64, usize)>, svmas: &[u64], count: usize) -> Vec<Vec<usize>> {
    ranges.sort_unstable();
    let mut per_unit: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (k, &a) in svmas.iter().enumerate() {
        if let Some(u) = holder(&ranges, a) {
            per_unit[u].push(k);
        }
    }
    per_unit
}

/// The (start, end, `.debug_info` offset of the unit) of every non-empty range `aranges`
/// lists, up to the first damage.
fn arange_entries(aranges: &[u8]) -> Vec<(u64, u64, usize)> {
    let mut all = Vec::new();
    let mut headers = gimli::DebugAranges::new(aranges, gimli::LittleEndian).headers();
    while let Ok(Some(h)) = headers.next() {
        let at = h.debug_info_offset().0;
        let mut entries = h.entries();
        while let Ok(Some(e)) = entries.next() {
            let r = e.range();
            if r.begin < r.end {
                all.push((r.begin, r.end, at));
            }
        }
    }
    all
}

/// What `.debug_aranges` says of a file's lookups.
struct Held {
    /// The compilation units (by `.debug_info` offset) holding them, with all their ranges.
    units: Vec<Unit>,
    /// The addresses no range listed holds ([`Loaded::narrowed`] looks for those in the
    /// units aranges do not list).
    missing: Vec<u64>,
    /// Every unit aranges lists, sorted.
    listed: Vec<usize>,
}

/// What `.debug_aranges` says of `svmas`; `None` if there are no aranges.
fn units_holding(aranges: &[u8], svmas: &[u64]) -> Option<Held> {
    let mut all = arange_entries(aranges);
    if all.is_empty() {
        return None;
    }
    all.sort_unstable();
    let mut wanted: Vec<usize> = Vec::new();
    let mut missing = Vec::new();
    for &svma in svmas {
        match holder(&all, svma) {
            Some(at) => wanted.push(at),
            None => missing.push(svma),
        }
    }
    wanted.sort_unstable();
    wanted.dedup();
    let mut units: Vec<Unit> = wanted
        .iter()
        .map(|&at| Unit {
            at,
            len: 0,
            ranges: Vec::new(),
        })
        .collect();
    for &(start, end, at) in &all {
        if let Ok(i) = wanted.binary_search(&at) {
            units[i].ranges.push((start, end));
        }
    }
    let mut listed: Vec<usize> = all.iter().map(|&(_, _, at)| at).collect();
    listed.sort_unstable();
    listed.dedup();
    Some(Held {
        units,
        missing,
        listed,
    })
}

/// What looking up `svmas` in `file` reads of its DWARF (the units [`Loaded::load`] parses,
/// if each can be read alone, no references into other units; `None` otherwise): their
/// `.debug_info` entries one after the other, and `.debug_line` with only their line
/// programs, the others zeroed so that offsets stay (`None`: the file has none). Sections
/// inflated once, here, or mapped from the cache of inflated DWARF.
pub(crate) fn pruned(file: &ElfData, svmas: &[u64]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let loaded = Loaded::load(file, svmas)?;
    let mut info = Vec::new();
    for u in loaded.units.as_ref()? {
        info.extend_from_slice(loaded.info.get(u.at..u.at.checked_add(u.len)?)?);
    }
    let line = loaded.section(gimli::SectionId::DebugLine);
    let abbrev = loaded.section(gimli::SectionId::DebugAbbrev);
    let kept_line = (!line.is_empty()).then(|| {
        let mut kept = vec![0u8; line.len()];
        for r in line_programs(&info, abbrev, line) {
            if let (Some(from), Some(to)) = (line.get(r.clone()), kept.get_mut(r)) {
                to.copy_from_slice(from);
            }
        }
        kept
    });
    Some((info, kept_line))
}

/// Where in `.debug_line` the line programs of the units in `info` lie (by their
/// `DW_AT_stmt_list`).
fn line_programs(info: &[u8], abbrev: &[u8], line: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let abbrev = gimli::DebugAbbrev::new(abbrev, gimli::LittleEndian);
    let mut headers = gimli::DebugInfo::new(info, gimli::LittleEndian).units();
    while let Ok(Some(h)) = headers.next() {
        let Ok(abbrevs) = h.abbreviations(&abbrev) else {
            continue;
        };
        let mut entries = h.entries(&abbrevs);
        let Ok(Some(root)) = entries.next_dfs() else {
            continue;
        };
        let at = match root.attr_value(gimli::DW_AT_stmt_list) {
            Some(gimli::AttributeValue::DebugLineRef(o)) => o.0,
            Some(gimli::AttributeValue::SecOffset(o)) => o,
            _ => continue,
        };
        if let Some(len) = unit_length(line, at) {
            out.push(at..at + len);
        }
    }
    out
}

/// Whether each of `units` can be parsed alone: whole in `info`, and referring to no other
/// unit.
fn can_narrow(info: &[u8], abbrev: &[u8], units: &[Unit]) -> bool {
    units.iter().all(|u| {
        let bytes = info.get(u.at..u.at.saturating_add(u.len)).unwrap_or(&[]);
        u.len > 0 && abbrev_offset(bytes).is_some_and(|o| !refers_outside(abbrev, o))
    })
}

/// The length (header included) of the unit at `at` of `.debug_info`.
fn unit_length(info: &[u8], at: usize) -> Option<usize> {
    let mut r = Slice::new(info.get(at..)?, gimli::LittleEndian);
    let (len, format) = r.read_initial_length().ok()?;
    Some(len + format.initial_length_size() as usize)
}

/// The `.debug_abbrev` offset in the header of `unit`.
fn abbrev_offset(unit: &[u8]) -> Option<usize> {
    let mut units = gimli::DebugInfo::new(unit, gimli::LittleEndian).units();
    let header = units.next().ok()??;
    Some(header.debug_abbrev_offset().0)
}

/// Whether the abbreviation table at `at` has forms that may point outside their unit
/// (`DW_FORM_ref_addr`, as dwz and LTO write; `DW_FORM_indirect`, which could be anything).
/// A table that does not parse counts as pointing outside.
fn refers_outside(abbrev: &[u8], at: usize) -> bool {
    let Some(bytes) = abbrev.get(at..) else {
        return true;
    };
    let mut r = Slice::new(bytes, gimli::LittleEndian);
    let mut parse = || -> gimli::Result<bool> {
        while r.read_uleb128()? != 0 {
            r.read_uleb128()?; // tag
            r.read_u8()?; // children
            loop {
                let (name, form) = (r.read_uleb128()?, r.read_uleb128()?);
                match gimli::DwForm(form as u16) {
                    _ if name == 0 && form == 0 => break,
                    gimli::DW_FORM_ref_addr | gimli::DW_FORM_indirect => return Ok(true),
                    gimli::DW_FORM_implicit_const => {
                        r.read_sleb128()?;
                    }
                    _ => {}
                }
            }
        }
        Ok(false)
    };
    parse().unwrap_or(true)
}

/// A section of the file, inflated (if compressed with zlib) only as far as asked.
enum Section<'a> {
    Ready(Cow<'a, [u8]>),
    Zlib {
        input: &'a [u8],
        inflater: flate2::Decompress,
        out: Vec<u8>,
        size: usize,
    },
}

impl<'a> Section<'a> {
    fn open(obj: &object::File<'a>, id: gimli::SectionId) -> Section<'a> {
        let Some(section) = obj.section_by_name(id.name()) else {
            return Section::Ready(Cow::Borrowed(&[]));
        };
        match section.compressed_data() {
            Ok(c) if c.format == object::CompressionFormat::Zlib => {
                Section::zlib(c.data, c.uncompressed_size)
            }
            _ => Section::Ready(
                section
                    .uncompressed_data()
                    .unwrap_or(Cow::Borrowed(&[][..])),
            ),
        }
    }

    /// A zlib stream that inflates to `size` bytes, as its header says, but no more than
    /// deflate can give: a damaged header must not reserve more memory than exists.
    fn zlib(input: &'a [u8], size: u64) -> Section<'a> {
        Section::Zlib {
            input,
            inflater: flate2::Decompress::new(true),
            out: Vec::new(),
            size: usize::try_from(size)
                .unwrap_or(usize::MAX)
                .min(input.len().saturating_mul(1032)),
        }
    }

    /// Inflates the first `len` bytes (or all there are).
    fn inflate_to(&mut self, len: usize) {
        const STEP: usize = 256 << 10;
        let Section::Zlib {
            input,
            inflater,
            out,
            size,
        } = self
        else {
            return;
        };
        let want = len.min(*size);
        while out.len() < want {
            out.reserve_exact((want - out.len()).max(STEP).min(*size - out.len()));
            let consumed = inflater.total_in() as usize;
            let before = out.len();
            let status = inflater.decompress_vec(
                input.get(consumed..).unwrap_or(&[]),
                out,
                flate2::FlushDecompress::None,
            );
            if !matches!(status, Ok(flate2::Status::Ok)) || out.len() == before {
                break;
            }
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Section::Ready(b) => b,
            Section::Zlib { out, .. } => out,
        }
    }

    fn full(mut self) -> Cow<'a, [u8]> {
        self.inflate_to(usize::MAX);
        self.into_bytes()
    }

    fn into_bytes(self) -> Cow<'a, [u8]> {
        match self {
            Section::Ready(b) => b,
            Section::Zlib { out, .. } => Cow::Owned(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::ObjectSymbol;

    /// libc's debug file (libc6-dbg): thousands of units, with .debug_aranges.
    fn libc_debug() -> Option<std::sync::Arc<ElfData>> {
        let loader = crate::files::Loader::new();
        let libc = loader.elf("/usr/lib/x86_64-linux-gnu/libc.so.6", None)?;
        let debug = loader.debug_file(&libc);
        assert!(
            debug.is_some() || std::env::var_os("CI").is_none(),
            "libc6-dbg is missing (scripts/setup installs it)"
        );
        debug
    }

    /// Every 200th function of libc, a few bytes in.
    fn some_functions(debug: &ElfData) -> Vec<u64> {
        let obj = object::File::parse(&*debug.bytes).unwrap();
        let mut funcs: Vec<(u64, String)> = obj
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 8)
            .map(|s| (s.address() + 4, s.name().unwrap_or("").to_string()))
            .collect();
        funcs.sort();
        funcs.dedup_by_key(|f| f.0);
        funcs.iter().step_by(200).map(|f| f.0).collect()
    }

    fn show(frames: Vec<Frame>) -> Vec<String> {
        frames
            .iter()
            .map(|f| format!("{:?} {:?}:{:?}", f.name, f.file, f.line))
            .collect()
    }

    /// How many bytes of `file`'s `.debug_*` sections this process has mapped (pages present
    /// in its page tables, from /proc/self/pagemap).
    fn dwarf_mapped(file: &ElfData) -> usize {
        use std::io::{Read, Seek};
        let obj = object::File::parse(&*file.bytes).unwrap();
        let mut pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut pages = std::collections::BTreeSet::new();
        for section in obj.sections() {
            let (Some((at, len)), Ok(name)) = (section.file_range(), section.name()) else {
                continue;
            };
            if !name.starts_with(".debug_") || len == 0 {
                continue;
            }
            let start = file.bytes.as_ptr() as u64 + at;
            let (first, end) = (start / 4096, (start + len).div_ceil(4096));
            let mut entries = vec![0u8; ((end - first) * 8) as usize];
            pagemap.seek(std::io::SeekFrom::Start(first * 8)).unwrap();
            pagemap.read_exact(&mut entries).unwrap();
            for (k, e) in entries.chunks_exact(8).enumerate() {
                if u64::from_le_bytes(e.try_into().unwrap()) >> 63 == 1 {
                    pages.insert(first + k as u64);
                }
            }
        }
        pages.len() * 4096
    }

    /// Names looked up across a large DWARF file (this test program's own, uncompressed)
    /// leave little of it mapped: each unit is given back once walked, `.debug_str` a MiB at a
    /// time as its names are read in order, the rest once done. Kept mapped, what was read
    /// here was 26 MiB of the process's memory. The names are addr2line's.
    #[test]
    fn names_leave_the_file_unmapped_and_are_addr2line_s() {
        let exe = std::env::current_exe().unwrap();
        let loader = crate::files::Loader::new();
        let elf = loader.elf(exe.to_str().unwrap(), None).unwrap();
        let svmas = some_functions(&elf);
        let loaded = Loaded::load(&elf, &svmas).unwrap();
        assert!(
            matches!(loaded.info, Cow::Borrowed(_)),
            "DWARF read in place"
        );
        let (info, strings) = (
            loaded.info.len(),
            loaded.section(gimli::SectionId::DebugStr).len(),
        );
        assert!(
            info + strings > 32 << 20,
            "{info} + {strings} bytes: too few to tell"
        );
        let names = loaded.names(&svmas).unwrap();
        let mapped = dwarf_mapped(&elf);
        assert!(
            mapped < 2 << 20,
            "{} KiB of the DWARF mapped after names for {} addresses from {info} bytes of \
             .debug_info and {strings} of .debug_str",
            mapped >> 10,
            svmas.len()
        );
        let frames = Frames::new(&loaded).unwrap();
        let mut named = 0;
        for (k, &svma) in svmas.iter().enumerate() {
            let want: Vec<Option<String>> = frames.find(svma).into_iter().map(|f| f.name).collect();
            let have: Vec<Option<String>> = names[k].iter().map(|f| f.name.clone()).collect();
            if !want.is_empty() {
                assert_eq!(have, want, "at {svma:#x}");
                named += 1;
            }
        }
        assert!(named * 2 > svmas.len(), "{named} of {} named", svmas.len());
    }

    #[test]
    fn narrowed_units_give_what_the_whole_file_gives() {
        let Some(debug) = libc_debug() else {
            eprintln!("skipped: no libc debug file");
            return;
        };
        let svmas = some_functions(&debug);
        assert!(svmas.len() >= 10, "{} lookups", svmas.len());

        let narrow = Loaded::load(&debug, &svmas).unwrap();
        let whole = Loaded::load_whole(&debug).unwrap();
        let units = narrow
            .narrowed_units()
            .expect("libc's aranges cover its functions");
        assert!(
            units <= svmas.len(),
            "{units} units for {} lookups",
            svmas.len()
        );
        assert!(narrow.info.len() <= whole.info.len());
        let (narrow, whole) = (Frames::new(&narrow).unwrap(), Frames::new(&whole).unwrap());
        let mut named = 0;
        for &svma in &svmas {
            let n = show(narrow.find(svma));
            assert_eq!(n, show(whole.find(svma)), "at {svma:#x}");
            named += n.iter().any(|f| f.starts_with("Some(")) as usize;
        }
        assert!(
            named * 10 >= svmas.len() * 9,
            "{named} of {} named",
            svmas.len()
        );
    }

    #[test]
    fn the_cache_of_inflated_sections_gives_the_frames_inflating_gives() {
        let Some(debug) = libc_debug() else {
            eprintln!("skipped: no libc debug file");
            return;
        };
        let svmas = some_functions(&debug);
        // A copy without a build id: never cached, inflated here.
        let mut plain = ElfData::parse(
            debug.name.clone(),
            crate::files::Bytes::Owned(debug.bytes.to_vec()),
        )
        .unwrap();
        plain.build_id = None;
        assert!(cached(&plain).is_none());
        let frames_of = |file: &ElfData| -> Vec<Vec<String>> {
            let loaded = Loaded::load(file, &svmas).unwrap();
            let frames = Frames::new(&loaded).unwrap();
            svmas.iter().map(|&a| show(frames.find(a))).collect()
        };
        let expected = frames_of(&plain);
        // Inflates and stores (or finds the cache an earlier run stored).
        prefetch(&debug);
        let again = libc_debug().unwrap();
        let cache = cached(&again).expect("libc's inflated DWARF is cached");
        assert!(cache.section(".debug_info").unwrap().len() > 1 << 20);
        assert_eq!(frames_of(&again), expected);
    }

    #[test]
    fn sections_inflated_early_give_the_same_frames() {
        let Some(debug) = libc_debug() else {
            eprintln!("skipped: no libc debug file");
            return;
        };
        let svmas = some_functions(&debug);
        let expected: Vec<Vec<String>> = {
            let whole = Loaded::load_whole(&debug).unwrap();
            let frames = Frames::new(&whole).unwrap();
            svmas.iter().map(|&a| show(frames.find(a))).collect()
        };
        prefetch(&debug);
        // Inflated now, or mapped from the cache of an earlier run.
        assert!(inflated(&debug, 0).is_some_and(|b| b.len() > 1 << 20));
        let loaded = Loaded::load(&debug, &svmas).unwrap();
        assert!(
            loaded.narrowed_units().is_some(),
            "still parsed unit by unit"
        );
        let frames = Frames::new(&loaded).unwrap();
        let got: Vec<Vec<String>> = svmas.iter().map(|&a| show(frames.find(a))).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_lookup_in_no_unit_needs_none() {
        let Some(debug) = libc_debug() else {
            eprintln!("skipped: no libc debug file");
            return;
        };
        // Address 1 lies in no unit, listed in aranges or not: the others stay narrowed
        // (before, one such address, a PLT stub say, had the whole file parsed, and an
        // archive keep all of its DWARF).
        assert_eq!(
            Loaded::load(&debug, &[1]).unwrap().narrowed_units(),
            Some(0)
        );
        let mut svmas = some_functions(&debug);
        let alone = Loaded::load(&debug, &svmas).unwrap().narrowed_units();
        svmas.push(1);
        let narrow = Loaded::load(&debug, &svmas).unwrap();
        assert_eq!(narrow.narrowed_units(), alone);
        let whole = Loaded::load_whole(&debug).unwrap();
        let (narrow, whole) = (Frames::new(&narrow).unwrap(), Frames::new(&whole).unwrap());
        for &svma in &svmas {
            assert_eq!(
                show(narrow.find(svma)),
                show(whole.find(svma)),
                "at {svma:#x}"
            );
        }
    }

    /// A program of two units, one compiled by gcc (listed in `.debug_aranges`), one by clang
    /// (which writes no aranges): a lookup in the second finds its unit by the unit's own
    /// ranges, as addr2line does, and stays narrowed.
    #[test]
    fn a_unit_aranges_do_not_list_is_found_by_its_own_ranges() {
        let dir = std::env::temp_dir().join(format!("bpfperf-aranges-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.c"),
            "int from_gcc(int x) { return x * 3 + 1; }\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("b.c"),
            "int from_gcc(int);\nint from_clang(int x) { return from_gcc(x) * 5; }\n\
             int main(int argc, char **argv) { return from_clang(argc); }\n",
        )
        .unwrap();
        let run = |cmd: &[&str]| {
            let ok = std::process::Command::new(cmd[0])
                .args(&cmd[1..])
                .current_dir(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok || std::env::var_os("CI").is_none(), "{cmd:?} failed");
            ok
        };
        if !(run(&["gcc", "-g", "-O1", "-c", "a.c"])
            && run(&["clang", "-g", "-O1", "-c", "b.c"])
            && run(&["gcc", "a.o", "b.o", "-o", "two"]))
        {
            eprintln!("skipped: no gcc or clang");
            return;
        }
        let bytes = std::fs::read(dir.join("two")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let elf = ElfData::parse("two".into(), crate::files::Bytes::Owned(bytes)).unwrap();
        let obj = object::File::parse(&*elf.bytes).unwrap();
        let at = |name: &str| {
            obj.symbols()
                .find(|s| s.name() == Ok(name))
                .map(|s| s.address())
                .unwrap()
        };
        let (gcc, clang) = (at("from_gcc"), at("from_clang"));
        let aranges = Section::open(&obj, gimli::SectionId::DebugAranges).full();
        let held = units_holding(&aranges, &[gcc, clang]).unwrap();
        assert_eq!((held.units.len(), &held.missing[..]), (1, &[clang][..]));
        let loaded = Loaded::load(&elf, &[gcc, clang]).unwrap();
        assert_eq!(loaded.narrowed_units(), Some(2));
        let frames = Frames::new(&loaded).unwrap();
        let name = |a| frames.find(a).pop().and_then(|f| f.name);
        assert_eq!(name(clang).as_deref(), Some("from_clang"));
        assert_eq!(name(gcc).as_deref(), Some("from_gcc"));
    }

    #[test]
    fn a_compressed_section_inflates_in_steps_and_a_damaged_size_is_bounded() {
        use std::io::Write;
        let data: Vec<u8> = (0..1_000_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&data).unwrap();
        let compressed = z.finish().unwrap();

        let mut s = Section::zlib(&compressed, data.len() as u64);
        s.inflate_to(1000);
        assert!(s.bytes().len() >= 1000 && s.bytes().len() < data.len());
        assert_eq!(s.bytes(), &data[..s.bytes().len()]);
        assert_eq!(&*s.full(), &data[..]);
        // A header claiming 2^64 bytes: what the stream holds, no huge reservation.
        assert_eq!(&*Section::zlib(&compressed, u64::MAX).full(), &data[..]);
        // A stream cut short: what it gave.
        let cut = Section::zlib(&compressed[..compressed.len() / 2], data.len() as u64).full();
        assert!(!cut.is_empty() && cut.len() < data.len());
        assert_eq!(&*cut, &data[..cut.len()]);
    }

    #[test]
    fn abbreviations_with_cross_unit_references_are_noticed() {
        // code 1, DW_TAG_compile_unit, children, (DW_AT_name, DW_FORM_string), end; end.
        let local = [1, 0x11, 1, 0x03, 0x08, 0, 0, 0];
        assert!(!refers_outside(&local, 0));
        // code 1, DW_TAG_subprogram, no children, (DW_AT_abstract_origin, DW_FORM_ref_addr).
        let cross = [1, 0x2e, 0, 0x31, 0x10, 0, 0, 0];
        assert!(refers_outside(&cross, 0));
        // Truncated: counts as referring outside.
        assert!(refers_outside(&local[..3], 0));
        assert!(refers_outside(&local, 100));
    }

    /// This test program (rustc's DWARF 4 and C compilers' DWARF 5, 1,563 units) and ripgrep
    /// where the benchmarks built it (939 units), read.
    fn programs_of_many_units() -> Vec<ElfData> {
        let mut paths = vec![std::env::current_exe().unwrap()];
        let rg =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-real/bin/rg");
        if rg.exists() {
            paths.push(rg);
        }
        paths
            .into_iter()
            .map(|path| {
                let bytes = crate::files::Bytes::Owned(std::fs::read(&path).unwrap());
                ElfData::parse(path.display().to_string(), bytes).unwrap()
            })
            .collect()
    }

    /// The range attributes of functions and inlined calls, read at their offsets in the
    /// entry (the rest skipped by size), are what gimli parses, and the cursor ends where
    /// gimli's does: every entry with ranges of this test program (rustc's DWARF 4 and C
    /// compilers' DWARF 5), of libc's debug file (GCC's DWARF 5) and of ripgrep where the
    /// benchmarks built it.
    #[test]
    fn ranges_read_directly_are_those_gimli_parses() {
        let mut files: Vec<std::sync::Arc<ElfData>> = programs_of_many_units()
            .into_iter()
            .map(std::sync::Arc::new)
            .collect();
        files.extend(libc_debug());
        for elf in files {
            let loaded = Loaded::load_whole(&elf).unwrap();
            let units = inlines::Units::new(loaded.dwarf(&loaded.info, false).unwrap());
            let (mut direct, mut entries) = (0, 0);
            for u in (0..units.len()).filter(|&u| units.may_hold_code(u)) {
                let (d, pairs) = inlines::ranges_read_both_ways(&units, u);
                for (k, (read, parsed)) in pairs.iter().enumerate() {
                    assert_eq!(read, parsed, "{}: unit {u}, entry {k}", elf.name);
                }
                direct += d;
                entries += pairs.len();
            }
            eprintln!("{}: {direct} of {entries} entries read directly", elf.name);
            assert!(entries > 1000, "{}: {entries} entries", elf.name);
            assert!(
                direct * 10 > entries * 9,
                "{}: {direct} of {entries}",
                elf.name
            );
        }
    }

    /// A unit passed over as holding no code ([`inlines::Units::may_hold_code`], from its
    /// root's abbreviation alone) has no ranges when read: every unit of this test program's
    /// DWARF (rustc's and C compilers' units, DWARF 4 and 5), and of ripgrep's where the
    /// benchmarks built it.
    #[test]
    fn units_passed_over_as_holding_no_code_have_no_ranges() {
        for elf in programs_of_many_units() {
            let path = &elf.name;
            let loaded = Loaded::load_whole(&elf).unwrap();
            let units = inlines::Units::new(loaded.dwarf(&loaded.info, false).unwrap());
            assert!(units.len() > 100, "{} units", units.len());
            let (mut passed_over, mut with_code) = (0, 0);
            for u in 0..units.len() {
                let ranges = units.ranges(u);
                if !units.may_hold_code(u) {
                    assert!(ranges.is_empty(), "{path}: unit {u}: {ranges:x?}");
                    passed_over += 1;
                }
                with_code += !ranges.is_empty() as usize;
            }
            // Type and metadata units: half of this program's 1,563, 748 of ripgrep's 939.
            assert!(passed_over > 100, "{path}: {passed_over} passed over");
            assert!(with_code > 100, "{path}: {with_code} units with code");
        }
    }
}
