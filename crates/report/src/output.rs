//! The output folder of a run.

use std::path::{Path, PathBuf};

/// Why writing a report failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file or folder could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// JSON serialization failed.
    #[error("{path}: cannot serialize JSON: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// No TrueType font was found for PNG text (SVG needs none).
    #[error(
        "{path}: no TrueType font found for PNG text; set WORLDMESH_FONT to a .ttf file (e.g. DejaVuSans.ttf)"
    )]
    NoFont {
        /// The PNG that was not written.
        path: PathBuf,
    },
    /// Drawing a plot failed.
    #[error("{path}: cannot draw plot: {reason}")]
    Plot {
        /// The file.
        path: PathBuf,
        /// What the plotting backend said.
        reason: String,
    },
}

/// A folder that receives a run's CSV, JSON and SVG files. Created on first use.
#[derive(Clone, Debug)]
pub struct OutputDir {
    root: PathBuf,
}

impl OutputDir {
    /// An output folder at `root` (created, with parents, if missing).
    pub fn create(root: impl Into<PathBuf>) -> Result<Self, ReportError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|source| ReportError::Io {
            path: root.clone(),
            source,
        })?;
        Ok(Self { root })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path of `name` inside the folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Writes a text file and returns its path.
    pub fn write_text(&self, name: &str, text: &str) -> Result<PathBuf, ReportError> {
        let path = self.path(name);
        std::fs::write(&path, text).map_err(|source| ReportError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes `value` as pretty JSON and returns the path.
    pub fn write_json<T: serde::Serialize + ?Sized>(
        &self,
        name: &str,
        value: &T,
    ) -> Result<PathBuf, ReportError> {
        let path = self.path(name);
        let text = serde_json::to_string_pretty(value).map_err(|source| ReportError::Json {
            path: path.clone(),
            source,
        })?;
        self.write_text(name, &(text + "\n"))
    }

    /// Writes a table as CSV and returns the path.
    pub fn write_csv(&self, name: &str, table: &crate::Table) -> Result<PathBuf, ReportError> {
        self.write_text(name, &table.to_csv())
    }

    /// Draws a plot as SVG (`name`) and as PNG beside it (same stem) and returns the SVG's
    /// path. Without a font the PNG is skipped (see [`crate::raster::font`]); SVG is always
    /// written.
    pub fn write_plot(&self, name: &str, plot: &crate::Plot) -> Result<PathBuf, ReportError> {
        let path = self.path(name);
        plot.write_svg(&path)?;
        skip_without_font(plot.write_png(&path.with_extension("png")))?;
        Ok(path)
    }

    /// Draws a heat map as SVG and PNG, like [`Self::write_plot`].
    pub fn write_heatmap(&self, name: &str, map: &crate::HeatMap) -> Result<PathBuf, ReportError> {
        let path = self.path(name);
        map.write_svg(&path)?;
        skip_without_font(map.write_png(&path.with_extension("png")))?;
        Ok(path)
    }
}

/// PNG output is best effort without a font: say so once, keep going.
fn skip_without_font(r: Result<(), ReportError>) -> Result<(), ReportError> {
    match r {
        Err(e @ ReportError::NoFont { .. }) => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| eprintln!("warning: {e}; writing SVG only"));
            Ok(())
        }
        r => r,
    }
}
