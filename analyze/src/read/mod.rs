//! Stage 1, read: the recording's records in time order, turned into owned samples whose
//! frames already point at the mapping they fell in (the process state at that moment).
//!
//! The process timeline is replayed as the records come: COMM names threads, FORK copies the
//! parent's mappings and name, MMAP/MMAP2 add executable mappings (replacing what they
//! overlap; an exec keeps the old ones until then, as perf does). A sample's user addresses
//! are matched against the mappings in place at its time, so a library unmapped or a program
//! exec'd later still symbolizes right.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;

use format::linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord, RawData, Regs};
use format::linux_perf_data::PerfFileRecord;
use format::PerfFileReader;

mod parallel;
mod sample_head;
mod timeline;

use timeline::Timeline;

/// An executable mapping of a file into a process (or the kernel's, with pid -1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub pid: i32,
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub path: String,
    pub build_id: Option<Vec<u8>>,
}

/// Index into [`Recording::mappings`].
pub type MapId = u32;

/// A user frame address and the mapping it fell in when sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UserFrame {
    pub addr: u64,
    pub map: Option<MapId>,
}

/// A sample's user registers, as far as unwinding needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

/// A copied user stack to unwind with DWARF CFI.
#[derive(Debug, Clone)]
pub struct StackCopy {
    pub regs: UserRegs,
    pub bytes: StackBytes,
}

/// A stack copy's bytes: where they lie in the mapped file, or owned.
#[derive(Clone)]
pub enum StackBytes {
    Owned(Vec<u8>),
    Mapped(format::InputBytes, std::ops::Range<usize>),
}

impl std::ops::Deref for StackBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            StackBytes::Owned(v) => v,
            StackBytes::Mapped(input, range) => &input[range.clone()],
        }
    }
}

impl StackBytes {
    /// Tells the input's page budget that these bytes are being read (see
    /// [`format::PageBudget`]): a pass over the stack copies of a large recording then keeps
    /// only a window of it mapped in.
    pub fn reading(&self) {
        if let StackBytes::Mapped(input, range) = self {
            input.pages().went_through(range.len() as u64);
        }
    }

    /// Gives the pages of the input these bytes lie in back (the end of a pass over them).
    pub fn done_reading(&self) {
        if let StackBytes::Mapped(input, _) = self {
            input.pages().give_back();
        }
    }
}

impl std::fmt::Debug for StackBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StackBytes({} bytes)", self.len())
    }
}

/// One sample, owned.
#[derive(Debug, Clone)]
pub struct RawSample {
    pub event: usize,
    pub pid: i32,
    pub tid: i32,
    pub time: u64,
    pub cpu: u32,
    /// The sample's period; for merged samples, the sum of their periods.
    pub period: u64,
    /// How many samples this one stands for: identical ones (same event, thread, name,
    /// mappings and callchain, no stack copy) merge when read with [`read_merged`]; else 1.
    pub count: u64,
    /// Name of the thread at the time of the sample (index into [`Recording::comms`]).
    pub comm: u32,
    /// Kernel frames, innermost first.
    pub kernel: Vec<u64>,
    /// User frames from the callchain (frame pointers), innermost first.
    pub user: Vec<UserFrame>,
    /// REGS_USER + STACK_USER, when the sample has them (DWARF mode).
    pub stack_copy: Option<StackCopy>,
}

/// Build ids by path, as the BUILD_ID feature lists them.
pub type BuildIds = HashMap<String, Vec<u8>>;

/// Everything the later stages need from the file.
#[derive(Debug, Default)]
pub struct Recording {
    pub events: Vec<String>,
    pub samples: Vec<RawSample>,
    pub mappings: Vec<Mapping>,
    pub comms: Vec<String>,
    /// Executable mappings of each process at the end of the recording (for DWARF unwinding).
    pub process_maps: HashMap<i32, Vec<MapId>>,
    /// Build ids from the BUILD_ID feature, by path.
    pub build_ids: BuildIds,
    pub notes: Vec<String>,
    pub lost: u64,
    /// The recording machine's kernel release (OSRELEASE), if the file says.
    pub os_release: Option<String>,
    /// The recording machine's architecture (ARCH: `x86_64`, `aarch64`, ...), if the file says.
    pub arch: Option<String>,
}

