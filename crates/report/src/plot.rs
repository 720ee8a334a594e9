//! SVG line plots (also used for CDFs and scatter-like series).

use crate::ReportError;
use plotters::prelude::*;
use std::path::Path;

/// Axis scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Scale {
    /// Linear axis.
    #[default]
    Linear,
    /// Base-10 logarithmic axis (non-positive values are dropped).
    Log,
}

/// One named series of (x, y) points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Draw markers at the points as well as the line.
    pub markers: bool,
}

impl Series {
    /// A line series.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            markers: false,
        }
    }

    /// A line series with point markers.
    pub fn marked(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            markers: true,
        }
    }

    /// The empirical CDF of `values` as a series (x = value, y = fraction ≤ x).
    pub fn cdf(name: impl Into<String>, values: &[f64]) -> Self {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len().max(1) as f64;
        let points = v
            .iter()
            .enumerate()
            .map(|(i, x)| (*x, (i + 1) as f64 / n))
            .collect();
        Self::line(name, points)
    }
}

/// A titled chart of one or more series.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LinePlot {
    /// Chart title.
    pub title: String,
    /// x-axis label.
    pub x_label: String,
    /// y-axis label.
    pub y_label: String,
    /// The series.
    pub series: Vec<Series>,
    /// x-axis scale.
    pub x_scale: Scale,
    /// y-axis scale.
    pub y_scale: Scale,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

impl LinePlot {
    /// A plot with a title and axis labels and no series yet.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            ..Self::default()
        }
    }

    /// Adds a series (builder style).
    pub fn with(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }

    fn bounds(&self) -> ((f64, f64), (f64, f64)) {
        let keep = |v: f64, s: Scale| v.is_finite() && (s == Scale::Linear || v > 0.0);
        let pts = self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| keep(*x, self.x_scale) && keep(*y, self.y_scale));
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for (x, y) in pts {
            x0 = x0.min(*x);
            x1 = x1.max(*x);
            y0 = y0.min(*y);
            y1 = y1.max(*y);
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        let pad = |lo: f64, hi: f64, s: Scale| -> (f64, f64) {
            match s {
                Scale::Log => (lo / 1.2, hi * 1.2),
                Scale::Linear => {
                    let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
                    let lo2 = if lo >= 0.0 && lo - 0.05 * span < 0.0 {
                        0.0
                    } else {
                        lo - 0.05 * span
                    };
                    (lo2, hi + 0.05 * span)
                }
            }
        };
        (pad(x0, x1, self.x_scale), pad(y0, y1, self.y_scale))
    }

    /// Renders the plot to an SVG file.
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        let err = |e: &dyn std::fmt::Display| ReportError::Plot {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let root = SVGBackend::new(path, (800, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let ((x0, x1), (y0, y1)) = self.bounds();
        macro_rules! draw {
            ($xr:expr, $yr:expr) => {{
                let mut chart = ChartBuilder::on(&root)
                    .caption(&self.title, ("sans-serif", 20))
                    .margin(12)
                    .x_label_area_size(44)
                    .y_label_area_size(64)
                    .build_cartesian_2d($xr, $yr)
                    .map_err(|e| err(&e))?;
                chart
                    .configure_mesh()
                    .x_desc(self.x_label.as_str())
                    .y_desc(self.y_label.as_str())
                    .draw()
                    .map_err(|e| err(&e))?;
                for (i, s) in self.series.iter().enumerate() {
                    let color = PALETTE[i % PALETTE.len()];
                    let pts: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .copied()
                        .filter(|(x, y)| {
                            x.is_finite()
                                && y.is_finite()
                                && (self.x_scale == Scale::Linear || *x > 0.0)
                                && (self.y_scale == Scale::Linear || *y > 0.0)
                        })
                        .collect();
                    chart
                        .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                        .map_err(|e| err(&e))?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                        });
                    if s.markers {
                        chart
                            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                            .map_err(|e| err(&e))?;
                    }
                }
                if self.series.len() > 1 || self.series.iter().any(|s| !s.name.is_empty()) {
                    chart
                        .configure_series_labels()
                        .background_style(WHITE.mix(0.85))
                        .border_style(BLACK.mix(0.3))
                        .draw()
                        .map_err(|e| err(&e))?;
                }
            }};
        }
        match (self.x_scale, self.y_scale) {
            (Scale::Linear, Scale::Linear) => draw!(x0..x1, y0..y1),
            (Scale::Log, Scale::Linear) => draw!((x0..x1).log_scale(), y0..y1),
            (Scale::Linear, Scale::Log) => draw!(x0..x1, (y0..y1).log_scale()),
            (Scale::Log, Scale::Log) => draw!((x0..x1).log_scale(), (y0..y1).log_scale()),
        }
        root.present().map_err(|e| err(&e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_is_monotone_and_ends_at_one() {
        let s = Series::cdf("x", &[3.0, 1.0, f64::NAN, 2.0]);
        assert_eq!(s.points, vec![(1.0, 1.0 / 3.0), (2.0, 2.0 / 3.0), (3.0, 1.0)]);
    }

    #[test]
    fn writes_an_svg_with_title_and_legend() {
        let dir = std::env::temp_dir().join(format!("wm-report-{}", std::process::id()));
        let out = crate::OutputDir::create(&dir).unwrap();
        let p = LinePlot::new("Bandwidth vs players", "players", "kbps")
            .with(Series::marked("worldmesh", vec![(9.0, 10.0), (400.0, 50.0)]))
            .with(Series::line("broadcast", vec![(9.0, 20.0), (400.0, 900.0)]));
        let mut log = p.clone();
        log.y_scale = Scale::Log;
        let path = out.write_plot("a.svg", &p).unwrap();
        out.write_plot("b.svg", &log).unwrap();
        let svg = std::fs::read_to_string(path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("Bandwidth vs players") && svg.contains("broadcast"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
