//! Sends followed to the device (netsend.bpf.c) cross the ring buffer as one record per send
//! call, holding its stacks once, and a small record per skb naming its call by (socket, start
//! time): joined here into one [`NetWhat::Send`] event per skb, as record writes them.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::events::{Event, NetEvent, NetWhat};
use crate::skel::types;

// SAFETY: both are plain data (integers and arrays of them), any bit pattern valid.
unsafe impl plain::Plain for types::net_call_event {}
unsafe impl plain::Plain for types::net_skb_event {}

const EVENT_NET_CALL: u32 = types::event_kind::EVENT_NET_CALL.0;
const EVENT_NET_SKB: u32 = types::event_kind::EVENT_NET_SKB.0;

/// Send calls remembered for the skbs still to come. Each skb is charged to its socket's
/// latest call when it was queued, so only a socket's recent calls matter: the last
/// [`PER_SOCKET`] of each, [`CALLS`] in all (beyond, each socket keeps its latest only),
/// which outlive the kernel's own table of skbs in flight on any workload we measured and
/// bound record's memory to a few MB.
const CALLS: usize = 16384;
const PER_SOCKET: usize = 1024;

/// A call's kernel and user stacks, shared by its skbs' events.
type Stacks = (Arc<[u64]>, Arc<[u64]>);

/// A send call: who made it, on which connection, with which stacks.
#[derive(Debug, Default)]
struct Call {
    pid: u32,
    tid: u32,
    comm: [u8; 16],
    family: u16,
    lport: u16,
    rport: u16,
    state: u8,
    saddr: [u8; 16],
    daddr: [u8; 16],
    kernel_stack: Arc<[u64]>,
    user_stack: Arc<[u64]>,
}

/// The times of a socket's last skb followed: its call's start, to net_dev_queue, in the
/// qdisc, and to net_dev_xmit (ns). The skbs its socket's rate skipped after it (a tail
/// record) are given them.
#[derive(Debug, Default, Clone, Copy)]
struct Times {
    send_ns: u64,
    queue_ns: u64,
    qdisc_ns: u32,
    duration_ns: u64,
}

/// What is kept of a socket: its latest calls by start time, the newest last, and its last
/// skb's times.
#[derive(Default)]
struct Socket {
    calls: VecDeque<(u64, Call)>,
    last: Times,
}

/// The calls seen, by socket: a small table that stays in cache, where one keyed by each
/// call took a cache miss to insert, one to forget and one per skb (a quarter of record's
/// CPU following iperf3's 70k skbs a second).
#[derive(Default)]
pub(crate) struct Joiner {
    calls: FxHashMap<u64, Socket>,
    kept: usize,
    /// Each thread's last stacks, by tid, for the calls that come without them (made from
    /// where that one was: netsend.bpf.c's call_sites).
    last_stacks: FxHashMap<u32, Stacks>,
    /// The records time send calls (the kernel's TX timestamping), not skbs: said in each
    /// event ([`NetEvent::active`]).
    calls_timed: bool,
}

impl Joiner {
    /// Decodes one ring buffer record, a send call's kept (`None`) for the skbs that name it;
    /// `None` too for a record of unknown kind or size (see [`Event::decode`]).
    pub(crate) fn decode(&mut self, data: &[u8]) -> Option<Event> {
        let kind = u32::from_ne_bytes(data.get(..4)?.try_into().ok()?);
        match kind {
            EVENT_NET_CALL => {
                self.call(data);
                None
            }
            EVENT_NET_SKB => self.skb(data).map(Event::Net),
            _ => Event::decode(data),
        }
    }

    /// A joiner for records of sends followed skb by skb (`calls`: false) or of send calls
    /// timed by the kernel's TX timestamping.
    pub fn timing_calls(calls: bool) -> Self {
        Joiner {
            calls_timed: calls,
            ..Joiner::default()
        }
    }