const KERNEL_MARK: u64 = format::callchain::KERNEL;
const USER_MARK: u64 = format::callchain::USER;

/// Reads `path` whole, every sample on its own (times, CPUs and periods kept).
pub fn read(path: &Path) -> Result<Recording, format::Error> {
    read_with(crate::input::open(path)?.reader, false, &mut |_| {})
}

/// Reads `path` whole, merging identical samples (see [`RawSample::count`]): what a profile
/// needs, at a fraction of the cost (100k samples are typically a few thousand stacks).
pub fn read_merged(path: &Path) -> Result<Recording, format::Error> {
    read_with(crate::input::open(path)?.reader, true, &mut |_| {})
}

/// Whether `chain` (a callchain, or the ip when there is none), split as [`read_with`]
/// splits it, gives the frames of `s`.
fn same_frames(s: &RawSample, chain: &[u64], mut in_kernel: bool) -> bool {
    let (mut k, mut u) = (0, 0);
    for &a in chain {
        match a {
            KERNEL_MARK => in_kernel = true,
            USER_MARK => in_kernel = false,
            a if a >= format::callchain::MAX_CONTEXT => {}
            a if in_kernel => {
                if s.kernel.get(k) != Some(&a) {
                    return false;
                }
                k += 1;
            }
            a => {
                if s.user.get(u).map(|f| f.addr) != Some(a) {
                    return false;
                }
                u += 1;
            }
        }
    }
    k == s.kernel.len() && u == s.user.len()
}

/// A callchain (context markers included) as kernel and user frames, innermost first.
fn split_callchain(chain: &[u64], in_kernel: bool) -> (Vec<u64>, Vec<u64>) {
    // Which side a callchain entry is a frame of (`None`: a context marker), as the markers
    // seen so far say.
    let side = |in_kernel: &mut bool, a: u64| match a {
        KERNEL_MARK => {
            *in_kernel = true;
            None
        }
        USER_MARK => {
            *in_kernel = false;
            None
        }
        a if a >= format::callchain::MAX_CONTEXT => None,
        _ => Some(*in_kernel),
    };
    // Sized exactly: the frames of every sample are held at once.
    let (mut kernel_frames, mut user_frames, mut at_kernel) = (0, 0, in_kernel);
    for &a in chain {
        match side(&mut at_kernel, a) {
            Some(true) => kernel_frames += 1,
            Some(false) => user_frames += 1,
            None => {}
        }
    }
    let mut kernel = Vec::with_capacity(kernel_frames);
    let mut user = Vec::with_capacity(user_frames);
    let mut at_kernel = in_kernel;
    for &a in chain {
        match side(&mut at_kernel, a) {
            Some(true) => kernel.push(a),
            Some(false) => user.push(a),
            None => {}
        }
    }
    (kernel, user)
}

