//! Load states (paper `004` §2.3): steady states `SteadyState(N)` with `N` logged-in
//! users, the transitions of a daily curve (users log in during the morning and out at
//! night), and peaks (content releases, special events). The planner evaluates each.
//!
//! ## Load-state file (TOML)
//!
//! ```toml
//! [[steady]]
//! name = "night"
//! players = 40
//!
//! [[steady]]
//! name = "day"
//! players = 200
//!
//! # Daily curve: (hour, players) points, hours in [0, 24] strictly increasing. The
//! # planner evaluates every point; `DailyCurve::players_at` interpolates linearly.
//! [daily]
//! points = [[0, 40], [8, 120], [12, 200], [20, 320], [23, 60]]
//!
//! [[peak]]
//! name = "content release"
//! players = 800
//! ```
//!
//! Every section is optional, but the file must name at least one state. Errors name
//! the file and line. §2.3 assumes `Load(N)` is non-decreasing in `N`; the predictions
//! make that checkable (they are non-decreasing in `N` for a fixed density).

use crate::error::{LoadModelError, line_of, read_file, toml_error};
use serde::Deserialize;
use std::path::Path;

/// Largest accepted user count of a load state.
pub const MAX_PLAYERS: usize = 1_000_000;

/// What kind of load state a state is.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum LoadKind {
    /// `SteadyState(N)`.
    Steady,
    /// A point of the daily curve, at an hour of the day.
    Daily {
        /// Hour of the day, in [0, 24].
        hour: f64,
    },
    /// A peak (special event).
    Peak,
}

impl std::fmt::Display for LoadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadKind::Steady => write!(f, "steady"),
            LoadKind::Daily { hour } => {
                let minutes = (hour * 60.0).round() as u32;
                write!(f, "daily {:02}:{:02}", minutes / 60, minutes % 60)
            }
            LoadKind::Peak => write!(f, "peak"),
        }
    }
}

/// One load state the planner evaluates.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LoadState {
    /// Name for reports.
    pub name: String,
    /// Number of logged-in users `N`.
    pub players: usize,
    /// Steady, daily point or peak.
    pub kind: LoadKind,
}

impl LoadState {
    /// `SteadyState(N)`.
    pub fn steady(players: usize) -> Self {
        Self {
            name: format!("SteadyState({players})"),
            players,
            kind: LoadKind::Steady,
        }
    }
}

/// A daily load curve: `(hour, players)` points, hours strictly increasing in [0, 24].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DailyCurve {
    /// The points.
    pub points: Vec<(f64, usize)>,
}

impl DailyCurve {
    /// Players at `hour`, linear between points and constant beyond the first and last.
    pub fn players_at(&self, hour: f64) -> f64 {
        let p = &self.points;
        match p.iter().position(|(h, _)| *h >= hour) {
            None => p.last().map_or(0.0, |x| x.1 as f64),
            Some(0) => p[0].1 as f64,
            Some(k) => {
                let ((h0, n0), (h1, n1)) = (p[k - 1], p[k]);
                let w = (hour - h0) / (h1 - h0);
                n0 as f64 + w * (n1 as f64 - n0 as f64)
            }
        }
    }
}

/// The load states of a plan.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LoadPlan {
    /// Every state to evaluate, in file order: steady states, daily points, peaks.
    pub states: Vec<LoadState>,
    /// The daily curve, if any.
    pub daily: Option<DailyCurve>,
}

impl LoadPlan {
    /// One steady state per user count.
    pub fn steady(players: &[usize]) -> Result<Self, LoadModelError> {
        if players.is_empty() {
            return Err(LoadModelError::Empty("no player count given".into()));
        }
        for &n in players {
            check_players(n).map_err(|why| LoadModelError::spec(format!("{n} players"), why))?;
        }
        Ok(Self {
            states: players.iter().map(|&n| LoadState::steady(n)).collect(),
            daily: None,
        })
    }

