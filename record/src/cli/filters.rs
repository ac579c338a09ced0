//! `-e`, `--filter` and `--latency`: each filter paired with its event, record's own events
//! told from any event.

use super::args::Args;

/// record's own events (the rest of -e is any event: tracepoints, probes).
const OWN_EVENTS: &[&str] = &[
    "cpu-clock",
    "cpu",
    "offcpu",
    "wakeup",
    "runq",
    "fault",
    "io",
    "cache",
    "net",
];

/// Gives each --filter to the -e or --latency right before it on the command line (perf's
/// rule), and sorts -e words into record's own events and any event. Errors: a filter with
/// no event before it, or after one of record's own events; a word that is neither.
pub(super) fn pair_filters(args: &mut Args, m: &clap::ArgMatches) -> Result<(), String> {
    let indexed = |id: &str| -> Vec<(usize, String)> {
        match (m.indices_of(id), m.get_many::<String>(id)) {
            (Some(i), Some(v)) => i.zip(v.cloned()).collect(),
            _ => Vec::new(),
        }
    };
    let events = indexed("events");
    let latency = indexed("latency");
    let mut filters = indexed("filters");
    filters.reverse();
    // Which filter follows an event: the first after it, if no other event comes between.
    let mut all: Vec<(usize, bool, String)> = events
        .iter()
        .map(|(i, e)| (*i, false, e.clone()))
        .chain(latency.iter().map(|(i, l)| (*i, true, l.clone())))
        .collect();
    all.sort();
    let mut taken = vec![false; filters.len()];
    let mut filter_after = |at: usize, next: usize| -> Option<String> {
        let k = filters
            .iter()
            .enumerate()
            .rev()
            .find(|(k, (i, _))| !taken[*k] && *i > at && *i < next)?
            .0;
        taken[k] = true;
        Some(filters[k].1.clone())
    };
    let own = |e: &str| OWN_EVENTS.contains(&e);
    for (n, (at, is_latency, word)) in all.iter().enumerate() {
        let next = all.get(n + 1).map_or(usize::MAX, |x| x.0);
        let filter = filter_after(*at, next);
        if *is_latency {
            let Some((entry, exit)) = word.split_once(',') else {
                return Err(format!(
                    "--latency {word}: expected ENTRY,EXIT (two tracepoints: \
                     syscalls:sys_enter_read,syscalls:sys_exit_read)"
                ));
            };
            args.latency_pairs
                .push((entry.trim().into(), exit.trim().into(), filter));
        } else if own(word) {
            if let Some(f) = filter {
                return Err(format!(
                    "--filter '{f}': {word} is one of record's own events, which take no \
                     filter (filters are for tracepoints and probes)"
                ));
            }
        } else if word.contains(':') {
            args.traced.push((word.clone(), filter));
        } else {
            return Err(format!(
                "-e {word}: no such event (record's own: {}; or a tracepoint SYSTEM:NAME, \
                 uprobe:PATH:FUNCTION, uretprobe:PATH:FUNCTION, usdt:PATH:PROVIDER:NAME, \
                 kprobe:FUNCTION)",
                OWN_EVENTS.join(", ")
            ));
        }
    }
    if let Some(k) = taken.iter().position(|t| !t) {
        return Err(format!(
            "--filter '{}': a filter goes after the -e (or --latency) it is for",
            filters[k].1
        ));
    }
    args.events.retain(|e| own(e));
    Ok(())
}
