//! `analyze annotate`.

use std::io::Write;

use analyze::pipeline;
use analyze::views;

use crate::recording::with_recording;
use analyze::cli::AnnotateArgs;

/// `analyze annotate`: the resolve and symbolize stages (function names only), then the one
/// function's instructions and lines.
pub fn annotate(args: &AnnotateArgs, stdout: &mut impl Write) -> anyhow::Result<()> {
    use analyze::views::annotate::{self, disasm, source};
    use std::io::IsTerminal;
    use views::annotate::render::{self, Style, View};
    // Names need no DWARF; the chosen function's lines are looked up on their own.
    let options = args.select.options(false, false);
    let options = pipeline::Options {
        inline: false,
        ..options
    };
    let color = match args.color.as_str() {
        _ if args.stdio => false,
        "always" => true,
        "never" => false,
        "auto" => std::io::stdout().is_terminal(),
        other => anyhow::bail!("--color {other}: not one of auto, always, never"),
    };
    let view = if args.source {
        View::Source
    } else if args.asm {
        View::Asm
    } else {
        View::Interleaved
    };
    let syntax = if args.intel {
        disasm::Syntax::Intel
    } else {
        disasm::Syntax::Att
    };
    let mut sources = source::Sources::new(source::SourceDirs {
        dirs: args.source_dir.clone(),
        prefix: args.prefix.clone(),
        prefix_strip: args.prefix_strip,
    });
    let mut out = std::io::BufWriter::new(stdout);
    with_recording(&args.select, &options, |rec, loader| {
        let resolved = pipeline::resolve(rec, &options, loader)?;
        let symbols = pipeline::symbolize_addresses(rec, &resolved, &options, loader);
        for w in resolved.stats.warnings.iter().chain(&symbols.warnings) {
            eprintln!("analyze: warning: {w}");
        }
        if rec.lost > 0 {
            eprintln!("analyze: warning: {} events lost while recording", rec.lost);
        }
        let functions = annotate::function_costs(&resolved, &symbols);
        let style = Style {
            view,
            color,
            event: resolved.label.clone(),
            unit: resolved.unit.clone(),
        };
        let Some(query) = &args.symbol else {
            let weight = resolved.samples.iter().map(|s| s.1).sum();
            render::write_hottest(&functions, weight, &style, args.limit, &mut out)?;
            return Ok(());
        };
        let matches = annotate::find(&functions, query).map_err(|close| {
            anyhow::anyhow!(
                "no function named {query} has {} samples in {}; closest: {}",
                resolved.label,
                args.select.input.display(),
                close.join(", ")
            )
        })?;
        // Several functions of that name (a static function in two files, one name in two
        // libraries): each, as perf annotates each. Several different names: say which.
        let names: std::collections::BTreeSet<&str> =
            matches.iter().map(|f| f.name.as_str()).collect();
        if names.len() > 1 {
            let list: Vec<String> = matches
                .iter()
                .take(20)
                .map(|f| format!("{} [{}]", f.name, f.dso))
                .collect();
            anyhow::bail!(
                "{query} matches {} functions; name one of them:\n  {}",
                names.len(),
                list.join("\n  ")
            );
        }
        for (n, function) in matches.iter().enumerate() {
            let a = annotate::annotate(&resolved, &symbols, function, annotate::Style { syntax })
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            if n > 0 {
                writeln!(out)?;
            }
            render::write_annotation(&a, &mut sources, &style, &mut out)?;
        }
        Ok(())
    })?;
    out.flush()?;
    render::report_missing_sources(&sources);
    Ok(())
}
