//! What the symbolize stage hands the views: every selected sample's stack as ids into one
//! table of frames, root first. Plain data; [`crate::pipeline`] makes it, [`crate::aggregate`]
//! and the views consume it.

use std::collections::BTreeMap;

use super::frame::FrameInfo;

/// A frame's address in the process and its offset in its symbol (for `script`); an inline
/// frame has the offset in the symbol it was inlined into, as perf gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameAddr {
    pub addr: u64,
    pub offset: Option<u64>,
}

/// One sample's symbolized stack, root first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolizedStack {
    /// Index into [`Symbolized::comms`].
    pub comm: u32,
    pub pid: i32,
    pub tid: i32,
    pub time: u64,
    pub cpu: u32,
    /// Index into [`Symbolized::events`].
    pub event: u32,
    pub period: u64,
    pub weight: u64,
    /// How many recorded samples this one stands for (identical samples are merged while
    /// reading and before unwinding unless every sample is kept).
    pub count: u64,
    /// Indices into [`Symbolized::frames`], root first: user frames, then kernel frames.
    pub frames: Vec<u32>,
    /// How many of `frames` are user frames.
    pub user_len: u32,
    /// Aligned with `frames` when `pipeline::Options::addresses` is set, else empty.
    pub addrs: Vec<FrameAddr>,
}

/// One recorded sample of a timeline: which of [`Symbolized::stacks`] it has, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedSample {
    /// Index into [`Symbolized::stacks`] (whose thread and command it has).
    pub stack: u32,
    pub time: u64,
    pub cpu: u32,
    pub period: u64,
    pub weight: u64,
}

/// Counters of what could not be resolved, for the summary line.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub samples: u64,
    pub frames: u64,
    pub unknown_frames: u64,
    /// Frames no symbol names that are named by their address ([`FrameInfo::by_address`]).
    pub by_address_frames: u64,
    /// Frames no symbol names (`[unknown]`, or by their address), by the file they are in
    /// (user frames in files), and whether that file is stripped (no `.symtab` in it or in
    /// its debug file).
    pub unnamed_by_file: BTreeMap<String, (u64, bool)>,
    pub dwarf_samples: u64,
    pub stack_ends: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
}

/// Every selected sample, symbolized, in file order.
#[derive(Debug, Default)]
pub struct Symbolized {
    pub comms: Vec<String>,
    pub events: Vec<String>,
    /// The selected event, as reports name it.
    pub event: String,
    pub unit: String,
    pub frames: Vec<FrameInfo>,
    pub stacks: Vec<SymbolizedStack>,
    /// Every selected sample in file order, when a view asked for a timeline
    /// (`pipeline::Options::timeline`): then `stacks` holds each thread's distinct stacks
    /// once (unless every sample is kept apart anyway), and the samples point into it.
    pub timeline: Vec<TimedSample>,
    pub stats: Stats,
    /// For the critical path: its thread and wall time (ns); `None` otherwise, or when the
    /// recording has no such thread.
    pub critical: Option<(i32, u64)>,
}