    /// Keeps a call's record (`net_call_event`'s head, then its frames); false if malformed.
    pub fn call(&mut self, data: &[u8]) -> bool {
        let mut e = types::net_call_event::default();
        let head = std::mem::offset_of!(types::net_call_event, kstack);
        // SAFETY: net_call_event is plain data.
        let bytes = unsafe { plain::as_mut_bytes(&mut e) };
        let Some(h) = data.get(..head) else {
            return false;
        };
        bytes[..head].copy_from_slice(h);
        let frames = |at: usize, len: i32| -> Option<Arc<[u64]>> {
            let len = usize::try_from(len).ok()?;
            let raw = data.get(at..at.checked_add(len)?)?;
            Some(
                raw.chunks_exact(8)
                    .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
                    .collect::<Arc<[u64]>>(),
            )
        };
        let Some(mut kernel_stack) = frames(head, e.kstack_bytes) else {
            return false;
        };
        let Some(mut user_stack) = frames(head + e.kstack_bytes as usize, e.ustack_bytes) else {
            return false;
        };
        if e.same_stacks != 0 {
            if let Some((k, u)) = self.last_stacks.get(&e.tid) {
                kernel_stack = k.clone();
                user_stack = u.clone();
            }
        } else {
            if self.last_stacks.len() >= CALLS && !self.last_stacks.contains_key(&e.tid) {
                // Bounded: threads beyond it are forgotten (their next call walks again
                // only in the kernel's own table, which is as large).
                self.last_stacks.clear();
            }
            self.last_stacks
                .insert(e.tid, (kernel_stack.clone(), user_stack.clone()));
        }
        let call = Call {
            pid: e.pid,
            tid: e.tid,
            comm: e.comm.map(|c| c as u8),
            family: e.family,
            lport: e.lport,
            rport: e.rport,
            state: e.state,
            saddr: e.saddr,
            daddr: e.daddr,
            kernel_stack,
            user_stack,
        };
        let socket = &mut self.calls.entry(e.sk).or_default().calls;
        match socket.back_mut() {
            // The same call again (a record repeated): the later one stands.
            Some((time, kept)) if *time == e.time_ns => *kept = call,
            _ => {
                socket.push_back((e.time_ns, call));
                self.kept += 1;
                if socket.len() > PER_SOCKET {
                    socket.pop_front();
                    self.kept -= 1;
                }
            }
        }
        if self.kept > CALLS {
            self.forget_all_but_latest();
        }
        true
    }

    /// Each socket keeps its latest call only; with more sockets than [`CALLS`], none.
    fn forget_all_but_latest(&mut self) {
        if self.calls.len() > CALLS {
            self.calls.clear();
        }
        for socket in self.calls.values_mut() {
            let n = socket.calls.len();
            socket.calls.drain(..n.saturating_sub(1));
        }
        self.kept = self.calls.len();
    }

    /// Socket `sk`'s call that began at `start`.
    fn find(&self, sk: u64, start: u64) -> Option<&Call> {
        let socket = self.calls.get(&sk)?;
        socket
            .calls
            .iter()
            .rev()
            .find(|(time, _)| *time == start)
            .map(|(_, c)| c)
    }

