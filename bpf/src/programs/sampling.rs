//! sampling.bpf.c: on-CPU samples from one cpu-clock event per CPU, sent one by one or
//! counted in the kernel (`--aggregate`).

use std::collections::HashMap;
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags};

use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::{perf_event, AggregatedSamples, Error, Options};

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
    let (stack_keys, by_id) = read_stacks(stacks);
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
        let stack = |id: u64| by_id.get(&id).cloned().unwrap_or_default();
        out.push(AggregatedSamples {
            pid: k.pid,
            tid: k.tid,
            count,
            kernel_stack: stack(k.kstack),
            user_stack: stack(k.ustack),
        });
    }
    for key in &count_keys {
        let _ = counts.delete(key);
    }
    for key in &stack_keys {
        let _ = stacks.delete(key);
    }
    Ok(out)
}

/// The stacks of an aggregation map (frames -> id): its keys, and each id's frames.
pub(super) fn read_stacks(stacks: &libbpf_rs::Map<'_>) -> (Vec<Vec<u8>>, HashMap<u64, Vec<u64>>) {
    let stack_keys: Vec<Vec<u8>> = stacks.keys().collect();
    let mut by_id: HashMap<u64, Vec<u64>> = HashMap::with_capacity(stack_keys.len());
    for key in &stack_keys {
        let Ok(Some(id)) = stacks.lookup(key, MapFlags::ANY) else {
            continue;
        };
        let Ok(id) = id[..].try_into().map(u64::from_ne_bytes) else {
            continue;
        };
        by_id.insert(id, frames(key));
    }
    (stack_keys, by_id)
}

/// A stack key's frames: as many as its `len` (the last u64) says, the frames past them zero.
fn frames(key: &[u8]) -> Vec<u64> {
    let words: Vec<u64> = key
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    let Some((&len, ips)) = words.split_last() else {
        return Vec::new();
    };
    ips[..(len as usize / 8).min(ips.len())].to_vec()
}

#[cfg(test)]
mod tests {
    use super::frames;

    #[test]
    fn stack_keys_hold_their_length() {
        let mut key = vec![0u8; 8 * 128];
        key[..8].copy_from_slice(&0x401000u64.to_ne_bytes());
        key[16..24].copy_from_slice(&0x402000u64.to_ne_bytes());
        key[8 * 127..].copy_from_slice(&32u64.to_ne_bytes());
        assert_eq!(frames(&key), [0x401000, 0, 0x402000, 0]);
        assert!(frames(&[0u8; 8 * 128]).is_empty());
    }
}
