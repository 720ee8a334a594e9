//! Density maps (paper `004` §3.2, §4): how likely one object is to be in each cell.
//!
//! Collected maps: positions are polled at an interval during a steady state, each
//! position increments its cell's counter, and every counter is divided by the total, so
//! the map sums to 1 (`Σᵢ P(i, N) = 1`, §5.2) — [`DensityMap::from_samples`].
//!
//! Without a recorded trace the planner needs a model of where players stand:
//! - [`DensityMap::uniform`]: every occupiable cell equally likely;
//! - [`DensityMap::hotspots`]: a Zipf-weighted-waypoint model in the spirit of the model
//!   workload (paper `000` §4.1: waypoints with Zipf-like popularity): `K` hotspots at
//!   random free cells, hotspot `k` (1-based rank) has weight `k^(−s)` and spreads as a
//!   Gaussian of standard deviation `σ`; a share of the mass is spread uniformly so every
//!   free cell can be occupied.
//!
//! Density depends on the number of users (§3.2: "density maps for different values of
//! N are recommended"); [`DensitySeries`] holds maps for several N and interpolates
//! between them linearly or extrapolates with the largest one, as §3.2 describes.

use crate::error::LoadModelError;
use crate::grid::Grid;
use worldmesh_core::DetRng;

/// A normalized density map over a grid: `p[i]` = probability that one given object is
/// in cell `i`; the values sum to 1.
#[derive(Clone, Debug, PartialEq)]
pub struct DensityMap {
    /// The grid.
    pub grid: Grid,
    /// Probability per cell (sums to 1).
    pub p: Vec<f64>,
    /// Position samples the map was built from (0 for models).
    pub samples: usize,
}

/// Parameters of the hotspot (Zipf-weighted waypoint) density model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HotspotConfig {
    /// Number of hotspots `K`.
    pub count: usize,
    /// Zipf exponent `s`: hotspot of rank `k` has weight `k^(−s)`.
    pub zipf_s: f64,
    /// Standard deviation of the Gaussian spread around a hotspot (world units).
    pub spread: f64,
    /// Share of the mass spread uniformly over free cells (0–1).
    pub background: f64,
    /// Seed choosing the hotspot cells.
    pub seed: u64,
}

impl Default for HotspotConfig {
    /// 8 hotspots, `s = 1` (classic Zipf), σ = 300 units (a few AoI radii of Quake-like
    /// size), 10% background.
    fn default() -> Self {
        Self {
            count: 8,
            zipf_s: 1.0,
            spread: 300.0,
            background: 0.1,
            seed: 1,
        }
    }
}

