//! annotate's text: a function's source lines and instructions with their samples, and the
//! list of hottest functions to choose from.

use std::io::{self, Write};

use super::source::Sources;
use super::{Annotation, FunctionCost, Line};
use crate::symbolize::SourceFrame;

/// What to show of an annotated function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Each source line with its counts, its instructions under it (perf annotate's default).
    Interleaved,
    /// Source lines only, each once, grouped by the function whose code they are.
    Source,
    /// Instructions only.
    Asm,
}

/// How to print.
#[derive(Debug, Clone)]
pub struct Style {
    pub view: View,
    /// ANSI colors: hot counts red, warm green, source lines bold.
    pub color: bool,
    /// The selected event as views name it, and the unit of its weights.
    pub event: String,
    pub unit: String,
}

/// perf annotate's thresholds: red from 5%, green from 0.5%.
const RED: f64 = 5.0;
const GREEN: f64 = 0.5;

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// `value` in the color its percent deserves.
fn painted(style: &Style, pct: f64, text: String) -> String {
    if !style.color || pct < GREEN {
        return text;
    }
    let color = if pct >= RED { "31" } else { "32" };
    format!("\x1b[{color}m{text}\x1b[0m")
}

fn bold(style: &Style, text: String) -> String {
    if style.color {
        format!("\x1b[1m{text}\x1b[0m")
    } else {
        text
    }
}

/// The counts columns of a row: percent of the function's self weight (of its total where it
/// has no self samples: off-CPU time in user code), self, total.
fn columns(style: &Style, a: &Annotation, self_weight: u64, total_weight: u64) -> String {
    let pct = if a.self_weight > 0 {
        percent(self_weight, a.self_weight)
    } else {
        percent(total_weight, a.total_weight)
    };
    painted(
        style,
        pct,
        format!("{pct:7.2}% {self_weight:>10} {total_weight:>10}"),
    )
}

fn location(line: &Line) -> String {
    let file = line
        .file
        .as_deref()
        .map_or("??", |f| f.rsplit('/').next().unwrap_or(f));
    match line.line {
        Some(n) => format!("{file}:{n}"),
        None => format!("{file}:?"),
    }
}

fn line_row(style: &Style, a: &Annotation, line: &Line, sources: &mut Sources) -> String {
    let text = match (&line.file, line.line) {
        (Some(f), Some(n)) => sources.line(f, n).unwrap_or("").trim_end().to_string(),
        _ => String::new(),
    };
    let indent = "  ".repeat(line.depth);
    format!(
        "{} | {indent}{}",
        columns(style, a, line.self_weight, line.total_weight),
        bold(style, format!("{:<18} {text}", location(line)))
    )
}

/// The head of an inlined range: the inlined function, its file, and where it was called.
fn inline_header(line: &Line, call_site: Option<&SourceFrame>) -> String {
    let function = line.function.as_deref().unwrap_or("[unknown]");
    let called = call_site
        .map(|c| {
            let file = c
                .file
                .as_deref()
                .map_or("??", |f| f.rsplit('/').next().unwrap_or(f));
            let at = c.line.map_or("?".to_string(), |n| n.to_string());
            format!(", called at {file}:{at}")
        })
        .unwrap_or_default();
    format!(
        "{:>30} | {}[inlined] {function}  ({}{called})",
        "",
        "  ".repeat(line.depth),
        line.file.as_deref().unwrap_or("??")
    )
}

/// Writes the annotation of one function.
pub fn write_annotation(
    a: &Annotation,
    sources: &mut Sources,
    style: &Style,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "{:>30} | {} in {}{}",
        "",
        bold(style, a.name.clone()),
        a.dso,
        a.build_id
            .as_deref()
            .map_or(String::new(), |b| format!(" (build id {b})"))
    )?;
    writeln!(
        out,
        "{:>30} | {}: {} {} with their leaf in it (Self), {} passing through it (Total)",
        "", style.event, a.self_weight, style.unit, a.total_weight
    )?;
    writeln!(out, "{:>8} {:>10} {:>10} |", "Percent", "Self", "Total")?;
    if let Some(why) = &a.not_decoded {
        writeln!(out, "{:>30} | ({why})", "")?;
    }
    match style.view {
        View::Source => write_source(a, sources, style, out),
        View::Asm => {
            for insn in &a.instructions {
                write_instruction(a, insn, style, 0, out)?;
            }
            Ok(())
        }
        View::Interleaved => write_interleaved(a, sources, style, out),
    }
}

