//! The process timeline, replayed from COMM, FORK and MMAP/MMAP2 records in time order (and
//! KSYMBOL records, kernel code named at run time, collected as they come), and
//! versioned: each change is a new version and each state keeps the version it began at, so a
//! sample can be placed (then, or later and in parallel) in the processes as they were at its
//! time.
//!
//! COMM names threads, FORK copies the parent's mappings and name, MMAP/MMAP2 add executable
//! mappings (replacing what they overlap; an exec keeps the old ones until then, as perf
//! does: samples taken inside execve still have the old image's user stack).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use format::linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, Mmap2FileId, RecordType,
};

use super::recording::{Ksymbol, MapId, MapPiece, Mapping, Recording};

/// The executable mappings of one process.
#[derive(Default, Clone)]
pub(super) struct Process {
    /// start -> mapping, for the executable mappings currently in place.
    maps: BTreeMap<u64, MapId>,
}

impl Process {
    /// The mapping that starts last at or before `addr`, if it holds `addr`, with the span of
    /// addresses that find the same mapping: from its start to its end or the next mapping's
    /// start, whichever comes first.
    fn find_span(&self, addr: u64, mappings: &[Mapping]) -> Option<(u64, u64, MapId)> {
        let (&start, &id) = self.maps.range(..=addr).next_back()?;
        let end = self.span_end(start, id, mappings);
        (addr < end).then_some((start, end, id))
    }

    /// Where the addresses that the entry at `start` (of mapping `id`) finds end: at its
    /// mapping's end or the next entry, whichever comes first.
    fn span_end(&self, start: u64, id: MapId, mappings: &[Mapping]) -> u64 {
        let next = self
            .maps
            .range(start + 1..)
            .next()
            .map_or(u64::MAX, |(&s, _)| s);
        mappings[id as usize].end.min(next)
    }

    /// The stretches of addresses each mapping holds, in order (what [`Process::find_span`]
    /// finds).
    fn pieces(&self, mappings: &[Mapping]) -> Vec<MapPiece> {
        self.maps
            .iter()
            .map(|(&start, &id)| MapPiece {
                start,
                end: self.span_end(start, id, mappings),
                id,
            })
            .filter(|p| p.start < p.end)
            .collect()
    }

    /// A finder for many addresses of this process (a stack's frames mostly lie in one or
    /// two mappings).
    pub(super) fn finder<'a>(&'a self, mappings: &'a [Mapping]) -> Finder<'a> {
        Finder {
            process: self,
            mappings,
            last: None,
        }
    }

    /// Adds a mapping (`mappings`: those added before); the ones starting inside it are
    /// replaced, and what goes on past its end of the one it was laid over stays, as perf
    /// keeps it: an entry from its end that finds the old mapping. (NVIDIA's GL library
    /// maps a page range of its own code again, writable: half of a game's samples fell in
    /// the 40 MB of code past that range, and were [unknown].)
    fn insert(&mut self, id: MapId, m: &Mapping, mappings: &[Mapping]) {
        // The entry in place at `m.end`, if any: it finds its mapping up to that mapping's
        // end or the next entry, whichever comes first.
        let tail = self
            .maps
            .range(..m.end)
            .next_back()
            .and_then(|(&at, &old)| (self.span_end(at, old, mappings) > m.end).then_some(old));
        let inside: Vec<u64> = self.maps.range(m.start..m.end).map(|(&s, _)| s).collect();
        for s in inside {
            self.maps.remove(&s);
        }
        self.maps.insert(m.start, id);
        if let Some(old) = tail {
            self.maps.insert(m.end, old);
        }
    }
}

/// Finds the mapping of addresses of one process, remembering the span the last one found.
pub(super) struct Finder<'a> {
    process: &'a Process,
    mappings: &'a [Mapping],
    last: Option<(u64, u64, MapId)>,
}

impl Finder<'_> {
    pub(super) fn find(&mut self, addr: u64) -> Option<MapId> {
        if let Some((lo, hi, id)) = self.last {
            if (lo..hi).contains(&addr) {
                return Some(id);
            }
        }
        let found = self.process.find_span(addr, self.mappings);
        if found.is_some() {
            self.last = found;
        }
        found.map(|(_, _, id)| id)
    }
}

