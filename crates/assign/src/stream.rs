//! A stream of join/leave events as JSON lines, applied to an [`Assigner`]: the input format
//! of `worldmesh assign`, reusable by an admission service (paper `002` §3: the
//! authentication server receives each joining player's measured delays and runs CMA-J;
//! it runs CMA-L on each leave).
//!
//! One JSON object per line; blank lines and lines starting with `#` are skipped:
//!
//! ```text
//! {"join": "alice", "delays": [12.5, 40, 81.2]}   delays in ms to mirrors 0, 1, 2
//! {"join": 7, "node": 42}                         delays looked up for node 42
//! {"leave": "alice"}
//! ```
//!
//! Player names are strings or integers (an integer `7` and a string `"7"` are the same
//! player). `node` needs a node table ([`Session::with_node_table`]). Every error carries
//! the 1-based line number; a failed line changes nothing.

use crate::{AssignError, Assigner, Move, PlayerId, Stats};
use std::collections::HashMap;

/// Longest line accepted, in bytes.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Why a line of the event stream was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StreamError {
    /// Not valid JSON, or not an event object of the documented shape.
    #[error("line {line}: malformed event: {why}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// A leave names a player who never joined.
    #[error("line {line}: unknown player `{player}` (never joined)")]
    UnknownPlayer {
        /// 1-based line number.
        line: usize,
        /// The name.
        player: String,
    },
    /// A leave names a player who has already left.
    #[error("line {line}: player `{player}` is not connected (already left)")]
    Absent {
        /// 1-based line number.
        line: usize,
        /// The name.
        player: String,
    },
    /// A join names a player who is connected.
    #[error("line {line}: duplicate join: player `{player}` is already connected")]
    DuplicateJoin {
        /// 1-based line number.
        line: usize,
        /// The name.
        player: String,
    },
    /// Every mirror is full.
    #[error(
        "line {line}: infeasible: all mirrors are full (total capacity {capacity}), cannot place `{player}`"
    )]
    AllFull {
        /// 1-based line number.
        line: usize,
        /// The name.
        player: String,
        /// Total capacity.
        capacity: u64,
    },
    /// The assigner refused the event for another reason (bad delay, wrong row length…).
    #[error("line {line}: {source}")]
    Rejected {
        /// 1-based line number.
        line: usize,
        /// The reason.
        source: AssignError,
    },
}

/// What one event did, with players named as in the input.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Applied {
    /// 1-based input line.
    pub line: usize,
    /// `"join"` or `"leave"`.
    pub event: &'static str,
    /// The joining or leaving player.
    pub player: String,
    /// Mirror joined, or mirror left.
    pub mirror: usize,
    /// Other players re-assigned by this event.
    pub moved: Vec<NamedMove>,
    /// The assignment's totals after the event.
    pub stats: Stats,
}

/// A [`Move`] with the player's input name.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NamedMove {
    /// Player name.
    pub player: String,
    /// Mirror before.
    pub from: usize,
    /// Mirror after.
    pub to: usize,
}

enum Parsed {
    Join { player: String, delays: Delays },
    Leave { player: String },
}

enum Delays {
    Ms(Vec<f64>),
    Node(u64),
}

/// An [`Assigner`] driven by named events.
#[derive(Clone, Debug)]
pub struct Session {
    assigner: Assigner,
    ids: HashMap<String, PlayerId>,
    names: Vec<String>,
    node_table: Option<(usize, Vec<f64>)>,
}

impl Session {
    /// A session over an (usually empty) assigner.
    pub fn new(assigner: Assigner) -> Self {
        Self {
            assigner,
            ids: HashMap::new(),
            names: Vec::new(),
            node_table: None,
        }
    }

    /// Enables `"node": k` joins: `table` is row-major `nodes × m` delays in ms.
    pub fn with_node_table(mut self, table: Vec<f64>) -> Self {
        let m = self.assigner.mirrors();
        self.node_table = Some((table.len() / m, table));
        self
    }

    /// The assignment.
    pub fn assigner(&self) -> &Assigner {
        &self.assigner
    }

    /// The input name of a player.
    pub fn name(&self, id: PlayerId) -> &str {
        self.names.get(id.0 as usize).map_or("?", String::as_str)
    }

    /// Connected players with their mirrors, by input name.
    pub fn assignment(&self) -> Vec<(String, usize)> {
        self.assigner
            .players()
            .map(|(id, m)| (self.name(id).to_owned(), m))
            .collect()
    }

    /// Parses and applies line `line` (1-based) of the stream; `Ok(None)` for blank and
    /// comment lines.
    pub fn apply_line(&mut self, line: usize, text: &str) -> Result<Option<Applied>, StreamError> {
        let Some(ev) = parse(line, text)? else {
            return Ok(None);
        };
        match ev {
            Parsed::Join { player, delays } => self.join(line, player, delays).map(Some),
            Parsed::Leave { player } => self.leave(line, player).map(Some),
        }
    }