    /// Parses a load-state file (module docs).
    pub fn parse_toml(text: &str, source_name: &str) -> Result<Self, LoadModelError> {
        let file: PlanFile = toml::from_str(text).map_err(|e| toml_error(text, source_name, &e))?;
        let invalid = |span: std::ops::Range<usize>, message: String| LoadModelError::Invalid {
            source_name: source_name.to_string(),
            line: line_of(text, span.start),
            message,
        };
        let mut plan = LoadPlan::default();
        for (list, kind) in [(&file.steady, LoadKind::Steady), (&file.peak, LoadKind::Peak)] {
            for s in list {
                let st = s.get_ref();
                check_players(st.players)
                    .map_err(|why| invalid(s.span(), format!("players = {}: {why}", st.players)))?;
                plan.states.push(LoadState {
                    name: st
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("{kind}({})", st.players)),
                    players: st.players,
                    kind,
                });
            }
        }
        // Daily points go between steady states and peaks.
        let peaks = plan.states.split_off(file.steady.len());
        if let Some(d) = &file.daily {
            let pts = &d.get_ref().points;
            if pts.is_empty() {
                return Err(invalid(d.span(), "daily: points is empty".into()));
            }
            let mut last = f64::NEG_INFINITY;
            let mut curve = Vec::with_capacity(pts.len());
            for (k, &(h, n)) in pts.iter().enumerate() {
                if !(0.0..=24.0).contains(&h) || h <= last {
                    return Err(invalid(
                        d.span(),
                        format!(
                            "daily point {}: hour {h} must be in [0, 24] and after the previous point",
                            k + 1
                        ),
                    ));
                }
                check_players(n).map_err(|why| invalid(d.span(), format!("daily point {}: {why}", k + 1)))?;
                last = h;
                curve.push((h, n));
                let kind = LoadKind::Daily { hour: h };
                plan.states.push(LoadState {
                    name: format!("{kind}"),
                    players: n,
                    kind,
                });
            }
            plan.daily = Some(DailyCurve { points: curve });
        }
        plan.states.extend(peaks);
        if plan.states.is_empty() {
            return Err(LoadModelError::Invalid {
                source_name: source_name.to_string(),
                line: 1,
                message: "no load state: add [[steady]], [daily] or [[peak]]".into(),
            });
        }
        Ok(plan)
    }

    /// Loads a load-state file.
    pub fn load(path: &Path) -> Result<Self, LoadModelError> {
        let text = read_file(path)?;
        Self::parse_toml(&text, &path.display().to_string())
    }
}

fn check_players(n: usize) -> Result<(), String> {
    if (1..=MAX_PLAYERS).contains(&n) {
        Ok(())
    } else {
        Err(format!("must be between 1 and {MAX_PLAYERS}"))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    #[serde(default)]
    steady: Vec<toml::Spanned<StateFile>>,
    #[serde(default)]
    daily: Option<toml::Spanned<DailyFile>>,
    #[serde(default)]
    peak: Vec<toml::Spanned<StateFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    name: Option<String>,
    players: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DailyFile {
    points: Vec<(f64, usize)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[[steady]]\nname = \"night\"\nplayers = 40\n\n[daily]\npoints = [[0, 40], [8.5, 120], [20, 320]]\n\n\
                        [[peak]]\nplayers = 800\n";

    #[test]
    fn parses_states_in_order() {
        let p = LoadPlan::parse_toml(TEXT, "l.toml").unwrap();
        let got: Vec<(String, usize)> = p.states.iter().map(|s| (s.name.clone(), s.players)).collect();
        assert_eq!(
            got,
            vec![
                ("night".to_string(), 40),
                ("daily 00:00".to_string(), 40),
                ("daily 08:30".to_string(), 120),
                ("daily 20:00".to_string(), 320),
                ("peak(800)".to_string(), 800),
            ]
        );
        let d = p.daily.unwrap();
        assert_eq!(d.players_at(4.25), 80.0);
        assert_eq!(d.players_at(23.0), 320.0);
    }

    #[test]
    fn bad_files_name_the_line() {
        let cases = [
            ("[[steady]]\nplayers = 0\n", 1, "between 1"),
            (
                "[[steady]]\nplayers = 3\n[daily]\npoints = [[5, 1], [4, 2]]\n",
                3,
                "hour 4",
            ),
            ("[[steady]]\nplayers = 3\nplayerz = 4\n", 3, "unknown field"),
            ("[[peak]]\nplayers = \"many\"\n", 2, ""),
            ("# nothing\n", 1, "no load state"),
        ];
        for (text, line, what) in cases {
            let msg = LoadPlan::parse_toml(text, "l.toml").unwrap_err().to_string();
            assert!(msg.starts_with(&format!("l.toml:{line}:")), "{text:?}: {msg}");
            assert!(msg.contains(what), "{text:?}: {msg}");
        }
        assert!(LoadPlan::steady(&[]).is_err());
        assert!(LoadPlan::steady(&[10, 0]).is_err());
    }
}
