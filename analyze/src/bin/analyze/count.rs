//! `analyze count`.

use std::io::Write;

use analyze::pipeline;
use analyze::views::count::{self, By};

use crate::recording::{symbolize_noting, with_recording_files};
use analyze::cli::{CountArgs, CountBy};

/// `analyze count`: the selected samples counted per key; per stack, the pipeline's profile
/// of them.
pub fn count(args: &CountArgs, mut out: impl Write) -> anyhow::Result<()> {
    let options = args.traced.options(false);
    let by = match args.by {
        CountBy::Event => By::Event,
        CountBy::Comm => By::Comm,
        CountBy::Pid => By::Pid,
        CountBy::Stack => {
            let text = stack_counts(args, &options)?;
            out.write_all(text.as_bytes())?;
            return Ok(());
        }
    };
    let symfs = args.traced.stacks.symfs.as_deref();
    let text = with_recording_files(&args.traced.input, symfs, &options, false, |rec, _| {
        let samples = pipeline::select_samples(rec, &options)?.samples;
        Ok(count::table(&count::counts(rec, &samples, by), by))
    })?;
    out.write_all(text.as_bytes())?;
    Ok(())
}

fn stack_counts(args: &CountArgs, options: &pipeline::Options) -> anyhow::Result<String> {
    let symfs = args.traced.stacks.symfs.as_deref();
    with_recording_files(&args.traced.input, symfs, options, true, |rec, loader| {
        let s = symbolize_noting(rec, options, loader)?;
        Ok(count::stacks(&analyze::aggregate::aggregate(s)))
    })
}