fn write_instruction(
    a: &Annotation,
    insn: &super::Instruction,
    style: &Style,
    depth: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "{} | {}{:>8x}:  {}",
        columns(style, a, insn.self_weight, insn.total_weight),
        "  ".repeat(depth + 1),
        insn.addr,
        insn.text
    )
}

fn write_interleaved(
    a: &Annotation,
    sources: &mut Sources,
    style: &Style,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut previous: Option<usize> = None;
    for (n, insn) in a.instructions.iter().enumerate() {
        let own = a.line_of[n];
        if previous != Some(own) {
            let line = &a.lines[own];
            let was = previous.map(|p| &a.lines[p]);
            // A new inlined range: headed by the inlined function's name.
            let entered = line.depth > 0
                && was.is_none_or(|w| w.depth != line.depth || w.function != line.function);
            if entered {
                writeln!(out, "{}", inline_header(line, insn.location.get(1)))?;
            }
            writeln!(out, "{}", line_row(style, a, line, sources))?;
            previous = Some(own);
        }
        write_instruction(a, insn, style, a.lines[own].depth, out)?;
    }
    Ok(())
}

fn write_source(
    a: &Annotation,
    sources: &mut Sources,
    style: &Style,
    out: &mut impl Write,
) -> io::Result<()> {
    // Groups: the function's own lines, then each inlined function's, in order of first
    // appearance; lines in each by file and number.
    let mut groups: Vec<(usize, Option<&str>, Vec<&Line>)> = Vec::new();
    for line in &a.lines {
        let key = (line.depth.min(1), line.function.as_deref());
        match groups.iter_mut().find(|g| (g.0, g.1) == key) {
            Some(g) => g.2.push(line),
            None => groups.push((key.0, key.1, vec![line])),
        }
    }
    for (depth, _, mut lines) in groups {
        lines.sort_by(|x, y| (&x.file, x.line).cmp(&(&y.file, y.line)));
        if depth > 0 {
            writeln!(out, "{}", inline_header(lines[0], None))?;
        }
        for line in lines {
            let mut shown = line.clone();
            shown.depth = depth;
            writeln!(out, "{}", line_row(style, a, &shown, sources))?;
        }
    }
    Ok(())
}

/// Says once, on stderr, which source files were not found and where they were looked for.
pub fn report_missing_sources(sources: &Sources) {
    let missing = sources.missing();
    if missing.is_empty() {
        return;
    }
    for (path, tried) in &missing {
        let tried: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
        eprintln!(
            "analyze: warning: source {path} not found (looked for: {}); line numbers only \
             (--source-dir DIR, or --prefix and --prefix-strip, say where it is)",
            tried.join(", ")
        );
    }
}

/// The hottest functions, to choose what to annotate.
pub fn write_hottest(
    functions: &[FunctionCost],
    samples_weight: u64,
    style: &Style,
    limit: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "# Hottest functions of {} ({samples_weight} {}); `analyze annotate NAME` shows one",
        style.event, style.unit
    )?;
    writeln!(
        out,
        "{:>7} {:>12} {:>8} {:>12}  Function  [file]",
        "Self%", "Self", "Total%", "Total"
    )?;
    for f in functions.iter().take(limit) {
        let pct = percent(f.self_weight, samples_weight);
        writeln!(
            out,
            "{} {:>7.2}% {:>12}  {}  [{}]",
            painted(style, pct, format!("{pct:6.2}% {:>12}", f.self_weight)),
            percent(f.total_weight, samples_weight),
            f.total_weight,
            f.name,
            f.dso
        )?;
    }
    Ok(())
}