impl DensityMap {
    /// Normalizes non-negative weights into a density map.
    pub fn from_weights(grid: Grid, weights: Vec<f64>, samples: usize) -> Result<Self, LoadModelError> {
        if weights.len() != grid.len() {
            return Err(LoadModelError::spec(
                format!("{} weights", weights.len()),
                format!("the grid has {} cells", grid.len()),
            ));
        }
        if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return Err(LoadModelError::spec("density weights", "must be finite and ≥ 0"));
        }
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return Err(LoadModelError::Empty(
                "density map: every cell has weight 0 (no free cell? a cell is free when its centre \
                 lies on the map and outside every obstacle)"
                    .into(),
            ));
        }
        let p = weights.into_iter().map(|w| w / total).collect();
        Ok(Self { grid, p, samples })
    }

    /// The collected density map of §3.2/§4: one count per position sample in its cell,
    /// normalized. Samples off the grid are ignored; returns the map and the number of
    /// ignored samples. Fails if no sample falls on the grid.
    pub fn from_samples(grid: Grid, samples: &[(f64, f64)]) -> Result<(Self, usize), LoadModelError> {
        let mut counts = vec![0.0; grid.len()];
        let mut off = 0;
        for &(x, y) in samples {
            match grid.cell_of(x, y) {
                Some(i) => counts[i] += 1.0,
                None => off += 1,
            }
        }
        let on = samples.len() - off;
        if on == 0 {
            return Err(LoadModelError::Empty(format!(
                "density map: none of {} position samples falls on the map",
                samples.len()
            )));
        }
        Ok((Self::from_weights(grid, counts, on)?, off))
    }

    /// Uniform density over the occupiable cells (`free[i]`).
    pub fn uniform(grid: Grid, free: &[bool]) -> Result<Self, LoadModelError> {
        let w = free.iter().map(|f| if *f { 1.0 } else { 0.0 }).collect();
        Self::from_weights(grid, w, 0)
    }

    /// The hotspot model (module docs) over the occupiable cells.
    pub fn hotspots(grid: Grid, free: &[bool], cfg: &HotspotConfig) -> Result<Self, LoadModelError> {
        if cfg.count == 0 || !(cfg.zipf_s.is_finite() && cfg.zipf_s >= 0.0) {
            return Err(LoadModelError::spec(
                format!("hotspots: count {} s {}", cfg.count, cfg.zipf_s),
                "needs count ≥ 1 and s ≥ 0",
            ));
        }
        if !(cfg.spread.is_finite() && cfg.spread > 0.0 && (0.0..=1.0).contains(&cfg.background)) {
            return Err(LoadModelError::spec(
                format!("hotspots: spread {} background {}", cfg.spread, cfg.background),
                "needs spread > 0 and background in [0, 1]",
            ));
        }
        let free_idx: Vec<usize> = (0..grid.len()).filter(|&i| free[i]).collect();
        if free_idx.is_empty() {
            return Err(LoadModelError::Empty(
                "density map: the map has no free cell (a cell is free when its centre lies on the map \
                 and outside every obstacle; try a smaller cell size)"
                    .into(),
            ));
        }
        let mut rng = DetRng::new(cfg.seed).fork(0x4807);
        let centres: Vec<((f64, f64), f64)> = (0..cfg.count)
            .map(|k| {
                let c = grid.center(free_idx[rng.index(free_idx.len())]);
                (c, ((k + 1) as f64).powf(-cfg.zipf_s))
            })
            .collect();
        let zsum: f64 = centres.iter().map(|c| c.1).sum();
        let two_var = 2.0 * cfg.spread * cfg.spread;
        // Per-hotspot normalization so that hotspot k holds exactly its Zipf share.
        let mut per_hotspot = Vec::with_capacity(centres.len());
        for &((cx, cy), _) in &centres {
            let mut w = vec![0.0; grid.len()];
            for &i in &free_idx {
                let (x, y) = grid.center(i);
                let d2 = (x - cx).powi(2) + (y - cy).powi(2);
                w[i] = (-d2 / two_var).exp();
            }
            per_hotspot.push(w);
        }
        let n_free = free_idx.len() as f64;
        let mut weights = vec![0.0; grid.len()];
        for &i in &free_idx {
            weights[i] = cfg.background / n_free;
        }
        for (w, &(_, z)) in per_hotspot.iter().zip(&centres) {
            let total: f64 = w.iter().sum();
            if total > 0.0 {
                for &i in &free_idx {
                    weights[i] += (1.0 - cfg.background) * (z / zsum) * w[i] / total;
                }
            }
        }
        Self::from_weights(grid, weights, 0)
    }

    /// Sum of the cell values (1 up to rounding).
    pub fn total(&self) -> f64 {
        self.p.iter().sum()
    }

    /// Largest cell value.
    pub fn peak(&self) -> f64 {
        self.p.iter().copied().fold(0.0, f64::max)
    }

    /// Draws `n` independent positions (cell centres) from the density; used to check
    /// predictions against placements (Monte Carlo).
    pub fn sample_cells(&self, n: usize, rng: &mut DetRng) -> Vec<usize> {
        let mut cdf = Vec::with_capacity(self.p.len());
        let mut acc = 0.0;
        for v in &self.p {
            acc += v;
            cdf.push(acc);
        }
        (0..n)
            .map(|_| {
                let u = rng.next_f64() * acc;
                cdf.partition_point(|c| *c <= u).min(self.p.len() - 1)
            })
            .collect()
    }
}

/// Density maps collected at several user counts (§3.2 "density maps for different
/// values of N are recommended").
#[derive(Clone, Debug, Default)]
pub struct DensitySeries {
    maps: Vec<(usize, DensityMap)>,
}

impl DensitySeries {
    /// One map valid for every N.
    pub fn single(map: DensityMap) -> Self {
        Self { maps: vec![(0, map)] }
    }

