//! A sample's stacks as perf writes them: the callchain (kernel, then user frames, with their
//! context markers), and in DWARF mode the user registers and the stack copy.

use format::{callchain, misc, Sample};

use super::recorder::Recorder;

/// Kernel and user stacks as a perf callchain: context markers, innermost first.
///
/// A frame-pointer walk through code built without frame pointers reads whatever the stack
/// holds: the user stack ends at its first word that cannot be a user address (top bit set).
/// Past it is garbage, and a word in the context markers' range (-1, say) makes perf drop
/// the whole callchain as invalid, leaf included.
fn build_callchain(out: &mut Vec<u64>, kernel: &[u64], user: &[u64]) {
    out.clear();
    if !kernel.is_empty() {
        out.push(callchain::KERNEL);
        out.extend_from_slice(kernel);
    }
    let user = match user.iter().position(|&a| a >> 63 != 0) {
        Some(end) => &user[..end],
        None => user,
    };
    if !user.is_empty() {
        out.push(callchain::USER);
        out.extend_from_slice(user);
    }
}

impl Recorder {
    /// Writes a sample of event `attr` with the given stacks.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_stack_sample(
        &mut self,
        copy: Option<(&bpf::UserRegs, &[u8])>,
        attr: usize,
        pid: u32,
        tid: u32,
        cpu: u32,
        time: u64,
        period: u64,
        kernel: &[u64],
        user: &[u64],
        raw: &[u8],
    ) -> anyhow::Result<()> {
        self.describe(pid, time)?;
        let mut chain = std::mem::take(&mut self.callchain);
        build_callchain(&mut chain, kernel, user);
        // A copied stack's user frames in the callchain are its Python frames alone
        // (format::python): the leaf is the registers' ip.
        let ip = kernel
            .first()
            .copied()
            .or(copy.map(|(r, _)| r.ip()))
            .or(user.first().copied())
            .unwrap_or(0);
        let regs = copy.map(|(r, _)| r.0);
        let sample = Sample {
            misc: if kernel.is_empty() {
                misc::USER
            } else {
                misc::KERNEL
            },
            ip,
            pid,
            tid,
            time,
            cpu,
            period,
            callchain: &chain,
            raw,
            user_regs: regs.as_ref().map(|regs| format::UserRegs { abi: 2, regs }),
            user_stack: copy.map_or(&[][..], |(_, s)| s),
            ..Default::default()
        };
        let r = self.writer.write_sample(attr, &sample);
        self.callchain = chain;
        r?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_stacks_end_before_words_that_are_no_user_address() {
        let mut chain = Vec::new();
        build_callchain(
            &mut chain,
            &[0xffff_ffff_8100_0000],
            &[0x401000, 0x20, u64::MAX, 0x402000],
        );
        assert_eq!(
            chain,
            [
                callchain::KERNEL,
                0xffff_ffff_8100_0000,
                callchain::USER,
                0x401000,
                0x20
            ]
        );
        build_callchain(&mut chain, &[], &[u64::MAX]);
        assert!(chain.is_empty(), "{chain:x?}");
    }
}
