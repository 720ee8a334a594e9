//! The map a load prediction is made for: a finite rectangle `[0, width] × [0, height]`
//! (paper `004` §3 assumes "a finite occupiable space"), axis-aligned obstacle boxes that
//! block line of sight, and an optional terrain height map (§5.1: Torque levels are tiled
//! height maps; the eye height is added to the terrain height at both ends of a ray).
//!
//! Obstacles are full-height walls: the model is 2-D (x, y), as in the paper's case study
//! ("enabling a two-dimensional treatment of the level", §5); the z extent of an
//! [`Aabb`] is ignored. A cell whose centre lies inside an obstacle is not occupiable.
//!
//! ## Map file (TOML)
//!
//! ```toml
//! # Map size in world units (the model game uses Quake units).
//! width = 4000
//! height = 3000
//!
//! # Any number of obstacle boxes; each blocks line of sight.
//! [[obstacle]]
//! min_x = 1000
//! min_y = 500
//! max_x = 1100
//! max_y = 2000
//!
//! # Optional terrain. rows[k] is the row at y = k * cell_size, left to right in x.
//! [height_map]
//! cell_size = 100
//! eye_height = 56      # added to the terrain height at both ends of a sight line
//! rows = [[0, 0, 10], [0, 40, 10]]
//! ```
//!
//! Every error names the file and line ([`LoadModelError`]).
//!
//! ## Generated maps
//!
//! `random:WxH:K:SEED` (see [`MapSpec`]) builds a `W × H` map with `K` random obstacles
//! (a mix of long thin walls and blocks) from `SEED`, so `worldmesh plan` runs without a
//! file; `empty:WxH` has no obstacles.

use crate::error::{LoadModelError, line_of, read_file, toml_error};
use serde::Deserialize;
use std::path::Path;
use worldmesh_core::{Aabb, DetRng, Point3};

/// Largest accepted map side, in world units (guards against absurd inputs).
pub const MAX_MAP_SIDE: f64 = 1.0e7;
/// Largest accepted number of obstacles.
pub const MAX_OBSTACLES: usize = 100_000;
/// Largest accepted number of height-map samples.
pub const MAX_HEIGHT_SAMPLES: usize = 16_000_000;

/// A terrain height map: `rows[y][x]` heights sampled on a square lattice of spacing
/// `cell_size` (sample `(x, y)` at world position `(x · cell_size, y · cell_size)`); the
/// height between samples is interpolated bilinearly, and clamped to the lattice's edge
/// outside it.
#[derive(Clone, Debug, PartialEq)]
pub struct HeightMap {
    /// Lattice spacing (world units).
    pub cell_size: f64,
    /// Height of an observer's eye above the terrain (§5.1 "the avatar's eye height was
    /// added to the terrain height").
    pub eye_height: f64,
    /// Samples per row (x direction).
    pub nx: usize,
    /// Rows (y direction).
    pub ny: usize,
    /// Heights, row-major (`heights[y * nx + x]`).
    pub heights: Vec<f64>,
}

impl HeightMap {
    /// Terrain height at `(x, y)` (bilinear between samples, clamped to the lattice).
    pub fn height_at(&self, x: f64, y: f64) -> f64 {
        let split = |v: f64, n: usize| -> (usize, usize, f64) {
            let f = (v / self.cell_size).clamp(0.0, (n - 1) as f64);
            let f = if f.is_nan() { 0.0 } else { f };
            let k = f.floor() as usize;
            (k, (k + 1).min(n - 1), f - k as f64)
        };
        let (x0, x1, tx) = split(x, self.nx);
        let (y0, y1, ty) = split(y, self.ny);
        let at = |xi: usize, yi: usize| self.heights[yi * self.nx + xi];
        let low = at(x0, y0) + tx * (at(x1, y0) - at(x0, y0));
        let high = at(x0, y1) + tx * (at(x1, y1) - at(x0, y1));
        low + ty * (high - low)
    }
}

