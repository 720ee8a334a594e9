//! One report for a whole run: a self-contained HTML file (styles inline, every figure's
//! SVG inline, no external resource) and the same content as markdown (figures linked as
//! PNG, or SVG where no PNG was written).

use crate::{ReportError, Table};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A piece of a section.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// A paragraph of plain text.
    Paragraph(String),
    /// A quotation and where it comes from.
    Quote {
        /// The quoted sentence(s).
        text: String,
        /// Where: paper and section.
        source: String,
    },
    /// A table.
    Table(Table),
    /// A figure written earlier as SVG (a PNG beside it is linked from the markdown).
    Figure(PathBuf),
    /// A command line or other verbatim text.
    Code(String),
}

/// A titled part of a [`Document`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Section {
    /// Anchor (letters, digits and dashes).
    pub id: String,
    /// Heading.
    pub heading: String,
    /// Content, in order.
    pub blocks: Vec<Block>,
}

impl Section {
    /// An empty section.
    pub fn new(id: impl Into<String>, heading: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            heading: heading.into(),
            blocks: Vec::new(),
        }
    }

    /// Appends a block (builder style).
    pub fn with(mut self, b: Block) -> Self {
        self.blocks.push(b);
        self
    }

    /// Appends a block.
    pub fn push(&mut self, b: Block) {
        self.blocks.push(b);
    }
}

/// A report: title, introduction, sections.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Document {
    /// Title.
    pub title: String,
    /// Blocks before the first section (summary tables, how to read the report).
    pub intro: Vec<Block>,
    /// Sections.
    pub sections: Vec<Section>,
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

/// CSS class of a cell whose text starts with a verdict word.
fn verdict_class(cell: &str) -> Option<&'static str> {
    let c = cell.trim_start().to_ascii_lowercase();
    [
        ("reproduced", "v-ok"),
        ("better", "v-better"),
        ("worse", "v-worse"),
        ("contradicted", "v-bad"),
        ("inconclusive", "v-unk"),
    ]
    .into_iter()
    .find(|(w, _)| c.starts_with(w))
    .map(|(_, k)| k)
}

fn looks_numeric(c: &str) -> bool {
    let t = c.trim();
    !t.is_empty()
        && t.chars()
            .all(|ch| ch.is_ascii_digit() || ".-+e%×x ±[],/".contains(ch))
        && t.chars().any(|ch| ch.is_ascii_digit())
}

