//! A strict parser of the Prometheus text exposition format 0.0.4 — what a scraper
//! accepts — written apart from the renderer ([`crate::metrics::render`]) so that tests of
//! the renderer and of real nodes' `/metrics` endpoints do not trust the code they check,
//! and usable by operators' own checks of an endpoint.
//!
//! It refuses: a line that is not blank, `# HELP`, `# TYPE` or a sample; names outside
//! `[a-zA-Z_:][a-zA-Z0-9_:]*` and label names starting with `__`; a second HELP or TYPE
//! for a family, or a TYPE after the family's samples; a sample whose family has no TYPE
//! before it; a counter not ending in `_total`, or another type that does; unquoted,
//! badly escaped or unterminated label values; a label twice; a sample twice; values and
//! timestamps that do not parse; text not ending in a line feed.

use std::collections::{BTreeMap, BTreeSet};

/// One sample.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Metric name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// A parsed exposition.
#[derive(Debug, Default)]
pub struct Exposition {
    /// Family → type.
    pub types: BTreeMap<String, String>,
    /// Samples in order.
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// The value of `name` with exactly `labels`.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    }

    /// Every sample of `name`.
    pub fn all(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

fn family_of<'a>(name: &'a str, types: &BTreeMap<String, String>) -> &'a str {
    for suffix in ["_sum", "_count", "_bucket"] {
        if let Some(base) = name.strip_suffix(suffix)
            && types
                .get(base)
                .is_some_and(|t| t == "summary" || t == "histogram")
        {
            return base;
        }
    }
    name
}

/// Parses `text`, checking: every line is blank, `# HELP`, `# TYPE` or a sample; names
/// match `[a-zA-Z_:][a-zA-Z0-9_:]*`; every sample's family has a TYPE (given before its
/// samples, once); counters end in `_total`; label values are quoted and escaped; no
/// sample appears twice.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut e = Exposition::default();
    let mut helps = BTreeSet::new();
    let mut seen = BTreeSet::new();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("does not end with a line feed".into());
    }
    for (i, line) in text.lines().enumerate() {
        let ln = i + 1;
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let rest = rest
                .strip_prefix(' ')
                .ok_or(format!("line {ln}: comment without a space: {line:?}"))?;
            let mut it = rest.splitn(3, ' ');
            let (kw, name) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
            if !valid_name(name) {
                return Err(format!("line {ln}: bad name {name:?}"));
            }
            match kw {
                "HELP" => {
                    if !helps.insert(name.to_owned()) {
                        return Err(format!("line {ln}: second HELP for {name}"));
                    }
                }
                "TYPE" => {
                    let t = it.next().unwrap_or("");
                    if !["counter", "gauge", "summary", "histogram", "untyped"].contains(&t) {
                        return Err(format!("line {ln}: bad type {t:?}"));
                    }
                    if e.samples.iter().any(|s| family_of(&s.name, &e.types) == name) {
                        return Err(format!("line {ln}: TYPE of {name} after its samples"));
                    }
                    if e.types.insert(name.to_owned(), t.to_owned()).is_some() {
                        return Err(format!("line {ln}: second TYPE for {name}"));
                    }
                    if (t == "counter") != name.ends_with("_total") {
                        return Err(format!(
                            "line {ln}: {name} is a {t}: only counters end in _total, and they must"
                        ));
                    }
                }
                _ => return Err(format!("line {ln}: unknown comment {line:?}")),
            }
            continue;
        }
        let s = sample(line).map_err(|m| format!("line {ln}: {m}: {line:?}"))?;
        let fam = family_of(&s.name, &e.types).to_owned();
        if !e.types.contains_key(&fam) {
            return Err(format!("line {ln}: {} has no TYPE before it", s.name));
        }
        if !seen.insert((s.name.clone(), s.labels.clone())) {
            return Err(format!("line {ln}: sample repeated"));
        }
        e.samples.push(s);
    }
    Ok(e)
}

fn sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(r) = rest.strip_prefix('{') {
        let mut p = 0;
        loop {
            if r[p..].starts_with('}') {
                p += 1;
                break;
            }
            let eq = r[p..].find('=').ok_or("label without =")? + p;
            let lname = &r[p..eq];
            if !valid_name(lname) || lname.starts_with("__") {
                return Err(format!("bad label name {lname:?}"));
            }
            p = eq + 1;
            if !r[p..].starts_with('"') {
                return Err("label value not quoted".into());
            }
            p += 1;
            let mut val = String::new();
            let mut it = r[p..].char_indices();
            loop {
                match it.next() {
                    Some((_, '\\')) => match it.next() {
                        Some((_, '\\')) => val.push('\\'),
                        Some((_, '"')) => val.push('"'),
                        Some((_, 'n')) => val.push('\n'),
                        _ => return Err("bad escape".into()),
                    },
                    Some((i, '"')) => {
                        p += i + 1;
                        break;
                    }
                    Some((_, '\n')) | None => return Err("unterminated label value".into()),
                    Some((_, c)) => val.push(c),
                }
            }
            if labels.insert(lname.to_owned(), val).is_some() {
                return Err(format!("label {lname} twice"));
            }
            match r[p..].chars().next() {
                Some(',') => p += 1,
                Some('}') => {
                    p += 1;
                    break;
                }
                _ => return Err("expected , or }".into()),
            }
        }
        rest = &r[p..];
    }
    let v = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let mut parts = v.split(' ');
    let value = match parts.next().unwrap_or("") {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        x => x.parse::<f64>().map_err(|_| format!("bad value {x:?}"))?,
    };
    if let Some(ts) = parts.next()
        && ts.parse::<i64>().is_err()
    {
        return Err(format!("bad timestamp {ts:?}"));
    }
    if parts.next().is_some() {
        return Err("trailing text".into());
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}
