//! Events from the BPF ring buffer, decoded from the skeleton's generated types.

use crate::skel::types;

// SAFETY: generated plain-old-data structs (integers and arrays only).
unsafe impl plain::Plain for types::sample_event {}
unsafe impl plain::Plain for types::exit_event {}

const EVENT_ON_CPU: u32 = 1;
const EVENT_EXIT: u32 = 2;

/// A stack sample of a thread that was running on a CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnCpuSample {
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub time: u64,
    /// cpu-clock period of this sample, in nanoseconds.
    pub period: u64,
    /// Kernel stack, innermost first (empty when the sample hit user mode).
    pub kernel_stack: Vec<u64>,
    /// User stack by frame pointers, innermost first.
    pub user_stack: Vec<u64>,
}

/// What the BPF programs report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    OnCpu(OnCpuSample),
    /// A tracked process (thread group) exited.
    Exit {
        pid: u32,
        time: u64,
    },
}

fn stack(frames: &[u64], bytes: i32) -> Vec<u64> {
    let n = (bytes.max(0) as usize / 8).min(frames.len());
    frames[..n].to_vec()
}

impl Event {
    /// Decodes one ring buffer record; `None` for a record of unknown kind or size.
    pub fn decode(data: &[u8]) -> Option<Event> {
        let kind = u32::from_ne_bytes(data.get(..4)?.try_into().ok()?);
        match kind {
            EVENT_ON_CPU => {
                let mut e = types::sample_event::default();
                plain::copy_from_bytes(&mut e, data).ok()?;
                Some(Event::OnCpu(OnCpuSample {
                    pid: e.pid,
                    tid: e.tid,
                    cpu: e.cpu,
                    time: e.time_ns,
                    period: e.period,
                    kernel_stack: stack(&e.kstack, e.kstack_bytes),
                    user_stack: stack(&e.ustack, e.ustack_bytes),
                }))
            }
            EVENT_EXIT => {
                let mut e = types::exit_event::default();
                plain::copy_from_bytes(&mut e, data).ok()?;
                Some(Event::Exit {
                    pid: e.pid,
                    time: e.time_ns,
                })
            }
            _ => None,
        }
    }
}
