//! Sheet painting: background, cells, labels (box + anti-aliased glyphs) and the audio band.

use ab_glyph::{point, Font as _, FontVec, GlyphId, PxScale, ScaleFont as _};

use crate::convert::Image;
use crate::error::{Error, Result};
use crate::plan::{BandPlan, LabelPlan, Rect, Theme};

/// An RGB24 sheet.
pub(crate) struct Canvas {
    pub w: u32,
    pub h: u32,
    pub data: Vec<u8>,
}

/// Clips `r` to a `w x h` canvas: (x0, y0, x1, y1), empty when x0 >= x1 or y0 >= y1.
fn clip(r: Rect, w: u32, h: u32) -> (usize, usize, usize, usize) {
    let x0 = (r.x as i64).clamp(0, w as i64);
    let y0 = (r.y as i64).clamp(0, h as i64);
    let x1 = (r.x as i64 + r.w as i64).clamp(0, w as i64);
    let y1 = (r.y as i64 + r.h as i64).clamp(0, h as i64);
    (x0 as usize, y0 as usize, x1 as usize, y1 as usize)
}

#[inline]
fn mix(dst: u8, src: u8, a: u32) -> u8 {
    ((src as u32 * a + dst as u32 * (255 - a) + 127) / 255) as u8
}

impl Canvas {
    pub(crate) fn new(w: u32, h: u32, background: [u8; 3]) -> Self {
        let mut data = vec![0u8; w as usize * h as usize * 3];
        for px in data.chunks_exact_mut(3) {
            px.copy_from_slice(&background);
        }
        Canvas { w, h, data }
    }

    pub(crate) fn fill(&mut self, r: Rect, c: [u8; 3]) {
        let (x0, y0, x1, y1) = clip(r, self.w, self.h);
        for y in y0..y1 {
            let row = (y * self.w as usize) * 3;
            for px in self.data[row + x0 * 3..row + x1 * 3].chunks_exact_mut(3) {
                px.copy_from_slice(&c);
            }
        }
    }

    /// Source-over blend of an RGBA colour.
    pub(crate) fn blend(&mut self, r: Rect, c: [u8; 4]) {
        let a = c[3] as u32;
        if a == 255 {
            return self.fill(r, [c[0], c[1], c[2]]);
        }
        let (x0, y0, x1, y1) = clip(r, self.w, self.h);
        for y in y0..y1 {
            let row = (y * self.w as usize) * 3;
            for px in self.data[row + x0 * 3..row + x1 * 3].chunks_exact_mut(3) {
                for i in 0..3 {
                    px[i] = mix(px[i], c[i], a);
                }
            }
        }
    }

    #[inline]
    fn cover(&mut self, x: i64, y: i64, c: [u8; 3], coverage: f32) {
        if x < 0 || y < 0 || x >= self.w as i64 || y >= self.h as i64 {
            return;
        }
        let a = (coverage.clamp(0.0, 1.0) * 255.0).round() as u32;
        if a == 0 {
            return;
        }
        let o = (y as usize * self.w as usize + x as usize) * 3;
        for (d, s) in self.data[o..o + 3].iter_mut().zip(c) {
            *d = mix(*d, s, a);
        }
    }

    /// Copies `img` with its top-left corner at (x, y), clipped to the canvas.
    pub(crate) fn blit(&mut self, x: i32, y: i32, img: &Image) {
        let r = Rect {
            x,
            y,
            w: img.w,
            h: img.h,
        };
        let (x0, y0, x1, y1) = clip(r, self.w, self.h);
        if x0 >= x1 {
            return;
        }
        for cy in y0..y1 {
            let sy = (cy as i64 - y as i64) as usize;
            let sx = (x0 as i64 - x as i64) as usize;
            let src = &img.data
                [(sy * img.w as usize + sx) * 3..(sy * img.w as usize + sx + (x1 - x0)) * 3];
            let row = (cy * self.w as usize) * 3;
            self.data[row + x0 * 3..row + x1 * 3].copy_from_slice(src);
        }
    }

