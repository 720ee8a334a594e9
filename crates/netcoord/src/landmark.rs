//! Landmark-based latency estimation (GNP / Netvigator-like; paper `001` §2.4 and §5).
//!
//! A few *landmark* hosts measure each other; every other host measures only the
//! landmarks (`L` probes per host instead of Vivaldi's continuous probing, §5: "a set of
//! landmark nodes L are probed … by N nodes (L · N probes)"). A central repository then
//! places everyone in the same space as Vivaldi (Euclidean plus height, [`Coordinate`]):
//!
//! 1. *Landmark choice*: farthest-first (start at the host with the largest mean RTT,
//!    then repeatedly the host farthest from the chosen ones) or uniformly at random.
//! 2. *Landmark fit*: minimize `Σ_{a≠b} ((d(a, b) − m(a, b)) / max(m(a, b), floor))²`
//!    over the landmarks' coordinates, `d` the height-vector distance and `m` the
//!    measured RTT (the squared *relative* error, as GNP does; the floor, 1 ms by
//!    default, keeps sub-millisecond pairs from dominating).
//! 3. *Host fit*: each host minimizes the same objective over its `L` measurements with
//!    the landmarks fixed.
//!
//! Both fits use normalized gradient descent with a "bold driver" step (grow 20% after an
//! improving step, halve and retry after a worsening one) from several deterministic
//! random starts, keeping the best. Netvigator itself refines this with traceroute
//! routers as extra landmarks, which we do not model (§6.3 calls its configuration a black
//! box).

use crate::coord::{CoordError, Coordinate, MAX_DIMS};
use worldmesh_core::DetRng;

/// How landmarks are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum LandmarkSelection {
    /// Farthest-first traversal (spread over the network).
    FarthestFirst,
    /// Uniformly at random.
    Random,
}

/// Parameters of the landmark method. The defaults (20 random landmarks, 8 dimensions plus
/// height, 4000 steps, 8 starts) were the most accurate of the settings tried on the
/// PlanetLab matrix (the `vivaldi` experiment compares others); farthest-first landmarks
/// did worse there, because they pick the most remote, least typical hosts.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct LandmarkConfig {
    /// Number of landmarks `L`.
    pub landmarks: usize,
    /// Euclidean dimensions.
    pub dims: usize,
    /// Fit a height per host (the height-vector model), or pure Euclidean.
    pub height: bool,
    /// How landmarks are chosen.
    pub selection: LandmarkSelection,
    /// Gradient steps per fit.
    pub iterations: usize,
    /// Random starts per fit (the best is kept).
    pub restarts: usize,
    /// Denominator floor (ms) of the relative error.
    pub floor_ms: f64,
}

impl Default for LandmarkConfig {
    fn default() -> Self {
        Self {
            landmarks: 20,
            dims: 8,
            height: true,
            selection: LandmarkSelection::Random,
            iterations: 4000,
            restarts: 8,
            floor_ms: 1.0,
        }
    }
}

/// Why a landmark fit is impossible.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LandmarkError {
    /// Not enough landmarks or hosts for the dimensions.
    #[error("need at least 2 landmarks and at most as many as hosts: {landmarks} landmarks, {hosts} hosts")]
    TooFewLandmarks {
        /// Landmarks requested.
        landmarks: usize,
        /// Hosts available.
        hosts: usize,
    },
    /// A measurement is not a finite non-negative RTT. Hosts are host indices in
    /// [`fit_all`], landmark-list indices in [`fit_landmarks`]; [`fit_host`] does not know
    /// the measuring host and reports `from = usize::MAX`.
    #[error("bad RTT measurement {rtt_ms} ms from host {from} to landmark {to}")]
    BadMeasurement {
        /// Measuring host.
        from: usize,
        /// Landmark (host index).
        to: usize,
        /// The value.
        rtt_ms: f64,
    },
    /// Measurements and landmark coordinates disagree in number.
    #[error("{measurements} measurements for {landmarks} landmarks")]
    LengthMismatch {
        /// Measurements given.
        measurements: usize,
        /// Landmarks known.
        landmarks: usize,
    },
    /// The configuration is unusable.
    #[error("bad landmark configuration: {0}")]
    Coord(#[from] CoordError),
}

