//! pprof: a gzipped `profile.proto`, the format of `go tool pprof` and of the continuous
//! profiling backends (Pyroscope, Parca).
//!
//! One Location per physical frame, its inlined functions as further Lines (innermost first);
//! one Mapping per file with its build id; sample types named for what they count; each
//! sample labelled with its process's and thread's names and ids.

use std::collections::HashMap;
use std::io::{self, Write};

use prost::Message;

use super::pprof_proto as pb;
use super::{file_and_line, physical_frames, Context};
use crate::aggregate::Profile;
use crate::views::folded::frame_name;

/// Interns strings into the string table (index 0 is "").
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.id("");
        s
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// The profile as pprof's message (not yet encoded).
fn build(profile: &Profile, cx: &Context) -> pb::Profile {
    let mut strings = Strings::new();
    let mut out = pb::Profile::default();
    let value_type = |strings: &mut Strings, t: &str, u: &str| pb::ValueType {
        r#type: strings.id(t),
        unit: strings.id(u),
    };
    // Each sample's count, then (the default) its weight where it is not the count: time,
    // a counting event's periods (`cycles`), a field's values.
    let in_ns = profile.unit == "ns";
    let weighed = profile.unit != "samples";
    out.sample_type.push(if in_ns {
        value_type(&mut strings, "events", "count")
    } else {
        value_type(&mut strings, "samples", "count")
    });
    if in_ns {
        out.sample_type
            .push(value_type(&mut strings, &cx.measure, "nanoseconds"));
    } else if weighed {
        out.sample_type
            .push(value_type(&mut strings, &profile.unit, "count"));
    }
    out.default_sample_type = out.sample_type.last().map_or(0, |t| t.r#type);
    out.duration_nanos = cx.span.1.saturating_sub(cx.span.0) as i64;
    let comment = format!("bpfperf analyze export: {} of {}", cx.event, cx.name);
    out.comment.push(strings.id(&comment));

    // Mappings by file (the main binary first, as pprof expects), functions by (name,
    // file), locations by physical frame.
    let mut mappings: HashMap<&str, u64> = HashMap::new();
    if let Some(main) = main_binary(profile) {
        out.mapping.push(mapping(1, main, cx, &mut strings));
        mappings.insert(main, 1);
    }
    let mut functions: HashMap<(String, &str), u64> = HashMap::new();
    let mut locations: HashMap<&[u32], u64> = HashMap::new();
    let (process_name, thread_name, pid, tid) = (
        strings.id("process_name"),
        strings.id("thread_name"),
        strings.id("pid"),
        strings.id("tid"),
    );
    // A process is named as its main thread mostly was (its first samples may precede its
    // exec, named `:PID`); else as the thread sampled.
    let mut main_names: HashMap<(i32, u32), u64> = HashMap::new();
    for s in profile.stacks.iter().filter(|s| s.pid == s.tid) {
        *main_names.entry((s.pid, s.comm)).or_insert(0) += s.weight;
    }
    let mut main_thread: HashMap<i32, (u64, u32)> = HashMap::new();
    for ((pid, comm), w) in main_names {
        let best = main_thread.entry(pid).or_insert((w, comm));
        if (w, std::cmp::Reverse(comm)) > (best.0, std::cmp::Reverse(best.1)) {
            *best = (w, comm);
        }
    }
    for stack in &profile.stacks {
        let mut ids = Vec::new();
        for range in physical_frames(&stack.frames, &profile.frames) {
            let key = &stack.frames[range];
            if let Some(&id) = locations.get(key) {
                ids.push(id);
                continue;
            }
            let outer = &profile.frames[key[0] as usize];
            let mapping_id = *mappings.entry(&outer.dso).or_insert_with(|| {
                let id = out.mapping.len() as u64 + 1;
                out.mapping.push(mapping(id, &outer.dso, cx, &mut strings));
                id
            });
            let mut lines = Vec::new();
            for &f in key.iter().rev() {
                let frame = &profile.frames[f as usize];
                let name = frame_name(frame).into_owned();
                let (file, line) = frame.srcline.as_deref().map_or(("", 0), file_and_line);
                let function_id = match functions.get(&(name.clone(), file)) {
                    Some(&id) => id,
                    None => {
                        let id = out.function.len() as u64 + 1;
                        out.function.push(pb::Function {
                            id,
                            name: strings.id(&name),
                            system_name: strings.id(&name),
                            filename: strings.id(file),
                            start_line: 0,
                        });
                        functions.insert((name, file), id);
                        id
                    }
                };
                lines.push(pb::Line { function_id, line });
            }
            let id = out.location.len() as u64 + 1;
            out.location.push(pb::Location {
                id,
                mapping_id,
                address: 0,
                line: lines,
                is_folded: false,
            });
            locations.insert(key, id);
            ids.push(id);
        }
        ids.reverse();
        let mut value = vec![stack.count as i64];
        if weighed {
            value.push(stack.weight as i64);
        }
        let process = main_thread.get(&stack.pid).map_or(stack.comm, |m| m.1);
        let label = vec![
            pb::Label {
                key: process_name,
                str: strings.id(&profile.comms[process as usize]),
                ..Default::default()
            },
            pb::Label {
                key: thread_name,
                str: strings.id(&profile.comms[stack.comm as usize]),
                ..Default::default()
            },
            pb::Label {
                key: pid,
                num: stack.pid as i64,
                ..Default::default()
            },
            pb::Label {
                key: tid,
                num: stack.tid as i64,
                ..Default::default()
            },
        ];
        out.sample.push(pb::Sample {
            location_id: ids,
            value,
            label,
        });
    }
    out.string_table = strings.table;
    out
}

fn mapping(id: u64, dso: &str, cx: &Context, strings: &mut Strings) -> pb::Mapping {
    let build_id = cx.build_ids.get(dso).map_or("", String::as_str);
    pb::Mapping {
        id,
        filename: strings.id(dso),
        build_id: strings.id(build_id),
        has_functions: true,
        has_filenames: cx.lines,
        has_line_numbers: cx.lines,
        has_inline_frames: cx.inline && cx.lines,
        ..Default::default()
    }
}

/// The program's own file: where its `main` (C, C++, Rust; Go's `main.main`) is, else its
/// `_start` (not the dynamic loader's, which has one too: a sample taken while ld.so loads
/// the program would name it), else the file with the most user frames.
fn main_binary(profile: &Profile) -> Option<&str> {
    let named = |names: &[&str]| {
        profile
            .frames
            .iter()
            .find(|f| {
                names.contains(&f.function.as_str())
                    && !f.dso.starts_with('[')
                    && !is_dynamic_loader(&f.dso)
            })
            .map(|f| f.dso.as_str())
    };
    if let Some(dso) = named(&["main", "main.main"]).or_else(|| named(&["_start"])) {
        return Some(dso);
    }
    let mut weight: HashMap<&str, u64> = HashMap::new();
    for s in &profile.stacks {
        for &f in &s.frames[..s.user_len as usize] {
            *weight.entry(&profile.frames[f as usize].dso).or_insert(0) += s.weight;
        }
    }
    weight
        .into_iter()
        .filter(|(dso, _)| !dso.starts_with('['))
        .max_by_key(|&(dso, w)| (w, std::cmp::Reverse(dso)))
        .map(|(dso, _)| dso)
}

/// Whether `dso` is the dynamic loader (`ld-linux-x86-64.so.2`, `ld-musl-x86_64.so.1`,
/// `ld.so`).
fn is_dynamic_loader(dso: &str) -> bool {
    let name = dso.rsplit('/').next().unwrap_or(dso);
    name.starts_with("ld-linux") || name.starts_with("ld-musl") || name.starts_with("ld.so")
}

/// Writes `profile` as a gzipped pprof profile.
pub fn write(profile: &Profile, cx: &Context, out: impl Write) -> io::Result<()> {
    let bytes = build(profile, cx).encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Stack;
    use crate::symbolize::FrameInfo;

    /// A sample taken while the dynamic loader runs (its own `_start`) comes first in the
    /// frames table: the program's file is still the one its `main` is in (go tool pprof
    /// showed `File: ld-linux-x86-64.so.2` for a Rust program recorded by perf in a fresh run).
    #[test]
    fn the_main_binary_is_main_s_file_not_the_loader_s() {
        let ld = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
        let profile = Profile {
            comms: vec!["rsprog".into()],
            frames: vec![
                FrameInfo::new("_start", ld),
                FrameInfo::new("_dl_start", ld),
                FrameInfo::new("_start", "/tmp/rsprog"),
                FrameInfo::new("main", "/tmp/rsprog"),
            ],
            stacks: vec![Stack {
                comm: 0,
                pid: 1,
                tid: 1,
                frames: vec![0, 1],
                user_len: 2,
                weight: 1,
                count: 1,
            }],
            ..Default::default()
        };
        assert_eq!(main_binary(&profile), Some("/tmp/rsprog"));
        // Without main, the program's _start, still not the loader's.
        let mut no_main = profile;
        no_main.frames.pop();
        assert_eq!(main_binary(&no_main), Some("/tmp/rsprog"));
        assert!(is_dynamic_loader(ld) && !is_dynamic_loader("/tmp/rsprog"));
    }
}
