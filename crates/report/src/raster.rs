//! PNG output: the same drawing code as the SVG, on plotters' bitmap backend, with text
//! rasterised by `ab_glyph` from a TrueType font found on the machine, and the pixels
//! encoded by the `png` crate.
//!
//! Why these dependencies: plotters' own font support (`ttf`) pulls font-kit and the
//! system's fontconfig; resvg (SVG → PNG) pulls a text-shaping stack that took about
//! five minutes to build on this 2-core machine. `ab_glyph` (a small pure-Rust TrueType
//! rasteriser) and `png` (with its deflate) keep the build lean, and plotters stays on its
//! font-free layout, so the PNG is laid out exactly like the SVG.
//!
//! The font: `WORLDMESH_FONT` if set, else the first of the usual system paths of DejaVu
//! Sans, Liberation Sans, Noto Sans or Arial. Without one, [`font`] is `None` and PNG
//! writing fails with [`ReportError::NoFont`]; SVG output never needs a font.

use crate::ReportError;
use ab_glyph::{Font, FontArc, PxScale, ScaleFont};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind, FontTransform,
    text_anchor::{HPos, VPos},
};
use plotters_bitmap::BitMapBackend;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where fonts are looked for, in order, after `WORLDMESH_FONT`.
pub const FONT_PATHS: [&str; 8] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

/// Largest font file read, bytes.
const MAX_FONT_BYTES: u64 = 64 << 20;

fn load(path: &Path) -> Option<FontArc> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FONT_BYTES {
        return None;
    }
    FontArc::try_from_vec(std::fs::read(path).ok()?).ok()
}

/// The font PNG text is drawn with, and the file it came from; loaded once.
pub fn font() -> Option<&'static (FontArc, PathBuf)> {
    static FONT: OnceLock<Option<(FontArc, PathBuf)>> = OnceLock::new();
    FONT.get_or_init(|| {
        let env = std::env::var_os("WORLDMESH_FONT").map(PathBuf::from);
        env.into_iter()
            .chain(FONT_PATHS.iter().map(PathBuf::from))
            .find_map(|p| load(&p).map(|f| (f, p)))
    })
    .as_ref()
}

/// A bitmap backend whose text is drawn with a real font (see the module doc).
pub struct Canvas<'a> {
    inner: BitMapBackend<'a>,
    font: &'a FontArc,
}

impl Canvas<'_> {
    fn scale(&self, size: f64) -> PxScale {
        // plotters' size ÷ 1.24 is the em (its SVG backend prints that as font-size);
        // ab_glyph scales by the height (ascent − descent).
        let f = self.font.height_unscaled() / self.font.units_per_em().unwrap_or(1000.0);
        PxScale::from((size / 1.24) as f32 * f)
    }

    fn measure(&self, text: &str, size: f64) -> (f32, f32, f32) {
        let sf = self.font.as_scaled(self.scale(size));
        let mut w = 0.0;
        let mut prev = None;
        for c in text.chars() {
            let g = sf.glyph_id(c);
            if let Some(p) = prev {
                w += sf.kern(p, g);
            }
            w += sf.h_advance(g);
            prev = Some(g);
        }
        (w, sf.ascent(), sf.descent())
    }
}

impl DrawingBackend for Canvas<'_> {
    type ErrorType = <BitMapBackend<'static> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }
    fn draw_pixel(
        &mut self,
        p: BackendCoord,
        c: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(p, c)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        s: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(a, b, s)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        s: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(a, b, s, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        s: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, s)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        c: BackendCoord,
        r: u32,
        s: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(c, r, s, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        s: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vert, s)
    }

    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let (w, a, d) = self.measure(text, style.size());
        Ok((w.ceil() as u32, (a - d).ceil() as u32))
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let colour = style.color();
        if colour.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size();
        let (w, ascent, descent) = self.measure(text, size);
        let h = ascent - descent;
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0.0,
            HPos::Center => -w / 2.0,
            HPos::Right => -w,
        };
        // Baseline below the anchor.
        let base = match anchor.v_pos {
            VPos::Top => ascent,
            VPos::Center => ascent - h / 2.0,
            VPos::Bottom => ascent - h,
        };
        let trans = style.transform();
        let sf = self.font.as_scaled(self.scale(size));
        let mut pen = dx;
        let mut prev = None;
        let mut pixels: Vec<(i32, i32, f32)> = Vec::new();
        for c in text.chars() {
            let id = sf.glyph_id(c);
            if let Some(p) = prev {
                pen += sf.kern(p, id);
            }
            let g = id.with_scale_and_position(sf.scale(), ab_glyph::point(pen, base));
            pen += sf.h_advance(id);
            prev = Some(id);
            if let Some(out) = self.font.outline_glyph(g) {
                let b = out.px_bounds();
                out.draw(|x, y, cov| {
                    if cov > 0.0 {
                        pixels.push((b.min.x as i32 + x as i32, b.min.y as i32 + y as i32, cov));
                    }
                });
            }
        }
        for (x, y, cov) in pixels {
            let (tx, ty) = match trans {
                FontTransform::None => (x, y),
                _ => trans.transform(x, y),
            };
            self.inner.draw_pixel(
                (pos.0 + tx, pos.1 + ty),
                BackendColor {
                    alpha: colour.alpha * f64::from(cov.min(1.0)),
                    rgb: colour.rgb,
                },
            )?;
        }
        Ok(())
    }
}

/// Draws with `render` on a `size` bitmap and writes it to `path` as PNG.
pub fn write_png(
    path: &Path,
    (w, h): (u32, u32),
    render: impl FnOnce(&DrawingArea<Canvas<'_>, Shift>) -> Result<(), String>,
) -> Result<(), ReportError> {
    let err = |reason: String| ReportError::Plot {
        path: path.to_path_buf(),
        reason,
    };
    let (font, _) = font().ok_or_else(|| ReportError::NoFont {
        path: path.to_path_buf(),
    })?;
    let mut buf = vec![255u8; w as usize * h as usize * 3];
    {
        let inner = BitMapBackend::with_buffer(&mut buf, (w, h));
        let root = Canvas { inner, font }.into_drawing_area();
        render(&root).map_err(err)?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    let file = std::fs::File::create(path).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fast);
    let mut wr = enc.write_header().map_err(|e| err(e.to_string()))?;
    wr.write_image_data(&buf).map_err(|e| err(e.to_string()))?;
    wr.finish().map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_has_the_plot_size_and_drawn_text_or_says_no_font() {
        let dir = std::env::temp_dir().join(format!("wm-png-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.png");
        let p = crate::Plot::of("paper 000 Fig. 9", "a title", "nodes", "B/s")
            .with(crate::Series::marked("a", vec![(1.0, 1.0), (2.0, 4.0)]));
        match p.write_png(&path) {
            Ok(()) => {
                let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
                let mut r = dec.read_info().unwrap();
                let mut px = vec![0; r.output_buffer_size().unwrap()];
                let info = r.next_frame(&mut px).unwrap();
                assert_eq!((info.width, info.height), p.size());
                // The title row (top 30 px) has dark text pixels.
                let row = info.width as usize * 3;
                assert!(px[..30 * row].chunks(3).any(|c| c.iter().all(|v| *v < 100)));
            }
            Err(ReportError::NoFont { .. }) => assert!(font().is_none()),
            Err(e) => panic!("{e}"),
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
