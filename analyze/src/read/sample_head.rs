//! The fields of a sample record up to its callchain, read in place from a little-endian
//! record: what merging identical samples needs, in 48 bytes and without the full parse
//! (linux-perf-event-reader's `SampleRecord` is 200 bytes; kept for 100k samples, the pages
//! it filled were a fifth of a report's time). The layout is PERF_RECORD_SAMPLE's in
//! perf_event.h: every field before the callchain has a fixed size but `read_format` values,
//! so a format with PERF_SAMPLE_READ is not taken here.

use format::linux_perf_data::linux_perf_event_reader::SampleFormat;

/// A sample's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head<'a> {
    pub pid: i32,
    pub tid: i32,
    pub time: u64,
    pub cpu: u32,
    pub period: u64,
    /// The callchain's entries (little-endian u64s), or the ip's bytes where the format has
    /// no callchain.
    pub chain: &'a [u8],
    /// Where the fields after the callchain start in the record.
    pub rest: usize,
}

impl Head<'_> {
    /// The callchain's entries (or the ip).
    pub fn chain(&self) -> impl Iterator<Item = u64> + Clone + '_ {
        self.chain
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
    }
}

/// Whether [`head`] can read samples of this format.
pub(super) fn readable(format: SampleFormat) -> bool {
    !format.contains(SampleFormat::READ)
}

/// The head of the sample record `data` (the bytes after the record header); `None` if the
/// record is too short for its format.
pub(super) fn head(data: &[u8], format: SampleFormat) -> Option<Head<'_>> {
    let mut at = 0usize;
    let mut next = |has: bool| -> Option<Option<&[u8]>> {
        if !has {
            return Some(None);
        }
        let field = data.get(at..at + 8)?;
        at += 8;
        Some(Some(field))
    };
    let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    next(format.contains(SampleFormat::IDENTIFIER))?;
    let ip = next(format.contains(SampleFormat::IP))?;
    let tid = next(format.contains(SampleFormat::TID))?;
    let time = next(format.contains(SampleFormat::TIME))?;
    next(format.contains(SampleFormat::ADDR))?;
    next(format.contains(SampleFormat::ID))?;
    next(format.contains(SampleFormat::STREAM_ID))?;
    let cpu = next(format.contains(SampleFormat::CPU))?;
    let period = next(format.contains(SampleFormat::PERIOD))?;
    if format.contains(SampleFormat::READ) {
        return None;
    }
    let (chain, rest) = if format.contains(SampleFormat::CALLCHAIN) {
        let nr = usize::try_from(u64_of(next(true)??)).ok()?;
        let end = at.checked_add(nr.checked_mul(8)?)?;
        (data.get(at..end)?, end)
    } else {
        (ip.unwrap_or(&[]), at)
    };
    let pid = tid.map_or(-1, |b| u32_of(&b[..4]) as i32);
    Some(Head {
        pid,
        tid: tid.map_or(pid, |b| u32_of(&b[4..]) as i32),
        time: time.map_or(0, u64_of),
        cpu: cpu.map_or(0, |b| u32_of(&b[..4])),
        period: period.map_or(1, u64_of),
        chain,
        rest,
    })
}

/// A sample's RAW payload (the bytes after its u32 size), read in place after `head`; `None`
/// if the format has none or the record is too short for the size it gives.
pub(super) fn raw<'a>(data: &'a [u8], format: SampleFormat, head: &Head<'_>) -> Option<&'a [u8]> {
    if !format.contains(SampleFormat::RAW) {
        return None;
    }
    let at = head.rest;
    let size = u32::from_le_bytes(data.get(at..at.checked_add(4)?)?.try_into().ok()?);
    data.get(at + 4..(at + 4).checked_add(size as usize)?)
}

