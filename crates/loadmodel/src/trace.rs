//! Recorded position traces, the raw data of density maps (paper `004` §4: "the process
//! records the positions and types of every object at a specific interval, such as one
//! second").
//!
//! ## Trace file (CSV)
//!
//! One position record per line, fields separated by commas:
//!
//! ```text
//! time_s,object_kind,x,y
//! 0.0,avatar,1032.5,220.0
//! 0.0,missile,400.0,80.25
//! 0.1,avatar,1040.0,221.5
//! ```
//!
//! - `time_s`: seconds since the start of the recording, finite, ≥ 0, non-decreasing
//!   down the file (a snapshot is all the records with one time);
//! - `object_kind`: a non-empty name without commas (`avatar`, `missile`, …), so that
//!   object types can be kept in separate density maps (§3.2);
//! - `x`, `y`: position in world units.
//!
//! The header line is optional; blank lines and lines starting with `#` are skipped.
//! Every error names the file and line.

use crate::error::{LoadModelError, read_file};
use std::collections::BTreeMap;
use std::path::Path;

/// The header line of a trace file.
pub const TRACE_HEADER: &str = "time_s,object_kind,x,y";

/// One position record.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRecord {
    /// Seconds since the start of the recording.
    pub time_s: f64,
    /// Index of the object kind in [`Trace::kinds`].
    pub kind: usize,
    /// x position.
    pub x: f64,
    /// y position.
    pub y: f64,
}

/// A recorded trace: position records in time order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Object kind names, in order of first appearance.
    pub kinds: Vec<String>,
    /// The records.
    pub records: Vec<TraceRecord>,
}

/// How often to sample each object kind (§4: positions are recorded "at a specific
/// interval"; §3.2: per object type).
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    /// Interval for kinds not listed in `per_kind` (seconds; 0 keeps every snapshot).
    pub default_interval_s: f64,
    /// Interval per kind name.
    pub per_kind: BTreeMap<String, f64>,
}

impl Default for Sampling {
    /// One sample per second, as in the paper's user studies (§5.1: "1 Hz samples").
    fn default() -> Self {
        Self {
            default_interval_s: 1.0,
            per_kind: BTreeMap::new(),
        }
    }
}

