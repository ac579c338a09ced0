//! blockio.bpf.c: block requests from their start (who made them) to completion, and writeback charged to the
//! thread that dirtied the pages.

use libbpf_rs::{Link, MapCore, MapFlags};

use super::attach_one;
use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::{Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) -> Result<(), Error> {
    let rodata = super::rodata(open);
    rodata.io_enabled = o.block_io;
    rodata.io_unseen_every = o.io_unseen_every;
    let step = "size the block I/O maps";
    if !o.block_io {
        // The preallocated maps take no room when nothing fills them.
        super::unused([&mut open.maps.io_starts, &mut open.maps.dirtiers], step)?;
    } else if let Some(n) = o.io_prealloc {
        open.maps
            .io_starts
            .set_max_entries(n.max(1))
            .map_err(Error::bpf(step))?;
    }
    // Requests are taken where they are made: block_io_start where the kernel has it (6.5+),
    // else as they are queued (block_rq_insert).
    let at_start = o.block_io && super::kernel_has_function("btf_trace_block_io_start");
    open.progs.on_block_start.set_autoload(at_start);
    open.progs
        .on_block_insert
        .set_autoload(o.block_io && !at_start);
    for prog in [
        &mut open.progs.on_block_issue,
        &mut open.progs.on_block_complete,
        &mut open.progs.on_folio_dirtied,
    ] {
        prog.set_autoload(o.block_io);
    }
    Ok(())
}

pub fn attach(skel: &BpfperfSkel<'_>, o: &Options, links: &mut Vec<Link>) -> Result<(), Error> {
    if o.block_io {
        let p = &skel.progs;
        if p.on_block_start.autoload() {
            attach_one(&p.on_block_start, "attach block_io_start", links)?;
        } else {
            attach_one(&p.on_block_insert, "attach block_rq_insert", links)?;
        }
        attach_one(&p.on_block_issue, "attach block_rq_issue", links)?;
        attach_one(&p.on_block_complete, "attach block_rq_complete", links)?;
        attach_one(&p.on_folio_dirtied, "attach writeback_dirty_folio", links)?;
    }
    Ok(())
}

/// Block requests kept and issued whose completion no program saw, and their bytes: those
/// whose address started again (counted by the programs) and those still kept now (in
/// flight, or completed unseen).
pub fn unseen_completions(skel: &BpfperfSkel<'_>) -> (u64, u64) {
    let mut requests = super::bss_counter(skel, |bss| &bss.io_unseen_completions);
    let mut bytes = super::bss_counter(skel, |bss| &bss.io_unseen_bytes);
    for map in [&skel.maps.io_starts, &skel.maps.io_starts_more] {
        for key in map.keys() {
            let Ok(Some(value)) = map.lookup(&key, MapFlags::ANY) else {
                continue;
            };
            let mut s = types::io_start::default();
            if plain::copy_from_bytes(&mut s, &value).is_ok() && s.issue_ns != 0 {
                requests += 1;
                bytes += s.issue_bytes;
            }
        }
    }
    (requests, bytes)
}
