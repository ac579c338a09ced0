//! Interactive SVG flame graphs, drawn by inferno from folded stacks.

use std::io::Write;

/// Writes an SVG of `folded` lines with `title`; counts are `count_name` (samples, ns).
pub fn write_svg(
    folded: &[String],
    title: &str,
    count_name: &str,
    out: impl Write,
) -> anyhow::Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = count_name.to_string();
    inferno::flamegraph::from_lines(&mut opts, folded.iter().map(String::as_str), out)?;
    Ok(())
}