/// A sample's user registers ip, sp and bp, and where its copy of the user stack lies in the
/// record (the bytes the kernel filled: `dyn_size`), read in place after `head`; `regs_mask`
/// is the attr's `sample_regs_user`. `None` if the sample has no registers or stack, or is
/// too short for them; formats with fields this does not skip (BRANCH_STACK)
/// are left to the full parse ([`reads_stack_copies`]).
pub(super) fn stack_copy(
    data: &[u8],
    format: SampleFormat,
    regs_mask: u64,
    head: &Head<'_>,
) -> Option<([u64; 3], std::ops::Range<usize>)> {
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            data.get(at..at.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    let mut at = head.rest;
    if format.contains(SampleFormat::RAW) {
        let size = u32::from_le_bytes(data.get(at..at.checked_add(4)?)?.try_into().ok()?);
        at = at.checked_add(4 + size as usize)?;
    }
    if !format.contains(SampleFormat::REGS_USER) || !format.contains(SampleFormat::STACK_USER) {
        return None;
    }
    let abi = u64_at(at)?;
    at += 8;
    if abi == 0 {
        return None;
    }
    // perf's x86 register numbers: BP 6, SP 7, IP 8; the values follow in the mask's order.
    let reg = |n: u32| -> Option<u64> {
        if regs_mask & (1 << n) == 0 {
            return None;
        }
        u64_at(at + 8 * (regs_mask & ((1 << n) - 1)).count_ones() as usize)
    };
    let regs = [reg(8)?, reg(7)?, reg(6)?];
    at = at.checked_add(8 * regs_mask.count_ones() as usize)?;
    let size = usize::try_from(u64_at(at)?).ok()?;
    let stack = at + 8..(at + 8).checked_add(size)?;
    if size == 0 {
        return Some((regs, stack));
    }
    let dyn_size = usize::try_from(u64_at(stack.end)?).ok()?;
    Some((regs, stack.start..stack.start + dyn_size.min(size)))
}

/// Whether [`stack_copy`] can read samples of this format.
pub(super) fn reads_stack_copies(format: SampleFormat) -> bool {
    readable(format) && !format.contains(SampleFormat::BRANCH_STACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(fields: &[u64]) -> Vec<u8> {
        fields.iter().flat_map(|f| f.to_le_bytes()).collect()
    }

    #[test]
    fn reads_the_fields_before_the_callchain_and_the_callchain() {
        let format = SampleFormat::IDENTIFIER
            | SampleFormat::IP
            | SampleFormat::TID
            | SampleFormat::TIME
            | SampleFormat::CPU
            | SampleFormat::PERIOD
            | SampleFormat::CALLCHAIN;
        let tid = (7u64 << 32) | 5; // pid 5, tid 7
        let data = record(&[99, 0x1000, tid, 1234, 3, 250_000, 2, 0x2000, 0x3000, 42]);
        let h = head(&data, format).unwrap();
        assert_eq!(
            (h.pid, h.tid, h.time, h.cpu, h.period),
            (5, 7, 1234, 3, 250_000)
        );
        assert_eq!(h.chain().collect::<Vec<_>>(), [0x2000, 0x3000]);
        // Cut inside the callchain: no head.
        assert_eq!(head(&data[..data.len() - 16], format), None);
    }

    #[test]
    fn finds_the_registers_and_the_stack_bytes_the_kernel_filled() {
        let format = SampleFormat::TID
            | SampleFormat::CALLCHAIN
            | SampleFormat::RAW
            | SampleFormat::REGS_USER
            | SampleFormat::STACK_USER;
        // AX, BP, SP, IP (perf's numbers 0, 6, 7, 8).
        let mask = 1 | 1 << 6 | 1 << 7 | 1 << 8;
        let stack: Vec<u64> = vec![0x11, 0x22, 0x33, 0];
        let mut fields = vec![5, 1, 0x2000];
        fields.push(4 | 0xaabb_ccdd << 32); // raw: 4 bytes, padded to 8 with its size
        fields.extend([2, 0xa, 0xb0, 0x5000, 0x401000]); // abi, AX BP SP IP
        fields.push(32);
        fields.extend(&stack);
        fields.push(24); // dyn_size: the last 8 bytes were not filled
        let data = record(&fields);
        let h = head(&data, format).unwrap();
        assert_eq!(
            raw(&data, format, &h),
            Some(&0xaabb_ccdd_u32.to_le_bytes()[..])
        );
        let (regs, at) = stack_copy(&data, format, mask, &h).unwrap();
        assert_eq!(regs, [0x401000, 0x5000, 0xb0]);
        assert_eq!(data[at], record(&stack[..3])[..]);
        // Cut before dyn_size: no stack copy, no panic.
        assert_eq!(stack_copy(&data[..data.len() - 8], format, mask, &h), None);
        // A RAW size past the record's end: no payload, no panic.
        let mut lying = data.clone();
        lying[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(raw(&lying, format, &h), None);
        assert_eq!(raw(&data, format - SampleFormat::RAW, &h), None);
        // A mask without SP: no registers to unwind from.
        assert_eq!(stack_copy(&data, format, 1 | 1 << 6 | 1 << 8, &h), None);
    }

    #[test]
    fn without_a_callchain_the_ip_stands_for_it() {
        let format = SampleFormat::IP | SampleFormat::TID;
        let data = record(&[0x1000, 9]);
        let h = head(&data, format).unwrap();
        assert_eq!((h.pid, h.tid, h.period), (9, 0, 1));
        assert_eq!(h.chain().collect::<Vec<_>>(), [0x1000]);
        assert!(!readable(format | SampleFormat::READ));
    }
}
