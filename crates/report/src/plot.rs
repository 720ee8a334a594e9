//! Charts: lines, marked lines, step CDFs, scatter points, grouped bars over categories and
//! stacked areas, with error bars or bands for intervals and dashed reference lines
//! (paper values, limits). Rendered as SVG, and as PNG where a font is found
//! ([`crate::raster`]).
//!
//! Layout rules, applied to every chart: the title names the paper and figure
//! ([`Plot::figure`]) and wraps instead of running off; the legend sits in its own panel
//! right of the data, never over it; ticks come from [`crate::ticks`] (whole numbers on
//! integer axes, decades on log axes, as many labels as fit); grids are light grey.

use crate::ReportError;
use crate::style::{REF_COLOURS, colour, draw_marker, marker, text_width, wrap};
use crate::ticks::{self, Ticks};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
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

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mark {
    /// A line through the points.
    #[default]
    Line,
    /// A line with a marker at every point.
    Marked,
    /// A post-step line (x_i, y_i) → (x_{i+1}, y_i) → (x_{i+1}, y_{i+1}): CDFs.
    Step,
    /// Markers only (scatter).
    Points,
    /// A dashed line.
    Dashed,
    /// Bars over the plot's categories (x = category index); bar series are grouped.
    Bar,
    /// A component of a stacked area chart: area series are stacked in order.
    Area,
}

/// One named series of (x, y) points.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Series {
    /// Legend label (empty: not in the legend).
    pub name: String,
    /// Points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// How the series is drawn.
    pub mark: Mark,
    /// An interval (low, high) per point, drawn as error bars, or as a band if `band`.
    pub errors: Option<Vec<(f64, f64)>>,
    /// Draw `errors` as a shaded band instead of bars.
    pub band: bool,
}

impl Series {
    fn new(name: impl Into<String>, points: Vec<(f64, f64)>, mark: Mark) -> Self {
        Self {
            name: name.into(),
            points,
            mark,
            ..Self::default()
        }
    }

    /// A line series.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Mark::Line)
    }

    /// A line series with point markers.
    pub fn marked(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Mark::Marked)
    }

    /// A dashed line.
    pub fn dashed(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Mark::Dashed)
    }

    /// Markers only.
    pub fn points(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Mark::Points)
    }

    /// A post-step line through `points`.
    pub fn step(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Mark::Step)
    }

    /// Bars: `values[c]` over category `c`.
    pub fn bars(name: impl Into<String>, values: &[f64]) -> Self {
        let pts = values.iter().enumerate().map(|(c, v)| (c as f64, *v)).collect();
        Self::new(name, pts, Mark::Bar)
    }

    /// A stacked-area component.
    pub fn area(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self::new(name, points, Mark::Area)
    }

    /// The empirical CDF of `values` as a step series (x = value, y = fraction ≤ x),
    /// starting at (min, 0). More than `MAX_CDF_STEPS` distinct values are thinned to
    /// evenly spaced quantiles.
    pub fn cdf(name: impl Into<String>, values: &[f64]) -> Self {
        Self::step(name, cdf_points(values))
    }

    /// Adds intervals (low, high), one per point, drawn as error bars.
    pub fn with_errors(mut self, errors: Vec<(f64, f64)>) -> Self {
        self.errors = Some(errors);
        self
    }

    /// Draws the intervals as a band.
    pub fn as_band(mut self) -> Self {
        self.band = true;
        self
    }
}

/// Most steps kept in a CDF series.
pub const MAX_CDF_STEPS: usize = 600;

/// The points of an empirical CDF of `values` (non-finite values dropped): (min, 0), then
/// (x, fraction ≤ x) for each distinct x, thinned to `MAX_CDF_STEPS` quantiles.
pub fn cdf_points(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut pts: Vec<(f64, f64)> = vec![(v[0], 0.0)];
    for (i, x) in v.iter().enumerate() {
        let f = (i + 1) as f64 / n;
        let n_pts = pts.len();
        match pts.last_mut() {
            Some(last) if last.0 == *x && n_pts > 1 => last.1 = f,
            _ => pts.push((*x, f)),
        }
    }
    if pts.len() > MAX_CDF_STEPS + 1 {
        let mut thin = vec![pts[0]];
        for k in 1..=MAX_CDF_STEPS {
            let q = k as f64 / MAX_CDF_STEPS as f64;
            let i = ((q * n).ceil() as usize).clamp(1, v.len()) - 1;
            thin.push((v[i], q));
        }
        thin.dedup_by(|b, a| {
            b.0 == a.0 && {
                a.1 = b.1;
                true
            }
        });
        return thin;
    }
    pts
}

/// A horizontal or vertical dashed reference line (a paper's value, a limit).
#[derive(Clone, Debug, PartialEq)]
pub struct RefLine {
    /// Legend label.
    pub name: String,
    /// Vertical (x = value) or horizontal (y = value).
    pub vertical: bool,
    /// Where.
    pub value: f64,
}

/// A titled chart of one or more series.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Plot {
    /// The paper and figure this chart reproduces ("paper 000 Fig. 9"), or what it is
    /// when no paper has it ("ours: …"); printed before the title.
    pub figure: String,
    /// Chart title.
    pub title: String,
    /// x-axis label (with units).
    pub x_label: String,
    /// y-axis label (with units).
    pub y_label: String,
    /// The series.
    pub series: Vec<Series>,
    /// Reference lines.
    pub refs: Vec<RefLine>,
    /// x-axis scale.
    pub x_scale: Scale,
    /// y-axis scale.
    pub y_scale: Scale,
    /// Category names: if not empty, x is categorical (x = index) and bars group by it.
    pub categories: Vec<String>,
    /// Fixed x range (default: the data's).
    pub x_range: Option<(f64, f64)>,
    /// Fixed y range (default: the data's).
    pub y_range: Option<(f64, f64)>,
}