/// The copied user stack and the registers to unwind it from, when the sample has them.
/// With `input`, the bytes stay where they lie in it when they are a slice of it (no copy).
fn stack_copy(
    regs: &Option<Regs<'_>>,
    stack: &Option<(RawData<'_>, u64)>,
    input: Option<&format::InputBytes>,
) -> Option<StackCopy> {
    let (Some(regs), Some((stack, dyn_size))) = (regs, stack) else {
        return None;
    };
    let regs = UserRegs {
        ip: regs.get(8)?,
        sp: regs.get(7)?,
        bp: regs.get(6)?,
    };
    if let (RawData::Single(b), Some(input)) = (stack, input) {
        let len = b.len().min(*dyn_size as usize);
        if let Some(copy) = mapped_stack_copy(regs, &b[..len], input) {
            return Some(copy);
        }
    }
    let mut bytes = stack.as_slice().to_vec();
    bytes.truncate(*dyn_size as usize);
    Some(StackCopy {
        regs,
        bytes: StackBytes::Owned(bytes),
    })
}

/// A stack copy whose bytes `stack` are a slice of `input`, kept where they lie (`None` if
/// they are not in it).
fn mapped_stack_copy(
    regs: UserRegs,
    stack: &[u8],
    input: &format::InputBytes,
) -> Option<StackCopy> {
    let start = (stack.as_ptr() as usize).checked_sub(input.as_ptr() as usize)?;
    (start + stack.len() <= input.len()).then(|| StackCopy {
        regs,
        bytes: StackBytes::Mapped(input.clone(), start..start + stack.len()),
    })
}

/// Reads the recording `reader` opened, merging identical samples if `merge`; `files_known`
/// is told the build ids (the files perf lists as hit) before the records are read, so that
/// the caller can start loading those files meanwhile.
pub fn read_with(
    mut reader: PerfFileReader,
    merge: bool,
    files_known: &mut dyn FnMut(&BuildIds),
) -> Result<Recording, format::Error> {
    crate::timing::mark("read: open");
    let mut rec = Recording {
        notes: reader.notes().to_vec(),
        os_release: reader
            .perf_file()
            .os_release()
            .ok()
            .flatten()
            .map(str::to_string),
        arch: reader.perf_file().arch().ok().flatten().map(str::to_string),
        ..Default::default()
    };
    rec.events = (0..reader.perf_file().event_attributes().len())
        .map(|i| reader.event_name(i))
        .collect();
    if let Ok(ids) = reader.perf_file().build_ids() {
        for info in ids.values() {
            rec.build_ids.insert(
                String::from_utf8_lossy(&info.path).into_owned(),
                info.build_id.clone(),
            );
        }
    }
    files_known(&rec.build_ids);
    let mut timeline = Timeline::default();
    let mut comm_ids: HashMap<String, u32> = HashMap::new();
    let mut intern = |rec: &mut Recording, s: &str| -> u32 {
        *comm_ids.entry(s.to_string()).or_insert_with(|| {
            rec.comms.push(s.to_string());
            (rec.comms.len() - 1) as u32
        })
    };
    // Samples of threads the recording never names get this, then `:TID` at the end.
    let unknown_comm = u32::MAX;
    if std::env::var_os("BPFPERF_SEQUENTIAL_READ").is_none() {
        if let Some(bytes) = reader.record_bytes() {
            if parallel::read(
                reader.perf_file(),
                &reader.input(),
                bytes,
                &mut rec,
                &mut intern,
                unknown_comm,
                merge,
            ) {
                name_threads_without_comm(&mut rec, &mut intern, unknown_comm);
                share_stack_copies(&mut rec);
                return Ok(rec);
            }
        }
    }
    // Merging: a sample whose thread's name and mappings changed since (a new timeline
    // version) is not merged with one before.
    let mut merged: rustc_hash::FxHashMap<u64, usize> = Default::default();
    let mut sample_version: Vec<u64> = Vec::new();
    let mut chain: Vec<u64> = Vec::new();
    // Samples are most of the records: room for them up front, not by doubling and copying.
    let file_size = reader.input_len();
    rec.samples.reserve((file_size / 128).min(1 << 22) as usize);

    while let Some(record) = reader.next_record()? {
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        let Ok(parsed) = format::parse_record(&record) else {
            continue;
        };
        let version = timeline.version;
        match parsed {
            EventRecord::Sample(s) => {
                let pid = s.pid.unwrap_or(-1);
                let tid = s.tid.unwrap_or(pid);
                let starts_in_kernel = matches!(s.cpu_mode, CpuMode::Kernel);
                chain.clear();
                match &s.callchain {
                    Some(c) => chain.extend((0..c.len()).map(|i| c.get(i).unwrap_or(0))),
                    None => chain.extend(s.ip),
                }
                let period = s.period.unwrap_or(1);
                let mergeable = merge && s.user_regs.is_none() && s.user_stack.is_none();
                let key = mergeable.then(|| {
                    let mut h = rustc_hash::FxHasher::default();
                    (attr_index, pid, tid, version, &chain[..]).hash(&mut h);
                    h.finish()
                });
                if let Some(&i) = key.and_then(|k| merged.get(&k)) {
                    let m: &mut RawSample = &mut rec.samples[i];
                    if m.event == attr_index
                        && m.pid == pid
                        && m.tid == tid
                        && sample_version[i] == version
                        && same_frames(m, &chain, starts_in_kernel)
                    {
                        m.count += 1;
                        m.period += period;
                        continue;
                    }
                }
                let (kernel, user_addrs) = split_callchain(&chain, starts_in_kernel);
                let proc_ = timeline.process(pid, version);
                let user = user_addrs
                    .iter()
                    .map(|&addr| UserFrame {
                        addr,
                        map: proc_.and_then(|p| p.find(addr, &rec.mappings)),
                    })
                    .collect();
                let stack_copy = stack_copy(&s.user_regs, &s.user_stack, None);
                if let Some(k) = key {
                    merged.insert(k, rec.samples.len());
                    sample_version.resize(rec.samples.len() + 1, 0);
                    sample_version[rec.samples.len()] = version;
                }
                rec.samples.push(RawSample {
                    event: attr_index,
                    pid,
                    tid,
                    time: s.timestamp.unwrap_or(0),
                    cpu: s.cpu.unwrap_or(0),
                    period,
                    count: 1,
                    comm: timeline.comm(tid, pid, version).unwrap_or(unknown_comm),
                    kernel,
                    user,
                    stack_copy,
                });
            }
            other => timeline.replay(&mut rec, &mut intern, &other),
        }
    }
    timeline.finish(&mut rec);
    name_threads_without_comm(&mut rec, &mut intern, unknown_comm);
    share_stack_copies(&mut rec);
    Ok(rec)
}

/// record writes run-queue and page-fault samples beside the off-CPU sample they are part
/// of, with its registers and, in DWARF mode, no stack bytes of their own: they unwind with
/// the bytes of the off-CPU sample of the same thread at the same time.
fn share_stack_copies(rec: &mut Recording) {
    use format::events::{FAULT_EVENT, OFFCPU_EVENT, RUNQ_EVENT};
    let index = |name: &str| rec.events.iter().position(|n| n == name);
    let Some(offcpu) = index(OFFCPU_EVENT) else {
        return;
    };
    let sharing = [index(RUNQ_EVENT), index(FAULT_EVENT)];
    let shares = |s: &RawSample| {
        sharing.contains(&Some(s.event))
            && s.stack_copy.as_ref().is_some_and(|c| c.bytes.is_empty())
    };
    if !rec.samples.iter().any(shares) {
        return;
    }
    let owners: FxHashMap<(i32, u64), usize> = rec
        .samples
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.event == offcpu && s.stack_copy.as_ref().is_some_and(|c| !c.bytes.is_empty())
        })
        .map(|(i, s)| ((s.tid, s.time), i))
        .collect();
    for i in 0..rec.samples.len() {
        let s = &rec.samples[i];
        if !shares(s) {
            continue;
        }
        if let Some(&owner) = owners.get(&(s.tid, s.time)) {
            let bytes = rec.samples[owner]
                .stack_copy
                .as_ref()
                .map(|c| c.bytes.clone());
            if let (Some(copy), Some(bytes)) = (rec.samples[i].stack_copy.as_mut(), bytes) {
                copy.bytes = bytes;
            }
        }
    }
}

