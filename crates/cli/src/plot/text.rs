//! Text for the plots: one TrueType font, measured and drawn with its real metrics.
//!
//! The layout fits titles and legend labels by measuring them: the width of a string is the sum of its
//! glyphs' advances plus the font's kerning, at the size it is drawn. The same numbers place the glyphs
//! when a PNG is drawn (`Glyphs`), so what was measured is what is drawn. plotters' own bitmap text
//! (0.3.7) drops each glyph's left side bearing, which printed "OUT router" as "OU Trouter": PNG text goes
//! through `Glyphs` instead. SVG text stays `<text>` for the viewer to lay out with its own font.

use ab_glyph::{point, Font, FontRef, ScaleFont};
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// The family name text styles use; the font is registered with plotters under it.
pub const FAMILY: &str = "sans-serif";

/// The first font of `FONT_PATHS` that loads, registered with plotters (for the SVG's estimates) once.
pub fn font() -> Option<&'static FontRef<'static>> {
    static FONT: std::sync::OnceLock<Option<FontRef<'static>>> = std::sync::OnceLock::new();
    FONT.get_or_init(|| {
        FONT_PATHS.iter().find_map(|p| {
            let bytes: &'static [u8] = Box::leak(std::fs::read(p).ok()?.into_boxed_slice());
            let font = FontRef::try_from_slice(bytes).ok()?;
            plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).ok()?;
            Some(font)
        })
    })
    .as_ref()
}

/// Width in pixels of `text` drawn at `size` (plotters' font size: the font's ascent to descent).
pub fn width(text: &str, size: f64) -> f64 {
    let Some(font) = font() else { return 0.0 };
    let f = font.as_scaled(size as f32);
    let mut w = 0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = f.glyph_id(c);
        if let Some(p) = prev {
            w += f.kern(p, id);
        }
        w += f.h_advance(id);
        prev = Some(id);
    }
    w as f64
}

/// `text`, or its longest beginning that fits `max` pixels with "…" after it.
pub fn fit(text: &str, size: f64, max: f64) -> String {
    if width(text, size) <= max {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    // The widest prefix that fits, by bisection (width grows with the prefix).
    let (mut lo, mut hi) = (0, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let s: String = chars[..mid]
            .iter()
            .collect::<String>()
            .trim_end()
            .to_string()
            + "…";
        if width(&s, size) <= max {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let s: String = chars[..lo].iter().collect();
    s.trim_end().to_string() + "…"
}

/// A bitmap backend whose text is drawn glyph by glyph with `width`'s metrics; everything else goes
/// to the backend it wraps.
pub struct Glyphs<B>(pub B);

impl<B: DrawingBackend> DrawingBackend for Glyphs<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.present()
    }
    fn draw_pixel(
        &mut self,
        p: BackendCoord,
        c: BackendColor,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_pixel(p, c)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_rect(a, b, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_path(path, style)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.fill_polygon(vert, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_circle(center, radius, style, fill)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<B::ErrorType>> {
        Ok((
            width(text, style.size()).ceil() as u32,
            style.size().ceil() as u32,
        ))
    }

    /// Each glyph at its pen position (advance and kerning as `width` sums them) plus its own bearing,
    /// anti-aliased by coverage; the anchor and rotation as plotters' default text drawing takes them.
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let color = style.color();
        let Some(font) = font() else { return Ok(()) };
        if color.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size() as f32;
        let f = font.as_scaled(size);
        let w = width(text, style.size()) as f32;
        let h = f.ascent() - f.descent();
        let dx = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => -w / 2.0,
            HPos::Right => -w,
        };
        let top = match style.anchor().v_pos {
            VPos::Top => 0.0,
            VPos::Center => -h / 2.0,
            VPos::Bottom => -h,
        };
        let baseline = top + f.ascent();
        let trans = style.transform();
        let (iw, ih) = self.get_size();
        let mut pen = dx;
        let mut prev = None;
        let mut pixels: Vec<(i32, i32, f32)> = Vec::new();
        for c in text.chars() {
            let id = f.glyph_id(c);
            if let Some(p) = prev {
                pen += f.kern(p, id);
            }
            prev = Some(id);
            let glyph = id.with_scale_and_position(size, point(pen, baseline));
            pen += f.h_advance(id);
            if let Some(g) = font.outline_glyph(glyph) {
                let b = g.px_bounds();
                g.draw(|x, y, cov| {
                    if cov > 0.0 {
                        pixels.push((b.min.x as i32 + x as i32, b.min.y as i32 + y as i32, cov))
                    }
                });
            }
        }
        for (x, y, cov) in pixels {
            let (x, y) = trans.transform(x, y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && y >= 0 && (x as u32) < iw && (y as u32) < ih {
                let alpha = color.alpha * cov.min(1.0) as f64;
                self.0.draw_pixel(
                    (x, y),
                    BackendColor {
                        alpha,
                        rgb: color.rgb,
                    },
                )?;
            }
        }
        Ok(())
    }
}
