//! Charts of a sweep: bus bandwidth against size on a log2 axis, one line per series (and one of a
//! log's measurements), drawn with plotters' SVG backend.
//!
//! ```text
//!  busbw   ┌──────────────────────────┐
//!  (GB/s)  │ ── ring     ___-----‾‾‾  │
//!          │ ── one_shot_---‾‾        │
//!          │ __--‾                    │
//!          └──────────────────────────┘
//!            1K   4K   16K  64K  256K      size per rank (log2)
//! ```

use crate::sweep::{Row, format_size, series_in_order};
use anyhow::{Result, anyhow};
use plotters::prelude::*;

const SIZE: (u32, u32) = (860, 500);

/// One line of a chart: its name in the legend, and its busbw (GB/s) at each size (bytes).
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    /// The legend's name for it.
    pub name: String,
    /// `(size, busbw)` points, in any order.
    pub points: Vec<(u64, f64)>,
}

/// A curve for every series of `rows`, in the order the series first appear.
pub fn curves(rows: &[Row]) -> Vec<Curve> {
    let points = |series: &str| rows.iter().filter(|r| r.series == series).map(|r| (r.size, r.busbw_gbps)).collect();
    series_in_order(rows).into_iter().map(|name| Curve { name: name.to_owned(), points: points(name) }).collect()
}

/// An SVG of busbw against size (log2 axis) for every curve, each in the legend in the order given;
/// `title` above. Points of size 0 or of a busbw that is not finite are left out.
///
/// # Errors
/// When plotters cannot lay the chart out (it reports which element failed).
pub fn busbw_svg(title: &str, curves: &[Curve]) -> Result<String> {
    let drawable = |&&(size, busbw): &&(u64, f64)| size > 0 && busbw.is_finite();
    let all = || curves.iter().flat_map(|curve| curve.points.iter().filter(drawable));
    let smallest = all().map(|p| p.0).min().unwrap_or(1 << 10);
    let largest = all().map(|p| p.0).max().unwrap_or(1 << 20);
    // A single size still needs a range: one doubling either side.
    let (x_min, x_max) = if smallest == largest { ((smallest / 2).max(1), largest * 2) } else { (smallest, largest) };
    let doublings = (x_max as f64 / x_min as f64).log2().ceil() as usize;
    let y_top = all().map(|p| p.1).fold(0.0, f64::max);
    let y_max = if y_top > 0.0 { y_top * 1.1 } else { 1.0 };

    let mut svg = String::new();
    let failed = |e: &dyn std::fmt::Display| anyhow!("cannot draw the plot: {e}");
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| failed(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((x_min..x_max).log_scale().base(2.0), 0.0..y_max)
            .map_err(|e| failed(&e))?;
        chart
            .configure_mesh()
            // Few enough labels that plotters keeps to powers of two.
            .x_labels(doublings + 1)
            .x_label_formatter(&|size| format_size(*size))
            .x_desc("size per rank, bytes (log2 scale)")
            .y_desc("busbw (GB/s)")
            .draw()
            .map_err(|e| failed(&e))?;
        for (i, curve) in curves.iter().enumerate() {
            let colour = Palette99::pick(i).stroke_width(2);
            let mut points: Vec<(u64, f64)> = curve.points.iter().filter(drawable).copied().collect();
            points.sort_by_key(|p| p.0);
            chart
                .draw_series(LineSeries::new(points, colour))
                .map_err(|e| failed(&e))?
                .label(&curve.name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| failed(&e))?;
        root.present().map_err(|e| failed(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench::{Dtype, ReduceOp};

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
            protocol: None,
            time_ns: 1.0,
            algbw_gbps: busbw,
            busbw_gbps: busbw,
            checked: true,
            wrong: 0,
            bound: None,
            sol: None,
            rounded: None,
        }
    }

    /// The text of every `<text>` element, in document order.
    fn texts(svg: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(|t| t.trim().to_owned())
            .collect()
    }

    #[test]
    fn a_plot_is_an_svg_with_a_legend_entry_per_series_and_power_of_two_size_labels() {
        let sizes = [1024, 4096, 16384];
        let rows: Vec<Row> =
            sizes.iter().flat_map(|&size| [row("a<b", size, size as f64 / 4096.0), row("c", size, 2.0)]).collect();
        let svg = busbw_svg("t & u", &curves(&rows)).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        // One line of a point per size for each series (legend samples have two points), left to
        // right as sizes grow, inside the picture.
        let lines: Vec<Vec<(f64, f64)>> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .map(|n| {
                let points = n.attribute("points").unwrap().split_whitespace();
                points
                    .map(|p| p.split_once(',').map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap())).unwrap())
                    .collect()
            })
            .filter(|points: &Vec<(f64, f64)>| points.len() == sizes.len())
            .collect();
        assert_eq!(lines.len(), 2, "{svg}");
        for points in &lines {
            assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "x grows with size: {points:?}");
            // Log scale: sizes 4x apart are equally far apart.
            let gaps = (points[1].0 - points[0].0, points[2].0 - points[1].0);
            assert!((gaps.0 - gaps.1).abs() <= 1.0, "{gaps:?}");
            let (width, height) = (f64::from(SIZE.0), f64::from(SIZE.1));
            assert!(points.iter().all(|&(x, y)| (0.0..=width).contains(&x) && (0.0..=height).contains(&y)));
        }
        let texts = texts(&svg);
        for want in ["t & u", "a<b", "c", "busbw (GB/s)", "size per rank, bytes (log2 scale)"] {
            assert_eq!(texts.iter().filter(|t| *t == want).count(), 1, "{want} once in {texts:?}");
        }
        // Log2 ticks: every power of two of the range, nothing between.
        let sizes: Vec<&str> = texts.iter().map(String::as_str).filter(|t| t.ends_with('K')).collect();
        assert_eq!(sizes, ["1K", "2K", "4K", "8K", "16K"]);
        // The legend in the order the series first appear; a busbw axis from 0.
        let at = |name: &str| texts.iter().position(|t| t == name).unwrap();
        assert!(at("a<b") < at("c"), "{texts:?}");
        assert!(texts.iter().any(|t| t == "0.0") && texts.iter().any(|t| t == "2.0"), "{texts:?}");
    }

    #[test]
    fn a_single_size_still_has_an_x_range() {
        let svg = busbw_svg("one", &curves(&[row("a", 1 << 20, 5.0)])).unwrap();
        let texts = texts(&svg);
        assert!(texts.iter().any(|t| t == "1M") && !svg.contains("NaN"), "{texts:?}");
    }
}