/// Samples of threads the recording never names get perf's names: `swapper` for the idle
/// thread (tid 0), `:TID` for the others (a child sampled between fork and its first COMM).
fn name_threads_without_comm(
    rec: &mut Recording,
    intern: &mut dyn FnMut(&mut Recording, &str) -> u32,
    unknown: u32,
) {
    let unnamed: Vec<(usize, i32)> = rec
        .samples
        .iter()
        .enumerate()
        .filter(|(_, s)| s.comm == unknown)
        .map(|(i, s)| (i, s.tid))
        .collect();
    for (i, tid) in unnamed {
        let name = if tid == 0 {
            "swapper".to_string()
        } else {
            format!(":{tid}")
        };
        rec.samples[i].comm = intern(rec, &name);
    }
}

/// Kernel modules' address ranges and names, from [`Recording::kernel_modules`].
pub struct KernelModules(Vec<(u64, u64, String)>);

impl KernelModules {
    /// The name of the module whose mapping holds kernel address `addr`.
    pub fn name_of(&self, addr: u64) -> Option<&str> {
        let i = self.0.partition_point(|m| m.0 <= addr).checked_sub(1)?;
        let (_, end, name) = &self.0[i];
        (addr < *end).then_some(name.as_str())
    }
}

impl Recording {
    /// The times of the first and the last sample (of any event), if there are samples.
    pub fn time_span(&self) -> Option<(u64, u64)> {
        let first = self.samples.iter().map(|s| s.time).min()?;
        let last = self.samples.iter().map(|s| s.time).max()?;
        Some((first, last))
    }

    /// The mapping of process `pid` holding `addr` at the end of the recording.
    pub fn find_map(&self, pid: i32, addr: u64) -> Option<MapId> {
        self.process_maps.get(&pid)?.iter().copied().find(|&id| {
            let m = &self.mappings[id as usize];
            addr >= m.start && addr < m.end
        })
    }