/// A map: size, obstacles and optional terrain (paper `004` §3, §5.1).
#[derive(Clone, Debug, PartialEq)]
pub struct Map {
    /// Extent in x (world units); the map is `[0, width] × [0, height]`.
    pub width: f64,
    /// Extent in y (world units).
    pub height: f64,
    /// Obstacles; only x and y are used (full-height walls).
    pub obstacles: Vec<Aabb>,
    /// Optional terrain.
    pub height_map: Option<HeightMap>,
}

impl Map {
    /// A map with no obstacles and flat terrain.
    pub fn empty(width: f64, height: f64) -> Result<Self, LoadModelError> {
        check_side("width", width)?;
        check_side("height", height)?;
        Ok(Self {
            width,
            height,
            obstacles: Vec::new(),
            height_map: None,
        })
    }

    /// A map with the given obstacle boxes, each given as `(min_x, min_y, max_x, max_y)`.
    pub fn with_boxes(
        width: f64,
        height: f64,
        boxes: &[(f64, f64, f64, f64)],
    ) -> Result<Self, LoadModelError> {
        let mut m = Self::empty(width, height)?;
        for (k, &(x0, y0, x1, y1)) in boxes.iter().enumerate() {
            if ![x0, y0, x1, y1].iter().all(|v| v.is_finite()) || x0 > x1 || y0 > y1 {
                return Err(LoadModelError::spec(
                    format!("obstacle {k}: ({x0}, {y0})–({x1}, {y1})"),
                    "needs finite bounds with min ≤ max",
                ));
            }
            m.obstacles.push(flat_box(x0, y0, x1, y1));
        }
        Ok(m)
    }

    /// A map from obstacle boxes as the model game describes them (only x and y are
    /// used); every box must have finite bounds with `min ≤ max`.
    pub fn from_aabbs(width: f64, height: f64, boxes: &[Aabb]) -> Result<Self, LoadModelError> {
        let b: Vec<(f64, f64, f64, f64)> = boxes
            .iter()
            .map(|o| {
                (
                    f64::from(o.min.x),
                    f64::from(o.min.y),
                    f64::from(o.max.x),
                    f64::from(o.max.y),
                )
            })
            .collect();
        Self::with_boxes(width, height, &b)
    }

    /// True if `(x, y)` lies on the map and outside every obstacle (boundaries of an
    /// obstacle count as inside).
    pub fn is_free(&self, x: f64, y: f64) -> bool {
        (0.0..=self.width).contains(&x)
            && (0.0..=self.height).contains(&y)
            && !self.obstacles.iter().any(|b| {
                f64::from(b.min.x) <= x
                    && x <= f64::from(b.max.x)
                    && f64::from(b.min.y) <= y
                    && y <= f64::from(b.max.y)
            })
    }

