//! `analyze script`.

use std::io::Write;

use analyze::pipeline;
use analyze::views::script::write_script;
use analyze::views::trace::Payloads;

use crate::recording::{stacks_of_each, summary, with_recording};
use analyze::cli::Select;

/// `analyze script`: every selected sample with its stack, as perf script prints them, a
/// traced event's payload after its name.
pub fn script(select: &Select, out: impl Write) -> anyhow::Result<()> {
    let options = pipeline::Options {
        timeline: true,
        ..select.options(true, false)
    };
    with_recording(select, &options, |rec, loader| {
        let samples = pipeline::select_samples(rec, &options)?.samples;
        let s = stacks_of_each(rec, &options, loader, &samples)?;
        summary(&s, rec, loader);
        let payloads = Payloads::new(rec, Box::new(pipeline::kernel_namer(rec, loader)));
        let mut out = std::io::BufWriter::new(out);
        write_script(&s, |i, out| payloads.write(samples[i].0, out), &mut out)?;
        out.flush()?;
        Ok(())
    })
}
