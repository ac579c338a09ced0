//! The driver: read -> unwind -> symbolize -> stacks. Rayon lives here only.
//!
//! Stacks are unwound in parallel (DWARF samples grouped by process, each process's unwinder
//! built once), unique addresses are symbolized once, per ELF file in parallel. The result
//! does not depend on the thread count: every merge below is keyed and sorted.

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHashMap;
use std::path::Path;

use rayon::prelude::*;

use crate::dwarf_unwind::{
    ElfUnwindCache, ExecMapping, ProcessUnwinder, StackEnd, UnwindCache, UnwoundFrame,
};
use crate::read::{MapId, RawSample, Recording, UserFrame};
use crate::symbolize::{self, ElfFile, FrameInfo, Kallsyms};

/// Which samples make the profile, and what a sample weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// On-CPU samples (every event but offcpu-time and block I/O); weight 1 each.
    Cpu,
    /// offcpu-time samples; weight = nanoseconds off the CPU.
    OffCpu,
    /// bpfperf:block_io samples; weight = I/O latency in nanoseconds.
    Io,
    /// On-CPU samples weighted by their period (ns) plus off-CPU ns: where wall time went.
    Wall,
}

/// What to keep and how to show it.
#[derive(Debug, Clone)]
pub struct Options {
    pub event: EventKind,
    pub inline: bool,
    pub user_only: bool,
    pub kernel_only: bool,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub comm: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            event: EventKind::Cpu,
            inline: true,
            user_only: false,
            kernel_only: false,
            pid: None,
            tid: None,
            comm: None,
        }
    }
}

/// A symbolized stack, root first, with its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    /// Index into [`Profile::comms`].
    pub comm: u32,
    pub pid: i32,
    pub tid: i32,
    /// Indices into [`Profile::frames`], root first.
    pub frames: Vec<u32>,
    /// Which of the frames are kernel frames (same length as `frames`).
    pub kernel: Vec<bool>,
    pub weight: u64,
}

/// Counters of what could not be resolved, for the summary line.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub samples: u64,
    pub frames: u64,
    pub unknown_frames: u64,
    pub dwarf_samples: u64,
    pub stack_ends: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Profile {
    pub comms: Vec<String>,
    pub frames: Vec<FrameInfo>,
    pub stacks: Vec<Stack>,
    pub stats: Stats,
}

fn event_kind_of(name: &str) -> EventKind {
    match name {
        format::events::OFFCPU_EVENT => EventKind::OffCpu,
        format::events::BLOCK_IO_EVENT => EventKind::Io,
        _ => EventKind::Cpu,
    }
}

/// A user frame after unwinding: address, mapping, and whether it is a return address.
#[derive(Clone, Copy)]
struct Located {
    addr: u64,
    map: Option<MapId>,
    is_return: bool,
}

fn selected<'a>(rec: &'a Recording, o: &Options) -> Vec<(&'a RawSample, u64)> {
    let kinds: Vec<EventKind> = rec.events.iter().map(|n| event_kind_of(n)).collect();
    rec.samples
        .iter()
        .filter(|s| o.pid.is_none_or(|p| p == s.pid) && o.tid.is_none_or(|t| t == s.tid))
        .filter(|s| {
            o.comm
                .as_ref()
                .is_none_or(|c| *c == rec.comms[s.comm as usize])
        })
        .filter_map(|s| {
            let kind = kinds.get(s.event).copied().unwrap_or(EventKind::Cpu);
            let w = match (o.event, kind) {
                (EventKind::Cpu, EventKind::Cpu) => 1,
                (EventKind::OffCpu, EventKind::OffCpu) | (EventKind::Io, EventKind::Io) => s.period,
                (EventKind::Wall, EventKind::Cpu) | (EventKind::Wall, EventKind::OffCpu) => {
                    s.period
                }
                _ => return None,
            };
            Some((s, w))
        })
        .collect()
}

fn find_map(rec: &Recording, pid: i32, addr: u64) -> Option<MapId> {
    rec.process_maps.get(&pid)?.iter().copied().find(|&id| {
        let m = &rec.mappings[id as usize];
        addr >= m.start && addr < m.end
    })
}