/// Result of fitting every host.
#[derive(Clone, Debug)]
pub struct LandmarkFit {
    /// The landmark hosts, in choice order.
    pub landmarks: Vec<usize>,
    /// One coordinate per host (landmarks included).
    pub coords: Vec<Coordinate>,
    /// Probes each non-landmark host sends (= `L`).
    pub probes_per_host: usize,
    /// Probes among landmarks (`L · (L − 1)`).
    pub landmark_probes: usize,
}

/// Chooses `count` landmarks among `n` hosts.
pub fn select_landmarks(
    n: usize,
    rtt: &dyn Fn(usize, usize) -> f64,
    count: usize,
    selection: LandmarkSelection,
    rng: &mut DetRng,
) -> Vec<usize> {
    let count = count.min(n);
    match selection {
        LandmarkSelection::Random => {
            let mut all: Vec<usize> = (0..n).collect();
            rng.shuffle(&mut all);
            all.truncate(count);
            all
        }
        LandmarkSelection::FarthestFirst => {
            if count == 0 {
                return Vec::new();
            }
            let mean = |i: usize| (0..n).map(|j| rtt(i, j)).sum::<f64>();
            let first = (0..n)
                .max_by(|&a, &b| mean(a).total_cmp(&mean(b)).then(b.cmp(&a)))
                .unwrap_or(0);
            let mut chosen = vec![first];
            let mut near: Vec<f64> = (0..n).map(|j| rtt(first, j)).collect();
            while chosen.len() < count {
                let next = (0..n)
                    .filter(|j| !chosen.contains(j))
                    .max_by(|&a, &b| near[a].total_cmp(&near[b]).then(b.cmp(&a)))
                    .unwrap_or(0);
                chosen.push(next);
                for (j, d) in near.iter_mut().enumerate() {
                    *d = d.min(rtt(next, j));
                }
            }
            chosen
        }
    }
}

/// A point being optimized: components and height.
#[derive(Clone, Copy)]
struct Pt {
    x: [f64; MAX_DIMS],
    h: f64,
}

fn dist(a: &Pt, b: &Pt, dims: usize) -> (f64, f64) {
    let e = a.x[..dims]
        .iter()
        .zip(&b.x[..dims])
        .map(|(p, q)| (p - q) * (p - q))
        .sum::<f64>()
        .sqrt();
    (e, e + a.h + b.h)
}

/// Objective and gradient of one host against fixed anchors (or one landmark against the
/// others): `Σ ((d − m)/s)²`.
fn host_objective(p: &Pt, anchors: &[Pt], meas: &[f64], cfg: &LandmarkConfig, grad: Option<&mut Pt>) -> f64 {
    let dims = cfg.dims;
    let mut f = 0.0;
    let mut g = Pt {
        x: [0.0; MAX_DIMS],
        h: 0.0,
    };
    for (a, &m) in anchors.iter().zip(meas) {
        let (e, d) = dist(p, a, dims);
        let s = m.max(cfg.floor_ms);
        let r = (d - m) / s;
        f += r * r;
        let c = 2.0 * r / s;
        if e > 1e-12 {
            for k in 0..dims {
                g.x[k] += c * (p.x[k] - a.x[k]) / e;
            }
        }
        if cfg.height {
            g.h += c;
        }
    }
    if let Some(out) = grad {
        *out = g;
    }
    f
}

fn random_pt(rng: &mut DetRng, dims: usize, scale: f64) -> Pt {
    let mut p = Pt {
        x: [0.0; MAX_DIMS],
        h: 0.0,
    };
    for v in p.x[..dims].iter_mut() {
        *v = rng.range_f64(-scale, scale);
    }
    p
}