impl Trace {
    /// Parses trace text (format in the module docs); `source_name` labels errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, LoadModelError> {
        let mut trace = Trace::default();
        let mut kind_ids: BTreeMap<String, usize> = BTreeMap::new();
        let mut last_t = 0.0;
        for (idx, raw) in text.lines().enumerate() {
            let line = idx + 1;
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') || (trace.records.is_empty() && l == TRACE_HEADER) {
                continue;
            }
            let syntax = |message: String| LoadModelError::Syntax {
                source_name: source_name.to_string(),
                line,
                message,
            };
            let fields: Vec<&str> = l.split(',').map(str::trim).collect();
            if fields.len() != 4 {
                return Err(syntax(format!(
                    "expected 4 fields `{TRACE_HEADER}`, found {}",
                    fields.len()
                )));
            }
            let num = |k: usize, what: &str| -> Result<f64, LoadModelError> {
                let v: f64 = fields[k]
                    .parse()
                    .map_err(|_| syntax(format!("{what} `{}` is not a number", fields[k])))?;
                if v.is_finite() {
                    Ok(v)
                } else {
                    Err(syntax(format!("{what} `{}` is not finite", fields[k])))
                }
            };
            let t = num(0, "time_s")?;
            let (x, y) = (num(2, "x")?, num(3, "y")?);
            let invalid = |message: String| LoadModelError::Invalid {
                source_name: source_name.to_string(),
                line,
                message,
            };
            if t < 0.0 {
                return Err(invalid(format!("time_s {t} is negative")));
            }
            if t < last_t {
                return Err(invalid(format!(
                    "time_s {t} is earlier than the previous record's {last_t}; records must be in time order"
                )));
            }
            last_t = t;
            if fields[1].is_empty() {
                return Err(invalid("object_kind is empty".into()));
            }
            let next = kind_ids.len();
            let kind = *kind_ids.entry(fields[1].to_string()).or_insert_with(|| {
                trace.kinds.push(fields[1].to_string());
                next
            });
            trace.records.push(TraceRecord {
                time_s: t,
                kind,
                x,
                y,
            });
        }
        Ok(trace)
    }

    /// Loads a trace file.
    pub fn load(path: &Path) -> Result<Self, LoadModelError> {
        let text = read_file(path)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Positions of the selected kinds (all kinds when `kinds` is empty), keeping for each
    /// kind only the snapshots at least its interval apart: a snapshot at time `t` is
    /// kept if `t ≥` the previous kept snapshot of that kind plus the interval. Unknown
    /// kind names are an error.
    pub fn sample(&self, kinds: &[&str], sampling: &Sampling) -> Result<Vec<(f64, f64)>, LoadModelError> {
        let mut wanted = vec![kinds.is_empty(); self.kinds.len()];
        for k in kinds {
            match self.kinds.iter().position(|n| n == k) {
                Some(i) => wanted[i] = true,
                None => {
                    return Err(LoadModelError::spec(
                        *k,
                        format!(
                            "no such object kind in the trace (kinds: {})",
                            self.kinds.join(", ")
                        ),
                    ));
                }
            }
        }
        let interval: Vec<f64> = self
            .kinds
            .iter()
            .map(|k| *sampling.per_kind.get(k).unwrap_or(&sampling.default_interval_s))
            .collect();
        // Time of the snapshot being kept (per kind) and the earliest next one.
        let mut kept_at: Vec<Option<f64>> = vec![None; self.kinds.len()];
        let mut next_due = vec![f64::NEG_INFINITY; self.kinds.len()];
        let mut out = Vec::new();
        for r in &self.records {
            if !wanted[r.kind] {
                continue;
            }
            if kept_at[r.kind] == Some(r.time_s) {
                out.push((r.x, r.y));
            } else if r.time_s >= next_due[r.kind] {
                kept_at[r.kind] = Some(r.time_s);
                next_due[r.kind] = r.time_s + interval[r.kind];
                out.push((r.x, r.y));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "time_s,object_kind,x,y\n# a comment\n0,avatar,1,2\n0,avatar,3,4\n0,missile,5,6\n\
                        0.5,avatar,7,8\n0.5,missile,9,10\n1.0,avatar,11,12\n1.0,avatar,13,14\n";

    #[test]
    fn parses_and_samples_per_kind() {
        let t = Trace::parse(TEXT, "t.csv").unwrap();
        assert_eq!(t.kinds, vec!["avatar", "missile"]);
        assert_eq!(t.records.len(), 7);
        let all = t.sample(&[], &Sampling::default()).unwrap();
        // avatar snapshots at 0 and 1.0 (0.5 is too early); missile at 0 only.
        assert_eq!(
            all,
            vec![(1.0, 2.0), (3.0, 4.0), (5.0, 6.0), (11.0, 12.0), (13.0, 14.0)]
        );
        let mut s = Sampling {
            default_interval_s: 0.0,
            ..Default::default()
        };
        s.per_kind.insert("avatar".into(), 10.0);
        let av = t.sample(&["avatar"], &s).unwrap();
        assert_eq!(av, vec![(1.0, 2.0), (3.0, 4.0)]);
        assert_eq!(t.sample(&["missile"], &s).unwrap(), vec![(5.0, 6.0), (9.0, 10.0)]);
        assert!(t.sample(&["tank"], &s).is_err());
    }

    #[test]
    fn bad_lines_are_named() {
        let cases = [
            ("0,avatar,1\n", 1, "4 fields"),
            ("0,avatar,1,2\n1,avatar,x,2\n", 2, "not a number"),
            ("1,avatar,1,2\n0.5,avatar,1,2\n", 2, "time order"),
            ("-1,avatar,1,2\n", 1, "negative"),
            ("\n0,,1,2\n", 2, "empty"),
            ("0,avatar,NaN,2\n", 1, "not finite"),
        ];
        for (text, want, what) in cases {
            let e = Trace::parse(text, "t.csv").unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("t.csv:{want}:")), "{text:?}: {msg}");
            assert!(msg.contains(what), "{text:?}: {msg}");
        }
    }
}