    /// A label: the box blended in `theme.labelBox`, then the text in `theme.labelText`.
    pub(crate) fn label(&mut self, font: &Font, label: &LabelPlan, theme: &Theme) {
        self.blend(label.r#box, theme.label_box);
        font.draw(
            self,
            &label.text,
            label.text_x,
            label.baseline_y,
            label.font_size,
            theme.label_text,
        );
    }

    /// The audio band, exactly as the BandPlan comment in src/core/render-plan.ts specifies:
    /// `levels` holds one level (0..1) per pixel column, decided by src/core/audio.ts (a missing
    /// one is 0); this only paints. A band with a message is its background only: the message is
    /// a label, drawn with the others. The rule and its vectors: fixtures/vectors/band-painting.json
    /// (the fallback's is src/engine/raster.ts `paintBand`).
    pub(crate) fn band(&mut self, band: &BandPlan, theme: &Theme, levels: &[f64]) {
        let r = band.rect;
        self.fill(r, theme.band_background);
        if band.message.is_some() || r.w == 0 || r.h == 0 {
            return;
        }
        let bar_room = r.h.saturating_sub(4) as f64;
        for c in 0..r.w {
            let lv = levels.get(c as usize).copied().unwrap_or(0.0);
            // NaN or out-of-range levels from a bad plan draw nothing rather than a wild bar.
            let lv = if lv.is_finite() {
                lv.clamp(0.0, 1.0)
            } else {
                0.0
            };
            let bar = ((lv * bar_room).round() as u32).min(r.h);
            let peak = lv >= theme.peak_threshold;
            let colour = if peak {
                theme.band_peak
            } else {
                theme.band_level
            };
            let x = r.x + c as i32;
            let bottom = r.y + (r.h - bar) as i32;
            self.fill(Rect::column(x, bottom, bar), colour);
            if peak {
                self.fill(Rect::column(x, r.y, 3.min(r.h)), theme.band_peak);
            }
        }
        // No tick marks a band without a time span.
        let span = band.end_ms - band.start_ms;
        let ticks = if span > 0.0 { &band.ticks_ms[..] } else { &[] };
        let (w, tick_h) = (r.w as f64, r.h.div_ceil(4));
        for &t in ticks {
            let off = ((t - band.start_ms) * w / span).floor();
            if (0.0..w).contains(&off) {
                let bottom = r.y + (r.h - tick_h) as i32;
                self.fill(
                    Rect::column(r.x + off as i32, bottom, tick_h),
                    theme.band_tick,
                );
            }
        }
    }
}

impl Rect {
    /// A one-pixel-wide column `h` pixels high from (x, y) down.
    fn column(x: i32, y: i32, h: u32) -> Rect {
        Rect { x, y, w: 1, h }
    }
}

/// The label font (the TTF the plan names), rasterised with ab_glyph.
pub(crate) struct Font {
    font: FontVec,
    /// ab_glyph scales by (ascent - descent); labels are specified by em size.
    em_to_px_scale: f32,
}

impl Font {
    pub(crate) fn load(path: &str) -> Result<Font> {
        let bytes = std::fs::read(path)
            .map_err(|e| Error::failed(format!("cannot read the label font {path} ({e})")))?;
        let font = FontVec::try_from_vec(bytes).map_err(|_| {
            Error::failed(format!(
                "the label font {path} is not a usable TrueType font"
            ))
        })?;
        let upem = font.units_per_em().filter(|u| *u > 0.0).unwrap_or(2048.0);
        let em_to_px_scale = font.height_unscaled() / upem;
        Ok(Font {
            font,
            em_to_px_scale,
        })
    }

