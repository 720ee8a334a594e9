//! Aligned text tables that also export as CSV.

use std::fmt;

/// A titled table of strings: printed aligned on the terminal, written as CSV to files.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Table {
    /// Title printed above the table (not part of the CSV).
    pub title: String,
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows; each should have as many cells as there are headers.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with a title and headers.
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Self {
        Self {
            title: title.into(),
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn push<S: ToString>(&mut self, row: impl IntoIterator<Item = S>) {
        self.rows.push(row.into_iter().map(|c| c.to_string()).collect());
    }

    /// The table as CSV (headers first; cells with commas, quotes or newlines are quoted).
    pub fn to_csv(&self) -> String {
        fn cell(s: &str) -> String {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_owned()
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            out.push_str(&row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        out
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cols = self
            .headers
            .len()
            .max(self.rows.iter().map(Vec::len).max().unwrap_or(0));
        let mut widths = vec![0usize; cols];
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, c) in row.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        if !self.title.is_empty() {
            writeln!(f, "{}", self.title)?;
        }
        // Columns whose cells all look like numbers are right-aligned, others left-aligned.
        let numeric = |c: &str| {
            let t = c.trim_end_matches(['%', 'x', 's']).trim();
            !t.is_empty() && t.chars().all(|ch| ch.is_ascii_digit() || ".-+e/ ".contains(ch))
        };
        let right: Vec<bool> = (0..cols)
            .map(|i| {
                i > 0
                    && self
                        .rows
                        .iter()
                        .all(|r| r.get(i).is_none_or(|c| c.is_empty() || numeric(c)))
            })
            .collect();
        let line = |f: &mut fmt::Formatter<'_>, row: &[String]| -> fmt::Result {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let c = row.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    s.push_str("  ");
                }
                if right[i] {
                    s.push_str(&format!("{c:>w$}"));
                } else {
                    s.push_str(&format!("{c:<w$}"));
                }
            }
            writeln!(f, "{}", s.trim_end())
        };
        line(f, &self.headers)?;
        let total: usize = widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
        writeln!(f, "{}", "-".repeat(total))?;
        for row in &self.rows {
            line(f, row)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_and_csv() {
        let mut t = Table::new("T", &["name", "value"]);
        t.push(["a", "1"]);
        t.push(["long,name", "22"]);
        let text = t.to_string();
        assert_eq!(
            text,
            "T\nname       value\n----------------\na              1\nlong,name     22\n"
        );
        assert_eq!(t.to_csv(), "name,value\na,1\n\"long,name\",22\n");
    }
}
