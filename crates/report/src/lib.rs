//! # worldmesh-report
//!
//! How worldmesh shows results: aligned text [`Table`]s for the terminal, CSV files for
//! spreadsheets, JSON for machines and SVG [`LinePlot`]s and [`HeatMap`]s for people. Experiments and the
//! `simulate` command write everything into one [`OutputDir`].
//!
//! Plots are SVG only: SVG needs no font files (text is rendered by the viewer), so the
//! project builds on a bare machine and every browser shows the result.
#![forbid(unsafe_code)]

mod heatmap;
mod output;
mod plot;
mod table;

pub use heatmap::HeatMap;
pub use output::{OutputDir, ReportError};
pub use plot::{LinePlot, Scale, Series};
pub use table::Table;
