//! Stage 5, aggregate: [`Symbolized`] stacks in, a [`Profile`] out: identical stacks of one
//! thread merged, their weights summed; and off-CPU stacks joined with their wakers'
//! ([`wakeups`], for `--event wakeup`); off-CPU stacks labelled with the peer a socket call
//! waited on ([`peers`]).

mod peers;
mod wakeups;

pub use peers::{has_socket_waits, label as label_peers, PEER_PREFIX};
pub use wakeups::{join as join_wakers, INTERRUPT, SEPARATOR};

use rustc_hash::FxHashMap;

use crate::symbolize::FrameInfo;
use crate::symbolize::{Stats, Symbolized};

/// A unique stack of one thread, root first, with its summed weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    /// Index into [`Profile::comms`].
    pub comm: u32,
    pub pid: i32,
    pub tid: i32,
    /// Indices into [`Profile::frames`], root first: user frames, then kernel frames.
    pub frames: Vec<u32>,
    /// How many of `frames` are user frames.
    pub user_len: u32,
    pub weight: u64,
    /// How many recorded samples (events) it sums.
    pub count: u64,
}

impl Stack {
    /// Whether frame `i` (root first) is a kernel frame.
    pub fn is_kernel(&self, i: usize) -> bool {
        i >= self.user_len as usize
    }
}

/// What the outputs show.
#[derive(Debug, Default)]
pub struct Profile {
    pub comms: Vec<String>,
    pub frames: Vec<FrameInfo>,
    /// Sorted by (comm, pid, tid, frames): the same whatever the thread count.
    pub stacks: Vec<Stack>,
    /// The selected event and what its weights count.
    pub event: String,
    pub unit: String,
    pub total: u64,
    pub stats: Stats,
}

/// A thread's stack: comm, pid, tid, user frames, frames.
type StackKey<'a> = (u32, i32, i32, u32, &'a [u32]);

pub fn aggregate(s: Symbolized) -> Profile {
    let mut merged: FxHashMap<StackKey, (u64, u64)> = FxHashMap::default();
    for st in &s.stacks {
        let m = merged
            .entry((st.comm, st.pid, st.tid, st.user_len, &st.frames))
            .or_insert((0, 0));
        m.0 += st.weight;
        m.1 += st.count;
    }
    let mut stacks: Vec<Stack> = merged
        .into_iter()
        .map(
            |((comm, pid, tid, user_len, frames), (weight, count))| Stack {
                comm,
                pid,
                tid,
                frames: frames.to_vec(),
                user_len,
                weight,
                count,
            },
        )
        .collect();
    stacks.sort_unstable_by(|a, b| {
        (a.comm, a.pid, a.tid, &a.frames, a.user_len)
            .cmp(&(b.comm, b.pid, b.tid, &b.frames, b.user_len))
    });
    let total = stacks.iter().map(|s| s.weight).sum();
    Profile {
        comms: s.comms,
        frames: s.frames,
        stacks,
        event: s.event,
        unit: s.unit,
        total,
        stats: s.stats,
    }
}
