//! The command line checked and turned into what to record ([`Config`]).

use std::path::PathBuf;

use super::args::{Args, CallGraph, CpuList, NetSendTiming};
use crate::config::{Config, Target};
use crate::output::rotation;
use crate::tracing;

impl Args {
    /// What to record, as the session takes it; an error for options that do not go together.
    pub fn into_config(self) -> anyhow::Result<Config> {
        let duration = match self.duration {
            Some(d) if !(d > 0.0 && d.is_finite()) => {
                anyhow::bail!("--duration {d}: expected a number of seconds above 0")
            }
            d => d.map(std::time::Duration::from_secs_f64),
        };
        let aggregate = self.aggregate || self.hist.is_some();
        if self.interval.is_some() && !aggregate {
            anyhow::bail!(
                "--interval: only with --aggregate or --hist (counts written every SECS)"
            );
        }
        if self.hist.is_some() && self.traced.is_empty() && self.latency_pairs.is_empty() {
            anyhow::bail!(
                "--hist: no traced event to count (give -e TRACEPOINT, a probe, or --latency ENTRY,EXIT)"
            );
        }
        // A histogram per command needs no stacks.
        let stacks = self.call_graph != CallGraph::None
            && (self.hist.is_none() || self.by.as_deref() == Some("stack"));
        let interval = match self.interval {
            Some(i) if !(i > 0.0 && i.is_finite()) => {
                anyhow::bail!("--interval {i}: expected a number of seconds above 0")
            }
            i => i.map(std::time::Duration::from_secs_f64),
        };
        // A duration alone records every process, as `-a -- sleep SECS` does.
        let all_cpus =
            self.all_cpus || (duration.is_some() && self.command.is_empty() && self.pid.is_empty());
        if self.command.is_empty() && self.pid.is_empty() && !all_cpus {
            anyhow::bail!(
                "nothing to record: give a command (record ls, or record -- ls), or -p PID, or -a"
            );
        }
        // A hash lookup per socket state change and per freed skb of the whole machine: only
        // when asked for by name.
        let net = self.events.iter().any(|e| e == "net");
        // Whether the kernel can time send calls is asked only when there are sends to time
        // (it reads the kernel's BTF).
        let net_send_calls = match self.net_send_timing {
            _ if !net => false,
            Some(NetSendTiming::Skbs) => false,
            Some(NetSendTiming::Calls) if !bpf::tx_timestamping() => anyhow::bail!(
                "--net-send-timing calls: no BPF TX timestamping here (it needs kernel 6.15+ \
                 and a cgroup v2 hierarchy mounted); use --net-send-timing skbs"
            ),
            Some(NetSendTiming::Calls) => true,
            // Only connections set up while recording are timed by call: where record starts
            // the command, all of them; with -p or -a, connections already open would go
            // unseen, so each skb is followed there.
            None => self.pid.is_empty() && !all_cpus && bpf::tx_timestamping(),
        };
        if self.freq == 0 || self.freq > 100_000 {
            anyhow::bail!(
                "-F {}: the frequency must be between 1 and 100000 Hz",
                self.freq
            );
        }
        // -e: only what it names (--no-* flags still take things away); any event alone
        // records only that.
        let any_event = !self.traced.is_empty() || !self.latency_pairs.is_empty();
        let chosen = |names: &[&str]| {
            (self.events.is_empty() && !any_event)
                || self.events.iter().any(|e| names.contains(&e.as_str()))
        };
        let off_cpu = chosen(&["offcpu", "wakeup", "runq", "fault"]) && !self.no_off_cpu;
        if let Some(CpuList(cpus)) = &self.cpus {
            let online = bpf::perf_event::online_cpus()?;
            if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
                anyhow::bail!("-C: CPU {c} is not online (online: {online:?})");
            }
        }
        let first_word = self.command.first().map(PathBuf::from);
        let target = if all_cpus {
            Target::SystemWide
        } else if !self.pid.is_empty() {
            Target::Pids(self.pid.clone())
        } else {
            Target::Workload
        };
        Ok(Config {
            output: self.output,
            frequency: self.freq,
            target,
            command: self.command,
            cmdline: std::env::args().collect(),
            sampling: chosen(&["cpu-clock", "cpu"]),
            cpus: self.cpus.clone().map(|l| l.0),
            off_cpu_min_ns: off_cpu.then_some(self.off_cpu_min * 1000),
            wakeups: !self.no_wakeups && chosen(&["wakeup"]),
            compression_level: self.compression_level,
            block_io: !self.no_io && chosen(&["io"]),
            // cachestat hooks every read() of the followed programs (about 2% of a
            // read-heavy one's CPU): only when asked for by name.
            cache: !self.no_cache
                && self.events.iter().any(|e| e == "cache")
                && self.cpus.is_none(),
            faults: !self.no_faults && chosen(&["fault"]),
            net,
            net_send_rate: self.net_send_rate,
            net_send_cap: self.net_send_cap,
            follow_write: follow_rate(&self.follow, false)?,
            follow_send: follow_rate(&self.follow, true)?,
            net_send_calls,
            verbose: self.verbose,
            status_line: !self.quiet,
            duration,
            ring_pages: self.mmap_pages,
            stack_copy_bytes: match self.call_graph {
                CallGraph::Dwarf(n) => n,
                _ => 0,
            },
            unwind_in_kernel: !self.no_kernel_unwind,
            python: !self.no_python,
            aggregate,
            interval,
            hist: self.hist,
            trace: tracing::Request {
                events: self.traced,
                latency: self.latency_pairs,
                stacks,
                pids: self.pid,
                command: first_word,
            },
            switch_output: self.switch_output.map(|switch| rotation::Options {
                switch,
                max_files: self.switch_max_files.unwrap_or(0),
            }),
            jvm_perfmap: self.jvm_perfmap == "on",
        })
    }
}

/// The rate `--follow` gives one kind of call (0: not followed); given twice, an error.
fn follow_rate(follow: &[super::args::Follow], send: bool) -> anyhow::Result<bpf::FollowRate> {
    let mut of_kind = follow.iter().filter(|f| f.send == send);
    let rate = of_kind.next().map_or(bpf::FollowRate::Off, |f| f.rate);
    if of_kind.next().is_some() {
        let kind = if send { "send" } else { "write" };
        anyhow::bail!("--follow {kind}: given twice");
    }
    Ok(rate)
}