/// Bold-driver normalized gradient descent over a vector of points.
fn descend(
    pts: &mut [Pt],
    cfg: &LandmarkConfig,
    scale: f64,
    objective: &dyn Fn(&[Pt], &mut [Pt]) -> f64,
) -> f64 {
    let dims = cfg.dims;
    let mut grad = vec![
        Pt {
            x: [0.0; MAX_DIMS],
            h: 0.0
        };
        pts.len()
    ];
    let mut f = objective(pts, &mut grad);
    let mut step = scale / 10.0;
    let mut trial = pts.to_vec();
    let mut trial_grad = grad.clone();
    for _ in 0..cfg.iterations {
        let norm = grad
            .iter()
            .map(|g| g.x[..dims].iter().map(|v| v * v).sum::<f64>() + g.h * g.h)
            .sum::<f64>()
            .sqrt();
        if norm < 1e-15 || step < 1e-6 {
            break;
        }
        for ((t, p), g) in trial.iter_mut().zip(pts.iter()).zip(&grad) {
            for k in 0..dims {
                t.x[k] = p.x[k] - step * g.x[k] / norm;
            }
            t.h = if cfg.height {
                (p.h - step * g.h / norm).max(0.0)
            } else {
                0.0
            };
        }
        let ft = objective(&trial, &mut trial_grad);
        if ft < f {
            pts.copy_from_slice(&trial);
            std::mem::swap(&mut grad, &mut trial_grad);
            f = ft;
            step *= 1.2;
        } else {
            step *= 0.5;
        }
    }
    f
}

/// Fits coordinates for the landmarks from their mutual RTTs `m(a, b)` (indices into
/// the landmark list), best of `cfg.restarts` random starts.
pub fn fit_landmarks(
    l: usize,
    m: &dyn Fn(usize, usize) -> f64,
    cfg: &LandmarkConfig,
    rng: &mut DetRng,
) -> Result<Vec<Coordinate>, LandmarkError> {
    Coordinate::origin(cfg.dims, 0.0)?;
    let mut meas = vec![0.0; l * l];
    let mut scale: f64 = 1.0;
    for a in 0..l {
        for b in 0..l {
            if a != b {
                let v = m(a, b);
                if !(v.is_finite() && v >= 0.0) {
                    return Err(LandmarkError::BadMeasurement {
                        from: a,
                        to: b,
                        rtt_ms: v,
                    });
                }
                meas[a * l + b] = v;
                scale = scale.max(v);
            }
        }
    }
    let dims = cfg.dims;
    // Exact gradient of Σ over ordered pairs: each term moves both of its points.
    let objective = |pts: &[Pt], grad: &mut [Pt]| -> f64 {
        for g in grad.iter_mut() {
            *g = Pt {
                x: [0.0; MAX_DIMS],
                h: 0.0,
            };
        }
        let mut total = 0.0;
        for a in 0..l {
            for b in 0..l {
                if a == b {
                    continue;
                }
                let mv = meas[a * l + b];
                let (e, d) = dist(&pts[a], &pts[b], dims);
                let s = mv.max(cfg.floor_ms);
                let r = (d - mv) / s;
                total += r * r;
                let c = 2.0 * r / s;
                if e > 1e-12 {
                    for k in 0..dims {
                        let u = c * (pts[a].x[k] - pts[b].x[k]) / e;
                        grad[a].x[k] += u;
                        grad[b].x[k] -= u;
                    }
                }
                if cfg.height {
                    grad[a].h += c;
                    grad[b].h += c;
                }
            }
        }
        total
    };
    let mut best: Option<(f64, Vec<Pt>)> = None;
    for _ in 0..cfg.restarts.max(1) {
        let mut pts: Vec<Pt> = (0..l).map(|_| random_pt(rng, cfg.dims, scale / 2.0)).collect();
        let f = descend(&mut pts, cfg, scale, &objective);
        if best.as_ref().is_none_or(|(bf, _)| f < *bf) {
            best = Some((f, pts));
        }
    }
    let pts = best.map(|(_, p)| p).unwrap_or_default();
    pts.iter()
        .map(|p| Ok(Coordinate::new(&p.x[..cfg.dims], p.h, 0.0, 0.0)?))
        .collect()
}