    /// Parses a map file (format in the module docs); `source_name` labels errors.
    pub fn parse_toml(text: &str, source_name: &str) -> Result<Self, LoadModelError> {
        let file: MapFile = toml::from_str(text).map_err(|e| toml_error(text, source_name, &e))?;
        let invalid = |span: std::ops::Range<usize>, message: String| LoadModelError::Invalid {
            source_name: source_name.to_string(),
            line: line_of(text, span.start),
            message,
        };
        for (name, v) in [("width", &file.width), ("height", &file.height)] {
            if check_side(name, *v.get_ref()).is_err() {
                return Err(invalid(
                    v.span(),
                    format!(
                        "{name} = {} must be a finite number in (0, {MAX_MAP_SIDE}]",
                        v.get_ref()
                    ),
                ));
            }
        }
        if file.obstacle.len() > MAX_OBSTACLES {
            return Err(invalid(
                0..0,
                format!("{} obstacles; at most {MAX_OBSTACLES}", file.obstacle.len()),
            ));
        }
        let mut map = Map::empty(*file.width.get_ref(), *file.height.get_ref())?;
        for (k, o) in file.obstacle.iter().enumerate() {
            let b = o.get_ref();
            let vals = [b.min_x, b.min_y, b.max_x, b.max_y];
            if !vals.iter().all(|v| v.is_finite()) {
                return Err(invalid(
                    o.span(),
                    format!("obstacle {}: bounds must be finite", k + 1),
                ));
            }
            if b.min_x > b.max_x || b.min_y > b.max_y {
                return Err(invalid(
                    o.span(),
                    format!(
                        "obstacle {}: min ({}, {}) is not ≤ max ({}, {})",
                        k + 1,
                        b.min_x,
                        b.min_y,
                        b.max_x,
                        b.max_y
                    ),
                ));
            }
            map.obstacles.push(flat_box(b.min_x, b.min_y, b.max_x, b.max_y));
        }
        if let Some(h) = file.height_map {
            let hm = h.get_ref();
            let bad = |m: String| invalid(h.span(), format!("height_map: {m}"));
            if !(hm.cell_size.is_finite() && hm.cell_size > 0.0) {
                return Err(bad(format!("cell_size = {} must be positive", hm.cell_size)));
            }
            if !(hm.eye_height.is_finite() && hm.eye_height >= 0.0) {
                return Err(bad(format!("eye_height = {} must be ≥ 0", hm.eye_height)));
            }
            let ny = hm.rows.len();
            let nx = hm.rows.first().map_or(0, Vec::len);
            if nx == 0 || ny == 0 {
                return Err(bad("rows must hold at least one sample".into()));
            }
            if nx.saturating_mul(ny) > MAX_HEIGHT_SAMPLES {
                return Err(bad(format!("{nx}×{ny} samples; at most {MAX_HEIGHT_SAMPLES}")));
            }
            let mut heights = Vec::with_capacity(nx * ny);
            for (r, row) in hm.rows.iter().enumerate() {
                if row.len() != nx {
                    return Err(bad(format!(
                        "row {} has {} samples, row 1 has {nx}",
                        r + 1,
                        row.len()
                    )));
                }
                if let Some(v) = row.iter().find(|v| !v.is_finite()) {
                    return Err(bad(format!("row {} holds a non-finite height {v}", r + 1)));
                }
                heights.extend_from_slice(row);
            }
            map.height_map = Some(HeightMap {
                cell_size: hm.cell_size,
                eye_height: hm.eye_height,
                nx,
                ny,
                heights,
            });
        }
        Ok(map)
    }

    /// Loads a map file.
    pub fn load(path: &Path) -> Result<Self, LoadModelError> {
        let text = read_file(path)?;
        Self::parse_toml(&text, &path.display().to_string())
    }

    /// Builds a map from a spec string: `random:WxH:K:SEED`, `empty:WxH`, or otherwise
    /// the path of a map file.
    pub fn from_spec_or_file(spec: &str) -> Result<Self, LoadModelError> {
        match MapSpec::parse(spec)? {
            Some(s) => Ok(s.build()),
            None => Self::load(Path::new(spec)),
        }
    }
}

/// A generated map: `random:WxH:K:SEED` or `empty:WxH`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MapSpec {
    /// Width (world units).
    pub width: f64,
    /// Height (world units).
    pub height: f64,
    /// Number of random obstacles.
    pub obstacles: usize,
    /// Seed of the generator.
    pub seed: u64,
}