#[derive(Default)]
pub(super) struct Timeline {
    /// Changes so far: the version of "now".
    pub(super) version: u64,
    procs: HashMap<i32, Vec<(u64, Arc<Process>)>>,
    comms: HashMap<i32, Vec<(u64, u32)>>,
}

/// The state of `history` at `version`.
fn at<T>(history: &[(u64, T)], version: u64) -> Option<&T> {
    let i = history.partition_point(|(v, _)| *v <= version);
    history.get(i.checked_sub(1)?).map(|(_, t)| t)
}

impl Timeline {
    /// Process `pid` as it was at `version`.
    pub(super) fn process(&self, pid: i32, version: u64) -> Option<&Process> {
        at(self.procs.get(&pid)?, version).map(|p| &**p)
    }

    /// The name (comm id) of thread `tid`, else of its process `pid`, at `version`.
    pub(super) fn comm(&self, tid: i32, pid: i32, version: u64) -> Option<u32> {
        let of = |t: i32| at(self.comms.get(&t)?, version).copied();
        of(tid).or_else(|| of(pid))
    }

    fn latest(&self, pid: i32) -> Option<Arc<Process>> {
        self.procs.get(&pid)?.last().map(|(_, p)| p.clone())
    }

    fn set_process(&mut self, pid: i32, p: Arc<Process>) {
        self.version += 1;
        self.procs.entry(pid).or_default().push((self.version, p));
    }

    fn set_comm(&mut self, tid: i32, comm: u32) {
        self.version += 1;
        self.comms
            .entry(tid)
            .or_default()
            .push((self.version, comm));
    }

