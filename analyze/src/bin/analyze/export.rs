//! `analyze export`.

use std::io::Write;
use std::path::PathBuf;

use analyze::aggregate;
use analyze::views;

use crate::recording::{summary, symbolize_noting, with_recording};
use analyze::cli::{ExportFormat, Select};

/// `analyze export`: the whole pipeline, then one of the exports (the Firefox Profiler's with
/// every sample apart, for their times, and the off-CPU and I/O spans beside them).
pub fn export(
    select: &Select,
    format: ExportFormat,
    output: Option<PathBuf>,
) -> anyhow::Result<()> {
    use views::export::{self, Context};
    let firefox = matches!(format, ExportFormat::Firefox);
    let mut options = select.options(false, true);
    // The Firefox Profiler's tracks and speedscope's Time Order are timelines.
    options.timeline = !matches!(format, ExportFormat::Pprof);
    let output = output.unwrap_or_else(|| PathBuf::from(format.default_file()));
    let (requests, net, sampled) = if firefox {
        (
            analyze::views::io::read_requests(&select.input)?,
            analyze::views::net::read_samples(&select.input)?,
            analyze::views::requests::read_requests(&select.input)?,
        )
    } else {
        Default::default()
    };
    let mut bytes = Vec::new();
    with_recording(select, &options, |rec, loader| {
        let s = symbolize_noting(rec, &options, loader)?;
        summary(&s, rec, loader);
        let cx = Context {
            measure: options.measure(),
            event: s.event.clone(),
            build_ids: rec
                .build_ids
                .iter()
                .map(|(path, id)| (path.clone(), analyze::files::hex(id)))
                .collect(),
            span: rec.time_span().unwrap_or((0, 0)),
            lines: options.lines,
            inline: options.inline,
            name: select.input.display().to_string(),
        };
        match format {
            ExportFormat::Firefox => {
                let mut spans = export::firefox::spans(rec, &requests, (&net.0, &net.1), &options);
                spans.extend(export::firefox_requests::request_spans(&sampled));
                export::firefox::write(&s, &spans, &cx, &mut bytes)?;
            }
            ExportFormat::Pprof => export::pprof::write(&aggregate::aggregate(s), &cx, &mut bytes)?,
            ExportFormat::Speedscope => export::speedscope::write(&s, &cx, &mut bytes)?,
        }
        Ok(())
    })?;
    if output.as_os_str() == "-" {
        std::io::stdout().lock().write_all(&bytes)?;
    } else {
        std::fs::write(&output, bytes).map_err(|e| anyhow::anyhow!("{}: {e}", output.display()))?;
        eprintln!("analyze: wrote {}", output.display());
    }
    Ok(())
}
