//! What reading gives the later stages: owned samples, the mappings their frames fell in,
//! and the process and file facts of the recording. Plain data.

use std::collections::HashMap;

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

/// Whether a mapping's path names anonymous memory rather than a file (`//anon`,
/// `[anon:NAME]`, `/memfd:NAME`): where JIT compilers put their code.
pub fn is_anonymous(path: &str) -> bool {
    path == "//anon" || path.starts_with("[anon") || path.starts_with("/memfd:")
}

/// Index into [`Recording::mappings`].
pub type MapId = u32;

/// A stretch of a process's addresses and the mapping that holds them. A mapping laid over
/// part of another leaves the older one two pieces, before and after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapPiece {
    pub start: u64,
    pub end: u64,
    pub id: MapId,
}

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

    /// Says that a pass is done with the stack copies `copies` (a task's, in time order):
    /// the pages of the stretch of the input they span are given back, the block the last
    /// ends in too (see [`format::PageBudget::done_with_through`]), where the input is larger
    /// than the budget.
    pub fn done_with<'a>(copies: impl IntoIterator<Item = &'a StackBytes>) {
        let mut input = None;
        let (mut start, mut end) = (usize::MAX, 0);
        for c in copies {
            if let StackBytes::Mapped(i, range) = c {
                input.get_or_insert(i);
                start = start.min(range.start);
                end = end.max(range.end);
            }
        }
        if let Some(i) = input {
            if let Some(span) = i.get(start..end) {
                i.pages().done_with_through(span);
            }
        }
    }

    /// Gives the pages of the input these bytes lie in back, beside the work that follows
    /// (the end of the last pass over them).
    pub fn done_reading(&self) {
        if let StackBytes::Mapped(input, _) = self {
            input.pages().last_pass_done();
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
    /// mappings and callchain, no stack copy) merge when read with [`super::read_merged`]; else 1.
    pub count: u64,
    /// Name of the thread at the time of the sample (index into [`Recording::comms`]).
    pub comm: u32,
    /// Kernel frames, innermost first.
    pub kernel: Vec<u64>,
    /// User frames from the callchain (frame pointers), innermost first.
    pub user: Vec<UserFrame>,
    /// REGS_USER + STACK_USER, when the sample has them (DWARF mode); boxed: most samples
    /// have none, and every sample is held at once.
    pub stack_copy: Option<Box<StackCopy>>,
    /// The RAW payload of a traced event's sample (a tracepoint's record as the kernel lays
    /// it out: read it with [`Recording::format`]); `None` for other events.
    pub raw: Option<Box<[u8]>>,
}

impl RawSample {
    /// Whether `self` and `other` are one stack of one thread for grouping: same event,
    /// thread, command name, kernel frames and payload (user frames are the caller's to
    /// compare: recorded or unwound). [`RawSample::hash_origin`] hashes the same parts.
    pub fn same_origin(&self, other: &RawSample) -> bool {
        (self.event, self.pid, self.tid, self.comm)
            == (other.event, other.pid, other.tid, other.comm)
            && same_words(&self.kernel, &other.kernel)
            && match (&self.raw, &other.raw) {
                (Some(a), Some(b)) => same_words(a, b),
                (a, b) => a.is_none() && b.is_none(),
            }
    }

    /// Hashes what [`RawSample::same_origin`] compares.
    pub fn hash_origin(&self, state: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        (
            self.event,
            self.pid,
            self.tid,
            self.comm,
            &self.kernel[..],
            self.raw.as_deref(),
        )
            .hash(state);
    }
}

/// `a == b` for slices of plain numbers, without calling `memcmp` on empty ones: glibc's
/// EVEX `memcmp` reads even a zero-length operand, with an all-masked load, and at the
/// dangling address of an empty `Vec` (0x8, an unmapped page) that load takes about 130 ns
/// on AMD EPYC (a suppressed fault) against 2 ns for three frames. Most samples taken in
/// user mode have no kernel frames, and grouping compares them once per sample.
pub fn same_words<T: PartialEq>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// Build ids by path, as the BUILD_ID feature lists them.
pub type BuildIds = HashMap<String, Vec<u8>>;

/// Everything the later stages need from the file.
#[derive(Debug, Default)]
pub struct Recording {
    pub events: Vec<String>,
    /// Aligned with `events`: the format of a traced event's payloads (a tracepoint's, from
    /// TRACING_DATA by its id); `None` for other events, or where TRACING_DATA has none.
    pub formats: Vec<Option<format::TraceFormat>>,
    /// Aligned with `events`: whether the event's period is a duration in ns (a latency
    /// pair `ENTRY->EXIT`, a return probe `...__return` that bpfperf wrote, bpfperf's
    /// off-CPU, run-queue, fault, block I/O and wakeup events).
    pub latency: Vec<bool>,
    /// Aligned with `events`: whether a sample's period is the number of samples it stands
    /// for (on-CPU samples that `record --aggregate` counted in the kernel), which reading
    /// puts in [`RawSample::count`].
    pub counted: Vec<bool>,
    /// Aligned with `events`: whether a sample weighs its period rather than one (see
    /// [`weighed_by_period`](super::weighed_by_period)).
    pub by_period: Vec<bool>,
    pub samples: Vec<RawSample>,
    pub mappings: Vec<Mapping>,
    pub comms: Vec<String>,
    /// Executable mappings of each process at the end of the recording (for DWARF unwinding),
    /// as the stretches of addresses each holds: sorted, not overlapping.
    pub process_maps: HashMap<i32, Vec<MapPiece>>,
    /// Build ids from the BUILD_ID feature, by path.
    pub build_ids: BuildIds,
    pub notes: Vec<String>,
    /// Events lost while recording (LOST records), of every event.
    pub lost: u64,
    /// Aligned with `events`: those of `lost` whose LOST record names the event (by one of
    /// its ids, as perf counts them); records naming no event count in `lost` only.
    pub lost_by_event: Vec<u64>,
    /// Aligned with `events`: each event's ids (the file's attrs), for the records that name
    /// an event by id.
    pub event_ids: Vec<Vec<u64>>,
    /// The recording machine's kernel release (OSRELEASE), if the file says.
    pub os_release: Option<String>,
    /// The recording machine's architecture (ARCH: `x86_64`, `aarch64`, ...), if the file says.
    pub arch: Option<String>,
    /// Kernel code named at run time (KSYMBOL records: BPF programs' JIT-ed functions,
    /// trampolines), in the order registered.
    pub ksymbols: Vec<Ksymbol>,
    /// When the file was last written, if it is a file (not a pipe or an archive's): tells
    /// whether it was recorded during this boot.
    pub modified: Option<std::time::SystemTime>,
}

/// Kernel code that a KSYMBOL record names: `start..end` is `name` (for BPF programs
/// `bpf_prog_<tag>_<name>`, which perf also gives as the frames' file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ksymbol {
    pub start: u64,
    pub end: u64,
    pub name: String,
}

