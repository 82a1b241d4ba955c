//! Training curves as a standalone SVG file: one panel per quantity, each with its series
//! drawn as polylines over labelled axes. No plotting dependency: a chart of a few lines is
//! plain SVG text.

use std::fmt::Write as _;
use std::path::Path;

use autograd_core::{Error, Result};

/// One line of a panel: `(x, y)` points drawn in `color` (any SVG colour).
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// An SVG colour such as `"#1f77b4"`.
    pub color: String,
    /// The points, in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// One chart: a title, axis labels and its series.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Shown above the chart.
    pub title: String,
    /// Under the horizontal axis.
    pub x_label: String,
    /// Beside the vertical axis.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

const WIDTH: f64 = 520.0;
const HEIGHT: f64 = 340.0;
const MARGIN_LEFT: f64 = 64.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_TOP: f64 = 36.0;
const MARGIN_BOTTOM: f64 = 48.0;
const TICKS: usize = 5;

/// Writes `panels` side by side into an SVG file at `path`.
pub fn write_svg(path: &Path, panels: &[Panel]) -> Result<()> {
    std::fs::write(path, render(panels))
        .map_err(|e| Error::Runtime(format!("cannot write {}: {e}", path.display())))
}

/// The SVG text of `panels` side by side.
pub fn render(panels: &[Panel]) -> String {
    let total = WIDTH * panels.len().max(1) as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{total}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {total} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for (i, p) in panels.iter().enumerate() {
        panel(&mut svg, p, WIDTH * i as f64);
    }
    svg.push_str("</svg>\n");
    svg
}

/// The range of the finite values of `v`, widened when empty or flat.
fn range(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = v
        .filter(|x| x.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
    if lo > hi {
        (0.0, 1.0)
    } else if hi - lo < 1e-12 {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo, hi)
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn panel(svg: &mut String, p: &Panel, left: f64) {
    let (x0, x1) = range(p.series.iter().flat_map(|s| s.points.iter().map(|q| q.0)));
    let (y0, y1) = range(p.series.iter().flat_map(|s| s.points.iter().map(|q| q.1)));
    let (plot_w, plot_h) = (
        WIDTH - MARGIN_LEFT - MARGIN_RIGHT,
        HEIGHT - MARGIN_TOP - MARGIN_BOTTOM,
    );
    let sx = |x: f64| left + MARGIN_LEFT + (x - x0) / (x1 - x0) * plot_w;
    let sy = |y: f64| MARGIN_TOP + (1.0 - (y - y0) / (y1 - y0)) * plot_h;
    let (bottom, right) = (MARGIN_TOP + plot_h, left + MARGIN_LEFT + plot_w);
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{}</text>",
        left + MARGIN_LEFT + plot_w / 2.0,
        escape(&p.title)
    );
    let _ = writeln!(
        svg,
        "<rect x=\"{}\" y=\"{MARGIN_TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"#444\"/>",
        left + MARGIN_LEFT
    );
    for t in 0..=TICKS {
        let f = t as f64 / TICKS as f64;
        let (xv, yv) = (x0 + f * (x1 - x0), y0 + f * (y1 - y0));
        let _ = writeln!(
            svg,
            "<line x1=\"{x}\" y1=\"{bottom}\" x2=\"{x}\" y2=\"{}\" stroke=\"#444\"/>\
             <text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            bottom + 4.0,
            bottom + 18.0,
            tick(xv),
            x = sx(xv)
        );
        let _ = writeln!(
            svg,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{right}\" y2=\"{y}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            left + MARGIN_LEFT,
            left + MARGIN_LEFT - 6.0,
            sy(yv) + 4.0,
            tick(yv),
            y = sy(yv)
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        left + MARGIN_LEFT + plot_w / 2.0,
        HEIGHT - 10.0,
        escape(&p.x_label)
    );
    let _ = writeln!(
        svg,
        "<text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        left + 16.0,
        MARGIN_TOP + plot_h / 2.0,
        escape(&p.y_label)
    );
    for (i, s) in p.series.iter().enumerate() {
        let points: Vec<String> = s
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| format!("{:.2},{:.2}", sx(x), sy(y)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" points=\"{}\"/>",
            escape(&s.color),
            points.join(" ")
        );
        let ly = MARGIN_TOP + 16.0 + 16.0 * i as f64;
        let _ = writeln!(
            svg,
            "<line x1=\"{lx}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{}\" stroke-width=\"3\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            right - 104.0,
            escape(&s.color),
            right - 98.0,
            ly + 4.0,
            escape(&s.name),
            lx = right - 120.0,
            y = ly
        );
    }
}

/// A tick label with as many decimals as the magnitude needs.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || v == v.trunc() && a < 1e6 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}
