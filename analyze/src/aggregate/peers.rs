//! Off-CPU stacks labelled with the connection they waited on: a `peer:ADDR:PORT` frame at
//! the root of each off-CPU interval spent blocked inside a socket call, so that folded
//! stacks and flame graphs group the time by peer first (as `comm` groups it by command),
//! and the wakeup view shows who woke the wait for that peer.
//!
//! A `bpfperf:sock_wait` sample (record `-e net`) is written when a socket call of a thread
//! returns after blocking; its payload names the socket's peer and `start_ns`, the end of the
//! call's first blocked interval. Off-CPU samples carry the time their interval ended, so the
//! thread's off-CPU samples from `start_ns` to the sock_wait sample's time are the call's.

use rustc_hash::FxHashMap;

use crate::read::Recording;
use crate::symbolize::{FrameInfo, Symbolized};

/// What the label frame's name starts with.
pub const PEER_PREFIX: &str = "peer:";

/// The label of one socket wait: `peer:10.0.0.2:8080` (IPv6 `peer:[::1]:8080`).
fn peer_name(n: &format::events::Net) -> String {
    let addr = n.remote_addr();
    if n.family == 10 && addr.contains(':') {
        format!("{PEER_PREFIX}[{addr}]:{}", n.rport)
    } else {
        format!("{PEER_PREFIX}{addr}:{}", n.rport)
    }
}

/// Socket waits by thread: (first interval's end, the call's return, label), sorted.
type Waits = FxHashMap<i32, Vec<(u64, u64, String)>>;

fn socket_waits(rec: &Recording) -> Waits {
    let Some(event) = rec
        .events
        .iter()
        .position(|e| e == format::events::SOCK_WAIT_EVENT)
    else {
        return Waits::default();
    };
    let mut waits = Waits::default();
    for s in rec.samples.iter().filter(|s| s.event == event) {
        let Some(n) = s.raw.as_deref().and_then(format::events::Net::from_raw) else {
            continue;
        };
        if n.start_ns == 0 || n.start_ns > s.time {
            continue;
        }
        waits
            .entry(s.tid)
            .or_default()
            .push((n.start_ns, s.time, peer_name(&n)));
    }
    for w in waits.values_mut() {
        w.sort_unstable();
    }
    waits
}

/// Whether a recording has socket waits to label off-CPU stacks with.
pub fn has_socket_waits(events: &[String]) -> bool {
    events.iter().any(|e| e == format::events::SOCK_WAIT_EVENT)
}

/// Puts the peer frame at the root of each stack of event `offcpu` that a socket wait of its
/// thread covers (stacks must be per sample: their times are the intervals'). Returns how
/// many stacks were labelled.
pub fn label(sym: &mut Symbolized, rec: &Recording, offcpu: u32) -> u64 {
    let waits = socket_waits(rec);
    if waits.is_empty() {
        return 0;
    }
    let mut ids: FxHashMap<String, u32> = FxHashMap::default();
    let mut labelled = 0;
    for s in sym.stacks.iter_mut().filter(|s| s.event == offcpu) {
        let Some(w) = waits.get(&s.tid) else {
            continue;
        };
        // The last wait that began at or before this interval's end.
        let i = w.partition_point(|(start, _, _)| *start <= s.time);
        let Some((_, end, name)) = i.checked_sub(1).map(|i| &w[i]) else {
            continue;
        };
        if s.time > *end {
            continue;
        }
        let frames = &mut sym.frames;
        let id = *ids.entry(name.clone()).or_insert_with(|| {
            let f = FrameInfo::new(name, "");
            frames.iter().position(|x| *x == f).unwrap_or_else(|| {
                frames.push(f);
                frames.len() - 1
            }) as u32
        });
        s.frames.insert(0, id);
        s.user_len += 1;
        if !s.addrs.is_empty() {
            s.addrs.truncate(0);
        }
        labelled += 1;
    }
    labelled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::testing::sample;
    use crate::symbolize::SymbolizedStack;
    use format::events::{Net, OFFCPU_EVENT, SOCK_WAIT_EVENT, SOCK_WAIT_TRACEPOINT_ID};

    fn stack(tid: i32, time: u64) -> SymbolizedStack {
        SymbolizedStack {
            comm: 0,
            pid: tid,
            tid,
            time,
            cpu: 0,
            event: 0,
            period: 10,
            weight: 10,
            count: 1,
            frames: vec![0, 1],
            user_len: 1,
            addrs: Vec::new(),
        }
    }

    #[test]
    fn off_cpu_stacks_of_a_wait_get_its_peer_at_the_root() {
        let mut wait = Net {
            event: SOCK_WAIT_TRACEPOINT_ID,
            family: 2,
            rport: 8080,
            start_ns: 100,
            ..Default::default()
        };
        wait.daddr[..4].copy_from_slice(&[10, 0, 0, 2]);
        let rec = Recording {
            events: vec![OFFCPU_EVENT.into(), SOCK_WAIT_EVENT.into()],
            samples: vec![sample(1, 7, 300, 150, &[], Some(wait.to_raw(7).to_vec()))],
            ..Default::default()
        };
        let frame = |name: &str| FrameInfo::new(name, "");
        let mut sym = Symbolized {
            events: rec.events.clone(),
            frames: vec![frame("main"), frame("schedule")],
            // Before the wait, its first and last intervals, after it, another thread's.
            stacks: vec![
                stack(7, 50),
                stack(7, 100),
                stack(7, 300),
                stack(7, 400),
                stack(8, 200),
            ],
            ..Default::default()
        };
        assert_eq!(label(&mut sym, &rec, 0), 2);
        let peer = sym
            .frames
            .iter()
            .position(|f| f.function == "peer:10.0.0.2:8080")
            .unwrap() as u32;
        let roots: Vec<u32> = sym.stacks.iter().map(|s| s.frames[0]).collect();
        assert_eq!(roots, [0, peer, peer, 0, 0]);
        assert_eq!(sym.stacks[1].user_len, 2);
        assert_eq!(sym.stacks[1].frames, [peer, 0, 1]);
    }
}
