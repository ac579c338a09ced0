//! Heatmaps of when things happened, as interactive SVG.
//!
//! - Latency (events weighed in ns: io, offcpu, runq): time on the x axis, the latency's
//!   log2 bucket (us, as `analyze io` and `sched` print them) on the y axis, each cell colored
//!   by how many events completed in that column with that latency.
//! - Sub-second offset (sampled events, cpu): FlameScope's view: each column one second of
//!   the recording, each row a slice of that second, colored by the samples in it.
//!
//! Every cell carries its time range as `--time` takes it (absolute, to the nanosecond, the
//! start included and the end left out): `analyze report --time` of a cell's range covers
//! exactly the samples that cell counts (for a latency heatmap, those of its whole column).

use std::fmt::Write as _;
use std::io::Write;

use crate::read::Weighed;
use crate::views::latency;

/// What the y axis shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Rows are log2 latency buckets ([`latency::bucket_of`]), from `first_bucket` up.
    Latency { first_bucket: usize },
    /// Rows are equal slices of each one-second column, the first at the top.
    Offset,
}

/// The most one-second columns a sub-second heatmap draws: an hour. A longer recording
/// shows its first hour ([`Heatmap::not_shown`] counts the rest; `--time` picks another).
pub const MAX_OFFSET_COLUMNS: usize = 3600;

/// A heatmap's cells, column by column.
#[derive(Debug, Clone)]
pub struct Heatmap {
    pub axis: Axis,
    /// The time of the first column's start (ns): the recording's first sample.
    pub start: u64,
    /// Width of a column in ns.
    pub column_ns: u64,
    pub columns: usize,
    pub rows: usize,
    /// `columns * rows` counts, column-major.
    pub counts: Vec<u64>,
    /// Aligned with `counts`: the summed weights (ns for latency maps).
    pub weights: Vec<u64>,
    /// Samples outside the map: after its last column, or outside the span it was given.
    pub not_shown: u64,
}

/// About 100 columns: the recording's span divided, rounded up to 1, 2 or 5 times a power
/// of ten, 1 ms at least.
fn column_width(span_ns: u64) -> u64 {
    let want = (span_ns / 100).max(1_000_000);
    let mut unit = 1_000_000u64;
    loop {
        for m in [1, 2, 5] {
            if unit * m >= want {
                return unit * m;
            }
        }
        unit *= 10;
    }
}

