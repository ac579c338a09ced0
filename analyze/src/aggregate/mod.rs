//! Stage 5, aggregate: [`Symbolized`] stacks in, a [`Profile`] out: identical stacks of one
//! thread merged, their weights summed; and off-CPU stacks joined with their wakers'
//! ([`wakeups`], for `--event wakeup`), and with their wakers' own waits and wakers in turn
//! ([`chains`], for `--event chain`); one thread's wall time charged to what held it up
//! ([`critical`], `analyze critical`); off-CPU stacks labelled with the peer a socket call
//! waited on ([`peers`]); sampled requests grouped by call, their layers timed from it
//! ([`requests`]).

mod chains;
mod critical;
mod peers;
pub mod requests;
#[cfg(test)]
mod testing;
mod wakeups;

pub use chains::{chain as chain_wakers, Roots};
pub use critical::{critical_path, Events as CriticalEvents};

pub use peers::{has_socket_waits, label as label_peers, PEER_PREFIX};
pub use wakeups::{join as join_wakers, INTERRUPT, SEPARATOR};

use rayon::prelude::*;

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

/// A thread's stack: comm, pid, tid, frames, user frames (the order stacks are sorted in).
fn key(s: &Stack) -> (u32, i32, i32, &[u32], u32) {
    (s.comm, s.pid, s.tid, &s.frames, s.user_len)
}

pub fn aggregate(s: Symbolized) -> Profile {
    // Sorted, then merged where equal: each stack's frames move into the profile as they
    // are (no table of them to hash, no copies).
    let mut stacks: Vec<Stack> = s
        .stacks
        .into_par_iter()
        .map(|st| Stack {
            comm: st.comm,
            pid: st.pid,
            tid: st.tid,
            frames: st.frames,
            user_len: st.user_len,
            weight: st.weight,
            count: st.count,
        })
        .collect();
    stacks.par_sort_unstable_by(|a, b| key(a).cmp(&key(b)));
    stacks.dedup_by(|st, kept| {
        let same = key(st) == key(kept);
        if same {
            kept.weight += st.weight;
            kept.count += st.count;
        }
        same
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