    /// The kernel modules' mappings (`pid -1` MMAPs other than the kernel's), sorted, each
    /// with the file name perf gives its frames: the module's path where the BUILD_ID list has
    /// it, else `[name]`, the file name without `.ko` (and a compression suffix), `-` as `_`.
    pub fn kernel_modules(&self) -> KernelModules {
        let mut modules: Vec<(u64, u64, String)> = self
            .mappings
            .iter()
            .filter(|m| m.pid == -1 && !m.path.starts_with("[kernel.kallsyms]"))
            .map(|m| (m.start, m.end, self.module_name(&m.path)))
            .collect();
        modules.sort_unstable();
        KernelModules(modules)
    }

    fn module_name(&self, path: &str) -> String {
        if self.build_ids.contains_key(path) {
            return path.to_string();
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        if file.starts_with('[') {
            return file.to_string();
        }
        let mut name = file;
        for suffix in [".gz", ".xz", ".zst"] {
            name = name.strip_suffix(suffix).unwrap_or(name);
        }
        let name = name.strip_suffix(".ko").unwrap_or(name);
        format!("[{}]", name.replace('-', "_"))
    }

    /// The kernel's mapping ([kernel.kallsyms]), if the file has one.
    pub fn kernel_mapping(&self) -> Option<&Mapping> {
        self.mappings
            .iter()
            .find(|m| m.pid == -1 && m.path.starts_with("[kernel.kallsyms]"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(start: u64, end: u64, path: &str) -> Mapping {
        Mapping {
            pid: -1,
            start,
            end,
            pgoff: 0,
            path: path.into(),
            build_id: None,
        }
    }

    #[test]
    fn kernel_modules_are_named_as_perf_names_them() {
        let mut rec = Recording {
            mappings: vec![
                mapping(
                    0xffff_ffff_8100_0000,
                    0xffff_ffff_8200_0000,
                    "[kernel.kallsyms]_text",
                ),
                mapping(
                    0xffff_ffff_c000_0000,
                    0xffff_ffff_c000_6000,
                    "/lib/modules/6.1/kernel/x/snd-seq.ko.xz",
                ),
                mapping(
                    0xffff_ffff_c001_0000,
                    0xffff_ffff_c002_0000,
                    "/lib/modules/6.1/kernel/y/ath9k.ko",
                ),
            ],
            ..Default::default()
        };
        rec.build_ids
            .insert("/lib/modules/6.1/kernel/y/ath9k.ko".into(), vec![1; 20]);
        let modules = rec.kernel_modules();
        assert_eq!(modules.name_of(0xffff_ffff_8100_0010), None);
        assert_eq!(modules.name_of(0xffff_ffff_c000_0010), Some("[snd_seq]"));
        // Listed by BUILD_ID: perf names it by its path.
        assert_eq!(
            modules.name_of(0xffff_ffff_c001_0010),
            Some("/lib/modules/6.1/kernel/y/ath9k.ko")
        );
        assert_eq!(modules.name_of(0xffff_ffff_c000_8000), None);
        assert_eq!(modules.name_of(0xffff_ffff_c003_0000), None);
    }

    #[test]
    fn threads_without_comm_get_perfs_names() {
        let sample = |tid: i32| RawSample {
            event: 0,
            pid: tid,
            tid,
            time: 0,
            cpu: 0,
            period: 1,
            count: 1,
            comm: u32::MAX,
            kernel: Vec::new(),
            user: Vec::new(),
            stack_copy: None,
        };
        let mut rec = Recording {
            samples: vec![sample(0), sample(4242), sample(4242)],
            ..Default::default()
        };
        let mut intern = |rec: &mut Recording, s: &str| -> u32 {
            match rec.comms.iter().position(|c| c == s) {
                Some(i) => i as u32,
                None => {
                    rec.comms.push(s.into());
                    (rec.comms.len() - 1) as u32
                }
            }
        };
        name_threads_without_comm(&mut rec, &mut intern, u32::MAX);
        let names: Vec<&str> = rec
            .samples
            .iter()
            .map(|s| rec.comms[s.comm as usize].as_str())
            .collect();
        assert_eq!(names, ["swapper", ":4242", ":4242"]);
    }
}
