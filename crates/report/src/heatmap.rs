//! SVG heat maps of per-cell values over a grid (density and visibility maps, paper
//! `004` Fig. 3). Zero cells are white ("white represents no data points"); `NaN` cells
//! (obstacles, off the map) are grey; positive values go from dark blue to yellow, on a
//! linear or logarithmic scale, with a colour bar.

use crate::ReportError;
use crate::style::wrap;
use crate::ticks;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// A grid of `nx × ny` cells of side `cell_size`; `values[y * nx + x]`, row 0 at the
/// bottom.
#[derive(Clone, Debug, PartialEq)]
pub struct HeatMap {
    /// The paper and figure it reproduces ("paper 004 Fig. 3"), printed before the title.
    pub figure: String,
    /// Chart title.
    pub title: String,
    /// Label of both map axes, with units.
    pub axis_label: String,
    /// Label of the colour bar: what a value means, with its units.
    pub label: String,
    /// Columns.
    pub nx: usize,
    /// Rows.
    pub ny: usize,
    /// Cell side in world units (axis scale).
    pub cell_size: f64,
    /// Row-major values.
    pub values: Vec<f64>,
    /// Logarithmic colour scale.
    pub log: bool,
}

/// Colour stops from low to high (a viridis-like ramp).
const RAMP: [(u8, u8, u8); 5] = [
    (68, 1, 84),
    (59, 82, 139),
    (33, 145, 140),
    (94, 201, 98),
    (253, 231, 37),
];