/// The old name of [`Plot`].
pub type LinePlot = Plot;

/// Image width in pixels.
const WIDTH: u32 = 1000;
/// Least image height in pixels.
const HEIGHT: u32 = 600;
const TITLE_SIZE: f64 = 17.0;
const LABEL_SIZE: f64 = 13.0;
const LEGEND_SIZE: f64 = 13.0;
const LEGEND_LINE: i32 = 16;

/// A font of `px` pixels as plotters takes it (its SVG prints the size ÷ 1.24).
pub(crate) fn font(px: f64) -> (&'static str, f64) {
    ("sans-serif", px * 1.24)
}

struct Layout {
    title: Vec<String>,
    title_h: u32,
    legend: Vec<(Entry, Vec<String>)>,
    legend_w: u32,
    height: u32,
}

#[derive(Clone, Copy)]
enum Entry {
    Series(usize),
    Ref(usize),
}

fn finite(p: &(f64, f64), xs: Scale, ys: Scale) -> bool {
    p.0.is_finite()
        && p.1.is_finite()
        && (xs == Scale::Linear || p.0 > 0.0)
        && (ys == Scale::Linear || p.1 > 0.0)
}

fn expand(b: &mut (f64, f64), v: f64, s: Scale) {
    if v.is_finite() && (s == Scale::Linear || v > 0.0) {
        b.0 = b.0.min(v);
        b.1 = b.1.max(v);
    }
}

