//! `analyze heatmap`.

use std::path::Path;

use analyze::pipeline;
use analyze::views;

use crate::recording::with_recording_files;
use analyze::cli::Select;

/// `analyze heatmap`: the select stage, then the cells.
pub fn heatmap(select: &Select, out: &Path, rows: usize) -> anyhow::Result<()> {
    use views::heatmap::{write_svg, Heatmap, MAX_OFFSET_COLUMNS};
    let mut options = select.options(false, false);
    options.per_sample = true;
    let symfs = select.filter.stacks.symfs.as_deref();
    let svg = with_recording_files(&select.input, symfs, &options, false, |rec, _| {
        let pipeline::Selected {
            samples,
            label,
            unit,
        } = pipeline::select_samples(rec, &options)?;
        let (span, strays) = rec.stray_times();
        let span = span.unwrap_or((0, 0));
        if strays > 0 {
            eprintln!(
                "analyze: warning: {strays} sample(s) have times far from all the others \
                 (more than an hour from the {:.3} s the rest span): the file looks damaged; \
                 the heatmap leaves them out",
                (span.1 - span.0) as f64 / 1e9
            );
        }
        let (map, what) = if unit == "ns" {
            (Heatmap::latency(&samples, span), "events")
        } else {
            let map = Heatmap::offsets(&samples, span, rows);
            let seconds = (span.1 - span.0) / 1_000_000_000 + 1;
            if seconds > MAX_OFFSET_COLUMNS as u64 {
                eprintln!(
                    "analyze: the recording spans {seconds} s; the heatmap shows its first \
                     {MAX_OFFSET_COLUMNS} (one column a second): pick another stretch with \
                     --time START,END"
                );
            }
            (map, "samples")
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
