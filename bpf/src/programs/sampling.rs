//! sampling.bpf.c: on-CPU samples from one cpu-clock event per CPU, sent one by one or
//! counted in the kernel (`--aggregate`).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags};

use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::{perf_event, AggregatedSamples, Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options, cpu_slots: u32) -> Result<(), Error> {
    open.progs.on_cpu_sample.set_autoload(o.sampling);
    super::rodata(open).aggregate = o.aggregate;
    if !o.aggregate {
        let m = &mut open.maps;
        for map in [
            &mut m.agg_counts0,
            &mut m.agg_counts1,
            &mut m.agg_stacks0,
            &mut m.agg_stacks1,
        ] {
            map.set_max_entries(1)
                .map_err(Error::bpf("size aggregation maps"))?;
        }
    }
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
    for &cpu in sampled {
        let fd = perf_event::open_cpu_clock(cpu, o.frequency)?;
        links.push(
            skel.progs
                .on_cpu_sample
                .attach_perf_event(fd.as_raw_fd())
                .map_err(Error::bpf("attach to cpu-clock"))?,
        );
        // The link owns the event now and closes it when detached.
        let _ = fd.into_raw_fd();
    }
    Ok(())
}

/// How long a program that read the old slot may still be counting into its maps: a
/// perf_event program runs to its end with interrupts off, in microseconds (a 127-frame
/// unwinding included); this is a thousand times that.
const SLOT_GRACE: Duration = Duration::from_millis(10);

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

/// A stack key's frames: up to the last that is not zero (the key is zero-padded).
fn frames(key: &[u8]) -> Vec<u64> {
    let mut ips: Vec<u64> = key
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    let n = ips.iter().rposition(|&ip| ip != 0).map_or(0, |i| i + 1);
    ips.truncate(n);
    ips
}

#[cfg(test)]
mod tests {
    use super::frames;

    #[test]
    fn stack_keys_end_at_their_last_frame() {
        let mut key = vec![0u8; 8 * 127];
        key[..8].copy_from_slice(&0x401000u64.to_ne_bytes());
        key[16..24].copy_from_slice(&0x402000u64.to_ne_bytes());
        assert_eq!(frames(&key), [0x401000, 0, 0x402000]);
        assert!(frames(&[0u8; 8 * 127]).is_empty());
    }
}
