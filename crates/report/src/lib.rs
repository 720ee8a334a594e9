//! # worldmesh-report
//!
//! How worldmesh shows results: aligned text [`Table`]s for the terminal, CSV files for
//! spreadsheets, JSON for machines, [`Plot`]s and [`HeatMap`]s for people (SVG, and PNG
//! where a font is found: [`raster`]), and one self-contained HTML/markdown [`Document`]
//! that gathers a whole run. Experiments and the `simulate` command write everything into
//! one [`OutputDir`].
//!
//! Plots are drawn once, by generic code over plotters' backends: the SVG needs no font
//! files (text is rendered by the viewer); the PNG is the same drawing on a bitmap with
//! text from a system TrueType font.
#![forbid(unsafe_code)]

pub mod document;
mod heatmap;
mod output;
mod plot;
pub mod raster;
pub mod style;
mod table;
pub mod ticks;

pub use document::{Document, Section};
pub use heatmap::HeatMap;
pub use output::{OutputDir, ReportError};
pub use plot::{LinePlot, Mark, Plot, RefLine, Scale, Series, cdf_points};
pub use table::Table;