impl Plot {
    /// A plot with a title and axis labels and no series yet.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            ..Self::default()
        }
    }

    /// A plot of `figure` ("paper 000 Fig. 9").
    pub fn of(
        figure: impl Into<String>,
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        Self {
            figure: figure.into(),
            ..Self::new(title, x_label, y_label)
        }
    }

    /// Adds a series (builder style).
    pub fn with(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }

    /// Adds a horizontal reference line at y = `value`.
    pub fn with_hline(mut self, name: impl Into<String>, value: f64) -> Self {
        self.refs.push(RefLine {
            name: name.into(),
            vertical: false,
            value,
        });
        self
    }

    /// Adds a vertical reference line at x = `value`.
    pub fn with_vline(mut self, name: impl Into<String>, value: f64) -> Self {
        self.refs.push(RefLine {
            name: name.into(),
            vertical: true,
            value,
        });
        self
    }

    /// Sets the axis scales.
    pub fn scales(mut self, x: Scale, y: Scale) -> Self {
        self.x_scale = x;
        self.y_scale = y;
        self
    }

    /// Makes x categorical with these names.
    pub fn with_categories<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.categories = names.into_iter().map(Into::into).collect();
        self
    }

    /// The title as printed: figure, then title.
    pub fn full_title(&self) -> String {
        if self.figure.is_empty() {
            self.title.clone()
        } else {
            format!("{}: {}", self.figure, self.title)
        }
    }

    fn stacked_tops(&self) -> Vec<Vec<(f64, f64, f64)>> {
        // Per area series: (x, lower, upper), stacked on the previous area series at the
        // same x (matched by index).
        let mut out: Vec<Vec<(f64, f64, f64)>> = Vec::new();
        for s in self.series.iter().filter(|s| s.mark == Mark::Area) {
            let below = out.last();
            let layer = s
                .points
                .iter()
                .enumerate()
                .map(|(i, (x, y))| {
                    let lo = below.and_then(|b| b.get(i)).map_or(0.0, |p| p.2);
                    (*x, lo, lo + y.max(0.0))
                })
                .collect();
            out.push(layer);
        }
        out
    }

    /// Data bounds ((x0, x1), (y0, y1)) before padding; `None` when nothing is drawable.
    fn data_bounds(&self) -> Option<((f64, f64), (f64, f64))> {
        let (xs, ys) = (self.x_scale, self.y_scale);
        let mut bx = (f64::INFINITY, f64::NEG_INFINITY);
        let mut by = (f64::INFINITY, f64::NEG_INFINITY);
        for s in &self.series {
            if s.mark == Mark::Area {
                continue;
            }
            for (i, p) in s.points.iter().enumerate() {
                if !finite(p, xs, ys) {
                    continue;
                }
                expand(&mut bx, p.0, xs);
                expand(&mut by, p.1, ys);
                if let Some((lo, hi)) = s.errors.as_ref().and_then(|e| e.get(i)) {
                    expand(&mut by, *lo, ys);
                    expand(&mut by, *hi, ys);
                }
            }
            if s.mark == Mark::Bar && ys == Scale::Linear {
                expand(&mut by, 0.0, ys);
            }
        }
        for layer in self.stacked_tops() {
            for (x, lo, hi) in layer {
                expand(&mut bx, x, xs);
                expand(&mut by, lo, ys);
                expand(&mut by, hi, ys);
            }
        }
        for r in &self.refs {
            if r.vertical {
                expand(&mut bx, r.value, xs);
            } else {
                expand(&mut by, r.value, ys);
            }
        }
        if !self.categories.is_empty() {
            bx = (-0.5, self.categories.len() as f64 - 0.5);
        }
        if bx.0 > bx.1 || by.0 > by.1 {
            return None;
        }
        Some((bx, by))
    }

    /// Per series: whether it is drawn dashed because it runs over an earlier line. A
    /// line (plain, marked or step) of which at least a fifth of the segments (between
    /// consecutive points) coincide with segments of an earlier line would hide that line
    /// wholly or in part; drawn dashed, the earlier one shows through the gaps (and the
    /// legend says so). Lines that merely cross or share a point stay solid.
    fn overlaid(&self) -> Vec<bool> {
        type Seg = (u64, u64, u64, u64);
        let line_like = |m: Mark| matches!(m, Mark::Line | Mark::Marked | Mark::Step);
        let segs = |pts: &[(f64, f64)]| -> Vec<Seg> {
            pts.windows(2)
                .map(|w| {
                    (
                        w[0].0.to_bits(),
                        w[0].1.to_bits(),
                        w[1].0.to_bits(),
                        w[1].1.to_bits(),
                    )
                })
                .collect()
        };
        let mut seen: std::collections::HashSet<Seg> = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(self.series.len());
        for s in &self.series {
            if !line_like(s.mark) {
                out.push(false);
                continue;
            }
            let mine = segs(&s.points);
            let shared = mine.iter().filter(|g| seen.contains(g)).count();
            out.push(!mine.is_empty() && shared * 5 >= mine.len());
            seen.extend(mine);
        }
        out
    }

    /// Whether any series draws markers, error bars or step rises at its points (such
    /// points must not sit on the frame of the chart: a CDF rising at 0 would).
    fn has_point_marks(&self) -> bool {
        self.series.iter().any(|s| {
            matches!(s.mark, Mark::Marked | Mark::Points | Mark::Step)
                || (s.errors.is_some() && !s.band && s.mark != Mark::Bar)
        })
    }

    fn is_integer_x(&self) -> bool {
        self.x_scale == Scale::Linear
            && self
                .series
                .iter()
                .flat_map(|s| s.points.iter())
                .all(|p| !p.0.is_finite() || (p.0 - p.0.round()).abs() < 1e-9)
    }

    fn is_integer_y(&self) -> bool {
        self.y_scale == Scale::Linear
            && self.series.iter().all(|s| s.errors.is_none())
            && self
                .series
                .iter()
                .flat_map(|s| s.points.iter())
                .all(|p| !p.1.is_finite() || (p.1 - p.1.round()).abs() < 1e-9)
    }

    fn layout(&self) -> Layout {
        let title_chars = ((f64::from(WIDTH) - 30.0) / (TITLE_SIZE * 0.6)) as usize;
        let title = wrap(&self.full_title(), title_chars);
        let title_h = 12 + title.len() as u32 * 22;
        let mut entries: Vec<(Entry, &str)> = self
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.name.is_empty())
            .map(|(i, s)| (Entry::Series(i), s.name.as_str()))
            .collect();
        entries.extend(
            self.refs
                .iter()
                .enumerate()
                .filter(|(_, r)| !r.name.is_empty())
                .map(|(i, r)| (Entry::Ref(i), r.name.as_str())),
        );
        // One bar series over named categories needs no legend: the categories and the
        // y label say it all, and the chart gets the width.
        if let [(Entry::Series(i), _)] = entries.as_slice()
            && self.series[*i].mark == Mark::Bar
            && !self.categories.is_empty()
        {
            entries.clear();
        }
        let widest = entries
            .iter()
            .map(|(_, t)| text_width(t, LEGEND_SIZE))
            .fold(0.0, f64::max);
        let legend_w = if entries.is_empty() {
            0
        } else {
            (widest + 64.0).clamp(150.0, 300.0) as u32
        };
        let chars = ((f64::from(legend_w) - 56.0) / (LEGEND_SIZE * 0.6)).max(8.0) as usize;
        let legend: Vec<(Entry, Vec<String>)> =
            entries.into_iter().map(|(e, t)| (e, wrap(t, chars))).collect();
        let legend_h: u32 = legend
            .iter()
            .map(|(_, l)| l.len() as u32 * LEGEND_LINE as u32 + 6)
            .sum::<u32>()
            + 30;
        Layout {
            height: HEIGHT.max(title_h + legend_h + 10),
            title,
            title_h,
            legend,
            legend_w,
        }
    }

    /// Image size in pixels.
    pub fn size(&self) -> (u32, u32) {
        (WIDTH, self.layout().height)
    }

    /// Renders the SVG text.
    pub fn to_svg(&self) -> Result<String, String> {
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, self.size()).into_drawing_area();
            self.render(&root)?;
            root.present().map_err(|e| e.to_string())?;
        }
        Ok(s)
    }

    /// Renders the plot to an SVG file.
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        let svg = self.to_svg().map_err(|reason| ReportError::Plot {
            path: path.to_path_buf(),
            reason,
        })?;
        std::fs::write(path, svg).map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Renders the plot to a PNG file (needs a font: [`crate::raster::font`]).
    pub fn write_png(&self, path: &Path) -> Result<(), ReportError> {
        crate::raster::write_png(path, self.size(), |root| self.render(root))
    }

    /// Draws the chart on `root`.
    pub fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let lay = self.layout();
        root.fill(&WHITE).map_err(e)?;
        // Title.
        for (i, line) in lay.title.iter().enumerate() {
            root.draw(&Text::new(
                line.clone(),
                (i32::try_from(WIDTH / 2).unwrap_or(500), 8 + 22 * i as i32),
                font(TITLE_SIZE)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(e)?;
        }
        let (_, body) = root.split_vertically(lay.title_h);
        let (chart_area, legend_area) = body.split_horizontally(WIDTH - lay.legend_w);
        let Some((bx, by)) = self.data_bounds() else {
            chart_area
                .draw(&Text::new(
                    "no data",
                    (40, 40),
                    font(LABEL_SIZE).into_font().color(&BLACK),
                ))
                .map_err(e)?;
            return Ok(());
        };
        let (bx, xt) = self.axis(bx, self.x_range, self.x_scale, true, self.is_integer_x());
        let (by, yt) = self.axis(by, self.y_range, self.y_scale, false, self.is_integer_y());
        let xt = if self.categories.is_empty() {
            xt
        } else {
            Ticks {
                major: (0..self.categories.len()).map(|c| c as f64).collect(),
                minor: Vec::new(),
                decimals: Some(0),
                powers: false,
            }
        };
        let widest_y = yt
            .major
            .iter()
            .map(|v| text_width(&yt.label(*v), LABEL_SIZE))
            .fold(0.0, f64::max);
        let y_area = (widest_y + 40.0).max(56.0) as u32;
        // Category labels wrap under their slot.
        let (chart_w, _) = chart_area.dim_in_pixel();
        let slot = (f64::from(chart_w) - f64::from(y_area) - 30.0) / self.categories.len().max(1) as f64;
        let cat_lines: Vec<Vec<String>> = self
            .categories
            .iter()
            .map(|c| wrap(c, ((slot - 6.0) / (LABEL_SIZE * 0.6)).max(4.0) as usize))
            .collect();
        let lines = cat_lines.iter().map(Vec::len).max().unwrap_or(1) as u32;
        let x_area = 44 + 15 * lines.saturating_sub(1);
        macro_rules! draw {
            ($xr:expr, $yr:expr) => {{
                let mut chart = ChartBuilder::on(&chart_area)
                    .margin_top(6)
                    .margin_right(18)
                    .margin_left(6)
                    .margin_bottom(4)
                    .x_label_area_size(x_area)
                    .y_label_area_size(y_area)
                    .build_cartesian_2d($xr, $yr)
                    .map_err(e)?;
                let cats = !self.categories.is_empty();
                let xfmt = |v: &f64| if cats { String::new() } else { xt.label(*v) };
                let yfmt = |v: &f64| yt.label(*v);
                chart
                    .configure_mesh()
                    .bold_line_style(RGBColor(222, 222, 222).stroke_width(1))
                    .light_line_style(RGBColor(246, 246, 246).stroke_width(1))
                    .axis_style(RGBColor(90, 90, 90))
                    .label_style(font(LABEL_SIZE))
                    .axis_desc_style(font(LABEL_SIZE + 1.0))
                    .x_label_formatter(&xfmt)
                    .y_label_formatter(&yfmt)
                    .x_desc(self.x_label.as_str())
                    .y_desc(self.y_label.as_str())
                    .draw()
                    .map_err(e)?;
                self.draw_data(root, &chart, (bx, by)).map_err(e)?;
                if cats {
                    for (c, lines) in cat_lines.iter().enumerate() {
                        let (px, py) = chart.backend_coord(&(c as f64, by.0));
                        for (k, l) in lines.iter().enumerate() {
                            root.draw(&Text::new(
                                l.clone(),
                                (px, py + 8 + 15 * k as i32),
                                font(LABEL_SIZE)
                                    .into_font()
                                    .color(&BLACK)
                                    .pos(Pos::new(HPos::Center, VPos::Top)),
                            ))
                            .map_err(e)?;
                        }
                    }
                }
            }};
        }
        let (xk, xl) = (xt.major.clone(), xt.minor.clone());
        let (yk, yl) = (yt.major.clone(), yt.minor.clone());
        match (self.x_scale, self.y_scale) {
            (Scale::Linear, Scale::Linear) => draw!(Keyed::linear(bx, xk, xl), Keyed::linear(by, yk, yl)),
            (Scale::Log, Scale::Linear) => draw!(Keyed::log(bx, xk, xl), Keyed::linear(by, yk, yl)),
            (Scale::Linear, Scale::Log) => draw!(Keyed::linear(bx, xk, xl), Keyed::log(by, yk, yl)),
            (Scale::Log, Scale::Log) => draw!(Keyed::log(bx, xk, xl), Keyed::log(by, yk, yl)),
        }
        self.draw_legend(&legend_area, &lay).map_err(e)?;
        Ok(())
    }

    /// The axis range (padded, widened to whole ticks on linear axes) and its ticks.
    fn axis(
        &self,
        (lo, hi): (f64, f64),
        fixed: Option<(f64, f64)>,
        scale: Scale,
        is_x: bool,
        integer: bool,
    ) -> ((f64, f64), Ticks) {
        let max_n = if is_x { 9 } else { 8 };
        if let Some((a, b)) = fixed {
            let t = match scale {
                Scale::Linear => ticks::linear(a, b, max_n, integer),
                Scale::Log => ticks::log(a, b, max_n),
            };
            return ((a, b), t);
        }
        match scale {
            Scale::Log => {
                let (lo, hi) = if hi > lo { (lo, hi) } else { (lo / 2.0, hi * 2.0) };
                let (a, b) = (lo / 1.12, hi * 1.12);
                ((a, b), ticks::log(a, b, max_n))
            }
            Scale::Linear => {
                if !self.categories.is_empty() && is_x {
                    return ((lo, hi), ticks::linear(lo, hi, max_n, true));
                }
                let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
                let mut a = lo - 0.04 * span;
                let mut b = hi + 0.04 * span;
                // Keep the axis from going below zero, except on x under markers, error
                // bars or step rises at zero, which would sit on the frame.
                if lo >= 0.0 && a < 0.0 && !(is_x && lo == 0.0 && self.has_point_marks()) {
                    a = 0.0;
                }
                if hi <= 0.0 && b > 0.0 {
                    b = 0.0;
                }
                // Quantities that start at zero (bars, CDFs, shares) keep zero in view.
                if !is_x && lo >= 0.0 && lo < 0.3 * hi {
                    a = 0.0;
                }
                let t = ticks::linear(a, b, max_n, integer);
                let step = match t.major.as_slice() {
                    [x, y, ..] => y - x,
                    _ => 0.0,
                };
                if step > 0.0 {
                    // Widen to the ticks just outside, when that costs little.
                    let a2 = (a / step).floor() * step;
                    let b2 = (b / step).ceil() * step;
                    if a - a2 < 0.5 * step && (a2 >= 0.0 || lo < 0.0) {
                        a = a2;
                    }
                    if b2 - b < 0.5 * step {
                        b = b2;
                    }
                }
                ((a, b), ticks::linear(a, b, max_n, integer))
            }
        }
    }

    fn draw_data<DB: DrawingBackend, X, Y>(
        &self,
        root: &DrawingArea<DB, Shift>,
        chart: &ChartContext<'_, DB, Cartesian2d<X, Y>>,
        (bx, by): ((f64, f64), (f64, f64)),
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
    where
        X: Ranged<ValueType = f64>,
        Y: Ranged<ValueType = f64>,
    {
        let (xs, ys) = (self.x_scale, self.y_scale);
        let px = |p: (f64, f64)| chart.backend_coord(&p);
        let clamp_y = |y: f64| y.clamp(by.0, by.1);
        let inside =
            |p: &(f64, f64)| finite(p, xs, ys) && p.0 >= bx.0 && p.0 <= bx.1 && p.1 >= by.0 && p.1 <= by.1;
        // Stacked areas first (underneath everything); over categories they are stacked bars.
        let tops = self.stacked_tops();
        if !self.categories.is_empty() {
            for (k, (i, _)) in self
                .series
                .iter()
                .enumerate()
                .filter(|(_, s)| s.mark == Mark::Area)
                .enumerate()
            {
                let c = colour(i);
                for (x, lo, hi) in &tops[k] {
                    let (a, b) = (px((x - 0.3, clamp_y(lo.max(by.0)))), px((x + 0.3, clamp_y(*hi))));
                    root.draw(&Rectangle::new([a, b], c.mix(0.8).filled()))?;
                }
            }
        }
        for (k, (i, _)) in self
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| s.mark == Mark::Area && self.categories.is_empty())
            .enumerate()
        {
            let c = colour(i);
            let layer = &tops[k];
            let mut poly: Vec<(i32, i32)> = layer.iter().map(|(x, _, hi)| px((*x, clamp_y(*hi)))).collect();
            poly.extend(
                layer
                    .iter()
                    .rev()
                    .map(|(x, lo, _)| px((*x, clamp_y(lo.max(by.0))))),
            );
            root.draw(&Polygon::new(poly, c.mix(0.55).filled()))?;
            let top: Vec<(i32, i32)> = layer.iter().map(|(x, _, hi)| px((*x, clamp_y(*hi)))).collect();
            root.draw(&PathElement::new(top, c.stroke_width(2)))?;
        }
        // Bars.
        let bars: Vec<usize> = (0..self.series.len())
            .filter(|i| self.series[*i].mark == Mark::Bar)
            .collect();
        let nb = bars.len().max(1) as f64;
        let base = if ys == Scale::Log {
            by.0
        } else {
            0.0f64.clamp(by.0, by.1)
        };
        for (j, &i) in bars.iter().enumerate() {
            let s = &self.series[i];
            let c = colour(i);
            for (k, (x, y)) in s.points.iter().enumerate() {
                if !finite(&(*x, *y), xs, ys) {
                    continue;
                }
                let xa = x - 0.4 + j as f64 * 0.8 / nb;
                let xb = xa + 0.8 / nb;
                let (a, b) = (px((xa, base)), px((xb, clamp_y(*y))));
                root.draw(&Rectangle::new(
                    [(a.0 + 1, a.1), (b.0 - 1, b.1)],
                    c.mix(0.85).filled(),
                ))?;
                if let Some((lo, hi)) = s.errors.as_ref().and_then(|e| e.get(k)) {
                    self.error_bar(root, &px, (xa + 0.4 / nb, *lo, *hi), by, RGBColor(30, 30, 30))?;
                }
            }
        }
        // Bands under lines.
        for (i, s) in self.series.iter().enumerate() {
            if let (Some(err), true) = (&s.errors, s.band) {
                let pts: Vec<((f64, f64), (f64, f64))> = s
                    .points
                    .iter()
                    .zip(err)
                    .filter(|(p, (lo, hi))| finite(p, xs, ys) && lo.is_finite() && hi.is_finite())
                    .map(|(p, e)| (*p, *e))
                    .collect();
                let mut poly: Vec<(i32, i32)> = pts.iter().map(|(p, e)| px((p.0, clamp_y(e.1)))).collect();
                poly.extend(pts.iter().rev().map(|(p, e)| px((p.0, clamp_y(e.0)))));
                if poly.len() >= 3 {
                    root.draw(&Polygon::new(poly, colour(i).mix(0.18).filled()))?;
                }
            }
        }
        // Lines, steps, points.
        let overlaid = self.overlaid();
        // Successive dashed overlays start their dashes 6 pixels apart.
        let phase = |i: usize| 6.0 * overlaid[..i].iter().filter(|o| **o).count() as f64;
        let dodge = self.dodge();
        for (i, s) in self.series.iter().enumerate() {
            let c = colour(i);
            let px = |p: (f64, f64)| {
                let (a, b) = px(p);
                (a + dodge[i], b)
            };
            let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(|p| finite(p, xs, ys)).collect();
            match s.mark {
                Mark::Bar | Mark::Area => continue,
                Mark::Line | Mark::Marked if overlaid[i] => {
                    dashed_from(
                        root,
                        pts.iter().map(|p| px((p.0, clamp_y(p.1)))).collect(),
                        c.stroke_width(2),
                        phase(i),
                    )?;
                }
                Mark::Line | Mark::Marked => {
                    let line: Vec<(i32, i32)> = pts.iter().map(|p| px((p.0, clamp_y(p.1)))).collect();
                    root.draw(&PathElement::new(line, c.stroke_width(2)))?;
                }
                Mark::Dashed => {
                    dashed(
                        root,
                        pts.iter().map(|p| px((p.0, clamp_y(p.1)))).collect(),
                        c.stroke_width(2),
                    )?;
                }
                Mark::Step => {
                    let mut st = Vec::with_capacity(2 * pts.len());
                    for (k, p) in pts.iter().enumerate() {
                        if k > 0 {
                            st.push(px((p.0, clamp_y(pts[k - 1].1))));
                        }
                        st.push(px((p.0, clamp_y(p.1))));
                    }
                    if overlaid[i] {
                        dashed_from(root, st, c.stroke_width(2), phase(i))?;
                    } else {
                        root.draw(&PathElement::new(st, c.stroke_width(2)))?;
                    }
                }
                Mark::Points => {}
            }
            if let (Some(err), false) = (&s.errors, s.band) {
                for (p, (lo, hi)) in s.points.iter().zip(err) {
                    if finite(p, xs, ys) {
                        self.error_bar(root, &px, (p.0, *lo, *hi), by, c)?;
                    }
                }
            }
            let (r, alpha) = match s.mark {
                Mark::Marked => (4, 1.0),
                // A line through one point draws nothing: mark the point.
                Mark::Line | Mark::Dashed | Mark::Step if pts.len() == 1 => (4, 1.0),
                Mark::Points if pts.len() > 400 => (2, 0.45),
                Mark::Points => (3, 0.8),
                _ => continue,
            };
            for p in pts.iter().filter(|p| inside(p)) {
                draw_marker(root, marker(i), px(*p), r, c.mix(alpha).into())?;
            }
        }
        // Reference lines.
        for (k, r) in self.refs.iter().enumerate() {
            let c = REF_COLOURS[k % REF_COLOURS.len()];
            let ends = if r.vertical {
                if !(r.value >= bx.0 && r.value <= bx.1) {
                    continue;
                }
                [px((r.value, by.0)), px((r.value, by.1))]
            } else {
                if !(r.value >= by.0 && r.value <= by.1) {
                    continue;
                }
                [px((bx.0, r.value)), px((bx.1, r.value))]
            };
            dashed(root, ends.to_vec(), c.stroke_width(2))?;
        }
        Ok(())
    }

    /// Pixels each series is moved sideways so the error bars of series sharing x values
    /// do not overlap (a dodge of 5 px per series, at most 48 px in all, centred); 0 for
    /// series without error bars, and for all when fewer than two have them.
    fn dodge(&self) -> Vec<i32> {
        let with: Vec<usize> = (0..self.series.len())
            .filter(|i| {
                let s = &self.series[*i];
                s.errors.is_some() && !s.band && !matches!(s.mark, Mark::Bar | Mark::Area)
            })
            .collect();
        let mut out = vec![0; self.series.len()];
        if with.len() < 2 {
            return out;
        }
        let step = (48.0 / (with.len() - 1) as f64).min(5.0);
        let mid = (with.len() - 1) as f64 / 2.0;
        for (j, i) in with.iter().enumerate() {
            out[*i] = ((j as f64 - mid) * step).round() as i32;
        }
        out
    }

    fn error_bar<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        px: &dyn Fn((f64, f64)) -> (i32, i32),
        (x, lo, hi): (f64, f64, f64),
        by: (f64, f64),
        c: RGBColor,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        if !(lo.is_finite() && hi.is_finite()) || (self.y_scale == Scale::Log && lo <= 0.0) {
            return Ok(());
        }
        let (a, b) = (px((x, lo.clamp(by.0, by.1))), px((x, hi.clamp(by.0, by.1))));
        let st = c.stroke_width(1);
        root.draw(&PathElement::new(vec![a, b], st))?;
        root.draw(&PathElement::new(vec![(a.0 - 4, a.1), (a.0 + 4, a.1)], st))?;
        root.draw(&PathElement::new(vec![(b.0 - 4, b.1), (b.0 + 4, b.1)], st))
    }

    fn draw_legend<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        lay: &Layout,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        if lay.legend.is_empty() {
            return Ok(());
        }
        let font = font(LEGEND_SIZE).into_font().color(&BLACK);
        let mut y = 14;
        let h: i32 = lay
            .legend
            .iter()
            .map(|(_, l)| l.len() as i32 * LEGEND_LINE + 6)
            .sum::<i32>()
            + 10;
        let w = i32::try_from(lay.legend_w).unwrap_or(200) - 8;
        area.draw(&Rectangle::new(
            [(0, 4), (w, 4 + h)],
            RGBColor(200, 200, 200).stroke_width(1),
        ))?;
        let overlaid = self.overlaid();
        for (entry, lines) in &lay.legend {
            let mid = y + LEGEND_LINE / 2;
            match *entry {
                Entry::Series(i) => {
                    let s = &self.series[i];
                    let c = colour(i);
                    match s.mark {
                        Mark::Bar | Mark::Area => {
                            area.draw(&Rectangle::new(
                                [(10, mid - 6), (36, mid + 6)],
                                c.mix(0.8).filled(),
                            ))?;
                        }
                        Mark::Dashed => {
                            dashed(area, vec![(8, mid), (38, mid)], c.stroke_width(2))?;
                            if s.points.len() == 1 {
                                draw_marker(area, marker(i), (23, mid), 4, c.into())?;
                            }
                        }
                        Mark::Points => draw_marker(area, marker(i), (23, mid), 3, c.into())?,
                        _ if overlaid[i] => {
                            dashed(area, vec![(8, mid), (38, mid)], c.stroke_width(2))?;
                            if s.mark == Mark::Marked || s.points.len() == 1 {
                                draw_marker(area, marker(i), (23, mid), 4, c.into())?;
                            }
                        }
                        _ => {
                            area.draw(&PathElement::new(vec![(8, mid), (38, mid)], c.stroke_width(2)))?;
                            if s.mark == Mark::Marked || s.points.len() == 1 {
                                draw_marker(area, marker(i), (23, mid), 4, c.into())?;
                            }
                        }
                    }
                    if s.errors.is_some() && !s.band && s.mark != Mark::Bar {
                        let st = c.stroke_width(1);
                        area.draw(&PathElement::new(vec![(23, mid - 7), (23, mid + 7)], st))?;
                    }
                }
                Entry::Ref(k) => {
                    let c = REF_COLOURS[k % REF_COLOURS.len()];
                    dashed(area, vec![(8, mid), (38, mid)], c.stroke_width(2))?;
                }
            }
            for (k, l) in lines.iter().enumerate() {
                area.draw(&Text::new(
                    l.clone(),
                    (46, y + k as i32 * LEGEND_LINE + 1),
                    font.clone(),
                ))?;
            }
            y += lines.len() as i32 * LEGEND_LINE + 6;
        }
        Ok(())
    }
}