/// Stage 2, unwind: user frames of each sample (DWARF where the sample has a stack copy).
fn unwind(rec: &Recording, samples: &[(&RawSample, u64)], stats: &mut Stats) -> Vec<Vec<Located>> {
    // One unwinder per process with DWARF samples.
    let mut pids: Vec<i32> = samples
        .iter()
        .filter(|(s, _)| s.stack_copy.is_some())
        .map(|(s, _)| s.pid)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    let mut elves = ElfUnwindCache::default();
    let unwinders: HashMap<i32, ProcessUnwinder> = pids
        .iter()
        .map(|&pid| {
            let maps: Vec<ExecMapping> = rec
                .process_maps
                .get(&pid)
                .map_or(&[][..], |v| v)
                .iter()
                .map(|&id| {
                    let m = &rec.mappings[id as usize];
                    ExecMapping {
                        start: m.start,
                        end: m.end,
                        pgoff: m.pgoff,
                        path: m.path.clone().into(),
                    }
                })
                .collect();
            (pid, ProcessUnwinder::new(&maps, &mut elves))
        })
        .collect();
    let results: Vec<(Vec<Located>, Option<StackEnd>)> = samples
        .par_iter()
        .map_init(UnwindCache::default, |cache, (s, _)| {
            let (Some(copy), Some(unwinder)) = (&s.stack_copy, unwinders.get(&s.pid)) else {
                let frames = s
                    .user
                    .iter()
                    .enumerate()
                    .map(|(i, f): (usize, &UserFrame)| Located {
                        addr: f.addr,
                        map: f.map,
                        is_return: i > 0,
                    })
                    .collect();
                return (frames, None);
            };
            let mut out = Vec::new();
            let end = unwinder.unwind(cache, copy.regs, &copy.bytes, &mut out);
            let frames = out
                .iter()
                .map(|f| {
                    let (addr, is_return) = match *f {
                        UnwoundFrame::InstructionPointer(a) => (a, false),
                        UnwoundFrame::ReturnAddress(a) => (a, true),
                    };
                    Located {
                        addr,
                        map: find_map(rec, s.pid, addr),
                        is_return,
                    }
                })
                .collect();
            (frames, Some(end))
        })
        .collect();
    let mut out = Vec::with_capacity(results.len());
    for (frames, end) in results {
        if let Some(end) = end {
            stats.dwarf_samples += 1;
            *stats.stack_ends.entry(format!("{end:?}")).or_insert(0) += 1;
        }
        out.push(frames);
    }
    out
}

