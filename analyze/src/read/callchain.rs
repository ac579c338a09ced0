//! A sample's frames: its callchain split into kernel and user frames, and its copied user
//! stack with the registers to unwind it from.

use format::linux_perf_data::linux_perf_event_reader::{RawData, Regs};

use super::recording::{RawSample, StackBytes, StackCopy, UserRegs};

pub(super) const KERNEL_MARK: u64 = format::callchain::KERNEL;
pub(super) const USER_MARK: u64 = format::callchain::USER;

/// Whether `chain` (a callchain, or the ip when there is none), split as [`super::read_with`]
/// splits it, gives the frames of `s`.
pub(super) fn same_frames(s: &RawSample, chain: &[u64], mut in_kernel: bool) -> bool {
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
pub(super) fn split_callchain(chain: &[u64], in_kernel: bool) -> (Vec<u64>, Vec<u64>) {
    split_callchain_with(chain.iter().copied(), in_kernel, |a| a)
}

/// [`split_callchain`] of a callchain read as it goes (twice: once to count), each user
/// frame made by `user`.
pub(super) fn split_callchain_with<T>(
    chain: impl Iterator<Item = u64> + Clone,
    in_kernel: bool,
    mut user: impl FnMut(u64) -> T,
) -> (Vec<u64>, Vec<T>) {
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
    for a in chain.clone() {
        match side(&mut at_kernel, a) {
            Some(true) => kernel_frames += 1,
            Some(false) => user_frames += 1,
            None => {}
        }
    }
    let mut kernel = Vec::with_capacity(kernel_frames);
    let mut users = Vec::with_capacity(user_frames);
    let mut at_kernel = in_kernel;
    for a in chain {
        match side(&mut at_kernel, a) {
            Some(true) => kernel.push(a),
            Some(false) => users.push(user(a)),
            None => {}
        }
    }
    (kernel, users)
}

/// The copied user stack and the registers to unwind it from, when the sample has them.
/// With `input`, the bytes stay where they lie in it when they are a slice of it (no copy).
pub(super) fn stack_copy(
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
pub(super) fn mapped_stack_copy(
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
