//! speedscope's file format (<https://www.speedscope.app/file-format-schema.json>): one
//! sampled profile per thread, its samples in time order (speedscope's Time Order view is
//! the thread's timeline), stacks root first, weights in the selected event's unit, every
//! frame once in the shared table.

use std::io::{self, Write};

use serde::Serialize;

use super::{file_and_line, Context};
use crate::symbolize::Symbolized;
use crate::views::folded::frame_name;

const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

#[derive(Serialize)]
struct File<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    name: String,
    exporter: String,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    shared: Shared,
    profiles: Vec<Sampled<'a>>,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<Frame>,
}

#[derive(Serialize)]
struct Frame {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<i64>,
}

#[derive(Serialize)]
struct Sampled<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: String,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
    /// Frame indices, root first.
    samples: Vec<&'a [u32]>,
    weights: Vec<u64>,
}

/// Writes the samples of `sym`'s timeline as a speedscope file.
pub fn write(sym: &Symbolized, cx: &Context, out: impl Write) -> io::Result<()> {
    let frames = sym
        .frames
        .iter()
        .map(|f| {
            let mut name = frame_name(f).into_owned();
            if f.inlined {
                name.push_str(" (inlined)");
            }
            let (file, line) = match f.srcline.as_deref().map(file_and_line) {
                Some((file, line)) => (Some(file.to_string()), (line > 0).then_some(line)),
                None => (None, None),
            };
            Frame { name, file, line }
        })
        .collect();
    let stack_of = |i: usize| &sym.stacks[sym.timeline[i].stack as usize];
    let mut order: Vec<usize> = (0..sym.timeline.len()).collect();
    order.sort_by_key(|&i| {
        let s = stack_of(i);
        (s.pid, s.tid, sym.timeline[i].time, i)
    });
    let mut profiles: Vec<Sampled> = Vec::new();
    // Each thread is named as it was last (its first samples may precede its exec).
    let mut last_comm: Vec<u32> = Vec::new();
    let mut current = None;
    for i in order {
        let s = stack_of(i);
        if current != Some((s.pid, s.tid)) {
            current = Some((s.pid, s.tid));
            profiles.push(Sampled {
                kind: "sampled",
                name: format!("(pid {}, tid {})", s.pid, s.tid),
                unit: if sym.unit == "ns" {
                    "nanoseconds"
                } else {
                    "none"
                },
                start_value: 0,
                end_value: 0,
                samples: Vec::new(),
                weights: Vec::new(),
            });
            last_comm.push(s.comm);
        }
        *last_comm.last_mut().expect("pushed above") = s.comm;
        let p = profiles.last_mut().expect("pushed above");
        let weight = sym.timeline[i].weight;
        p.samples.push(&s.frames);
        p.weights.push(weight);
        p.end_value += weight;
    }
    for (p, &comm) in profiles.iter_mut().zip(&last_comm) {
        p.name = format!("{} {}", sym.comms[comm as usize], p.name);
    }
    let active_profile_index = profiles
        .iter()
        .enumerate()
        .max_by_key(|(i, p)| (p.end_value, std::cmp::Reverse(*i)))
        .map_or(0, |(i, _)| i);
    let file = File {
        schema: SCHEMA,
        name: format!("{}: {}", cx.name, cx.event),
        exporter: format!("bpfperf analyze {}", env!("CARGO_PKG_VERSION")),
        active_profile_index,
        shared: Shared { frames },
        profiles,
    };
    serde_json::to_writer(io::BufWriter::new(out), &file).map_err(io::Error::other)
}