impl MapSpec {
    /// Parses `random:WxH:K:SEED` or `empty:WxH`; `Ok(None)` when `s` is neither (then it
    /// is a file name); an error when it starts with `random:`/`empty:` but is malformed.
    pub fn parse(s: &str) -> Result<Option<Self>, LoadModelError> {
        let (kind, rest) = match s.split_once(':') {
            Some((k @ ("random" | "empty"), r)) => (k, r),
            _ => return Ok(None),
        };
        let parts: Vec<&str> = rest.split(':').collect();
        let want = if kind == "random" { 3 } else { 1 };
        if parts.len() != want {
            return Err(LoadModelError::spec(
                s,
                "expected random:WIDTHxHEIGHT:OBSTACLES:SEED (e.g. random:4000x4000:40:1) or empty:WIDTHxHEIGHT",
            ));
        }
        let (w, h) = parts[0]
            .split_once(['x', 'X'])
            .ok_or_else(|| LoadModelError::spec(s, format!("`{}` is not WIDTHxHEIGHT", parts[0])))?;
        let num = |t: &str, what: &str| -> Result<f64, LoadModelError> {
            let v: f64 = t
                .trim()
                .parse()
                .map_err(|_| LoadModelError::spec(s, format!("{what} `{t}` is not a number")))?;
            check_side(what, v)
                .map_err(|_| LoadModelError::spec(s, format!("{what} {v} must be in (0, {MAX_MAP_SIDE}]")))?;
            Ok(v)
        };
        let (width, height) = (num(w, "width")?, num(h, "height")?);
        let (obstacles, seed) = if kind == "random" {
            let k: usize = parts[1].parse().map_err(|_| {
                LoadModelError::spec(s, format!("obstacle count `{}` is not a whole number", parts[1]))
            })?;
            if k > MAX_OBSTACLES {
                return Err(LoadModelError::spec(
                    s,
                    format!("at most {MAX_OBSTACLES} obstacles"),
                ));
            }
            let seed: u64 = parts[2]
                .parse()
                .map_err(|_| LoadModelError::spec(s, format!("seed `{}` is not a whole number", parts[2])))?;
            (k, seed)
        } else {
            (0, 0)
        };
        Ok(Some(Self {
            width,
            height,
            obstacles,
            seed,
        }))
    }

    /// Generates the map. Obstacles are, with equal odds, long thin walls (length 10–30%
    /// of the shorter side, thickness 1–2%) or blocks (5–12% of the shorter side per
    /// side), placed uniformly inside the map. Same spec ⇒ same map.
    pub fn build(&self) -> Map {
        let mut rng = DetRng::new(self.seed).fork(0x004d_4150);
        let s = self.width.min(self.height);
        let mut obstacles = Vec::with_capacity(self.obstacles);
        for _ in 0..self.obstacles {
            let (mut w, mut h) = if rng.chance(0.5) {
                (rng.range_f64(0.10, 0.30) * s, rng.range_f64(0.01, 0.02) * s)
            } else {
                (rng.range_f64(0.05, 0.12) * s, rng.range_f64(0.05, 0.12) * s)
            };
            if rng.chance(0.5) {
                std::mem::swap(&mut w, &mut h);
            }
            let (w, h) = (w.min(self.width), h.min(self.height));
            let x0 = rng.range_f64(0.0, self.width - w);
            let y0 = rng.range_f64(0.0, self.height - h);
            obstacles.push(flat_box(x0, y0, x0 + w, y0 + h));
        }
        Map {
            width: self.width,
            height: self.height,
            obstacles,
            height_map: None,
        }
    }
}

fn check_side(what: &str, v: f64) -> Result<(), LoadModelError> {
    if v.is_finite() && v > 0.0 && v <= MAX_MAP_SIDE {
        Ok(())
    } else {
        Err(LoadModelError::spec(
            format!("{what} = {v}"),
            format!("must be in (0, {MAX_MAP_SIDE}]"),
        ))
    }
}

