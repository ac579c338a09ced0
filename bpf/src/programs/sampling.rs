//! sampling.bpf.c: on-CPU samples from one cpu-clock event per CPU, sent one by one or
//! counted in the kernel (`--aggregate`).

use std::collections::HashMap;
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags};

use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::{perf_event, AggregatedSamples, Error, Options, PyFrame};

/// Python frames a sample may carry (bpfperf.h's MAX_PY_FRAMES).
const MAX_PY_FRAMES: usize = types::bpfperf_limits::BPFPERF_MAX_PY_FRAMES.0 as usize;

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options, cpu_slots: u32) -> Result<(), Error> {
    open.progs.on_cpu_sample.set_autoload(o.sampling);
    super::rodata(open).aggregate = o.aggregate;
    let m = &mut open.maps;
    super::size_aggregation_maps(
        [
            &mut m.agg_counts0,
            &mut m.agg_counts1,
            &mut m.agg_stacks0,
            &mut m.agg_stacks1,
        ],
        o.aggregate,
        o.aggregate_entries,
        "size aggregation maps",
    )?;
    // DWARF mode assembles each sample in a buffer per CPU.
    let slots = if o.stack_copy_bytes > 0 { cpu_slots } else { 1 };
    open.maps
        .sample_scratch
        .set_max_entries(slots)
        .map_err(Error::bpf("size stack copy buffers"))
}

/// Opens cpu-clock on each sampled CPU with the program attached: sampling starts.
pub fn attach(
    skel: &BpfperfSkel<'_>,
    o: &Options,
    cpus: &[u32],
    links: &mut Vec<Link>,
) -> Result<(), Error> {
    let sampled = cpus
        .iter()
        .filter(|c| o.sampling && o.cpus.as_ref().is_none_or(|l| l.contains(c)));
    super::attach_per_cpu(
        &skel.progs.on_cpu_sample,
        sampled,
        |cpu| perf_event::open_cpu_clock(cpu, o.frequency),
        "attach to cpu-clock",
        links,
    )
}

/// How long a program that read the old slot may still be counting into its maps: a
/// perf_event program runs to its end with interrupts off, in microseconds (a 127-frame
/// unwinding included); this is a thousand times that.
pub(super) const SLOT_GRACE: Duration = Duration::from_millis(10);

/// Moves the programs to the other pair of maps, then reads and empties pair `slot`.
pub fn take_aggregated(skel: &BpfperfSkel<'_>, slot: u32) -> Result<Vec<AggregatedSamples>, Error> {
    let m = &skel.maps;
    let zero = 0u32.to_ne_bytes();
    m.agg_slot
        .update(&zero, &(1 - slot).to_ne_bytes(), MapFlags::ANY)
        .map_err(Error::bpf("switch aggregation maps"))?;
    std::thread::sleep(SLOT_GRACE);
    let (counts, stacks) = if slot == 0 {
        (&m.agg_counts0, &m.agg_stacks0)
    } else {
        (&m.agg_counts1, &m.agg_stacks1)
    };
    let stacks_read = Stacks::read(stacks);
    let count_keys: Vec<Vec<u8>> = counts.keys().collect();
    let mut out = Vec::with_capacity(count_keys.len());
    for key in &count_keys {
        let Ok(Some(value)) = counts.lookup(key, MapFlags::ANY) else {
            continue;
        };
        let mut k = types::agg_key::default();
        if plain::copy_from_bytes(&mut k, key).is_err() {
            continue;
        }
        let Ok(count) = value[..].try_into().map(u64::from_ne_bytes) else {
            continue;
        };
        out.push(AggregatedSamples {
            pid: k.pid,
            tid: k.tid,
            count,
            kernel_stack: stacks_read.frames(k.kstack),
            user_stack: stacks_read.frames(k.ustack),
            python: stacks_read.python(k.pystack),
        });
    }
    for key in &count_keys {
        let _ = counts.delete(key);
    }
    stacks_read.delete_from(stacks);
    Ok(out)
}

/// The stacks of an aggregation map (frames -> id), as read: each id's key.
pub(super) struct Stacks {
    keys: Vec<Vec<u8>>,
    by_id: HashMap<u64, usize>,
}

