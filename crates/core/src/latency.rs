//! Round-trip-time matrices.
//!
//! A [`LatencyMatrix`] holds measured round-trip times in milliseconds between `n` hosts,
//! e.g. the 490 × 490 PlanetLab matrix shipped in `data/latency/`. Two text formats load:
//!
//! - *whitespace*: one row per line, values separated by spaces or tabs (the PlanetLab file);
//! - *CSV*: one row per line, values separated by commas.
//!
//! Lines that are empty or start with `#` are skipped. The matrix must be square with
//! finite, non-negative values. Every error names the source, the line and the column.
//! The parser never allocates more than [`MAX_HOSTS`]² entries, whatever the input says.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest matrix accepted (hosts per side): 10,000² × 4 bytes = 400 MB at most.
pub const MAX_HOSTS: usize = 10_000;

/// The largest round-trip time accepted, ms: a minute. No terrestrial or satellite path is
/// within two orders of magnitude of it (geostationary links are ~600 ms), and larger
/// finite values (`1e23`) overflow the delays computed from them.
pub const MAX_RTT_MS: f64 = 60_000.0;

/// The largest latency file read, bytes (256 MiB: about 7,000 hosts at 5 bytes a value).
/// Checked before reading, and the read itself stops there.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// A number as a person would write it: `1e23` rather than 24 digits.
struct Compact(f64);

impl fmt::Display for Compact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_finite() && self.0.abs() >= 1e6 {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// Why a latency matrix could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// The file could not be read.
    #[error("{path}: cannot read latency matrix: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A value is not a number.
    #[error("{source_name}:{line}:{column}: `{token}` is not a number")]
    NotANumber {
        /// File name or other description of the input.
        source_name: String,
        /// 1-based line.
        line: usize,
        /// 1-based column (value index within the row).
        column: usize,
        /// The offending text.
        token: String,
    },
    /// A value is NaN, infinite or negative.
    #[error("{source_name}:{line}:{column}: round-trip time {} is {why}", Compact(*value))]
    BadValue {
        /// File name or other description of the input.
        source_name: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The value.
        value: f64,
        /// "negative", "not finite" or above [`MAX_RTT_MS`].
        why: &'static str,
    },
    /// A row has the wrong number of values, or there are too many or too few rows.
    #[error("{source_name}:{line}: {what}")]
    Shape {
        /// File name or other description of the input.
        source_name: String,
        /// 1-based line (the last line for a missing row).
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error("{path}: latency matrix file is larger than {limit} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, bytes.
        limit: u64,
    },
    /// The input holds no rows.
    #[error("{source_name}: latency matrix is empty")]
    Empty {
        /// File name or other description of the input.
        source_name: String,
    },
    /// A latency source ([`load_spec`]) that does not parse.
    #[error("latency `{spec}`: {reason}")]
    Spec {
        /// The source as written.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// The PlanetLab matrix shipped with worldmesh: 490 hosts, round-trip times in ms (MIT
/// licence: `data/latency/LICENSE-planetlab`).
pub const PLANETLAB_490: &str = include_str!("../../../data/latency/planetlab-490.txt");

/// Hosts in a `uniform:` matrix (more nodes share rows, with access delays; BRIEF §4).
pub const MAX_UNIFORM_HOSTS: usize = 1024;

/// Resolves a latency source as the simulator and the real runtime's WAN shim name it:
/// `planetlab` (the shipped matrix), `uniform:RTT_MS` ([`MAX_UNIFORM_HOSTS`] hosts) or a
/// file path, optionally followed by `@median=MS` to rescale every RTT so the median is MS
/// (e.g. `planetlab@median=85` matches the 80–90 ms median of the King samples the
/// Colyseus evaluation used, paper `000` §4.1).
pub fn load_spec(spec: &str) -> Result<LatencyMatrix, LatencyError> {
    let bad = |reason: &str| LatencyError::Spec {
        spec: spec.to_owned(),
        reason: reason.to_owned(),
    };
    if let Some((base, median)) = spec.rsplit_once("@median=") {
        let target: f32 = median
            .parse()
            .ok()
            .filter(|v: &f32| v.is_finite() && *v > 0.0)
            .ok_or_else(|| bad("@median= needs a positive number of ms"))?;
        let m = load_spec(base)?;
        let current = m.median_rtt();
        if current <= 0.0 {
            return Err(bad("the matrix has a zero median"));
        }
        return Ok(m.scaled(target / current));
    }
    if spec == "planetlab" {
        return planetlab();
    }
    if let Some(rtt) = spec.strip_prefix("uniform:") {
        let v: f32 = rtt
            .parse()
            .ok()
            .filter(|v: &f32| v.is_finite() && *v >= 0.0 && f64::from(*v) <= MAX_RTT_MS)
            .ok_or_else(|| bad("expected uniform:RTT_MS with 0 <= RTT_MS <= 60000"))?;
        return Ok(LatencyMatrix::uniform(MAX_UNIFORM_HOSTS, v));
    }
    LatencyMatrix::load(spec)
}

/// The shipped PlanetLab matrix, parsed once per process and copied at every call:
/// parsing its 240,100 values takes about 97 M instructions (some 30 ms, a twentieth of a
/// 16-node simulation's wall time; `crates/sim/PERFORMANCE.md`, ninth round), copying
/// them under a millisecond, and an experiment builds dozens of worlds.
fn planetlab() -> Result<LatencyMatrix, LatencyError> {
    static PARSED: std::sync::OnceLock<Result<LatencyMatrix, String>> = std::sync::OnceLock::new();
    let parsed = PARSED.get_or_init(|| {
        LatencyMatrix::parse(PLANETLAB_490, MatrixFormat::Whitespace, "planetlab-490.txt")
            .map_err(|e| e.to_string())
    });
    match parsed {
        Ok(m) => Ok(m.clone()),
        Err(reason) => Err(LatencyError::Spec {
            spec: "planetlab".into(),
            reason: reason.clone(),
        }),
    }
}

/// Text format of a matrix file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MatrixFormat {
    /// Values separated by spaces/tabs.
    Whitespace,
    /// Values separated by commas.
    Csv,
}

/// A square matrix of round-trip times in milliseconds (row = from, column = to).
#[derive(Clone, PartialEq)]
pub struct LatencyMatrix {
    n: usize,
    rtt_ms: Vec<f32>,
}

impl fmt::Debug for LatencyMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LatencyMatrix({}x{})", self.n, self.n)
    }
}

