//! `analyze heatmap`.

use std::path::Path;

use analyze::pipeline;
use analyze::views;

use crate::args::Select;
use crate::recording::with_recording_files;

/// `analyze heatmap`: the select stage, then the cells.
pub fn heatmap(select: &Select, out: &Path, rows: usize) -> anyhow::Result<()> {
    use views::heatmap::{write_svg, Heatmap};
    let mut options = select.options(false, false);
    options.per_sample = true;
    let svg = with_recording_files(select, &options, false, |rec, _| {
        let (samples, label) = pipeline::select_samples(rec, &options)?;
        let span = rec.time_span().unwrap_or((0, 0));
        let (map, what) = if options.event.unit() == "ns" {
            (Heatmap::latency(&samples, span), "events")
        } else {
            (Heatmap::offsets(&samples, span, rows), "samples")
        };
        let title = format!("{}: {label}", select.input.display());
        let mut svg = Vec::new();
        write_svg(&map, &title, what, &mut svg)?;
        Ok(svg)
    })?;
    std::fs::write(out, svg).map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    eprintln!("analyze: wrote {}", out.display());
    Ok(())
}
