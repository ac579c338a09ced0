//! cache.bpf.c: cachestat's counts per followed process, taken each second.

use libbpf_rs::{Link, MapCore, MapFlags};

use super::attach_one;
use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::{CacheCounts, Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) -> Result<(), Error> {
    let rodata = super::rodata(open);
    rodata.cache_enabled = o.cache;
    let p = &mut open.progs;
    for prog in [
        &mut p.on_cache_read,
        &mut p.on_cache_fault,
        &mut p.on_cache_add,
        &mut p.on_cache_dirty,
    ] {
        prog.set_autoload(o.cache);
    }
    if !o.cache {
        super::unused([&mut open.maps.cache_counts], "size the page-cache maps")?;
    }
    Ok(())
}

pub fn attach(skel: &BpfperfSkel<'_>, o: &Options, links: &mut Vec<Link>) -> Result<(), Error> {
    if o.cache {
        let p = &skel.progs;
        attach_one(&p.on_cache_read, "attach mm_filemap_get_pages", links)?;
        attach_one(&p.on_cache_fault, "attach mm_filemap_fault", links)?;
        attach_one(
            &p.on_cache_add,
            "attach mm_filemap_add_to_page_cache",
            links,
        )?;
        attach_one(&p.on_cache_dirty, "attach writeback_dirty_folio", links)?;
    }
    Ok(())
}

/// What the counts of each process were at the last take: (accesses, added, dirtied), and
/// how many takes in a row found them unchanged.
pub type Taken = std::collections::HashMap<u32, ([u64; 3], u32)>;

/// Each process's page-cache counts since the last call, processes with nothing counted
/// left out. The kernel's counters are per CPU and only grow: each take sums them and
/// subtracts the last take's; a process idle for two takes in a row loses its entry (so that
/// exited ones do not fill the map).
pub fn take_counts(skel: &BpfperfSkel<'_>, taken: &mut Taken) -> Vec<CacheCounts> {
    let map = &skel.maps.cache_counts;
    let keys: Vec<Vec<u8>> = map.keys().collect();
    let mut out = Vec::new();
    for key in keys {
        let Ok(pid) = key[..].try_into().map(u32::from_ne_bytes) else {
            continue;
        };
        let Ok(Some(per_cpu)) = map.lookup_percpu(&key, MapFlags::ANY) else {
            continue;
        };
        let mut total = [0u64; 3];
        for value in per_cpu {
            let mut c = types::cache_counts::default();
            if plain::copy_from_bytes(&mut c, &value).is_ok() {
                total[0] += c.accesses;
                total[1] += c.added;
                total[2] += c.dirtied;
            }
        }
        let (last, idle) = taken.entry(pid).or_insert(([0; 3], 0));
        let delta = [0, 1, 2].map(|i| total[i].saturating_sub(last[i]));
        if delta == [0; 3] {
            *idle += 1;
            if *idle >= 2 {
                let _ = map.delete(&key);
                taken.remove(&pid);
            }
            continue;
        }
        *last = total;
        *idle = 0;
        out.push(CacheCounts {
            pid,
            accesses: delta[0],
            added: delta[1],
            dirtied: delta[2],
        });
    }
    out.sort_by_key(|c| c.pid);
    out
}