    fn named(&self, moved: Vec<Move>) -> Vec<NamedMove> {
        moved
            .into_iter()
            .map(|m| NamedMove {
                player: self.name(m.player).to_owned(),
                from: m.from,
                to: m.to,
            })
            .collect()
    }

    fn join(&mut self, line: usize, player: String, delays: Delays) -> Result<Applied, StreamError> {
        let m = self.assigner.mirrors();
        let row: Vec<f64> = match delays {
            Delays::Ms(v) => v,
            Delays::Node(k) => {
                let Some((nodes, table)) = &self.node_table else {
                    return Err(StreamError::Malformed {
                        line,
                        why: "`node` given but no latency matrix was loaded (use `delays`)".into(),
                    });
                };
                if k >= *nodes as u64 {
                    return Err(StreamError::Malformed {
                        line,
                        why: format!("node {k} is out of range (the matrix has {nodes} nodes)"),
                    });
                }
                table[k as usize * m..(k as usize + 1) * m].to_vec()
            }
        };
        let id = match self.ids.get(&player) {
            Some(&id) => id,
            None => PlayerId(self.names.len() as u64),
        };
        let out = match self.assigner.join_ms(id, &row) {
            Ok(o) => o,
            Err(AssignError::DuplicateJoin(_)) => {
                return Err(StreamError::DuplicateJoin { line, player });
            }
            Err(AssignError::AllFull { capacity, .. }) => {
                return Err(StreamError::AllFull {
                    line,
                    player,
                    capacity,
                });
            }
            Err(source) => return Err(StreamError::Rejected { line, source }),
        };
        if id.0 as usize == self.names.len() {
            self.names.push(player.clone());
            self.ids.insert(player.clone(), id);
        }
        let moved = self.named(out.moved);
        Ok(Applied {
            line,
            event: "join",
            player,
            mirror: out.mirror,
            moved,
            stats: self.assigner.stats(),
        })
    }

    fn leave(&mut self, line: usize, player: String) -> Result<Applied, StreamError> {
        let Some(&id) = self.ids.get(&player) else {
            return Err(StreamError::UnknownPlayer { line, player });
        };
        let out = match self.assigner.leave(id) {
            Ok(o) => o,
            Err(AssignError::NotConnected(_)) => return Err(StreamError::Absent { line, player }),
            Err(source) => return Err(StreamError::Rejected { line, source }),
        };
        let moved = self.named(out.moved);
        Ok(Applied {
            line,
            event: "leave",
            player,
            mirror: out.mirror,
            moved,
            stats: self.assigner.stats(),
        })
    }
}