impl LatencyMatrix {
    /// A matrix built from a function of (row, column); the diagonal is forced to zero.
    pub fn from_fn(n: usize, mut f: impl FnMut(usize, usize) -> f32) -> Self {
        let mut rtt_ms = Vec::with_capacity(n * n);
        for i in 0..n {
            for j in 0..n {
                rtt_ms.push(if i == j { 0.0 } else { f(i, j) });
            }
        }
        Self { n, rtt_ms }
    }

    /// A matrix where every off-diagonal entry is `rtt_ms`.
    pub fn uniform(n: usize, rtt_ms: f32) -> Self {
        Self::from_fn(n, |_, _| rtt_ms)
    }

    /// Loads a file; the format is CSV when the name ends in `.csv` or the first data line
    /// contains a comma, whitespace otherwise.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LatencyError> {
        use std::io::Read as _;
        let path = path.as_ref();
        let io = |source| LatencyError::Io {
            path: path.to_path_buf(),
            source,
        };
        let too_large = || LatencyError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_FILE_BYTES,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        if file.metadata().map_err(io)?.len() > MAX_FILE_BYTES {
            return Err(too_large());
        }
        // The size can change between the check and the read: the read is bounded too.
        let mut text = String::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(io)?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(too_large());
        }
        let is_csv = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"))
            || text
                .lines()
                .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .is_some_and(|l| l.contains(','));
        let format = if is_csv {
            MatrixFormat::Csv
        } else {
            MatrixFormat::Whitespace
        };
        Self::parse(&text, format, &path.display().to_string())
    }

    /// Parses text in the given format; `source_name` appears in error messages.
    pub fn parse(text: &str, format: MatrixFormat, source_name: &str) -> Result<Self, LatencyError> {
        let mut n = 0usize;
        let mut rows = 0usize;
        let mut rtt_ms: Vec<f32> = Vec::new();
        let mut last_line = 0;
        for (idx, raw) in text.lines().enumerate() {
            let line = idx + 1;
            last_line = line;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let tokens: Vec<&str> = match format {
                MatrixFormat::Whitespace => trimmed.split_whitespace().collect(),
                MatrixFormat::Csv => trimmed.split(',').map(str::trim).collect(),
            };
            if rows == 0 {
                n = tokens.len();
                if n > MAX_HOSTS {
                    return Err(LatencyError::Shape {
                        source_name: source_name.into(),
                        line,
                        what: format!("{n} columns: more than the {MAX_HOSTS} hosts accepted"),
                    });
                }
                rtt_ms.reserve_exact(n * n);
            } else if rows >= n {
                return Err(LatencyError::Shape {
                    source_name: source_name.into(),
                    line,
                    what: format!("extra row: the first row has {n} values, so {n} rows are expected"),
                });
            }
            if tokens.len() != n {
                return Err(LatencyError::Shape {
                    source_name: source_name.into(),
                    line,
                    what: format!(
                        "row has {} values, expected {n} (as in the first row)",
                        tokens.len()
                    ),
                });
            }
            for (c, tok) in tokens.iter().enumerate() {
                let value: f64 = tok.parse().map_err(|_| LatencyError::NotANumber {
                    source_name: source_name.into(),
                    line,
                    column: c + 1,
                    token: tok.chars().take(40).collect(),
                })?;
                let why = if !value.is_finite() {
                    Some("not finite")
                } else if value < 0.0 {
                    Some("negative")
                } else if value > MAX_RTT_MS {
                    Some("above the 60000 ms accepted")
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(LatencyError::BadValue {
                        source_name: source_name.into(),
                        line,
                        column: c + 1,
                        value,
                        why,
                    });
                }
                rtt_ms.push(value as f32);
            }
            rows += 1;
        }
        if rows == 0 {
            return Err(LatencyError::Empty {
                source_name: source_name.into(),
            });
        }
        if rows != n {
            return Err(LatencyError::Shape {
                source_name: source_name.into(),
                line: last_line,
                what: format!("{rows} rows but {n} columns: the matrix must be square"),
            });
        }
        Ok(Self { n, rtt_ms })
    }

    /// Number of hosts.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a 0 × 0 matrix.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Round-trip time from `i` to `j`, in milliseconds.
    ///
    /// # Panics
    /// If `i` or `j` is out of range (callers index hosts they know exist).
    pub fn rtt_ms(&self, i: usize, j: usize) -> f32 {
        self.rtt_ms[i * self.n + j]
    }

    /// One-way delay from `i` to `j`, taken as half the round-trip time (at most half of
    /// [`MAX_RTT_MS`], whatever a matrix built in code holds).
    pub fn one_way(&self, i: usize, j: usize) -> Duration {
        let rtt = f64::from(self.rtt_ms(i, j));
        let rtt = if rtt.is_finite() {
            rtt.clamp(0.0, MAX_RTT_MS)
        } else {
            MAX_RTT_MS
        };
        Duration::from_secs_f64(rtt / 2000.0)
    }

    /// The row of round-trip times from `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.rtt_ms[i * self.n..(i + 1) * self.n]
    }

    /// The sub-matrix on the given hosts (in that order).
    pub fn select(&self, hosts: &[usize]) -> LatencyMatrix {
        LatencyMatrix::from_fn(hosts.len(), |a, b| self.rtt_ms(hosts[a], hosts[b]))
    }

    /// Maps `nodes` simulated or emulated nodes onto rows of this matrix: distinct rows
    /// (a random draw without replacement) while there are enough, otherwise a draw with
    /// replacement (BRIEF §4). The simulator and the real driver's delay shim both use it,
    /// so a seed places nodes identically in both.
    pub fn map_nodes(&self, nodes: usize, rng: &mut crate::DetRng) -> Vec<usize> {
        let rows = self.n.max(1);
        if nodes <= rows {
            let mut all: Vec<usize> = (0..rows).collect();
            rng.shuffle(&mut all);
            all.truncate(nodes);
            all
        } else {
            (0..nodes).map(|_| rng.index(rows)).collect()
        }
    }

    /// The median off-diagonal round-trip time, ms (0 for fewer than two hosts).
    pub fn median_rtt(&self) -> f32 {
        let mut v: Vec<f32> = (0..self.n)
            .flat_map(|i| (0..self.n).filter(move |j| *j != i).map(move |j| (i, j)))
            .map(|(i, j)| self.rtt_ms(i, j))
            .collect();
        if v.is_empty() {
            return 0.0;
        }
        v.sort_by(f32::total_cmp);
        v[v.len() / 2]
    }

    /// The largest off-diagonal round-trip time, as [`Self::one_way`] applies it (at most
    /// [`MAX_RTT_MS`]; a value that is not finite counts as that); zero for fewer than two
    /// hosts.
    pub fn largest_round_trip(&self) -> Duration {
        let ms = (0..self.n)
            .flat_map(|i| (0..self.n).filter(move |j| *j != i).map(move |j| (i, j)))
            .map(|(i, j)| {
                let rtt = self.rtt_ms(i, j);
                if rtt.is_finite() {
                    rtt.clamp(0.0, MAX_RTT_MS as f32)
                } else {
                    MAX_RTT_MS as f32
                }
            })
            .fold(0.0, f32::max);
        Duration::from_secs_f64(f64::from(ms) / 1000.0)
    }

    /// Every round-trip time multiplied by `factor` (e.g. to give a matrix another median).
    pub fn scaled(&self, factor: f32) -> LatencyMatrix {
        LatencyMatrix {
            n: self.n,
            rtt_ms: self.rtt_ms.iter().map(|v| v * factor).collect(),
        }
    }

    /// Renders the matrix in the whitespace format (round-trips through [`Self::parse`]).
    pub fn to_whitespace_string(&self) -> String {
        let mut s = String::new();
        for i in 0..self.n {
            let row: Vec<String> = self.row(i).iter().map(|v| v.to_string()).collect();
            s.push_str(&row.join(" "));
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(t: &str) -> Result<LatencyMatrix, LatencyError> {
        LatencyMatrix::parse(t, MatrixFormat::Whitespace, "test.txt")
    }

    #[test]
    fn latency_sources_resolve_and_bad_ones_name_the_source() {
        assert_eq!(load_spec("planetlab").unwrap().len(), 490);
        let u = load_spec("uniform:80").unwrap();
        assert_eq!((u.len(), u.rtt_ms(0, 5)), (MAX_UNIFORM_HOSTS, 80.0));
        let s = load_spec("planetlab@median=85").unwrap();
        assert!((s.median_rtt() - 85.0).abs() < 0.01);
        assert_eq!(
            load_spec("uniform:-1").unwrap_err().to_string(),
            "latency `uniform:-1`: expected uniform:RTT_MS with 0 <= RTT_MS <= 60000"
        );
        assert_eq!(
            load_spec("planetlab@median=abc").unwrap_err().to_string(),
            "latency `planetlab@median=abc`: @median= needs a positive number of ms"
        );
        assert!(
            load_spec("uniform:0@median=5")
                .unwrap_err()
                .to_string()
                .contains("zero median")
        );
        let e = load_spec("/no/matrix.txt").unwrap_err().to_string();
        assert!(e.starts_with("/no/matrix.txt: cannot read"), "{e}");
    }

    /// The shipped matrix is parsed once and copied: every call gives what parsing the
    /// text gives, also after `@median=` rescaled a copy.
    #[test]
    fn the_shipped_matrix_is_the_parsed_text_at_every_call() {
        let parsed = LatencyMatrix::parse(PLANETLAB_490, MatrixFormat::Whitespace, "p").unwrap();
        assert_eq!(parsed.len(), 490);
        assert_eq!(load_spec("planetlab").unwrap(), parsed);
        let scaled = load_spec("planetlab@median=85").unwrap();
        assert_ne!(scaled, parsed);
        assert_eq!(load_spec("planetlab").unwrap(), parsed);
    }

    #[test]
    fn parses_whitespace_and_csv() {
        let m = ws("0 10\t20\n10 0 30\n\n# comment\n20 30 0\n").unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m.rtt_ms(1, 2), 30.0);
        assert_eq!(m.one_way(0, 2), Duration::from_millis(10));
        let c = LatencyMatrix::parse("0, 4\n4 ,0\n", MatrixFormat::Csv, "x.csv").unwrap();
        assert_eq!(c.rtt_ms(0, 1), 4.0);
        assert_eq!(ws(&m.to_whitespace_string()).unwrap(), m);
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = ws("0 1\n1 zero\n").unwrap_err().to_string();
        assert_eq!(e, "test.txt:2:2: `zero` is not a number");
        let e = ws("0 1\n1 -3\n").unwrap_err().to_string();
        assert!(
            e.starts_with("test.txt:2:2: round-trip time -3 is negative"),
            "{e}"
        );
        let e = ws("0 1\nNaN 0\n").unwrap_err().to_string();
        assert!(e.contains("test.txt:2:1") && e.contains("not finite"), "{e}");
        let e = ws("0 1\n1\n").unwrap_err().to_string();
        assert!(e.starts_with("test.txt:2: row has 1 values, expected 2"), "{e}");
        let e = ws("0 1\n1 0\n2 2\n").unwrap_err().to_string();
        assert!(e.contains("test.txt:3: extra row"), "{e}");
        let e = ws("0 1 2\n1 0 2\n").unwrap_err().to_string();
        assert!(e.contains("2 rows but 3 columns"), "{e}");
        assert!(matches!(ws("\n# nothing\n"), Err(LatencyError::Empty { .. })));
        let e = LatencyMatrix::load("/definitely/not/here.txt")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/definitely/not/here.txt: cannot read"), "{e}");
    }

    #[test]
    fn rtts_beyond_a_minute_are_refused_and_never_overflow_a_delay() {
        // `1e23` is finite, but half of it in seconds overflows a `Duration`.
        let e = ws("0 1e23\n1e23 0\n").unwrap_err().to_string();
        assert_eq!(
            e,
            "test.txt:1:2: round-trip time 1e23 is above the 60000 ms accepted"
        );
        assert!(ws("0 60000\n60000 0\n").is_ok(), "the bound itself is accepted");
        assert!(load_spec("uniform:60001").is_err());
        assert!(load_spec("uniform:1e30").is_err());
        // A matrix built in code is not checked; its delays are clamped instead.
        let m = LatencyMatrix::from_fn(2, |i, j| if i == j { 0.0 } else { f32::MAX });
        assert_eq!(m.one_way(0, 1), Duration::from_secs(30));
        let m = LatencyMatrix::from_fn(2, |_, _| f32::INFINITY);
        assert_eq!(m.one_way(0, 1), Duration::from_secs(30));
    }

    #[test]
    fn files_beyond_the_size_limit_are_refused_before_reading() {
        let path = std::env::temp_dir().join(format!("wm-latency-huge-{}.txt", std::process::id()));
        let f = std::fs::File::create(&path).unwrap();
        // Sparse: no disk space is used and nothing is read.
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let r = LatencyMatrix::load(&path);
        std::fs::remove_file(&path).unwrap();
        match r {
            Err(LatencyError::TooLarge { limit, .. }) => assert_eq!(limit, MAX_FILE_BYTES),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn median_and_scaling() {
        let m = ws("0 10 30\n10 0 20\n30 20 0\n").unwrap();
        assert_eq!(m.median_rtt(), 20.0);
        let s = m.scaled(0.5);
        assert_eq!((s.rtt_ms(0, 2), s.median_rtt()), (15.0, 10.0));
    }

    #[test]
    fn largest_round_trip_ignores_the_diagonal_and_caps_like_the_delays() {
        let m = ws("0 10 30\n10 0 20\n35 20 0\n").unwrap();
        assert_eq!(m.largest_round_trip(), Duration::from_millis(35));
        assert_eq!(
            LatencyMatrix::uniform(1, 0.0).largest_round_trip(),
            Duration::ZERO
        );
        // Built in code: a value past the cap or not finite counts as the cap, as in
        // `one_way`.
        let huge = LatencyMatrix::from_fn(2, |_, _| f32::INFINITY);
        assert_eq!(huge.largest_round_trip().as_secs_f64() * 1000.0, MAX_RTT_MS);
        assert_eq!(huge.one_way(0, 1).as_secs_f64() * 2000.0, MAX_RTT_MS);
    }

    #[test]
    fn maps_nodes_onto_distinct_rows_while_possible() {
        let m = LatencyMatrix::uniform(10, 1.0);
        let mut r = crate::DetRng::new(1);
        let mut rows = m.map_nodes(10, &mut r);
        rows.sort_unstable();
        assert_eq!(rows, (0..10).collect::<Vec<_>>());
        let many = m.map_nodes(25, &mut r);
        assert_eq!(many.len(), 25);
        assert!(many.iter().all(|x| *x < 10));
    }

    #[test]
    fn rejects_huge_first_row_before_allocating() {
        let row = "1 ".repeat(MAX_HOSTS + 1);
        assert!(matches!(ws(&row), Err(LatencyError::Shape { .. })));
    }

    #[test]
    fn loads_the_shipped_planetlab_matrix() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../data/latency/planetlab-490.txt"
        );
        let m = LatencyMatrix::load(path).unwrap();
        assert_eq!(m.len(), 490);
        assert_eq!(m.rtt_ms(0, 0), 0.0);
        assert!((m.rtt_ms(0, 1) - 0.175).abs() < 1e-6);
    }
}