impl Stacks {
    pub(super) fn read(stacks: &libbpf_rs::Map<'_>) -> Stacks {
        let keys: Vec<Vec<u8>> = stacks.keys().collect();
        let mut by_id: HashMap<u64, usize> = HashMap::with_capacity(keys.len());
        for (i, key) in keys.iter().enumerate() {
            let Ok(Some(id)) = stacks.lookup(key, MapFlags::ANY) else {
                continue;
            };
            let Ok(id) = id[..].try_into().map(u64::from_ne_bytes) else {
                continue;
            };
            by_id.insert(id, i);
        }
        Stacks { keys, by_id }
    }

    /// Stack `id`'s frames (none for 0 or an id not read).
    pub(super) fn frames(&self, id: u64) -> Vec<u64> {
        self.by_id
            .get(&id)
            .map(|&i| frames(&self.keys[i]))
            .unwrap_or_default()
    }

    /// The Python frames kept as stack `id` (see bpfperf.h's `struct agg_key`).
    fn python(&self, id: u64) -> Vec<PyFrame> {
        self.by_id
            .get(&id)
            .map(|&i| python_frames(&self.keys[i]))
            .unwrap_or_default()
    }

    /// Empties the map of the stacks read.
    pub(super) fn delete_from(&self, stacks: &libbpf_rs::Map<'_>) {
        for key in &self.keys {
            let _ = stacks.delete(key);
        }
    }
}

/// A stack key's words: the frames, then `len`.
fn words(key: &[u8]) -> Vec<u64> {
    key.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

/// A stack key's frames: as many as its `len` (the last u64) says, the frames past them zero.
fn frames(key: &[u8]) -> Vec<u64> {
    let words = words(key);
    let Some((&len, ips)) = words.split_last() else {
        return Vec::new();
    };
    ips[..(len as usize / 8).min(ips.len())].to_vec()
}

/// A Python stack's frames: `len` / 8 codes, then their lasti (u32s) from word
/// MAX_PY_FRAMES on.
fn python_frames(key: &[u8]) -> Vec<PyFrame> {
    let words = words(key);
    let Some((&len, ips)) = words.split_last() else {
        return Vec::new();
    };
    let n = (len as usize / 8).min(MAX_PY_FRAMES);
    let lasti: Vec<u32> = key
        .get(8 * MAX_PY_FRAMES..8 * MAX_PY_FRAMES + 4 * n)
        .unwrap_or(&[])
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap_or([0; 4])))
        .collect();
    crate::events::py_frames(n as u32, ips.get(..n).unwrap_or(&[]), &lasti)
}

#[cfg(test)]
mod tests {
    use super::{frames, python_frames, MAX_PY_FRAMES};

    #[test]
    fn stack_keys_hold_their_length() {
        let mut key = vec![0u8; 8 * 128];
        key[..8].copy_from_slice(&0x401000u64.to_ne_bytes());
        key[16..24].copy_from_slice(&0x402000u64.to_ne_bytes());
        key[8 * 127..].copy_from_slice(&32u64.to_ne_bytes());
        assert_eq!(frames(&key), [0x401000, 0, 0x402000, 0]);
        assert!(frames(&[0u8; 8 * 128]).is_empty());
    }

    /// A Python stack's key: codes (with their flags), then the lasti two a word, as
    /// sampling.bpf.c writes them.
    #[test]
    fn python_stack_keys_hold_codes_then_lasti() {
        let mut key = vec![0u8; 8 * 128];
        for (i, code) in [0x7000_1000u64, 0x7000_2001, 0x7000_9002, 0x7000_3001]
            .iter()
            .enumerate()
        {
            key[8 * i..8 * i + 8].copy_from_slice(&code.to_ne_bytes());
            let at = 8 * MAX_PY_FRAMES + 4 * i;
            key[at..at + 4].copy_from_slice(&(10 * i as u32 + 2).to_ne_bytes());
        }
        key[8 * 127..].copy_from_slice(&32u64.to_ne_bytes());
        let got: Vec<(u64, u32, bool)> = python_frames(&key)
            .iter()
            .map(|f| (f.code, f.lasti, f.entry))
            .collect();
        // The eval call's own frame (bit 1) marks the one before it as its entry.
        assert_eq!(
            got,
            [
                (0x7000_1000, 2, false),
                (0x7000_2000, 12, true),
                (0x7000_3000, 32, true)
            ]
        );
        assert!(python_frames(&[0u8; 8 * 128]).is_empty());
    }
}