/// Fits one host from its RTTs `meas[l]` to the landmarks at `landmarks[l]`.
pub fn fit_host(
    meas: &[f64],
    landmarks: &[Coordinate],
    cfg: &LandmarkConfig,
    rng: &mut DetRng,
) -> Result<Coordinate, LandmarkError> {
    if meas.len() != landmarks.len() {
        return Err(LandmarkError::LengthMismatch {
            measurements: meas.len(),
            landmarks: landmarks.len(),
        });
    }
    for (l, &v) in meas.iter().enumerate() {
        if !(v.is_finite() && v >= 0.0) {
            return Err(LandmarkError::BadMeasurement {
                from: usize::MAX,
                to: l,
                rtt_ms: v,
            });
        }
    }
    let dims = cfg.dims;
    let anchors: Vec<Pt> = landmarks
        .iter()
        .map(|c| {
            if c.dims() != dims {
                return Err(LandmarkError::Coord(CoordError::DimensionMismatch {
                    expected: dims,
                    got: c.dims(),
                }));
            }
            let mut p = Pt {
                x: [0.0; MAX_DIMS],
                h: c.height(),
            };
            p.x[..dims].copy_from_slice(c.components());
            Ok(p)
        })
        .collect::<Result<_, _>>()?;
    let scale = meas.iter().copied().fold(1.0, f64::max);
    let objective =
        |pts: &[Pt], grad: &mut [Pt]| host_objective(&pts[0], &anchors, meas, cfg, Some(&mut grad[0]));
    let nearest = (0..meas.len())
        .min_by(|&a, &b| meas[a].total_cmp(&meas[b]))
        .unwrap_or(0);
    let mut best: Option<(f64, Pt)> = None;
    for r in 0..cfg.restarts.max(1) {
        // First start: next to the nearest landmark; others: random.
        let mut p = random_pt(rng, dims, if r == 0 { 1.0 } else { scale / 2.0 });
        if r == 0 && !anchors.is_empty() {
            for k in 0..dims {
                p.x[k] += anchors[nearest].x[k];
            }
        }
        let mut v = [p];
        let f = descend(&mut v, cfg, scale, &objective);
        if best.as_ref().is_none_or(|(bf, _)| f < *bf) {
            best = Some((f, v[0]));
        }
    }
    let p = best.map(|(_, p)| p).unwrap_or(Pt {
        x: [0.0; MAX_DIMS],
        h: 0.0,
    });
    Ok(Coordinate::new(&p.x[..dims], p.h, 0.0, 0.0)?)
}

