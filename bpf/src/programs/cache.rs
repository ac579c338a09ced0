//! cache.bpf.c: cachestat's counts per followed process, taken each second.

use libbpf_rs::{Link, MapCore};

use super::attach_one;
use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::{CacheCounts, Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) {
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

/// Each process's page-cache counts since the last call (and the counters restart), processes
/// with nothing counted left out.
pub fn take_counts(skel: &BpfperfSkel<'_>) -> Vec<CacheCounts> {
    let map = &skel.maps.cache_counts;
    let keys: Vec<Vec<u8>> = map.keys().collect();
    let mut out = Vec::new();
    for key in keys {
        // Taken and deleted at once: counts added meanwhile go to a fresh entry.
        let Ok(Some(value)) = map.lookup_and_delete(&key) else {
            continue;
        };
        let mut c = types::cache_counts::default();
        if plain::copy_from_bytes(&mut c, &value).is_err() {
            continue;
        }
        let Ok(pid) = key[..].try_into().map(u32::from_ne_bytes) else {
            continue;
        };
        if c.accesses + c.added + c.dirtied > 0 {
            out.push(CacheCounts {
                pid,
                accesses: c.accesses,
                added: c.added,
                dirtied: c.dirtied,
            });
        }
    }
    out.sort_by_key(|c| c.pid);
    out
}