/// A 2-D obstacle as a core [`Aabb`] (z spans everything: a full-height wall).
fn flat_box(x0: f64, y0: f64, x1: f64, y1: f64) -> Aabb {
    Aabb::from_corners(
        Point3::new(x0 as f32, y0 as f32, f32::MIN),
        Point3::new(x1 as f32, y1 as f32, f32::MAX),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    width: toml::Spanned<f64>,
    height: toml::Spanned<f64>,
    #[serde(default)]
    obstacle: Vec<toml::Spanned<ObstacleFile>>,
    #[serde(default)]
    height_map: Option<toml::Spanned<HeightMapFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObstacleFile {
    min_x: f64,
    min_y: f64,
    max_x: f64,
    max_y: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeightMapFile {
    cell_size: f64,
    #[serde(default)]
    eye_height: f64,
    rows: Vec<Vec<f64>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_map_file() {
        let text = "width = 400\nheight = 300.5\n[[obstacle]]\nmin_x = 10\nmin_y = 20\nmax_x = 30\nmax_y = 40\n\
                    [height_map]\ncell_size = 100\neye_height = 2\nrows = [[0, 1], [2, 3]]\n";
        let m = Map::parse_toml(text, "m.toml").unwrap();
        assert_eq!((m.width, m.height), (400.0, 300.5));
        assert_eq!(m.obstacles.len(), 1);
        assert_eq!((m.obstacles[0].min.x, m.obstacles[0].max.y), (10.0, 40.0));
        assert!(!m.is_free(20.0, 30.0) && m.is_free(50.0, 30.0) && !m.is_free(-1.0, 1.0));
        let hm = m.height_map.unwrap();
        assert_eq!((hm.nx, hm.ny, hm.eye_height), (2, 2, 2.0));
        assert_eq!(hm.height_at(100.0, 100.0), 3.0);
        assert_eq!(hm.height_at(-50.0, 120.0), 2.0);
        // Bilinear: halfway between all four samples is their mean.
        assert_eq!(hm.height_at(50.0, 50.0), 1.5);
        assert_eq!(hm.height_at(25.0, 0.0), 0.25);
    }

    fn err_line(text: &str) -> (usize, String) {
        match Map::parse_toml(text, "bad.toml").unwrap_err() {
            LoadModelError::Syntax { line, message, .. } | LoadModelError::Invalid { line, message, .. } => {
                (line, message)
            }
            e => panic!("unexpected error {e}"),
        }
    }

    #[test]
    fn bad_files_name_the_line() {
        let (line, msg) = err_line(
            "width = 100\nheight = 100\n\n[[obstacle]]\nmin_x = 50\nmin_y = 0\nmax_x = 10\nmax_y = 5\n",
        );
        assert_eq!(line, 4, "{msg}");
        assert!(msg.contains("obstacle 1"), "{msg}");
        let (line, msg) = err_line("width = 100\nheight = -3\n");
        assert_eq!(line, 2, "{msg}");
        let (line, msg) = err_line("width = 100\nheight = 100\nwidht = 3\n");
        assert_eq!(line, 3, "{msg}");
        let (line, _) = err_line("width = 100\nheight = \"tall\"\n");
        assert_eq!(line, 2);
        let (line, msg) =
            err_line("width = 100\nheight = 100\n[height_map]\ncell_size = 1\nrows = [[1, 2], [3]]\n");
        assert_eq!(line, 3);
        assert!(msg.contains("row 2"), "{msg}");
        let (_, msg) = err_line("height = 100\n");
        assert!(msg.contains("width"), "{msg}");
    }

    #[test]
    fn specs_build_deterministic_maps() {
        let s = MapSpec::parse("random:4000x3000:25:7").unwrap().unwrap();
        assert_eq!((s.width, s.height, s.obstacles, s.seed), (4000.0, 3000.0, 25, 7));
        let (a, b) = (s.build(), s.build());
        assert_eq!(a, b);
        assert_eq!(a.obstacles.len(), 25);
        assert!(
            a.obstacles
                .iter()
                .all(|o| o.min.x >= 0.0 && o.max.x <= 4000.0 && o.max.y <= 3000.0)
        );
        let again = Map::from_aabbs(a.width, a.height, &a.obstacles).unwrap();
        assert_eq!(again, a);
        let other = MapSpec { seed: 8, ..s }.build();
        assert_ne!(a, other);
        assert_eq!(MapSpec::parse("maps/level.toml").unwrap(), None);
        assert!(
            MapSpec::parse("empty:10x10")
                .unwrap()
                .unwrap()
                .build()
                .obstacles
                .is_empty()
        );
        for bad in [
            "random:4000:3:1",
            "random:4000x-1:3:1",
            "random:4000x100:many:1",
            "empty:axb",
        ] {
            assert!(
                matches!(MapSpec::parse(bad), Err(LoadModelError::Spec { .. })),
                "{bad}"
            );
        }
    }
}