    /// An skb's record (`net_skb_event`) as the NET_SEND event of its call; one whose call
    /// is unknown (its record lost, or forgotten) keeps its timing, with no owner or stacks.
    /// A socket's tail (the skbs its rate skipped after its last followed one, sent when its
    /// owner closes it or the recording ends) gets that one's call and times, at its own time.
    pub fn skb(&mut self, data: &[u8]) -> Option<NetEvent> {
        let mut e = types::net_skb_event::default();
        plain::copy_from_bytes(&mut e, data).ok()?;
        let times = if e.send_ns == 0 {
            self.calls.get(&e.sk).map(|s| s.last).unwrap_or_default()
        } else {
            let t = Times {
                send_ns: e.send_ns,
                queue_ns: e.queue_ns,
                qdisc_ns: e.qdisc_ns,
                duration_ns: e.time_ns.saturating_sub(e.send_ns),
            };
            if let Some(socket) = self.calls.get_mut(&e.sk) {
                socket.last = t;
            }
            t
        };
        let none;
        let c = match self.find(e.sk, times.send_ns) {
            Some(c) => c,
            None => {
                none = Call::default();
                &none
            }
        };
        let time = e.time_ns;
        Some(NetEvent {
            what: NetWhat::Send,
            pid: c.pid,
            tid: c.tid,
            comm: c.comm,
            cpu: e.cpu,
            time,
            start_time: time.saturating_sub(times.duration_ns),
            tx_bytes: u64::from(e.len) + e.skipped_bytes,
            rx_bytes: times.queue_ns,
            reason: times.qdisc_ns,
            skbs: e.skbs.max(1),
            family: c.family,
            saddr: c.saddr,
            daddr: c.daddr,
            lport: c.lport,
            rport: c.rport,
            state: c.state,
            active: self.calls_timed,
            kernel_stack: c.kernel_stack.clone(),
            user_stack: c.user_stack.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call_record(sk: u64, start: u64, pid: u32, kstack: &[u64], ustack: &[u64]) -> Vec<u8> {
        let mut e = types::net_call_event {
            kind: types::event_kind::EVENT_NET_CALL.0,
            pid,
            tid: pid + 1,
            time_ns: start,
            sk,
            lport: 40000,
            rport: 5201,
            family: 2,
            kstack_bytes: 8 * kstack.len() as i32,
            ustack_bytes: 8 * ustack.len() as i32,
            ..Default::default()
        };
        e.kstack[..kstack.len()].copy_from_slice(kstack);
        let head = std::mem::offset_of!(types::net_call_event, kstack);
        // SAFETY: plain data.
        let bytes = unsafe { plain::as_bytes(&e) };
        let mut out = bytes[..head].to_vec();
        for f in kstack.iter().chain(ustack) {
            out.extend_from_slice(&f.to_ne_bytes());
        }
        out
    }

    fn skb_record(sk: u64, start: u64, len: u32) -> Vec<u8> {
        let e = types::net_skb_event {
            kind: types::event_kind::EVENT_NET_SKB.0,
            cpu: 1,
            time_ns: start + 5000,
            send_ns: start,
            sk,
            len,
            qdisc_ns: 300,
            queue_ns: 2000,
            skbs: 1,
            ..Default::default()
        };
        // SAFETY: plain data.
        unsafe { plain::as_bytes(&e) }.to_vec()
    }

    #[test]
    fn each_skb_gets_its_calls_owner_and_stacks() {
        let mut j = Joiner::default();
        assert!(j.call(&call_record(0xa, 100, 7, &[1, 2, 3], &[9, 8])));
        assert!(j.call(&call_record(0xa, 200, 7, &[4], &[])));
        assert!(j.call(&call_record(0xb, 100, 8, &[5], &[6])));
        let e = j.skb(&skb_record(0xa, 100, 1448)).unwrap();
        assert_eq!((e.what, e.pid, e.tid), (NetWhat::Send, 7, 8));
        assert_eq!(
            (&e.kernel_stack[..], &e.user_stack[..]),
            (&[1, 2, 3][..], &[9, 8][..])
        );
        assert_eq!((e.tx_bytes, e.rx_bytes, e.reason), (1448, 2000, 300));
        assert_eq!(
            (e.start_time, e.time, e.lport, e.rport),
            (100, 5100, 40000, 5201)
        );
        assert_eq!(
            &j.skb(&skb_record(0xa, 200, 1)).unwrap().kernel_stack[..],
            &[4]
        );
        assert_eq!(j.skb(&skb_record(0xb, 100, 1)).unwrap().pid, 8);
        // The skbs of one call share its stacks, not copies (tens of thousands a second).
        let (a, b) = (
            j.skb(&skb_record(0xa, 100, 1)),
            j.skb(&skb_record(0xa, 100, 2)),
        );
        assert!(Arc::ptr_eq(
            &a.unwrap().kernel_stack,
            &b.unwrap().kernel_stack
        ));
        // Its call unknown: timed, no owner.
        let lost = j.skb(&skb_record(0xc, 100, 1)).unwrap();
        assert_eq!((lost.pid, lost.kernel_stack.len()), (0, 0));
    }

    #[test]
    fn calls_without_frames_get_their_threads_last_stacks() {
        let mut j = Joiner::default();
        assert!(j.call(&call_record(0xa, 100, 7, &[1, 2], &[9])));
        assert!(j.call(&call_record(0xb, 100, 20, &[5], &[6])));
        let mut same = call_record(0xa, 200, 7, &[], &[]);
        same[std::mem::offset_of!(types::net_call_event, same_stacks)] = 1;
        assert!(j.call(&same));
        let e = j.skb(&skb_record(0xa, 200, 1)).unwrap();
        assert_eq!(
            (&e.kernel_stack[..], &e.user_stack[..]),
            (&[1, 2][..], &[9][..])
        );
        // A thread never seen with stacks: none.
        let mut r = call_record(0xc, 300, 30, &[], &[]);
        r[std::mem::offset_of!(types::net_call_event, same_stacks)] = 1;
        assert!(j.call(&r));
        assert!(j
            .skb(&skb_record(0xc, 300, 1))
            .unwrap()
            .kernel_stack
            .is_empty());
    }

    #[test]
    fn skipped_skbs_are_carried_and_a_sockets_tail_gets_its_last_times() {
        let mut j = Joiner::default();
        assert!(j.call(&call_record(0xa, 100, 7, &[1, 2], &[9])));
        assert!(j.call(&call_record(0xa, 200, 7, &[4], &[])));
        // Followed, standing for 2 skipped before it (3,000 bytes).
        let mut r = skb_record(0xa, 100, 1448);
        r[std::mem::offset_of!(types::net_skb_event, skbs)] = 3;
        r[std::mem::offset_of!(types::net_skb_event, skipped_bytes)..][..8]
            .copy_from_slice(&3000u64.to_ne_bytes());
        let e = j.skb(&r).unwrap();
        assert_eq!((e.skbs, e.tx_bytes, e.time - e.start_time), (3, 4448, 5000));
        // The tail: 5 skipped after it, charged to its call with its times, at the close.
        let tail = types::net_skb_event {
            kind: types::event_kind::EVENT_NET_SKB.0,
            time_ns: 90_000,
            sk: 0xa,
            skbs: 5,
            skipped_bytes: 7000,
            ..Default::default()
        };
        // SAFETY: plain data.
        let e = j.skb(unsafe { plain::as_bytes(&tail) }).unwrap();
        assert_eq!(
            (
                e.skbs,
                e.tx_bytes,
                e.time,
                e.start_time,
                e.rx_bytes,
                e.reason
            ),
            (5, 7000, 90_000, 85_000, 2000, 300)
        );
        assert_eq!((e.pid, &e.kernel_stack[..]), (7, &[1, 2][..]));
        // The tail leaves the socket's calls: its skbs still to be sent keep them.
        assert_eq!(j.skb(&skb_record(0xa, 200, 1)).unwrap().pid, 7);
    }

    #[test]
    fn bad_records_are_refused_and_old_calls_forgotten() {
        let mut j = Joiner::default();
        let mut r = call_record(0xa, 1, 7, &[1, 2], &[3]);
        r.truncate(r.len() - 4);
        assert!(!j.call(&r));
        assert!(!j.call(&[0; 8]));
        assert!(j.skb(&[0; 8]).is_none());
        // A socket keeps its latest calls.
        for t in 0..PER_SOCKET as u64 + 10 {
            assert!(j.call(&call_record(0xa, t, 7, &[1], &[])));
        }
        assert_eq!(j.kept, PER_SOCKET);
        assert_eq!(j.skb(&skb_record(0xa, 9, 1)).unwrap().pid, 0);
        assert_eq!(j.skb(&skb_record(0xa, 10, 1)).unwrap().pid, 7);
        // Past CALLS in all, each socket its latest one.
        let sockets = CALLS / PER_SOCKET + 1;
        for sk in 1..=sockets as u64 {
            for t in 1..=PER_SOCKET as u64 {
                assert!(j.call(&call_record(0x100 + sk, t, 7, &[1], &[])));
            }
        }
        assert!(j.kept <= CALLS, "{}", j.kept);
        assert_eq!(
            j.skb(&skb_record(0x101, PER_SOCKET as u64, 1)).unwrap().pid,
            7
        );
        // (A start of 0 is a socket's tail: calls start later.)
        assert_eq!(j.skb(&skb_record(0x101, 1, 1)).unwrap().pid, 0);
    }
}
