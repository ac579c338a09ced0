//! requests.bpf.c: sampled write and send calls followed through the layers (`--follow`),
//! loaded only when asked for.

use libbpf_rs::{Link, MapCore, MapFlags};

use super::attach_one;
use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::{Error, FollowRate, Options};

/// Whether any calls are followed.
fn following(o: &Options) -> bool {
    o.follow_write.on() || o.follow_send.on()
}

/// The rate as the programs take it: (1 in N, or 0; the time between two chosen calls, or 0).
fn every_and_gap(rate: FollowRate) -> (u32, u64) {
    match rate {
        FollowRate::Off => (0, 0),
        FollowRate::OneIn(n) => (n, 0),
        FollowRate::PerSecond(0) => (0, 0),
        FollowRate::PerSecond(r) => (0, (1_000_000_000 / u64::from(r)).max(1)),
    }
}

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) -> Result<(), Error> {
    let rodata = super::rodata(open);
    (rodata.follow_write_every, rodata.follow_write_gap_ns) = every_and_gap(o.follow_write);
    (rodata.follow_send_every, rodata.follow_send_gap_ns) = every_and_gap(o.follow_send);
    let writes = o.follow_write.on();
    let sends = o.follow_send.on();
    // Block requests are taken where they are made (6.5+); without it writes are followed
    // to the page cache only.
    let block = writes && super::kernel_has_function("btf_trace_block_io_start");
    let p = &mut open.progs;
    p.on_request_enter.set_autoload(following(o));
    p.on_request_exit.set_autoload(following(o));
    p.on_request_dirty.set_autoload(writes);
    p.on_request_start.set_autoload(block);
    p.on_request_issue.set_autoload(block);
    p.on_request_complete.set_autoload(block);
    p.on_request_tcp.set_autoload(sends);
    p.on_request_queue.set_autoload(sends);
    p.on_request_xmit.set_autoload(sends);
    p.on_request_sent.set_autoload(sends);
    let m = &mut open.maps;
    let step = "size the --follow maps";
    if !sends {
        super::unused([&mut m.marked_skbs, &mut m.marked_sends], step)?;
    }
    if !writes {
        super::unused(
            [
                &mut m.marked_folios,
                &mut m.marked_requests,
                &mut m.pending_by_file,
            ],
            step,
        )?;
    }
    if !following(o) {
        super::unused([&mut m.marked_calls, &mut m.followed_parts], step)?;
    }
    Ok(())
}

pub fn attach(skel: &BpfperfSkel<'_>, links: &mut Vec<Link>) -> Result<(), Error> {
    let p = &skel.progs;
    for (prog, step) in [
        (
            &p.on_request_dirty,
            "attach writeback_dirty_folio (--follow)",
        ),
        (&p.on_request_start, "attach block_io_start (--follow)"),
        (&p.on_request_issue, "attach block_rq_issue (--follow)"),
        (
            &p.on_request_complete,
            "attach block_rq_complete (--follow)",
        ),
        (&p.on_request_tcp, "attach tcp_sendmsg_locked (--follow)"),
        (&p.on_request_queue, "attach net_dev_queue (--follow)"),
        (&p.on_request_xmit, "attach net_dev_start_xmit (--follow)"),
        (&p.on_request_sent, "attach net_dev_xmit (--follow)"),
        // The calls last: their marks find the layers' programs in place.
        (&p.on_request_exit, "attach sys_exit (--follow)"),
        (&p.on_request_enter, "attach sys_enter (--follow)"),
    ] {
        if prog.autoload() {
            attach_one(prog, step, links)?;
        }
    }
    Ok(())
}

/// Followed calls whose block request was issued and not seen completing: those whose
/// request's address started again (counted by the programs) and those of requests still
/// issued now (in flight, or completed unseen).
pub fn unseen_completions(skel: &BpfperfSkel<'_>) -> u64 {
    let mut calls = super::bss_counter(skel, |bss| &bss.req_unseen_completions);
    let map = &skel.maps.marked_requests;
    for key in map.keys() {
        let Ok(Some(value)) = map.lookup(&key, MapFlags::ANY) else {
            continue;
        };
        let mut r = types::request_marks::default();
        if plain::copy_from_bytes(&mut r, &value).is_ok() && r.issued != 0 {
            calls += u64::from(r.n);
        }
    }
    calls
}
