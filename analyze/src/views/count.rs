//! `analyze count`: how many times each event fired, as bcc's funccount prints its counts
//! (per event, command or process: a `%-36s %8s` table, smallest count first), and per
//! stack as stackcount prints them (each stack leaf first, two spaces in, kernel frames then
//! `--` then user frames, its count four spaces in, a blank line; smallest count first).

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::aggregate::Profile;
use crate::read::{Recording, Weighed};

/// What the counts are per.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Event,
    Comm,
    Pid,
}

/// The events each key of the selected samples counts: (key, count), smallest first (ties
/// by key).
pub fn counts(rec: &Recording, samples: &[Weighed<'_>], by: By) -> Vec<(String, u64)> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for (s, _) in samples {
        let key = match by {
            By::Event => rec.events.get(s.event).cloned().unwrap_or_default(),
            By::Comm => rec.comms.get(s.comm as usize).cloned().unwrap_or_default(),
            By::Pid => s.pid.to_string(),
        };
        *counts.entry(key).or_insert(0) += s.count;
    }
    sorted(counts.into_iter().collect())
}

fn sorted(mut counts: Vec<(String, u64)>) -> Vec<(String, u64)> {
    counts.sort_by(|(ka, a), (kb, b)| a.cmp(b).then_with(|| ka.cmp(kb)));
    counts
}

/// The counts as funccount prints them, under a header naming the key.
pub fn table(counts: &[(String, u64)], by: By) -> String {
    let title = match by {
        By::Event => "EVENT",
        By::Comm => "COMM",
        By::Pid => "PID",
    };
    let mut out = format!("{title:<36} {:>8}\n", "COUNT");
    for (key, n) in counts {
        let _ = writeln!(out, "{key:<36} {n:>8}");
    }
    out
}

/// The events each distinct stack of `profile` counts (its stacks' event counts summed over
/// threads), as stackcount prints them.
pub fn stacks(profile: &Profile) -> String {
    let mut by_stack: HashMap<(&[u32], u32), u64> = HashMap::new();
    for s in &profile.stacks {
        *by_stack.entry((&s.frames, s.user_len)).or_insert(0) += s.count;
    }
    let text: Vec<(String, u64)> = by_stack
        .into_iter()
        .map(|((frames, user_len), n)| {
            let mut t = String::new();
            let name = |f: &u32| super::folded::frame_name(&profile.frames[*f as usize]);
            let (user, kernel) = frames.split_at(user_len as usize);
            for f in kernel.iter().rev() {
                let _ = writeln!(t, "  {}", name(f));
            }
            if !kernel.is_empty() && !user.is_empty() {
                t.push_str("  --\n");
            }
            for f in user.iter().rev() {
                let _ = writeln!(t, "  {}", name(f));
            }
            (t, n)
        })
        .collect();
    let mut out = String::new();
    for (stack, n) in sorted(text) {
        let _ = write!(out, "{stack}    {n}\n\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Stack;
    use crate::read::testing::{recording, sample, write_payload};
    use crate::symbolize::FrameInfo;

    #[test]
    fn counts_per_event_comm_and_pid() {
        let mut rec = recording();
        let write = |pid| sample(1, pid, 1, 1, &[], Some(write_payload(pid, 1, 1)));
        rec.samples = vec![write(7), write(300), write(7)];
        rec.samples.push(sample(2, 300, 2, 10, &[], None));
        rec.samples[2].count = 3;
        let samples: Vec<Weighed> = rec.samples.iter().map(|s| (s, 1)).collect();
        let by_event = counts(&rec, &samples, By::Event);
        assert_eq!(
            table(&by_event, By::Event),
            "EVENT                                   COUNT\n\
             probe_libc:getaddrinfo__return              1\n\
             syscalls:sys_enter_write                    5\n"
        );
        assert_eq!(
            counts(&rec, &samples, By::Comm),
            [("curl".into(), 2), ("dd".into(), 4)]
        );
        assert_eq!(
            counts(&rec, &samples, By::Pid),
            [("300".into(), 2), ("7".into(), 4)]
        );
    }

    #[test]
    fn stacks_as_stackcount_prints_them() {
        let frame = |name: &str| FrameInfo::new(name, "x");
        let stack = |tid, frames: &[u32], user_len, count| Stack {
            comm: 0,
            pid: 1,
            tid,
            frames: frames.to_vec(),
            user_len,
            weight: count,
            count,
        };
        let profile = Profile {
            comms: vec!["dd".into()],
            frames: ["main", "write", "entry_SYSCALL_64", "ksys_write"]
                .map(frame)
                .to_vec(),
            // Two threads with the same stack, and a stack of user frames only.
            stacks: vec![
                stack(1, &[0, 1, 2, 3], 2, 4),
                stack(2, &[0, 1, 2, 3], 2, 3),
                stack(1, &[0, 1], 2, 2),
            ],
            ..Default::default()
        };
        assert_eq!(
            stacks(&profile),
            "  write\n  main\n    2\n\n  ksys_write\n  entry_SYSCALL_64\n  --\n  write\n  main\n    7\n\n"
        );
    }
}