fn parse(line: usize, text: &str) -> Result<Option<Parsed>, StreamError> {
    let bad = |why: String| StreamError::Malformed { line, why };
    if text.len() > MAX_LINE_BYTES {
        return Err(bad(format!("line is longer than {MAX_LINE_BYTES} bytes")));
    }
    let t = text.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_str(t).map_err(|e| bad(format!("not JSON: {e}")))?;
    let serde_json::Value::Object(obj) = v else {
        return Err(bad("expected a JSON object".into()));
    };
    let name = |key: &str| -> Result<String, StreamError> {
        match &obj[key] {
            serde_json::Value::String(s) if !s.is_empty() => Ok(s.clone()),
            serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => Ok(n.to_string()),
            other => Err(bad(format!(
                "`{key}` must be a player name (non-empty string or integer), got {other}"
            ))),
        }
    };
    let allowed: &[&str] = match (obj.contains_key("join"), obj.contains_key("leave")) {
        (true, false) => &["join", "delays", "node"],
        (false, true) => &["leave"],
        (true, true) => return Err(bad("an event has either `join` or `leave`, not both".into())),
        (false, false) => return Err(bad("expected a `join` or `leave` key".into())),
    };
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(format!("unexpected key `{k}`")));
    }
    if obj.contains_key("leave") {
        return Ok(Some(Parsed::Leave {
            player: name("leave")?,
        }));
    }
    let player = name("join")?;
    let delays = match (obj.get("delays"), obj.get("node")) {
        (Some(d), None) => {
            let serde_json::Value::Array(a) = d else {
                return Err(bad("`delays` must be an array of numbers (ms)".into()));
            };
            let v = a
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_f64()
                        .ok_or_else(|| bad(format!("`delays[{i}]` is not a number: {x}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Delays::Ms(v)
        }
        (None, Some(n)) => Delays::Node(
            n.as_u64()
                .ok_or_else(|| bad(format!("`node` must be a non-negative integer, got {n}")))?,
        ),
        (Some(_), Some(_)) => return Err(bad("give either `delays` or `node`, not both".into())),
        (None, None) => return Err(bad("a join needs `delays` (ms per mirror) or `node`".into())),
    };
    Ok(Some(Parsed::Join { player, delays }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Algorithm;

    fn session() -> Session {
        Session::new(Assigner::new(Algorithm::Optimal, vec![1, 1]).expect("mirrors"))
    }

    #[test]
    fn applies_joins_and_leaves_and_names_moves() {
        let mut s = session();
        let a = s
            .apply_line(1, r#"{"join": "a", "delays": [1, 5]}"#)
            .expect("ok")
            .expect("event");
        assert_eq!((a.mirror, a.moved.len()), (0, 0));
        // b is much better on 0 than a is: a moves to 1.
        let b = s
            .apply_line(2, r#"{"join": 7, "delays": [1, 50]}"#)
            .expect("ok")
            .expect("event");
        assert_eq!(b.mirror, 0);
        assert_eq!(
            b.moved,
            vec![NamedMove {
                player: "a".into(),
                from: 0,
                to: 1
            }]
        );
        assert_eq!(b.stats.total_us, 6_000);
        assert_eq!(s.apply_line(3, "  # comment").expect("ok"), None);
        let c = s.apply_line(4, r#"{"leave": "7"}"#).expect("ok").expect("event");
        assert_eq!(
            c.moved,
            vec![NamedMove {
                player: "a".into(),
                from: 1,
                to: 0
            }]
        );
    }

    #[test]
    fn every_bad_line_is_a_typed_error_with_its_line_number() {
        let mut s = session();
        s.apply_line(1, r#"{"join": "a", "delays": [1, 5]}"#).expect("ok");
        type Check = fn(&StreamError) -> bool;
        let cases: &[(&str, Check)] = &[
            (r#"{"join": "a", "delays": [1, 5]}"#, |e| {
                matches!(e, StreamError::DuplicateJoin { line: 9, .. })
            }),
            (r#"{"leave": "zed"}"#, |e| {
                matches!(e, StreamError::UnknownPlayer { line: 9, .. })
            }),
            (r#"{"join": "b", "delays": [1]}"#, |e| {
                matches!(e, StreamError::Rejected { line: 9, .. })
            }),
            (r#"{"join": "b", "delays": [1, -3]}"#, |e| {
                matches!(e, StreamError::Rejected { line: 9, .. })
            }),
            (r#"{"join": "b", "node": 3}"#, |e| {
                matches!(e, StreamError::Malformed { line: 9, .. })
            }),
            (r#"{"join": "b""#, |e| {
                matches!(e, StreamError::Malformed { line: 9, .. })
            }),
            (r#"[1, 2]"#, |e| {
                matches!(e, StreamError::Malformed { line: 9, .. })
            }),
            (r#"{"join": "b", "leave": "a"}"#, |e| {
                matches!(e, StreamError::Malformed { line: 9, .. })
            }),
            (r#"{"join": "b", "delays": [1, "x"]}"#, |e| {
                matches!(e, StreamError::Malformed { line: 9, .. })
            }),
            (r#"{"join": true, "delays": [1, 2]}"#, |e| {
                matches!(e, StreamError::Malformed { line: 9, .. })
            }),
            (r#"{"join": "b", "delays": [1, 2], "extra": 1}"#, |e| {
                matches!(e, StreamError::Malformed { line: 9, .. })
            }),
        ];
        for (text, ok) in cases {
            let e = s.apply_line(9, text).expect_err(text);
            assert!(ok(&e), "{text}: {e}");
            assert!(e.to_string().starts_with("line 9:"), "{e}");
        }
        // the failed lines changed nothing
        assert_eq!(s.assigner().len(), 1);
        s.apply_line(10, r#"{"join": "b", "delays": [1, 2]}"#)
            .expect("fits");
        let e = s
            .apply_line(11, r#"{"join": "c", "delays": [1, 2]}"#)
            .expect_err("full");
        assert!(
            matches!(
                e,
                StreamError::AllFull {
                    line: 11,
                    capacity: 2,
                    ..
                }
            ),
            "{e}"
        );
        s.apply_line(12, r#"{"leave": "b"}"#).expect("ok");
        let e = s.apply_line(13, r#"{"leave": "b"}"#).expect_err("absent");
        assert!(matches!(e, StreamError::Absent { line: 13, .. }), "{e}");
        // re-joining after leaving is fine
        s.apply_line(14, r#"{"join": "b", "delays": [3, 2]}"#)
            .expect("rejoin");
    }

    #[test]
    fn node_joins_read_the_table() {
        let mut s = session().with_node_table(vec![1.0, 9.0, 9.0, 1.0]);
        let a = s
            .apply_line(1, r#"{"join": "x", "node": 1}"#)
            .expect("ok")
            .expect("event");
        assert_eq!(a.mirror, 1);
        assert!(matches!(
            s.apply_line(2, r#"{"join": "y", "node": 2}"#),
            Err(StreamError::Malformed { line: 2, .. })
        ));
    }
}
