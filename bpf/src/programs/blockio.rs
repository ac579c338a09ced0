//! blockio.bpf.c: block requests from issue to completion, and writeback charged to the
//! thread that dirtied the pages.

use libbpf_rs::Link;

use super::attach_one;
use crate::skel::{BpfperfSkel, OpenBpfperfSkel};
use crate::{Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) -> Result<(), Error> {
    let rodata = super::rodata(open);
    rodata.io_enabled = o.block_io;
    let step = "size the block I/O maps";
    if !o.block_io {
        // The preallocated maps take no room when nothing fills them.
        for map in [&mut open.maps.io_starts, &mut open.maps.dirtiers] {
            map.set_max_entries(1).map_err(Error::bpf(step))?;
        }
    } else if let Some(n) = o.io_prealloc {
        open.maps
            .io_starts
            .set_max_entries(n.max(1))
            .map_err(Error::bpf(step))?;
    }
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
        attach_one(&p.on_block_issue, "attach block_rq_issue", links)?;
        attach_one(&p.on_block_complete, "attach block_rq_complete", links)?;
        attach_one(&p.on_folio_dirtied, "attach writeback_dirty_folio", links)?;
    }
    Ok(())
}