/// An axis (linear or log) whose ticks are exactly the given points: `major` labelled
/// with bold grid lines, `minor` as light grid lines.
pub(crate) struct Keyed<R> {
    inner: R,
    major: Vec<f64>,
    minor: Vec<f64>,
}

impl Keyed<RangedCoordf64> {
    pub(crate) fn linear((a, b): (f64, f64), major: Vec<f64>, minor: Vec<f64>) -> Self {
        Self {
            inner: (a..b).into(),
            major,
            minor,
        }
    }
}

impl Keyed<LogCoord<f64>> {
    pub(crate) fn log((a, b): (f64, f64), major: Vec<f64>, minor: Vec<f64>) -> Self {
        Self {
            inner: (a..b).log_scale().into(),
            major,
            minor,
        }
    }
}

impl<R: Ranged<ValueType = f64>> Ranged for Keyed<R> {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(v, limit)
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.major.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> std::ops::Range<i32> {
        self.inner.axis_pixel_range(limit)
    }
}

/// A dashed polyline in pixel coordinates (7 px on, 5 px off).
fn dashed<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    pts: Vec<(i32, i32)>,
    style: ShapeStyle,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    dashed_from(area, pts, style, 0.0)
}

/// [`dashed`] starting `phase` pixels into the dash pattern (7 on, 5 off): two dashed
/// lines over the same path, started 6 pixels apart, show their dashes in turn.
fn dashed_from<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    pts: Vec<(i32, i32)>,
    style: ShapeStyle,
    phase: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (on, off) = (7.0, 5.0);
    let mut phase = phase.rem_euclid(on + off);
    for w in pts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (dx, dy) = (f64::from(b.0 - a.0), f64::from(b.1 - a.1));
        let len = (dx * dx + dy * dy).sqrt();
        if len == 0.0 {
            continue;
        }
        let mut t = 0.0;
        while t < len {
            let in_on = phase < on;
            // At least a tenth of a pixel per step, so float rounding cannot stall the walk.
            let left = if in_on { on - phase } else { on + off - phase }.max(0.1);
            let t1 = (t + left).min(len);
            if t1 <= t {
                break;
            }
            if in_on {
                let p = |s: f64| {
                    (
                        a.0 + (dx * s / len).round() as i32,
                        a.1 + (dy * s / len).round() as i32,
                    )
                };
                area.draw(&PathElement::new(vec![p(t), p(t1)], style))?;
            }
            phase = (phase + (t1 - t)) % (on + off);
            t = t1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_is_a_staircase_from_zero_to_one() {
        let s = Series::cdf("x", &[3.0, 1.0, f64::NAN, 2.0, 2.0]);
        assert_eq!(s.mark, Mark::Step);
        assert_eq!(s.points, vec![(1.0, 0.0), (1.0, 0.25), (2.0, 0.75), (3.0, 1.0)]);
        let many: Vec<f64> = (0..10_000).map(f64::from).collect();
        let pts = cdf_points(&many);
        assert!(pts.len() <= MAX_CDF_STEPS + 1);
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(pts.last().unwrap().1, 1.0);
    }

    fn svg(p: &Plot) -> String {
        p.to_svg().unwrap()
    }

    #[test]
    fn legend_sits_right_of_the_data_and_titles_name_the_figure() {
        let p = Plot::of("paper 000 Fig. 12a", "Bandwidth vs players", "players", "kbit/s")
            .with(Series::marked("worldmesh", vec![(9.0, 10.0), (400.0, 50.0)]))
            .with(Series::line("broadcast", vec![(9.0, 20.0), (400.0, 900.0)]))
            .with_hline("paper: 10", 10.0);
        let s = svg(&p);
        assert!(s.contains("paper 000 Fig. 12a: Bandwidth vs players"));
        // The legend text starts right of the plotting area's right edge.
        let x_of = |label: &str| -> i32 {
            let at = s.find(&format!(">\n{label}\n<")).unwrap();
            let tag = &s[s[..at].rfind("<text").unwrap()..at];
            let x = tag.split("x=\"").nth(1).unwrap();
            x[..x.find('"').unwrap()].parse().unwrap()
        };
        assert!(x_of("worldmesh") > i32::try_from(WIDTH - p.layout().legend_w).unwrap());
        assert!(x_of("broadcast") > i32::try_from(WIDTH - p.layout().legend_w).unwrap());
    }

    #[test]
    fn integer_axes_have_whole_labels_and_log_axes_decades() {
        let p = Plot::of("ours", "t", "nodes", "kbit/s").with(Series::marked(
            "a",
            (1..=10).map(|n| (f64::from(n), f64::from(n) * 1.5)).collect(),
        ));
        let s = svg(&p);
        assert!(!s.contains("\n1.0\n") && !s.contains("\n10.0\n"), "{s}");
        let mut l = p.clone().scales(Scale::Log, Scale::Log);
        l.series[0].points = vec![(1.0, 1.0), (1000.0, 2000.0)];
        let s = svg(&l);
        for d in ["1", "10", "100", "1000"] {
            assert_eq!(s.matches(&format!(">\n{d}\n<")).count(), 2, "{d} once per axis");
        }
        assert!(!s.contains("\n1000.0\n"));
    }

    #[test]
    fn a_line_over_an_earlier_one_is_dashed_and_markers_clear_the_frame() {
        let same: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), f64::from(i % 3))).collect();
        let mut other = same.clone();
        for p in other.iter_mut().skip(5) {
            p.1 += 10.0;
        }
        let p = Plot::of("paper 002 Fig. 6", "delays", "leaves", "ms")
            .with(Series::step("L-SA", same.clone()))
            .with(Series::step("BF", same.clone()))
            .with(Series::line("half the same", other))
            .with(Series::line("apart", vec![(0.0, 50.0), (9.0, 60.0)]))
            .with(Series::line("shares a point", vec![(0.0, 0.0), (9.0, 70.0)]));
        assert_eq!(p.overlaid(), [false, true, true, false, false]);
        // The dashed copy is drawn as many short segments, the solid one as one path.
        let solid = Plot::of("x", "t", "x", "y").with(Series::step("L-SA", same.clone()));
        let dashed = solid.clone().with(Series::step("BF", same));
        assert!(svg(&dashed).matches("<polyline").count() > svg(&solid).matches("<polyline").count() + 5);
        // Markers at x = 0 get room left of the y axis, and so do step CDFs (their rise at
        // 0 would be drawn on the axis); plain lines start on it.
        let m = Plot::of("x", "t", "PredTime (ms)", "kbit/s")
            .with(Series::marked("a", vec![(0.0, 1.0), (8.0, 2.0)]));
        let (bx, _) = m.data_bounds().unwrap();
        assert!(m.axis(bx, None, Scale::Linear, true, true).0.0 < 0.0);
        let c = Plot::of("x", "t", "missing", "fraction").with(Series::cdf("a", &[0.0, 0.0, 1.0, 3.0]));
        let (bx, _) = c.data_bounds().unwrap();
        assert!(c.axis(bx, None, Scale::Linear, true, true).0.0 < 0.0);
        let l = Plot::of("x", "t", "ms", "fraction").with(Series::line("a", vec![(0.0, 0.0), (8.0, 1.0)]));
        let (bx, _) = l.data_bounds().unwrap();
        assert_eq!(l.axis(bx, None, Scale::Linear, true, true).0.0, 0.0);
        // A line through a single point still shows it (as its marker).
        let lone = Plot::of("x", "t", "N", "kbit/s").with(Series::line("predicted", vec![(16.0, 5.0)]));
        let bare = Plot::of("x", "t", "N", "kbit/s").with(Series::line("predicted", vec![]));
        assert!(svg(&lone).len() > svg(&bare).len() + 40, "{}", svg(&lone));
    }

    #[test]
    fn draws_bars_areas_steps_and_errors() {
        let p = Plot::of("paper 003 Fig. 9", "load per server", "server", "players")
            .with_categories(["S1", "S2", "S3"])
            .with(Series::bars("before", &[10.0, 20.0, 30.0]).with_errors(vec![(9.0, 11.0); 3]))
            .with(Series::bars("after", &[15.0, 15.0, 15.0]));
        let s = svg(&p);
        assert!(s.contains("\nS2\n") && s.matches("<rect").count() >= 6);
        assert!(p.layout().legend_w > 0, "two bar series need their legend");
        let lone = Plot::of("paper 001 Fig. 5b", "diameter", "core choice", "ms")
            .with_categories(["random", "k-center"])
            .with(Series::bars("diameter", &[500.0, 400.0]));
        assert_eq!(
            lone.layout().legend_w,
            0,
            "one bar series over categories has none"
        );
        let a = Plot::of("paper 000 Fig. 9", "components", "nodes", "B/s")
            .with(Series::area("routing", vec![(8.0, 1.0), (16.0, 2.0)]))
            .with(Series::area("matching", vec![(8.0, 1.0), (16.0, 1.0)]));
        assert_eq!(
            a.data_bounds().unwrap().1,
            (0.0, 3.0),
            "stacked on top of each other"
        );
        assert!(svg(&a).contains("<polygon"));
        // Error bars of series at the same x are moved apart, centred on it.
        let e = |n: &str| {
            Series::marked(n, vec![(4.0, 1.0), (8.0, 2.0)]).with_errors(vec![(0.5, 1.5), (1.0, 3.0)])
        };
        let d = Plot::of("paper 000 Fig. 10", "latency", "nodes", "ms")
            .with(e("a"))
            .with(Series::line("no bars", vec![(4.0, 1.0)]))
            .with(e("b"))
            .with(e("c"));
        assert_eq!(d.dodge(), [-5, 0, 0, 5]);
        assert_eq!(Plot::of("x", "t", "n", "ms").with(e("a")).dodge(), [0]);
        let c = Plot::of("x", "cdf", "v", "fraction").with(Series::cdf("v", &[1.0, 2.0, 3.0]));
        assert!(svg(&c).contains("<polyline"));
    }
}