/// Runs the whole method over `n` hosts whose RTTs are `rtt(i, j)`: choose landmarks, fit
/// them, fit every other host from its `L` measurements (`rtt(host, landmark)`).
pub fn fit_all(
    n: usize,
    rtt: &dyn Fn(usize, usize) -> f64,
    cfg: &LandmarkConfig,
    seed: u64,
) -> Result<LandmarkFit, LandmarkError> {
    if cfg.landmarks < 2 || cfg.landmarks > n {
        return Err(LandmarkError::TooFewLandmarks {
            landmarks: cfg.landmarks,
            hosts: n,
        });
    }
    let root = DetRng::new(seed);
    let mut rng = root.fork(1);
    let landmarks = select_landmarks(n, rtt, cfg.landmarks, cfg.selection, &mut rng);
    let l = landmarks.len();
    let lm_coords = fit_landmarks(l, &|a, b| rtt(landmarks[a], landmarks[b]), cfg, &mut root.fork(2))
        .map_err(|e| match e {
            LandmarkError::BadMeasurement { from, to, rtt_ms } => LandmarkError::BadMeasurement {
                from: landmarks[from],
                to: landmarks[to],
                rtt_ms,
            },
            other => other,
        })?;
    let mut coords = Vec::with_capacity(n);
    for host in 0..n {
        if let Some(pos) = landmarks.iter().position(|&x| x == host) {
            coords.push(lm_coords[pos]);
            continue;
        }
        let meas: Vec<f64> = landmarks.iter().map(|&lm| rtt(host, lm)).collect();
        let c = fit_host(&meas, &lm_coords, cfg, &mut root.fork(100 + host as u64)).map_err(|e| match e {
            LandmarkError::BadMeasurement { to, rtt_ms, .. } => LandmarkError::BadMeasurement {
                from: host,
                to: landmarks[to],
                rtt_ms,
            },
            other => other,
        })?;
        coords.push(c);
    }
    Ok(LandmarkFit {
        landmarks,
        coords,
        probes_per_host: l,
        landmark_probes: l * (l - 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::{ErrorSummary, pair_errors};

    #[test]
    fn farthest_first_starts_at_the_ends_of_a_line() {
        let rtt = |i: usize, j: usize| (i as f64 - j as f64).abs() * 10.0;
        let mut rng = DetRng::new(1);
        let l = select_landmarks(10, &rtt, 3, LandmarkSelection::FarthestFirst, &mut rng);
        assert_eq!(&l[..2], &[0, 9]);
        assert!(l[2] == 4 || l[2] == 5, "{l:?}");
        let r = select_landmarks(10, &rtt, 4, LandmarkSelection::Random, &mut rng);
        assert_eq!(r.len(), 4);
        let mut s = r.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn recovers_a_euclidean_geometry_with_heights() {
        // 36 hosts on a 6×6 grid (15 ms apart) with access links of 1–5 ms.
        let h = |i: usize| 1.0 + (i % 5) as f64;
        let rtt = move |i: usize, j: usize| {
            if i == j {
                return 0.0;
            }
            let (xi, yi, xj, yj) = ((i % 6) as f64, (i / 6) as f64, (j % 6) as f64, (j / 6) as f64);
            15.0 * ((xi - xj).powi(2) + (yi - yj).powi(2)).sqrt() + h(i) + h(j)
        };
        let cfg = LandmarkConfig {
            landmarks: 8,
            dims: 2,
            iterations: 3000,
            restarts: 4,
            ..Default::default()
        };
        let fit = fit_all(36, &rtt, &cfg, 3).unwrap();
        assert_eq!((fit.probes_per_host, fit.landmark_probes), (8, 56));
        let e = pair_errors(36, rtt, |i, j| fit.coords[i].distance_ms(&fit.coords[j]).unwrap());
        let s = ErrorSummary::of_pairs(&e);
        assert!(s.median < 0.03 && s.p90 < 0.1, "{s:?}");
    }

    #[test]
    fn bad_input_is_rejected() {
        let rtt = |i: usize, j: usize| if i == j { 0.0 } else { 10.0 };
        let cfg = LandmarkConfig {
            landmarks: 1,
            dims: 2,
            ..Default::default()
        };
        assert!(matches!(
            fit_all(5, &rtt, &cfg, 1),
            Err(LandmarkError::TooFewLandmarks { .. })
        ));
        let cfg = LandmarkConfig {
            landmarks: 6,
            dims: 2,
            ..Default::default()
        };
        assert!(matches!(
            fit_all(5, &rtt, &cfg, 1),
            Err(LandmarkError::TooFewLandmarks { .. })
        ));
        let cfg = LandmarkConfig {
            landmarks: 3,
            dims: 2,
            iterations: 50,
            restarts: 1,
            ..Default::default()
        };
        let nan = |i: usize, j: usize| {
            if i == j {
                0.0
            } else if i == 4 {
                f64::NAN
            } else {
                10.0
            }
        };
        let e = fit_all(5, &nan, &cfg, 1);
        assert!(
            matches!(e, Err(LandmarkError::BadMeasurement { from: 4, .. })),
            "{e:?}"
        );
        let lm = vec![Coordinate::origin(2, 0.0).unwrap(); 3];
        let mut rng = DetRng::new(1);
        assert!(matches!(
            fit_host(&[1.0, 2.0], &lm, &cfg, &mut rng),
            Err(LandmarkError::LengthMismatch { .. })
        ));
        let lm3 = vec![Coordinate::origin(3, 0.0).unwrap(); 2];
        assert!(matches!(
            fit_host(&[1.0, 2.0], &lm3, &cfg, &mut rng),
            Err(LandmarkError::Coord(CoordError::DimensionMismatch { .. }))
        ));
        let cfg0 = LandmarkConfig { dims: 0, ..cfg };
        assert!(matches!(
            fit_all(5, &rtt, &cfg0, 1),
            Err(LandmarkError::Coord(CoordError::UnsupportedDims { .. }))
        ));
    }
}