    /// Draws `text` with the first glyph's advance box starting at `x` and the baseline at `y`.
    pub(crate) fn draw(
        &self,
        canvas: &mut Canvas,
        text: &str,
        x: f32,
        y: f32,
        em_px: f32,
        colour: [u8; 3],
    ) {
        if !(em_px.is_finite() && em_px > 0.0) {
            return;
        }
        let scale = PxScale::from(em_px * self.em_to_px_scale);
        let scaled = self.font.as_scaled(scale);
        let mut caret = x;
        let mut prev: Option<GlyphId> = None;
        for ch in text.chars() {
            let id = self.font.glyph_id(ch);
            if let Some(p) = prev {
                caret += scaled.kern(p, id);
            }
            let glyph = id.with_scale_and_position(scale, point(caret, y));
            if let Some(outline) = self.font.outline_glyph(glyph) {
                let b = outline.px_bounds();
                let (ox, oy) = (b.min.x as i64, b.min.y as i64);
                outline.draw(|gx, gy, c| canvas.cover(ox + gx as i64, oy + gy as i64, colour, c));
            }
            caret += scaled.h_advance(id);
            prev = Some(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn theme() -> Theme {
        Theme {
            background: [0, 0, 0],
            label_box: [0, 0, 0, 180],
            label_text: [255, 255, 255],
            band_background: [10, 10, 10],
            band_level: [0, 200, 0],
            band_peak: [200, 0, 0],
            band_tick: [255, 255, 255],
            peak_threshold: 0.8,
        }
    }

    fn font() -> Option<Font> {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../node_modules/dejavu-fonts-ttf/ttf/DejaVuSansMono.ttf"
        );
        Font::load(p).ok()
    }

    fn px(c: &Canvas, x: u32, y: u32) -> [u8; 3] {
        let o = ((y * c.w + x) * 3) as usize;
        [c.data[o], c.data[o + 1], c.data[o + 2]]
    }

    #[derive(serde::Deserialize)]
    struct BandCase {
        name: String,
        canvas: (u32, u32),
        band: BandPlan,
        levels: Vec<serde_json::Value>,
        expect: Vec<String>,
    }

    #[derive(serde::Deserialize)]
    struct BandVectors {
        theme: Theme,
        cases: Vec<BandCase>,
    }

    #[test]
    fn band_follows_the_shared_vectors() {
        let BandVectors { theme: t, cases } = crate::vectors::file("band-painting.json");
        let legend = [
            ('o', t.background),
            ('.', t.band_background),
            ('l', t.band_level),
            ('p', t.band_peak),
            ('t', t.band_tick),
        ];
        for case in cases {
            let (w, h) = case.canvas;
            let mut c = Canvas::new(w, h, t.background);
            let levels: Vec<f64> = case
                .levels
                .iter()
                .map(|v| v.as_f64().unwrap_or(f64::NAN))
                .collect();
            c.band(&case.band, &t, &levels);
            let picture: Vec<String> = (0..h)
                .map(|y| {
                    (0..w)
                        .map(|x| {
                            let p = px(&c, x, y);
                            legend
                                .iter()
                                .find(|(_, rgb)| *rgb == p)
                                .map_or('?', |l| l.0)
                        })
                        .collect()
                })
                .collect();
            assert_eq!(picture, case.expect, "{}", case.name);
        }
    }

    #[test]
    fn label_draws_box_and_glyphs() {
        let Some(font) = font() else { return };
        let t = theme();
        let mut c = Canvas::new(60, 20, [100, 100, 100]);
        let label = LabelPlan {
            text: "0:05".into(),
            r#box: Rect {
                x: 0,
                y: 0,
                w: 50,
                h: 20,
            },
            text_x: 4.0,
            baseline_y: 15.0,
            font_size: 14.0,
        };
        c.label(&font, &label, &t);
        // Box: 100 * (75/255) = 29.4 -> 29 where no glyph covers.
        assert_eq!(px(&c, 1, 1), [29, 29, 29]);
        assert_eq!(px(&c, 55, 1), [100, 100, 100]);
        let bright = c.data.chunks_exact(3).filter(|p| p[0] > 200).count();
        assert!(bright > 20, "glyphs drawn: {bright}");
    }
}