fn ramp(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0) * (RAMP.len() - 1) as f64;
    let k = (t.floor() as usize).min(RAMP.len() - 2);
    let f = t - k as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + f * (f64::from(b) - f64::from(a))).round() as u8;
    let (a, b) = (RAMP[k], RAMP[k + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

impl HeatMap {
    /// A heat map with a linear scale.
    pub fn new(
        title: impl Into<String>,
        label: impl Into<String>,
        (nx, ny): (usize, usize),
        cell_size: f64,
        values: Vec<f64>,
    ) -> Self {
        Self {
            figure: String::new(),
            title: title.into(),
            axis_label: "world units".into(),
            label: label.into(),
            nx,
            ny,
            cell_size,
            values,
            log: false,
        }
    }

    /// Smallest and largest positive finite value (the colour range).
    pub fn range(&self) -> Option<(f64, f64)> {
        let mut it = self.values.iter().copied().filter(|v| v.is_finite() && *v > 0.0);
        let first = it.next()?;
        Some(it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
    }

    fn position(&self, v: f64, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            return 1.0;
        }
        if self.log {
            (v.ln() - lo.ln()) / (hi.ln() - lo.ln())
        } else {
            v / hi
        }
    }

    /// The title as printed: figure, then title.
    pub fn full_title(&self) -> String {
        if self.figure.is_empty() {
            self.title.clone()
        } else {
            format!("{}: {}", self.figure, self.title)
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.values.len() != self.nx * self.ny || self.nx == 0 || self.ny == 0 {
            return Err(format!(
                "{} values for a {}×{} grid",
                self.values.len(),
                self.nx,
                self.ny
            ));
        }
        Ok(())
    }

    /// Image size in pixels.
    pub fn size(&self) -> (u32, u32) {
        let map_w = 700u32;
        let map_h =
            ((f64::from(map_w) * self.ny as f64 / self.nx.max(1) as f64).round() as u32).clamp(200, 1400);
        (map_w + 260, map_h + 120)
    }

    /// Renders the heat map to an SVG file.
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        let err = |reason: String| ReportError::Plot {
            path: path.to_path_buf(),
            reason,
        };
        self.check().map_err(err)?;
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, self.size()).into_drawing_area();
            self.render(&root).map_err(err)?;
            root.present().map_err(|e| err(e.to_string()))?;
        }
        std::fs::write(path, s).map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Renders the heat map to a PNG file (needs a font: [`crate::raster::font`]).
    pub fn write_png(&self, path: &Path) -> Result<(), ReportError> {
        self.check().map_err(|reason| ReportError::Plot {
            path: path.to_path_buf(),
            reason,
        })?;
        crate::raster::write_png(path, self.size(), |root| self.render(root))
    }

    /// Draws the heat map and its colour bar on `root`.
    pub fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        self.check()?;
        let (w, _) = self.size();
        root.fill(&WHITE).map_err(e)?;
        let title = wrap(&self.full_title(), (f64::from(w) / (17.0 * 0.6)) as usize);
        for (i, line) in title.iter().enumerate() {
            root.draw(&Text::new(
                line.clone(),
                (i32::try_from(w / 2).unwrap_or(400), 8 + 22 * i as i32),
                crate::plot::font(17.0)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(e)?;
        }
        let (_, body) = root.split_vertically(12 + 22 * title.len() as u32);
        let (main, bar) = body.split_horizontally(w - 200);
        let (mw, mh) = (self.nx as f64 * self.cell_size, self.ny as f64 * self.cell_size);
        let xt = ticks::linear(0.0, mw, 8, false);
        let yt = ticks::linear(0.0, mh, 8, false);
        let mut chart = ChartBuilder::on(&main)
            .margin(8)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(
                crate::plot::Keyed::linear((0.0, mw), xt.major.clone(), Vec::new()),
                crate::plot::Keyed::linear((0.0, mh), yt.major.clone(), Vec::new()),
            )
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .label_style(crate::plot::font(13.0))
            .axis_desc_style(crate::plot::font(14.0))
            .x_label_formatter(&|v| xt.label(*v))
            .y_label_formatter(&|v| yt.label(*v))
            .x_desc(self.axis_label.as_str())
            .y_desc(self.axis_label.as_str())
            .draw()
            .map_err(e)?;
        let (lo, hi) = self.range().unwrap_or((1.0, 1.0));
        let cs = self.cell_size;
        let cells = self.values.iter().enumerate().filter_map(|(i, &v)| {
            let color = if v.is_nan() {
                RGBColor(200, 200, 200)
            } else if v > 0.0 {
                ramp(self.position(v, lo, hi))
            } else {
                return None;
            };
            let (x, y) = ((i % self.nx) as f64 * cs, (i / self.nx) as f64 * cs);
            Some(Rectangle::new([(x, y), (x + cs, y + cs)], color.filled()))
        });
        chart.draw_series(cells).map_err(e)?;

        // Colour bar: value ticks (decades on a log scale), the label with its units beside.
        let (blo, bhi) = if self.log {
            (lo, hi.max(lo * 1.0001))
        } else {
            (0.0, if hi > 0.0 { hi } else { 1.0 })
        };
        let bt = if self.log {
            ticks::log(blo, bhi, 7)
        } else {
            ticks::linear(blo, bhi, 7, false)
        };
        let (bw, bh) = bar.dim_in_pixel();
        let (top, bottom) = (30i32, i32::try_from(bh).unwrap_or(300) - 60);
        let (x0, x1) = (20i32, 44i32);
        let steps = 96;
        for k in 0..steps {
            let y_hi = bottom - (bottom - top) * (k + 1) / steps;
            let y_lo = bottom - (bottom - top) * k / steps;
            bar.draw(&Rectangle::new(
                [(x0, y_hi), (x1, y_lo)],
                ramp((f64::from(k) + 0.5) / f64::from(steps)).filled(),
            ))
            .map_err(e)?;
        }
        bar.draw(&Rectangle::new([(x0, top), (x1, bottom)], BLACK.stroke_width(1)))
            .map_err(e)?;
        let pos_of = |v: f64| -> f64 {
            if self.log {
                (v.ln() - blo.ln()) / (bhi.ln() - blo.ln())
            } else {
                (v - blo) / (bhi - blo)
            }
        };
        for v in &bt.major {
            let t = pos_of(*v);
            if !(-1e-9..=1.0 + 1e-9).contains(&t) {
                continue;
            }
            let y = bottom - ((f64::from(bottom - top)) * t).round() as i32;
            bar.draw(&PathElement::new(
                vec![(x1, y), (x1 + 5, y)],
                BLACK.stroke_width(1),
            ))
            .map_err(e)?;
            bar.draw(&Text::new(
                bt.label(*v),
                (x1 + 8, y),
                crate::plot::font(13.0)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(e)?;
        }
        let label = wrap(&self.label, 22);
        for (k, l) in label.iter().enumerate() {
            bar.draw(&Text::new(
                l.clone(),
                (8, bottom + 14 + 16 * k as i32),
                crate::plot::font(13.0).into_font().color(&BLACK),
            ))
            .map_err(e)?;
        }
        let _ = bw;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_cells_with_white_zeros_and_grey_gaps() {
        let dir = std::env::temp_dir().join(format!("wm-heatmap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h.svg");
        let mut hm = HeatMap::new(
            "Density",
            "P(i)",
            (3, 2),
            10.0,
            vec![0.0, 0.1, 0.2, f64::NAN, 0.3, 0.4],
        );
        assert_eq!(hm.range(), Some((0.1, 0.4)));
        hm.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("Density"));
        // Grey obstacle cell and the top of the ramp (the largest value) are drawn.
        assert!(svg.contains("#C8C8C8"), "grey cell missing");
        assert!(svg.contains("#FDE725"), "max colour missing");
        hm.log = true;
        hm.write_svg(&path).unwrap();
        hm.values.pop();
        assert!(hm.write_svg(&path).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn ramp_ends() {
        assert_eq!(ramp(0.0), RGBColor(68, 1, 84));
        assert_eq!(ramp(1.0), RGBColor(253, 231, 37));
        assert_eq!(ramp(7.0), RGBColor(253, 231, 37));
    }
}
