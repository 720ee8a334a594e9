//! Colours and markers shared by every chart: twelve colours that stay apart for
//! colour-blind readers as far as twelve can (Tableau 10 plus two), and seven marker
//! shapes, so series `i` gets colour `i mod 12` and marker `i mod 7` — 84 combinations
//! before one repeats, and two series never share both.

use plotters::prelude::*;

/// Series colours, in order of use.
pub const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
];

/// Colours of reference lines (paper values, limits): dark, dashed in use.
pub const REF_COLOURS: [RGBColor; 4] = [
    RGBColor(40, 40, 40),
    RGBColor(170, 0, 0),
    RGBColor(0, 90, 170),
    RGBColor(0, 120, 0),
];

/// Marker shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    /// Filled circle.
    Circle,
    /// Filled square.
    Square,
    /// Filled triangle pointing up.
    TriangleUp,
    /// Filled diamond.
    Diamond,
    /// Filled triangle pointing down.
    TriangleDown,
    /// Diagonal cross.
    Cross,
    /// Upright plus.
    Plus,
}

/// Markers in order of use.
pub const MARKERS: [Marker; 7] = [
    Marker::Circle,
    Marker::Square,
    Marker::TriangleUp,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::Cross,
    Marker::Plus,
];

/// Colour of series `i`.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Marker of series `i`.
pub fn marker(i: usize) -> Marker {
    MARKERS[i % MARKERS.len()]
}

/// Draws marker `m` of radius `r` pixels centred at pixel `(x, y)` of `area`.
pub fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    m: Marker,
    (x, y): (i32, i32),
    r: i32,
    style: ShapeStyle,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let line = ShapeStyle {
        filled: false,
        stroke_width: 2,
        ..style
    };
    match m {
        Marker::Circle => area.draw(&Circle::new((x, y), r, style.filled())),
        Marker::Square => area.draw(&Rectangle::new([(x - r, y - r), (x + r, y + r)], style.filled())),
        Marker::TriangleUp => area.draw(&Polygon::new(
            vec![(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)],
            style.filled(),
        )),
        Marker::TriangleDown => area.draw(&Polygon::new(
            vec![(x, y + r + 1), (x + r + 1, y - r), (x - r - 1, y - r)],
            style.filled(),
        )),
        Marker::Diamond => area.draw(&Polygon::new(
            vec![(x, y - r - 1), (x + r + 1, y), (x, y + r + 1), (x - r - 1, y)],
            style.filled(),
        )),
        Marker::Cross => {
            area.draw(&PathElement::new(vec![(x - r, y - r), (x + r, y + r)], line))?;
            area.draw(&PathElement::new(vec![(x - r, y + r), (x + r, y - r)], line))
        }
        Marker::Plus => {
            area.draw(&PathElement::new(vec![(x - r - 1, y), (x + r + 1, y)], line))?;
            area.draw(&PathElement::new(vec![(x, y - r - 1), (x, y + r + 1)], line))
        }
    }
}

/// Estimated width in pixels of `text` at font size `size` (DejaVu Sans-like metrics:
/// about 0.6 em per character).
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.6
}

/// `text` broken at spaces into lines of at most `max_chars` characters (a longer word
/// stays whole on its own line).
pub fn wrap(text: &str, max_chars: usize) -> Vec<String> {
    let max_chars = max_chars.max(4);
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > max_chars {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twelve_series_are_told_apart() {
        let combos: std::collections::BTreeSet<_> = (0..12)
            .map(|i| (colour(i).rgb(), MARKERS.iter().position(|m| *m == marker(i))))
            .collect();
        assert_eq!(combos.len(), 12);
        let colours: std::collections::BTreeSet<_> = (0..12).map(|i| colour(i).rgb()).collect();
        assert_eq!(colours.len(), 12, "twelve distinct colours");
    }

    #[test]
    fn wraps_at_spaces() {
        assert_eq!(
            wrap("rangedht hilbert sqr 0 ms", 12),
            ["rangedht", "hilbert sqr", "0 ms"]
        );
        assert_eq!(wrap("", 10), [""]);
    }
}
