//! What the driver hands from step to step: resolved stacks, then symbols for their
//! addresses.

use crate::read::Weighed;
use crate::resolve::{Key, Lookup, Resolver};
use crate::symbolize::{AddrInfo, Stats, TimedSample};
use crate::unwind::UnwoundStack;

/// What the unwind and resolve stages hand on: the selected samples, each with its user frames
/// unwound and resolved to (file, address in the file). Kernel frames need neither stage.
pub struct Resolved<'r> {
    /// What was selected, as views name it (`cpu-clock`, `off-CPU`).
    pub label: String,
    /// What the samples' weights count (see [`crate::read::Selected::unit`]).
    pub unit: String,
    /// The selected samples (identical stacks merged unless every sample is wanted) and their
    /// weights.
    pub samples: Vec<Weighed<'r>>,
    /// How many recorded samples each of `samples` stands for.
    pub counts: Vec<u64>,
    /// With [`Options::timeline`] (and samples grouped): every selected sample, pointing
    /// into `samples`.
    pub timeline: Vec<TimedSample>,
    /// Aligned with `samples`: the user frames, innermost first.
    pub stacks: Vec<UnwoundStack>,
    /// Aligned with `stacks`: each user frame's lookup key, `None` where no file tells.
    pub keys: Vec<Vec<Option<Key>>>,
    pub resolver: Resolver<'r>,
    pub stats: Stats,
    pub(super) bar: Option<indicatif::ProgressBar>,
}

/// The slot of a frame without a lookup key.
pub const NO_SLOT: u32 = u32::MAX;

/// What the symbolize stage hands on: every unique address of the resolved stacks with what
/// it symbolizes to, per file (sorted, for binary search) and for the kernel.
pub struct Symbols {
    pub per_file: Vec<Vec<Lookup>>,
    /// Aligned with [`Resolved::keys`]: each frame's place in its file's `per_file` (and
    /// `file_infos`), [`NO_SLOT`] where it has no key.
    pub slots: Vec<Vec<u32>>,
    /// The frames without a key, as (stack, frame) indices into [`Resolved::keys`].
    pub unresolved: Vec<(u32, u32)>,
    /// Aligned with `per_file`.
    pub file_infos: Vec<Vec<AddrInfo>>,
    pub kernel_addrs: Vec<u64>,
    /// Aligned with `kernel_addrs`.
    pub kernel_infos: Vec<AddrInfo>,
    /// Files that could not be used, a kernel that is not this machine's.
    pub warnings: Vec<String>,
}

impl Symbols {
    /// What a resolved user frame symbolizes to (every key of the stacks was looked up).
    pub fn user(&self, (file, lookup): Key) -> Option<&AddrInfo> {
        let i = self.per_file[file as usize].binary_search(&lookup).ok()?;
        Some(&self.file_infos[file as usize][i])
    }

    /// What a kernel address of the stacks symbolizes to.
    pub fn kernel(&self, addr: u64) -> Option<&AddrInfo> {
        let i = self.kernel_addrs.binary_search(&addr).ok()?;
        Some(&self.kernel_infos[i])
    }
}
