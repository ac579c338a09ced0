//! blockio.bpf.c: block requests from issue to completion, and writeback charged to the
//! thread that dirtied the pages.

use libbpf_rs::Link;

use super::attach_one;
use crate::skel::{BpfperfSkel, OpenBpfperfSkel};
use crate::{Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) {
    let rodata = super::rodata(open);
    rodata.io_enabled = o.block_io;
    for prog in [
        &mut open.progs.on_block_issue,
        &mut open.progs.on_block_complete,
        &mut open.progs.on_folio_dirtied,
    ] {
        prog.set_autoload(o.block_io);
    }
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
