//! Charts of a sweep: bus bandwidth against size, as a self-contained SVG.
//!
//! ```text
//!  busbw   ┌──────────────────────────┐  ── ring
//!  (GB/s)  │            ___-----‾‾‾   │  ── recursive_doubling
//!          │      _---‾‾              │
//!          │ __--‾                    │
//!          └──────────────────────────┘
//!            1K   4K   16K  64K  256K      size (log2)
//! ```
//!
//! One `<polyline class="series">` per series (algorithm or `auto`), in the order the series first
//! appear in the rows, each named by its `data-series` attribute and in the legend.

use std::fmt::Write as _;

use crate::sweep::{Row, format_size};

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 500.0;
/// The plot area: left, right, top, bottom.
const AREA: (f64, f64, f64, f64) = (80.0, 600.0, 50.0, 430.0);
/// Colours for successive series (Tableau 10), reused past the tenth.
const PALETTE: [&str; 10] =
    ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

/// An SVG of `busbw_gbps` against `size` (log2 axis) for every series in `rows`, under `title`.
///
/// # Examples
/// ```
/// use kernbench::sweep::{Series, Sweep};
/// use kernbench::{Collective, Communicator, System};
/// let mut comm = Communicator::new(System::shape(4, 1, 1, 1).unwrap());
/// let series = vec![Series::Algorithm("ring".into()), Series::Algorithm("one_shot".into())];
/// let rows = Sweep::new(Collective::AllReduce, series, vec![1024, 4096, 16384]).run(&mut comm, |_| {}).unwrap();
/// let svg = kernbench::plot::busbw_svg("all_reduce", &rows);
/// assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
/// assert_eq!(svg.matches("<polyline").count(), 2);
/// ```
pub fn busbw_svg(title: &str, rows: &[Row]) -> String {
    let rows: Vec<&Row> = rows.iter().filter(|r| r.size > 0 && r.busbw_gbps.is_finite()).collect();
    let (left, right, top, bottom) = AREA;
    let log = |size: u64| (size as f64).log2();
    let (mut x_min, mut x_max) =
        rows.iter().map(|r| log(r.size)).fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if x_min > x_max {
        (x_min, x_max) = (10.0, 20.0);
    }
    if x_max - x_min < 1.0 {
        (x_min, x_max) = (x_min - 1.0, x_max + 1.0);
    }
    let y_top = rows.iter().map(|r| r.busbw_gbps).fold(0.0, f64::max);
    let y_step = nice_step(y_top / 5.0);
    let y_max = (y_top / y_step).ceil().max(1.0) * y_step;
    let px = |x: f64| left + (x - x_min) / (x_max - x_min) * (right - left);
    let py = |y: f64| bottom - y / y_max * (bottom - top);

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, "<title>{}</title>", escape(title));
    let _ = writeln!(svg, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text class="title" x="{}" y="28" text-anchor="middle" font-size="15">{}</text>"#,
        (left + right) / 2.0,
        escape(title)
    );

    // Grid and ticks first, so the axes and lines draw over them.
    let _ = writeln!(svg, r#"<g class="y-ticks">"#);
    let mut y = 0.0;
    while y <= y_max + y_step / 2.0 {
        let at = py(y);
        let _ = writeln!(
            svg,
            r##"<g class="tick"><line x1="{left}" y1="{at:.1}" x2="{right}" y2="{at:.1}" stroke="#e0e0e0"/><line x1="{:.1}" y1="{at:.1}" x2="{left}" y2="{at:.1}" stroke="black"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text></g>"##,
            left - 5.0,
            left - 8.0,
            at + 4.0,
            format_number(y)
        );
        y += y_step;
    }
    let _ = writeln!(svg, "</g>");
    let _ = writeln!(svg, r#"<g class="x-ticks">"#);
    let (first, last) = (x_min.ceil() as i64, x_max.floor() as i64);
    let every = ((last - first) / 10 + 1).max(1);
    for k in (first..=last).filter(|k| (k - first) % every == 0) {
        let at = px(k as f64);
        let label =
            u64::try_from(k).ok().and_then(|k| 1u64.checked_shl(k as u32)).map_or(format!("2^{k}"), format_size);
        let _ = writeln!(
            svg,
            r##"<g class="tick"><line x1="{at:.1}" y1="{bottom}" x2="{at:.1}" y2="{:.1}" stroke="black"/><text x="{at:.1}" y="{:.1}" text-anchor="middle">{label}</text></g>"##,
            bottom + 5.0,
            bottom + 20.0
        );
    }
    let _ = writeln!(svg, "</g>");
    let _ = writeln!(svg, r#"<g class="axes" stroke="black" stroke-width="1.5">"#);
    let _ = writeln!(svg, r#"<line class="x-axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>"#);
    let _ = writeln!(svg, r#"<line class="y-axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/>"#);
    let _ = writeln!(svg, "</g>");
    let _ = writeln!(
        svg,
        r#"<text class="x-label" x="{}" y="{}" text-anchor="middle">size per rank, bytes (log2 scale)</text>"#,
        (left + right) / 2.0,
        bottom + 45.0
    );
    let _ = writeln!(
        svg,
        r#"<text class="y-label" x="20" y="{mid}" text-anchor="middle" transform="rotate(-90 20 {mid})">busbw (GB/s)</text>"#,
        mid = (top + bottom) / 2.0
    );

    let mut series: Vec<&str> = Vec::new();
    for row in &rows {
        if !series.contains(&row.series.as_str()) {
            series.push(&row.series);
        }
    }
    let _ = writeln!(svg, r#"<g class="lines" fill="none" stroke-width="2">"#);
    for (i, name) in series.iter().enumerate() {
        let mut points: Vec<(f64, f64)> =
            rows.iter().filter(|r| r.series == *name).map(|r| (log(r.size), r.busbw_gbps)).collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let text: Vec<String> = points.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
        let _ = writeln!(
            svg,
            r#"<polyline class="series" data-series="{}" stroke="{}" points="{}"/>"#,
            escape(name),
            PALETTE[i % PALETTE.len()],
            text.join(" ")
        );
    }
    let _ = writeln!(svg, "</g>");
    let _ = writeln!(svg, r#"<g class="legend">"#);
    for (i, name) in series.iter().enumerate() {
        let at = top + 10.0 + 20.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<g class="entry"><line x1="{:.1}" y1="{at:.1}" x2="{:.1}" y2="{at:.1}" stroke="{}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
            right + 20.0,
            right + 45.0,
            PALETTE[i % PALETTE.len()],
            right + 52.0,
            at + 4.0,
            escape(name)
        );
    }
    let _ = writeln!(svg, "</g>");
    svg.push_str("</svg>\n");
    svg
}

/// The tick step for about `rough`: 1, 2 or 5 times a power of ten.
fn nice_step(rough: f64) -> f64 {
    if !(rough.is_finite() && rough > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|&s| s >= rough).unwrap_or(10.0 * magnitude)
}

/// A tick label: no trailing zeros.
fn format_number(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_core::{Dtype, ReduceOp};

    fn row(series: &str, size: u64, busbw: f64) -> Row {
        Row {
            size,
            count: size / 4,
            ranks: 4,
            bytes_per_rank: size,
            dtype: Dtype::F32,
            op: ReduceOp::Sum,
            series: series.to_owned(),
            algorithm: series.to_owned(),
            time_ns: 1.0,
            algbw_gbps: busbw,
            busbw_gbps: busbw,
            wrong: 0,
            slowest_link: None,
            sol: None,
        }
    }

    #[test]
    fn steps_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.5), 2.0);
        assert_eq!(nice_step(31.0), 50.0);
        assert_eq!(nice_step(0.0), 1.0);
    }

    #[test]
    fn one_line_per_series_with_a_point_per_size_and_a_legend_entry_each() {
        let rows = [row("a<b", 1024, 1.0), row("c", 1024, 2.0), row("a<b", 4096, 3.0), row("c", 4096, 8.0)];
        let svg = busbw_svg("t & u", &rows);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(r#"data-series="a&lt;b""#) && svg.contains("<title>t &amp; u</title>"), "{svg}");
        assert_eq!(svg.matches(r#"<g class="entry">"#).count(), 2);
        for label in [">1K<", ">2K<", ">4K<", ">8<", ">0<"] {
            assert!(svg.contains(label), "no tick {label}:\n{svg}");
        }
    }

    #[test]
    fn a_single_size_still_has_an_x_range() {
        let svg = busbw_svg("one", &[row("a", 1 << 20, 5.0)]);
        assert!(svg.contains(">1M<") && !svg.contains("NaN"), "{svg}");
    }
}
