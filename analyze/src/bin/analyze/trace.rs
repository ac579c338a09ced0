//! `analyze trace`.

use std::io::Write;

use analyze::pipeline;
use analyze::read::select::traced_events;
use analyze::views::trace::{self, Lines};

use crate::recording::{stacks_of_each, with_recording_files};
use analyze::cli::TraceArgs;

/// `analyze trace`: the selected samples' lines; with -g, the pipeline's stacks under them.
pub fn trace(args: &TraceArgs, out: impl Write) -> anyhow::Result<()> {
    let mut options = args.traced.options(true);
    // Every sample apart, each with its own time; with stacks, each distinct stack once.
    options.per_sample = !args.stacks;
    options.timeline = args.stacks;
    let symfs = args.traced.stacks.symfs.as_deref();
    let input = &args.traced.input;
    with_recording_files(input, symfs, &options, args.stacks, |rec, loader| {
        let events = traced_events(rec, &options.event)?;
        let o = trace::Options {
            fields: args.fields.clone(),
            format: args.format.clone(),
        };
        let lines = Lines::new(rec, &events, &o)?
            .naming_kernel(Box::new(pipeline::kernel_namer(rec, loader)));
        let samples = pipeline::select_samples(rec, &options)?.samples;
        let stacks = if args.stacks {
            Some(stacks_of_each(rec, &options, loader, &samples)?)
        } else {
            None
        };
        let mut out = std::io::BufWriter::new(out);
        trace::write(&lines, &samples, stacks.as_ref(), &mut out)?;
        out.flush()?;
        Ok(())
    })
}