const CSS: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}\
h1{font-size:1.7em}h2{margin-top:2.2em;border-bottom:1px solid #ccc;padding-bottom:.2em}\
table{border-collapse:collapse;margin:1em 0;font-size:.86em;display:block;overflow-x:auto;max-width:100%}th,td{border:1px solid #ccc;padding:.25em .5em;vertical-align:top}\
th{background:#f2f2f2}td.n{text-align:right;white-space:nowrap}\
blockquote{margin:1em 0;padding:.4em 1em;border-left:4px solid #999;background:#f7f7f7}blockquote cite{display:block;color:#555;font-size:.9em;margin-top:.3em}\
pre{background:#f4f4f4;padding:.6em;overflow-x:auto}figure{margin:1.2em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\
figcaption{color:#555;font-size:.85em}.v-ok{background:#dff3df}.v-better{background:#d8ecff}.v-worse{background:#fde7c8}\
.v-bad{background:#f8d3d3}.v-unk{background:#eee}nav li{margin:.1em 0}";

impl Document {
    /// A document with a title.
    pub fn new(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            ..Self::default()
        }
    }

    fn html_block(out: &mut String, b: &Block) -> Result<(), ReportError> {
        match b {
            Block::Paragraph(p) => {
                let _ = writeln!(out, "<p>{}</p>", esc(p));
            }
            Block::Quote { text, source } => {
                let _ = writeln!(
                    out,
                    "<blockquote>“{}”<cite>— {}</cite></blockquote>",
                    esc(text),
                    esc(source)
                );
            }
            Block::Code(c) => {
                let _ = writeln!(out, "<pre><code>{}</code></pre>", esc(c));
            }
            Block::Table(t) => {
                if !t.title.is_empty() {
                    let _ = writeln!(out, "<p><b>{}</b></p>", esc(&t.title));
                }
                out.push_str("<table><tr>");
                for h in &t.headers {
                    let _ = write!(out, "<th>{}</th>", esc(h));
                }
                out.push_str("</tr>\n");
                for r in &t.rows {
                    out.push_str("<tr>");
                    for c in r {
                        let class = match (verdict_class(c), looks_numeric(c)) {
                            (Some(v), _) => format!(" class=\"{v}\""),
                            (None, true) => " class=\"n\"".into(),
                            _ => String::new(),
                        };
                        let _ = write!(out, "<td{class}>{}</td>", esc(c));
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</table>\n");
            }
            Block::Figure(path) => {
                let svg = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
                    path: path.clone(),
                    source,
                })?;
                let svg = match svg.find("<svg") {
                    Some(k) => &svg[k..],
                    None => svg.as_str(),
                };
                let name = path
                    .file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into_owned());
                let _ = writeln!(
                    out,
                    "<figure>{svg}<figcaption>{}</figcaption></figure>",
                    esc(&name)
                );
            }
        }
        Ok(())
    }

    /// The document as one HTML page with everything inline.
    pub fn to_html(&self) -> Result<String, ReportError> {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>",
            esc(&self.title)
        );
        let _ = writeln!(o, "<h1>{}</h1>", esc(&self.title));
        for b in &self.intro {
            Self::html_block(&mut o, b)?;
        }
        if !self.sections.is_empty() {
            o.push_str("<nav><ul>");
            for s in &self.sections {
                let _ = write!(o, "<li><a href=\"#{}\">{}</a></li>", esc(&s.id), esc(&s.heading));
            }
            o.push_str("</ul></nav>\n");
        }
        for s in &self.sections {
            let _ = writeln!(o, "<h2 id=\"{}\">{}</h2>", esc(&s.id), esc(&s.heading));
            for b in &s.blocks {
                Self::html_block(&mut o, b)?;
            }
        }
        o.push_str("</body></html>\n");
        Ok(o)
    }

    fn md_cell(s: &str) -> String {
        s.replace('|', "\\|").replace('\n', " ")
    }

    fn md_block(out: &mut String, b: &Block, base: &Path) {
        match b {
            Block::Paragraph(p) => {
                let _ = writeln!(out, "{p}\n");
            }
            Block::Quote { text, source } => {
                let _ = writeln!(out, "> “{text}”\n>\n> — {source}\n");
            }
            Block::Code(c) => {
                let _ = writeln!(out, "```\n{c}\n```\n");
            }
            Block::Table(t) => {
                if !t.title.is_empty() {
                    let _ = writeln!(out, "**{}**\n", Self::md_cell(&t.title));
                }
                let _ = writeln!(
                    out,
                    "| {} |",
                    t.headers
                        .iter()
                        .map(|h| Self::md_cell(h))
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
                let _ = writeln!(out, "|{}", "---|".repeat(t.headers.len().max(1)));
                for r in &t.rows {
                    let _ = writeln!(
                        out,
                        "| {} |",
                        r.iter().map(|c| Self::md_cell(c)).collect::<Vec<_>>().join(" | ")
                    );
                }
                out.push('\n');
            }
            Block::Figure(path) => {
                let png = path.with_extension("png");
                let shown = if png.exists() { png } else { path.clone() };
                let rel = shown.strip_prefix(base).map_or(shown.clone(), Path::to_path_buf);
                let name = path
                    .file_stem()
                    .map_or(String::new(), |n| n.to_string_lossy().into_owned());
                let _ = writeln!(out, "![{name}]({})\n", rel.display());
            }
        }
    }

    /// The document as markdown; figure links are relative to `base` (the folder the
    /// markdown file goes to).
    pub fn to_markdown(&self, base: &Path) -> String {
        let mut o = format!("# {}\n\n", self.title);
        for b in &self.intro {
            Self::md_block(&mut o, b, base);
        }
        for s in &self.sections {
            let _ = writeln!(o, "## {}\n", s.heading);
            for b in &s.blocks {
                Self::md_block(&mut o, b, base);
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_self_contained_and_escapes_text() {
        let dir = std::env::temp_dir().join(format!("wm-doc-{}", std::process::id()));
        let out = crate::OutputDir::create(&dir).unwrap();
        let fig = out
            .write_plot(
                "f.svg",
                &crate::Plot::of("paper 000 Fig. 9", "t", "x", "y")
                    .with(crate::Series::line("a", vec![(0.0, 1.0), (1.0, 2.0)])),
            )
            .unwrap();
        let mut t = Table::new("claims", &["claim", "verdict"]);
        t.push(["a < b", "contradicted by 20%"]);
        let doc = Document {
            title: "run".into(),
            intro: vec![Block::Table(t)],
            sections: vec![
                Section::new("s", "one")
                    .with(Block::Quote {
                        text: "x < y & z".into(),
                        source: "paper 000 §6.3".into(),
                    })
                    .with(Block::Figure(fig.clone())),
            ],
        };
        let html = doc.to_html().unwrap();
        assert!(html.contains("x &lt; y &amp; z"));
        assert!(html.contains("<svg") && html.contains("class=\"v-bad\""));
        assert!(
            !html.contains("http://") || !html.contains("src=\"http"),
            "no external resources"
        );
        assert!(!html.contains("<script") && !html.contains("<link"));
        let md = doc.to_markdown(&dir);
        assert!(md.contains("> “x < y & z”") && md.contains("| a < b | contradicted by 20% |"));
        assert!(md.contains("](f.png)") || md.contains("](f.svg)"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