/// Builds the profile of `rec` for `o`.
pub fn build(rec: &Recording, o: &Options) -> Profile {
    let mut stats = Stats::default();
    let samples = selected(rec, o);
    stats.samples = samples.len() as u64;
    let user = if o.kernel_only {
        vec![Vec::new(); samples.len()]
    } else {
        unwind(rec, &samples, &mut stats)
    };

    // Where each user frame points: (file, lookup SVMA). Each file is checked once.
    struct FileState {
        path: String,
        elf: Option<ElfFile>,
    }
    let mut files: Vec<FileState> = Vec::new();
    let mut file_of_path: FxHashMap<&str, u32> = FxHashMap::default();
    let mut file_of_map: Vec<Option<Option<u32>>> = vec![None; rec.mappings.len()];
    let mut warned: Vec<String> = Vec::new();
    let mut key_of = |loc: &Located| -> Option<(u32, u64)> {
        let map = loc.map?;
        let m = &rec.mappings[map as usize];
        let file = (*file_of_map[map as usize].get_or_insert_with(|| {
            if !m.path.starts_with('/') {
                return None;
            }
            Some(*file_of_path.entry(m.path.as_str()).or_insert_with(|| {
                let path = Path::new(&m.path);
                let expected = m
                    .build_id
                    .clone()
                    .or_else(|| rec.build_ids.get(&m.path).cloned());
                let mut elf = None;
                match (&expected, symbolize::build_id_of(path)) {
                    (Some(want), Some(have))
                        if !have.starts_with(want.strip_suffix(&[0u8; 4]).unwrap_or(want))
                            && !want.starts_with(&have) =>
                    {
                        warned.push(format!(
                            "{}: build id differs from the recording's; its frames are [unknown]",
                            m.path
                        ));
                    }
                    _ => {
                        elf = ElfFile::open(path);
                        if elf.is_none() {
                            warned.push(format!(
                                "{}: cannot read it; its frames are [unknown]",
                                m.path
                            ));
                        }
                    }
                }
                files.push(FileState {
                    path: m.path.clone(),
                    elf,
                });
                (files.len() - 1) as u32
            }))
        }))?;
        let svma = files[file as usize]
            .elf
            .as_ref()?
            .svma(loc.addr.wrapping_sub(m.start).wrapping_add(m.pgoff))?;
        Some((file, svma.saturating_sub(loc.is_return as u64)))
    };
    let keys: Vec<Vec<Option<(u32, u64)>>> = user
        .iter()
        .map(|fs| fs.iter().map(&mut key_of).collect())
        .collect();
    stats.warnings.extend(warned);

    // Unique addresses per file, looked up once, files in parallel.
    let mut per_file: Vec<Vec<u64>> = vec![Vec::new(); files.len()];
    for &(file, svma) in keys.iter().flatten().flatten() {
        per_file[file as usize].push(svma);
    }
    let files_list: Vec<(String, Vec<u64>)> = per_file
        .into_iter()
        .zip(&files)
        .map(|(mut v, f)| {
            v.sort_unstable();
            v.dedup();
            (f.path.clone(), v)
        })
        .collect();
    // /proc/kallsyms takes the kernel a while to format: read it while the files are looked up.
    let want_kallsyms = !o.user_only && rec.kernel_mapping().is_some();
    let (symbols, kallsyms) = rayon::join(
        || symbolize::lookup_files(files_list, o.inline),
        || {
            if want_kallsyms {
                Kallsyms::load()
            } else {
                None
            }
        },
    );

    // Frames interned once per unique address.
    let mut profile = Profile {
        comms: rec.comms.clone(),
        ..Default::default()
    };
    let mut interned: FxHashMap<FrameInfo, u32> = FxHashMap::default();
    let mut intern = |f: FrameInfo, frames: &mut Vec<FrameInfo>| -> u32 {
        *interned.entry(f).or_insert_with_key(|f| {
            frames.push(f.clone());
            (frames.len() - 1) as u32
        })
    };
    let mut user_ids: FxHashMap<(u32, u64), (Vec<u32>, u64)> = FxHashMap::default();
    let mut unknown_user: FxHashMap<String, u32> = FxHashMap::default();
    let mut kernel_ids: FxHashMap<u64, (u32, bool)> = FxHashMap::default();
    for (i, (s, weight)) in samples.iter().enumerate() {
        let mut frames = Vec::new();
        let mut kernel = Vec::new();
        if !o.kernel_only {
            for (j, loc) in user[i].iter().enumerate().rev() {
                stats.frames += 1;
                match keys[i][j] {
                    Some((file, svma)) => {
                        let (ids, unknown) = user_ids.entry((file, svma)).or_insert_with(|| {
                            let path = &files[file as usize].path;
                            let infos = symbols
                                .get(path)
                                .and_then(|m| m.get(&svma))
                                .cloned()
                                .unwrap_or_else(|| vec![FrameInfo::unknown(path)]);
                            let unknown =
                                infos.iter().filter(|f| f.function == "[unknown]").count() as u64;
                            (
                                infos
                                    .into_iter()
                                    .map(|f| intern(f, &mut profile.frames))
                                    .collect(),
                                unknown,
                            )
                        });
                        stats.unknown_frames += *unknown;
                        kernel.extend(std::iter::repeat_n(false, ids.len()));
                        frames.extend_from_slice(ids);
                    }
                    None => {
                        let dso = loc
                            .map
                            .map_or("[unknown]", |m| rec.mappings[m as usize].path.as_str());
                        let id = match unknown_user.get(dso) {
                            Some(&id) => id,
                            None => {
                                let id = intern(FrameInfo::unknown(dso), &mut profile.frames);
                                unknown_user.insert(dso.to_string(), id);
                                id
                            }
                        };
                        stats.unknown_frames += 1;
                        frames.push(id);
                        kernel.push(false);
                    }
                }
            }
        }
        if !o.user_only {
            for (j, &addr) in s.kernel.iter().enumerate().rev() {
                stats.frames += 1;
                let lookup = if j > 0 { addr.saturating_sub(1) } else { addr };
                let (id, known) = *kernel_ids.entry(lookup).or_insert_with(|| {
                    let name = kallsyms
                        .as_ref()
                        .and_then(|k| k.lookup(lookup))
                        .map(str::to_string);
                    let known = name.is_some();
                    let f = FrameInfo {
                        function: name.unwrap_or_else(|| "[unknown]".into()),
                        dso: "[kernel.kallsyms]".into(),
                        srcline: None,
                        inlined: false,
                    };
                    (intern(f, &mut profile.frames), known)
                });
                stats.unknown_frames += (!known) as u64;
                frames.push(id);
                kernel.push(true);
            }
        }
        profile.stacks.push(Stack {
            comm: s.comm,
            pid: s.pid,
            tid: s.tid,
            frames,
            kernel,
            weight: *weight,
        });
    }
    profile.stats = stats;
    profile
}
