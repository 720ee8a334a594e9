//! Errors of the load model: every input (map file, trace file, load-state file, map spec
//! string, parameters) is untrusted and gets a typed error that names the source, the
//! line where there is one, and why it was refused.

use std::path::PathBuf;

/// Why an input to the load model was refused.
#[derive(Debug, thiserror::Error)]
pub enum LoadModelError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is not well-formed (TOML syntax, CSV field count, a value that is not a
    /// number, an unknown key).
    #[error("{source_name}:{line}: {message}")]
    Syntax {
        /// File name (or another label for the text).
        source_name: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A well-formed file holds a value that is out of range or inconsistent.
    #[error("{source_name}:{line}: {message}")]
    Invalid {
        /// File name (or another label for the text).
        source_name: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A specification string (e.g. `random:4000x4000:40:1`) or a parameter is unusable.
    #[error("`{spec}`: {why}")]
    Spec {
        /// The string or parameter as given.
        spec: String,
        /// Why it was refused.
        why: String,
    },
    /// The requested computation would exceed a size bound (e.g. too many cells for a
    /// visibility half-matrix).
    #[error("{what}: {size} exceeds the limit of {limit}")]
    TooLarge {
        /// What would be too large.
        what: &'static str,
        /// Requested size.
        size: usize,
        /// The bound.
        limit: usize,
    },
    /// There is nothing to work with (e.g. no position sample falls on the map).
    #[error("{0}")]
    Empty(String),
}

impl LoadModelError {
    /// A [`LoadModelError::Spec`] error.
    pub(crate) fn spec(spec: impl Into<String>, why: impl Into<String>) -> Self {
        Self::Spec {
            spec: spec.into(),
            why: why.into(),
        }
    }
}

/// 1-based line of the byte offset `pos` in `text`.
pub(crate) fn line_of(text: &str, pos: usize) -> usize {
    let end = pos.min(text.len());
    text.as_bytes()[..end].iter().filter(|b| **b == b'\n').count() + 1
}

/// Converts a TOML parse error into a line-numbered [`LoadModelError::Syntax`].
pub(crate) fn toml_error(text: &str, source_name: &str, e: &toml::de::Error) -> LoadModelError {
    let line = e.span().map_or(1, |s| line_of(text, s.start));
    LoadModelError::Syntax {
        source_name: source_name.to_string(),
        line,
        message: e.message().trim().to_string(),
    }
}

/// Reads a whole file, with the path in the error.
pub(crate) fn read_file(path: &std::path::Path) -> Result<String, LoadModelError> {
    std::fs::read_to_string(path).map_err(|source| LoadModelError::Io {
        path: path.to_path_buf(),
        source,
    })
}