    /// Maps keyed by the user count they were collected at; all must share one grid.
    pub fn new(mut maps: Vec<(usize, DensityMap)>) -> Result<Self, LoadModelError> {
        maps.sort_by_key(|m| m.0);
        if maps.is_empty() {
            return Err(LoadModelError::Empty("no density map".into()));
        }
        if maps.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(LoadModelError::spec("density maps", "two maps for the same N"));
        }
        if maps.iter().any(|m| m.1.grid != maps[0].1.grid) {
            return Err(LoadModelError::spec("density maps", "maps must share one grid"));
        }
        Ok(Self { maps })
    }

    /// The grid shared by the maps.
    pub fn grid(&self) -> Grid {
        self.maps[0].1.grid
    }

    /// The maps with their N.
    pub fn maps(&self) -> &[(usize, DensityMap)] {
        &self.maps
    }

    /// The density for `n` users (§3.2): the collected map if there is one for `n`;
    /// between two collected counts, the cell-wise linear interpolation of the two
    /// nearest maps, each weighted by its distance in N ("the raw density maps for the
    /// closest two values of N are each weighted to their distance from the target
    /// value"); above the largest count, the largest map ("simple extrapolation"); below
    /// the smallest, the smallest. Interpolating normalized maps keeps the sum at 1.
    pub fn at(&self, n: usize) -> DensityMap {
        let first = &self.maps[0];
        let last = &self.maps[self.maps.len() - 1];
        if n <= first.0 {
            return first.1.clone();
        }
        if n >= last.0 {
            return last.1.clone();
        }
        let k = self.maps.partition_point(|m| m.0 <= n);
        let (lo, hi) = (&self.maps[k - 1], &self.maps[k]);
        if lo.0 == n {
            return lo.1.clone();
        }
        let w = (n - lo.0) as f64 / (hi.0 - lo.0) as f64;
        let p =
            lo.1.p
                .iter()
                .zip(&hi.1.p)
                .map(|(a, b)| (1.0 - w) * a + w * b)
                .collect();
        DensityMap {
            grid: lo.1.grid,
            p,
            samples: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn grid() -> Grid {
        Grid::new(10.0, 8, 5).unwrap()
    }

    #[test]
    fn collected_map_counts_and_normalizes() {
        let s = [(5.0, 5.0), (5.0, 5.0), (15.0, 5.0), (15.0, 45.0), (1000.0, 5.0)];
        let (d, off) = DensityMap::from_samples(grid(), &s).unwrap();
        assert_eq!((off, d.samples), (1, 4));
        assert_eq!(d.p[0], 0.5);
        assert_eq!(d.p[1], 0.25);
        assert_eq!(d.p[4 * 8 + 1], 0.25);
        assert!(matches!(
            DensityMap::from_samples(grid(), &[(-1.0, 0.0)]),
            Err(LoadModelError::Empty(_))
        ));
    }

    #[test]
    fn models_respect_obstacles_and_sum_to_one() {
        let g = grid();
        let mut free = vec![true; g.len()];
        free[3] = false;
        free[17] = false;
        let u = DensityMap::uniform(g, &free).unwrap();
        assert!((u.total() - 1.0).abs() < 1e-12);
        assert_eq!(u.p[3], 0.0);
        assert!((u.p[0] - 1.0 / 38.0).abs() < 1e-15);
        let h = DensityMap::hotspots(
            g,
            &free,
            &HotspotConfig {
                spread: 12.0,
                ..Default::default()
            },
        )
        .unwrap();
        assert!((h.total() - 1.0).abs() < 1e-12);
        assert_eq!((h.p[3], h.p[17]), (0.0, 0.0));
        assert!(h.p.iter().enumerate().all(|(i, v)| !free[i] || *v > 0.0));
        // Hotspots concentrate mass: the peak is far above uniform.
        assert!(h.peak() > 3.0 / 38.0);
        assert_eq!(
            h,
            DensityMap::hotspots(
                g,
                &free,
                &HotspotConfig {
                    spread: 12.0,
                    ..Default::default()
                }
            )
            .unwrap()
        );
    }

    #[test]
    fn series_interpolates_and_extrapolates() {
        let g = grid();
        let mut a = vec![0.0; g.len()];
        a[0] = 1.0;
        let mut b = vec![0.0; g.len()];
        b[1] = 1.0;
        let s = DensitySeries::new(vec![
            (20, DensityMap::from_weights(g, b, 1).unwrap()),
            (10, DensityMap::from_weights(g, a, 1).unwrap()),
        ])
        .unwrap();
        let m = s.at(13);
        assert!((m.p[0] - 0.7).abs() < 1e-12 && (m.p[1] - 0.3).abs() < 1e-12);
        assert_eq!(s.at(50).p[1], 1.0);
        assert_eq!(s.at(2).p[0], 1.0);
        assert_eq!(s.at(20).p[1], 1.0);
    }

    proptest! {
        #[test]
        fn density_sums_to_one(pts in proptest::collection::vec((0.0f64..80.0, 0.0f64..50.0), 1..200)) {
            let (d, off) = DensityMap::from_samples(grid(), &pts).unwrap();
            prop_assert_eq!(off, 0);
            prop_assert!((d.total() - 1.0).abs() < 1e-9);
            // Each cell holds exactly its share of the samples.
            for (i, v) in d.p.iter().enumerate() {
                let c = pts.iter().filter(|(x, y)| grid().cell_of(*x, *y) == Some(i)).count();
                prop_assert!((v - c as f64 / pts.len() as f64).abs() < 1e-12);
            }
        }
    }
}
