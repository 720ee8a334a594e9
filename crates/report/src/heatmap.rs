//! SVG heat maps of per-cell values over a grid (density and visibility maps, paper
//! `004` Fig. 3). Zero cells are white ("white represents no data points"); `NaN` cells
//! (obstacles, off the map) are grey; positive values go from dark blue to yellow, on a
//! linear or logarithmic scale, with a colour bar.

use crate::ReportError;
use plotters::prelude::*;
use std::path::Path;

/// A grid of `nx × ny` cells of side `cell_size`; `values[y * nx + x]`, row 0 at the
/// bottom.
#[derive(Clone, Debug, PartialEq)]
pub struct HeatMap {
    /// Chart title.
    pub title: String,
    /// Label of the colour bar (what a value means).
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
            title: title.into(),
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

    /// Renders the heat map to an SVG file.
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        let err = |e: &dyn std::fmt::Display| ReportError::Plot {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        if self.values.len() != self.nx * self.ny || self.nx == 0 || self.ny == 0 {
            return Err(err(&format!(
                "{} values for a {}×{} grid",
                self.values.len(),
                self.nx,
                self.ny
            )));
        }
        let map_w = 760u32;
        let map_h = ((f64::from(map_w) * self.ny as f64 / self.nx as f64).round() as u32).clamp(200, 1400);
        let root = SVGBackend::new(path, (map_w + 150, map_h + 90)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (main, bar) = root.split_horizontally(map_w + 40);
        let (w, h) = (self.nx as f64 * self.cell_size, self.ny as f64 * self.cell_size);
        let mut chart = ChartBuilder::on(&main)
            .caption(&self.title, ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..w, 0.0..h)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .disable_mesh()
            .draw()
            .map_err(|e| err(&e))?;
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
        chart.draw_series(cells).map_err(|e| err(&e))?;

        // Colour bar.
        let (blo, bhi) = if self.log { (lo.ln(), hi.ln()) } else { (0.0, hi) };
        let bhi = if bhi > blo { bhi } else { blo + 1.0 };
        let mut cb = ChartBuilder::on(&bar)
            .caption(&self.label, ("sans-serif", 13))
            .margin_top(40)
            .margin_bottom(38)
            .margin_right(8)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..1.0, blo..bhi)
            .map_err(|e| err(&e))?;
        let log = self.log;
        cb.configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .y_label_formatter(&|v| {
                let v = if log { v.exp() } else { *v };
                format!("{v:.3e}")
            })
            .draw()
            .map_err(|e| err(&e))?;
        let steps = 64;
        cb.draw_series((0..steps).map(|k| {
            let (a, b) = (
                blo + (bhi - blo) * k as f64 / steps as f64,
                blo + (bhi - blo) * (k + 1) as f64 / steps as f64,
            );
            Rectangle::new(
                [(0.0, a), (1.0, b)],
                ramp((k as f64 + 0.5) / steps as f64).filled(),
            )
        }))
        .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
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