    /// Applies a side-band record of event `event` (the one its sample id names; names
    /// interned into `rec.comms` by `intern`; mappings and lost counts go to `rec`). Other
    /// records are left alone.
    pub(super) fn replay(
        &mut self,
        rec: &mut Recording,
        intern: &mut dyn FnMut(&mut Recording, &str) -> u32,
        event: usize,
        record: &EventRecord,
    ) {
        match record {
            EventRecord::Comm(c) => {
                let id = intern(rec, &String::from_utf8_lossy(&c.name.as_slice()));
                self.set_comm(c.tid, id);
            }
            EventRecord::Fork(f) => {
                if f.pid != f.ppid {
                    let parent = self.latest(f.ppid).unwrap_or_default();
                    self.set_process(f.pid, parent);
                }
                if !self.comms.contains_key(&f.tid) {
                    if let Some(c) = self.comm(f.ptid, f.ptid, self.version) {
                        self.set_comm(f.tid, c);
                    }
                }
            }
            EventRecord::Mmap(m) => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                self.map(rec, m.pid, m.address, m.length, m.page_offset, path, None);
            }
            EventRecord::Mmap2(m) if m.protection & 4 != 0 || m.cpu_mode == CpuMode::Kernel => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let build_id = match &m.file_id {
                    Mmap2FileId::BuildId(b) => Some(b.clone()),
                    _ => None,
                };
                self.map(
                    rec,
                    m.pid,
                    m.address,
                    m.length,
                    m.page_offset,
                    path,
                    build_id,
                );
            }
            EventRecord::Lost(l) => rec.count_lost(l.id, l.count),
            // Samples the kernel could not write, of the event its sample id names (perf
            // writes these from the event's lost-samples count; 8 bytes of count first).
            EventRecord::Raw(raw) if raw.record_type == RecordType::LOST_SAMPLES => {
                let data = raw.data.as_slice();
                if let Some(count) = data.get(..8).and_then(|b| b.try_into().ok()) {
                    rec.count_lost_of(event, u64::from_le_bytes(count));
                }
            }
            EventRecord::Raw(raw) => {
                let registered = format::KsymbolRecord::parse(raw)
                    .filter(|k| k.flags & format::ksymbol::FLAG_UNREGISTER == 0 && k.len > 0);
                if let Some(k) = registered {
                    rec.ksymbols.push(Ksymbol {
                        start: k.addr,
                        end: k.addr.saturating_add(k.len.into()),
                        name: k.name,
                    });
                }
            }
            _ => {}
        }
    }

    /// Adds an executable mapping to process `pid`.
    #[allow(clippy::too_many_arguments)]
    fn map(
        &mut self,
        rec: &mut Recording,
        pid: i32,
        start: u64,
        len: u64,
        pgoff: u64,
        path: String,
        build_id: Option<Vec<u8>>,
    ) {
        if len == 0 {
            return;
        }
        let m = Mapping {
            pid,
            start,
            end: start.saturating_add(len),
            pgoff,
            path,
            build_id,
        };
        let id = rec.mappings.len() as MapId;
        let mut p = self.latest(pid).map(|p| (*p).clone()).unwrap_or_default();
        p.insert(id, &m, &rec.mappings);
        self.set_process(pid, Arc::new(p));
        rec.mappings.push(m);
    }

    /// Each process's mappings at the end, into `rec.process_maps`.
    pub(super) fn finish(&self, rec: &mut Recording) {
        for (&pid, history) in &self.procs {
            if let Some((_, p)) = history.last() {
                rec.process_maps.insert(pid, p.pieces(&rec.mappings));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(start: u64, end: u64) -> Mapping {
        Mapping {
            pid: 1,
            start,
            end,
            pgoff: 0,
            path: "/bin/x".into(),
            build_id: None,
        }
    }

    /// The finder answers as a fresh lookup does, whatever address came before: a mapping
    /// laid over part of another one takes the addresses it covers from it.
    #[test]
    fn finder_answers_as_a_fresh_lookup_whatever_came_before() {
        let mappings = vec![mapping(0x1000, 0x9000), mapping(0x3000, 0x4000)];
        let mut p = Process::default();
        for (id, m) in mappings.iter().enumerate() {
            p.insert(id as MapId, m, &mappings[..id]);
        }
        let fresh = |a| p.find_span(a, &mappings).map(|(_, _, id)| id);
        let addrs = [
            0x2000, 0x3500, 0x2fff, 0x3000, 0x4100, 0x1000, 0x8fff, 0x9000, 0x500,
        ];
        assert_eq!(fresh(0x2000), Some(0));
        assert_eq!(fresh(0x3500), Some(1));
        // Past the mapping laid over it, the first one's tail (perf keeps it too).
        assert_eq!(fresh(0x4000), Some(0));
        assert_eq!(fresh(0x8fff), Some(0));
        assert_eq!(fresh(0x9000), None);
        for first in addrs {
            for then in addrs {
                let mut f = p.finder(&mappings);
                f.find(first);
                assert_eq!(f.find(then), fresh(then), "{first:#x} then {then:#x}");
            }
        }

        // A mapping laid below one that already took the end of another: the tail it leaves
        // is the old one's up to the newer mapping only (an exec's libraries over the old
        // image's, in a perf 3.5 recording).
        let mappings = vec![
            mapping(0x1000, 0x9000),
            mapping(0x5000, 0xa000),
            mapping(0x2000, 0x3000),
        ];
        let mut p = Process::default();
        for (id, m) in mappings.iter().enumerate() {
            p.insert(id as MapId, m, &mappings[..id]);
        }
        let at = |a| p.find_span(a, &mappings).map(|(_, _, id)| id);
        let addrs = [0x1000, 0x2000, 0x3000, 0x4fff, 0x5000, 0x9fff, 0xa000];
        assert_eq!(
            addrs.map(at),
            [Some(0), Some(2), Some(0), Some(0), Some(1), Some(1), None]
        );

        // The pieces the unwinder and `Recording::find_map` go by: the old mapping's head
        // and tail apart, each address where the finder finds it (the list held each
        // mapping whole, and found the first one laid under an address).
        let pieces = p.pieces(&mappings);
        let piece = |start, end, id| MapPiece { start, end, id };
        assert_eq!(
            pieces,
            [
                piece(0x1000, 0x2000, 0),
                piece(0x2000, 0x3000, 2),
                piece(0x3000, 0x5000, 0),
                piece(0x5000, 0xa000, 1),
            ]
        );
        let rec = Recording {
            mappings: mappings.clone(),
            process_maps: [(1, pieces)].into(),
            ..Default::default()
        };
        assert_eq!(addrs.map(|a| rec.find_map(1, a)), addrs.map(at));
        assert_eq!(rec.find_map(1, 0xfff), None);
        assert_eq!(rec.find_map(2, 0x1000), None);
    }
}
