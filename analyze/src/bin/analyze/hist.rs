//! `analyze hist`.

use std::io::Write;

use analyze::pipeline;
use analyze::read::select::traced_events;
use analyze::views::hist::{self, By, Scale};

use crate::recording::{symbolize_noting, with_recording_files};
use analyze::cli::{HistArgs, HistBy};

/// `analyze hist`: each selected sample's value into its key's histogram; per stack, the
/// pipeline's stacks for the keys.
pub fn hist(args: &HistArgs, mut out: impl Write) -> anyhow::Result<()> {
    let by = match args.by {
        None => By::All,
        Some(HistBy::Comm) => By::Comm,
        Some(HistBy::Pid) => By::Pid,
        Some(HistBy::Stack) => By::Stack,
    };
    let scale = match args.linear {
        Some(step) => Scale::Linear { step },
        None => Scale::Log2,
    };
    let stacks = by == By::Stack;
    let mut options = args.traced.options(false);
    // Every sample apart (merged ones would sum their latencies); per stack, each distinct
    // stack symbolized once.
    options.per_sample = !stacks;
    options.timeline = stacks;
    let symfs = args.traced.stacks.symfs.as_deref();
    let input = &args.traced.input;
    let text = with_recording_files(input, symfs, &options, stacks, |rec, loader| {
        let events = traced_events(rec, &options.event)?;
        let quantities = hist::quantities(rec, &events, &args.quantity)?;
        let pipeline::Selected { samples, label, .. } = pipeline::select_samples(rec, &options)?;
        let sym = if stacks {
            Some(symbolize_noting(rec, &options, loader)?)
        } else {
            None
        };
        let (keyed, missing) =
            hist::histograms(rec, &samples, &quantities, by, sym.as_ref(), scale);
        if missing > 0 {
            eprintln!(
                "analyze: warning: {missing} sample(s) of {label} have payloads too short for {}: left out",
                args.quantity
            );
        }
        if keyed.is_empty() {
            eprintln!("analyze: no samples of {label} with {}", args.quantity);
        }
        Ok(hist::text(&keyed, scale)?)
    })?;
    out.write_all(text.as_bytes())?;
    Ok(())
}