impl Heatmap {
    /// Latencies: each sample's weight is its latency in ns (the latencies of the events it
    /// stands for summed: their mean places it).
    pub fn latency(samples: &[Weighed<'_>], (first, last): (u64, u64)) -> Heatmap {
        let column_ns = column_width(last.saturating_sub(first));
        let columns = (last.saturating_sub(first) / column_ns + 1) as usize;
        let buckets: Vec<usize> = samples
            .iter()
            .map(|(s, w)| latency::bucket_of(*w / s.count.max(1)))
            .collect();
        let first_bucket = buckets.iter().copied().min().unwrap_or(0);
        let rows = buckets
            .iter()
            .copied()
            .max()
            .map_or(1, |b| b - first_bucket + 1);
        let mut map = Heatmap::empty(
            Axis::Latency { first_bucket },
            first,
            column_ns,
            columns,
            rows,
        );
        for ((s, w), b) in samples.iter().zip(buckets) {
            if s.time < first || s.time > last {
                map.not_shown += s.count;
                continue;
            }
            let col = ((s.time - first) / column_ns) as usize;
            map.add(col.min(columns - 1), b - first_bucket, s.count, *w);
        }
        map
    }

    /// Sub-second offsets: `rows` slices per one-second column, [`MAX_OFFSET_COLUMNS`] at
    /// most.
    pub fn offsets(samples: &[Weighed<'_>], (first, last): (u64, u64), rows: usize) -> Heatmap {
        let column_ns = 1_000_000_000;
        let seconds = (last.saturating_sub(first) / column_ns).saturating_add(1);
        let columns = seconds.min(MAX_OFFSET_COLUMNS as u64) as usize;
        let rows = rows.clamp(1, 1000);
        let mut map = Heatmap::empty(Axis::Offset, first, column_ns, columns, rows);
        for (s, w) in samples {
            let at = s.time.wrapping_sub(first);
            let col = at / column_ns;
            if s.time < first || s.time > last || col >= columns as u64 {
                map.not_shown += s.count;
                continue;
            }
            let col = col as usize;
            // The row whose [start, end) holds the sample, as cell_time draws it.
            let mut row = ((at % column_ns) as u128 * rows as u128 / column_ns as u128) as usize;
            if row + 1 < rows && s.time >= map.cell_time(col, row + 1).0 {
                row += 1;
            }
            map.add(col, row, s.count, *w);
        }
        map
    }

    fn empty(axis: Axis, start: u64, column_ns: u64, columns: usize, rows: usize) -> Heatmap {
        Heatmap {
            axis,
            start,
            column_ns,
            columns,
            rows,
            counts: vec![0; columns * rows],
            weights: vec![0; columns * rows],
            not_shown: 0,
        }
    }

    fn add(&mut self, col: usize, row: usize, count: u64, weight: u64) {
        let i = col * self.rows + row;
        self.counts[i] += count;
        self.weights[i] += weight;
    }

    /// The time range `[start, end)` in ns that cell (`col`, `row`) covers.
    pub fn cell_time(&self, col: usize, row: usize) -> (u64, u64) {
        let col_start = self.start + col as u64 * self.column_ns;
        match self.axis {
            Axis::Latency { .. } => (col_start, col_start + self.column_ns),
            Axis::Offset => {
                let slice =
                    |r: usize| (self.column_ns as u128 * r as u128 / self.rows as u128) as u64;
                (col_start + slice(row), col_start + slice(row + 1))
            }
        }
    }
}

/// Nanoseconds as seconds, to the nanosecond (as `--time` reads them).
fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// White through yellow to red, by the cell's count against the largest (log scale, so that
/// rare cells still show).
fn color(count: u64, max: u64) -> String {
    let t = (count as f64).ln_1p() / (max.max(1) as f64).ln_1p();
    let (r, g, b) = if t < 0.5 {
        (255.0, 255.0 - 40.0 * t * 2.0, 200.0 * (1.0 - t * 2.0))
    } else {
        (
            255.0 - 55.0 * (t - 0.5) * 2.0,
            215.0 * (1.0 - (t - 0.5) * 2.0),
            0.0,
        )
    };
    format!("rgb({:.0},{:.0},{:.0})", r, g, b)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes `map` as an SVG titled `title`; `what` names the events counted (`samples`,
/// `requests`).
pub fn write_svg(
    map: &Heatmap,
    title: &str,
    what: &str,
    mut out: impl Write,
) -> std::io::Result<()> {
    let (left, top, bottom) = (90.0, 40.0, 60.0);
    let cell_w = (1100.0 / map.columns as f64).clamp(2.0, 40.0);
    let cell_h = match map.axis {
        Axis::Latency { .. } => 16.0,
        Axis::Offset => (500.0 / map.rows as f64).clamp(4.0, 20.0),
    };
    // Wide enough for the title and the details line however few the columns.
    let width = (left + cell_w * map.columns as f64 + 20.0).max(720.0);
    let height = top + cell_h * map.rows as f64 + bottom;
    let max = map.counts.iter().copied().max().unwrap_or(0);
    let total: u64 = map.counts.iter().sum();
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" xmlns="http://www.w3.org/2000/svg" data-events="{total}">
<style>text {{ font-family: Verdana, sans-serif; font-size: 12px; }} rect.c:hover {{ stroke: black; stroke-width: 1; }}</style>
<script><![CDATA[
function show(e) {{ document.getElementById("details").textContent = e.target.getAttribute("data-text"); }}
function pick(e) {{ var t = "--time " + e.target.getAttribute("data-time"); document.getElementById("picked").textContent = "picked: " + t; if (navigator.clipboard) navigator.clipboard.writeText(t).catch(function () {{}}); }}
]]></script>
<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="white"/>
<text x="{:.0}" y="20" text-anchor="middle" font-size="16">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    for col in 0..map.columns {
        for row in 0..map.rows {
            let i = col * map.rows + row;
            let n = map.counts[i];
            if n == 0 {
                continue;
            }
            let (a, b) = map.cell_time(col, row);
            let (y, what_row) = match map.axis {
                Axis::Latency { first_bucket } => {
                    let (lo, hi) = latency::bucket_bounds_us(first_bucket + row);
                    // Short latencies at the bottom.
                    (
                        top + cell_h * (map.rows - 1 - row) as f64,
                        format!("latency {lo}-{hi} us"),
                    )
                }
                Axis::Offset => {
                    let (from, to) = (
                        a - map.start - col as u64 * map.column_ns,
                        b - map.start - col as u64 * map.column_ns,
                    );
                    (
                        top + cell_h * row as f64,
                        format!(
                            "second {col}, {:.1}-{:.1} ms",
                            from as f64 / 1e6,
                            to as f64 / 1e6
                        ),
                    )
                }
            };
            let when = format!(
                "{:.3}-{:.3} s",
                (a - map.start) as f64 / 1e9,
                (b - map.start) as f64 / 1e9
            );
            let weight = match map.axis {
                Axis::Latency { .. } => format!(", {:.3} ms in all", map.weights[i] as f64 / 1e6),
                Axis::Offset => String::new(),
            };
            let text = format!(
                "{when}, {what_row}: {n} {what}{weight}; --time {},{}",
                secs(a),
                secs(b)
            );
            let _ = writeln!(
                s,
                r#"<rect class="c" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" data-count="{n}" data-weight="{}" data-time="{},{}" data-text="{}" onmouseover="show(evt)" onclick="pick(evt)"><title>{}</title></rect>"#,
                left + cell_w * col as f64,
                y,
                cell_w,
                cell_h,
                color(n, max),
                map.weights[i],
                secs(a),
                secs(b),
                escape(&text),
                escape(&text)
            );
        }
    }
    // Axes: row labels on the left, seconds under the columns.
    for row in 0..map.rows {
        let (label, y) = match map.axis {
            Axis::Latency { first_bucket } => {
                let (lo, _) = latency::bucket_bounds_us(first_bucket + row);
                (
                    format!("{lo} us"),
                    top + cell_h * (map.rows - row) as f64 - 3.0,
                )
            }
            Axis::Offset => {
                if row % (map.rows / 10).max(1) != 0 {
                    continue;
                }
                (
                    format!("{:.0} ms", 1000.0 * row as f64 / map.rows as f64),
                    top + cell_h * row as f64 + 10.0,
                )
            }
        };
        let _ = writeln!(
            s,
            r#"<text x="{:.0}" y="{y:.1}" text-anchor="end">{label}</text>"#,
            left - 6.0
        );
    }
    // A label every 80 px at least.
    let every = ((80.0 / cell_w).ceil() as usize).max(1);
    for col in (0..map.columns).step_by(every) {
        let at = (col as u64 * map.column_ns) as f64 / 1e9;
        let label = match map.axis {
            Axis::Offset => format!("{at:.0} s"),
            Axis::Latency { .. } => format!("{at:.3} s"),
        };
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}">{label}</text>"#,
            left + cell_w * col as f64,
            top + cell_h * map.rows as f64 + 16.0,
        );
    }
    let _ = writeln!(
        s,
        r#"<text id="details" x="{left:.0}" y="{:.1}">{total} {what}; hover a cell for its range, click to pick its --time</text>
<text id="picked" x="{left:.0}" y="{:.1}"> </text>
</svg>"#,
        height - 22.0,
        height - 6.0
    );
    out.write_all(s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_round_up_to_one_two_five() {
        assert_eq!(column_width(0), 1_000_000);
        assert_eq!(column_width(150_000_000), 2_000_000);
        assert_eq!(column_width(40_000_000_000), 500_000_000);
        assert_eq!(column_width(101_000_000_000), 2_000_000_000);
    }

    #[test]
    fn a_sample_standing_for_several_events_sits_at_their_mean_latency() {
        use crate::read::testing::sample;
        // 20 us alone; 9 events of 10 us in one sample (weighing 90 us).
        let one = sample(0, 1, 1_000, 20_000, &[], None);
        let mut nine = sample(0, 1, 2_000, 90_000, &[], None);
        nine.count = 9;
        let samples = [(&one, one.period), (&nine, nine.period)];
        let map = Heatmap::latency(&samples, (0, 10_000));
        assert_eq!(map.axis, Axis::Latency { first_bucket: 3 });
        assert_eq!((map.columns, map.rows), (1, 2));
        // Row 0: [8, 16) us, row 1: [16, 32) us.
        assert_eq!(map.counts, [9, 1]);
        assert_eq!(map.weights, [90_000, 20_000]);
    }
}
