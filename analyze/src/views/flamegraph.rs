//! Interactive SVG flame graphs, drawn by inferno from folded stacks.

use std::io::Write;

use crate::aggregate::Profile;

/// Writes an SVG of `profile` titled `title` (kernel frames and inlined ones coloured apart).
pub fn write_svg(profile: &Profile, title: &str, out: impl Write) -> std::io::Result<()> {
    let lines = super::folded::folded(profile, true);
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = profile.unit.to_string();
    opts.colors =
        inferno::flamegraph::Palette::Multi(inferno::flamegraph::color::MultiPalette::Java);
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
}