/// The recording's [`Ksymbol`]s by address, from [`Recording::ksymbol_table`].
#[derive(Debug, Default)]
pub struct Ksymbols(std::collections::BTreeMap<u64, Ksymbol>);

impl Ksymbols {
    /// The symbol holding kernel address `addr`.
    pub fn lookup(&self, addr: u64) -> Option<&Ksymbol> {
        let (_, k) = self.0.range(..=addr).next_back()?;
        (addr < k.end).then_some(k)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
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

/// The event of `event_ids` (each event's ids) that a record naming `id` is about: the only
/// one in a file of one event, whatever the id.
pub fn event_of_id(event_ids: &[Vec<u64>], id: u64) -> Option<usize> {
    if event_ids.len() == 1 {
        return Some(0);
    }
    event_ids.iter().position(|ids| ids.contains(&id))
}

impl Recording {
    /// Counts `count` events lost (a LOST record naming `id`).
    pub fn count_lost(&mut self, id: u64, count: u64) {
        match event_of_id(&self.event_ids, id) {
            Some(e) => self.count_lost_of(e, count),
            None => self.lost = self.lost.saturating_add(count),
        }
    }

    /// Counts `count` events of event `event` lost.
    pub fn count_lost_of(&mut self, event: usize, count: u64) {
        self.lost = self.lost.saturating_add(count);
        if let Some(n) = self.lost_by_event.get_mut(event) {
            *n = n.saturating_add(count);
        }
    }

    /// The format of event `event`'s payloads, if it is a traced event with one.
    pub fn format(&self, event: usize) -> Option<&format::TraceFormat> {
        self.formats.get(event)?.as_ref()
    }

    /// Whether event `event`'s period is a latency in nanoseconds.
    pub fn is_latency(&self, event: usize) -> bool {
        self.latency.get(event).copied().unwrap_or(false)
    }

    /// The names of the traced events (those with a format), for messages.
    pub fn traced_names(&self) -> Vec<&str> {
        (0..self.events.len())
            .filter(|&e| self.format(e).is_some())
            .map(|e| self.events[e].as_str())
            .collect()
    }

    /// The times of the first and the last sample (of any event), if there are samples,
    /// leaving out stray times ([`Recording::stray_times`]).
    pub fn time_span(&self) -> Option<(u64, u64)> {
        self.stray_times().0
    }

    /// The span of the samples' times, and how many samples lie outside it: times so far
    /// from all the others that they can only be damage (a spliced or corrupted file: one
    /// sample 12 billion seconds after the rest). Views of time are bounded by the span, not
    /// by the numbers a damaged file holds.
    ///
    /// A span of up to a day is taken whole. Over a day, the times are cut where two
    /// consecutive samples lie more than an hour apart, and the stretch holding the most
    /// samples is the span (its first, on a tie).
    pub fn stray_times(&self) -> (Option<(u64, u64)>, u64) {
        const WHOLE: u64 = 86_400 * 1_000_000_000;
        const GAP: u64 = 3_600 * 1_000_000_000;
        let first = self.samples.iter().map(|s| s.time).min();
        let last = self.samples.iter().map(|s| s.time).max();
        let (Some(first), Some(last)) = (first, last) else {
            return (None, 0);
        };
        if last - first <= WHOLE {
            return (Some((first, last)), 0);
        }
        let mut times: Vec<u64> = self.samples.iter().map(|s| s.time).collect();
        times.sort_unstable();
        // (start index, end index) of the stretch with the most samples.
        let (mut best, mut start) = ((0, 0), 0);
        for i in 1..=times.len() {
            if i == times.len() || times[i] - times[i - 1] > GAP {
                if i - start > best.1 - best.0 {
                    best = (start, i);
                }
                start = i;
            }
        }
        let span = (times[best.0], times[best.1 - 1]);
        let strays = (times.len() - (best.1 - best.0)) as u64;
        (Some(span), strays)
    }

    /// The mapping of process `pid` holding `addr` at the end of the recording.
    pub fn find_map(&self, pid: i32, addr: u64) -> Option<MapId> {
        let pieces = self.process_maps.get(&pid)?;
        let after = pieces.partition_point(|p| p.start <= addr);
        let piece = pieces.get(after.checked_sub(1)?)?;
        (addr < piece.end).then_some(piece.id)
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

    /// The [`Ksymbol`]s by address. Code registered later where earlier code was (a program
    /// unloaded and another loaded in its place) replaces it: its samples are named by the
    /// later one. (Unregistering is not replayed: samples taken before it keep their names.)
    pub fn ksymbol_table(&self) -> Ksymbols {
        let mut table = std::collections::BTreeMap::<u64, Ksymbol>::new();
        for k in &self.ksymbols {
            // Those it overlaps: starting inside it, or holding its start.
            let mut gone: Vec<u64> = table.range(k.start..k.end).map(|(&s, _)| s).collect();
            gone.extend(
                table
                    .range(..k.start)
                    .next_back()
                    .filter(|(_, before)| before.end > k.start)
                    .map(|(&s, _)| s),
            );
            for s in gone {
                table.remove(&s);
            }
            table.insert(k.start, k.clone());
        }
        Ksymbols(table)
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

    /// Every sample of a recording is held at once: a byte here is a megabyte a million
    /// samples (160 bytes before stack copies were boxed and payloads kept).
    #[test]
    fn raw_samples_stay_small() {
        assert_eq!(std::mem::size_of::<RawSample>(), 120);
    }

    /// A sample of `event` by thread `tid` of process 100 at `time`, with `kernel` frames
    /// and payload `raw`.
    fn sample(event: usize, tid: i32, time: u64, kernel: &[u64], raw: Option<&[u8]>) -> RawSample {
        RawSample {
            event,
            pid: 100,
            tid,
            time,
            cpu: 0,
            period: 1,
            count: 1,
            comm: 0,
            kernel: kernel.to_vec(),
            user: Vec::new(),
            stack_copy: None,
            raw: raw.map(Box::from),
        }
    }

    #[test]
    fn samples_are_of_one_origin_when_every_part_but_user_frames_is_equal() {
        let a = sample(0, 100, 1, &[], None);
        assert!(a.same_origin(&sample(0, 100, 2, &[], None)));
        let mut user_differs = sample(0, 100, 1, &[], None);
        user_differs.user.push(UserFrame { addr: 1, map: None });
        assert!(a.same_origin(&user_differs));
        let mut other_process = sample(0, 100, 1, &[], None);
        other_process.pid = 101;
        let mut other_comm = sample(0, 100, 1, &[], None);
        other_comm.comm = 1;
        for b in [
            sample(1, 100, 1, &[], None),
            sample(0, 101, 1, &[], None),
            other_process,
            other_comm,
            sample(0, 100, 1, &[0xffff_ffff_8100_0000], None),
            sample(0, 100, 1, &[], Some(&[])),
        ] {
            assert!(!a.same_origin(&b) && !b.same_origin(&a), "{b:?}");
        }
        let k = sample(0, 100, 1, &[1, 2], Some(&[7]));
        assert!(k.same_origin(&sample(0, 100, 1, &[1, 2], Some(&[7]))));
        assert!(!k.same_origin(&sample(0, 100, 1, &[1, 3], Some(&[7]))));
        assert!(!k.same_origin(&sample(0, 100, 1, &[1, 2], Some(&[8]))));
        assert!(same_words::<u64>(&[], &Vec::new()) && !same_words(&[1u64], &[]));
    }

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
}
