//! The `picture` signal's material (src/core/pictures.ts): a tiny luma thumbnail of every picture
//! decoded, read straight from the decoder's luma plane (or its RGB planes). The fallback's twin is
//! src/engine/ffmpeg/thumbs.ts (an area scale of the same plane).

use ff::ffi;
use ffmpeg_next as ff;

/// The thumbnail's grid (src/core/pictures.ts `THUMB`): 32x18 means, row by row.
pub(crate) const THUMB_W: usize = 32;
pub(crate) const THUMB_H: usize = 18;
pub(crate) const THUMB_BYTES: usize = THUMB_W * THUMB_H;
/// Pictures a render hands over at most (src/core/pictures.ts MAX_PICTURES): past it the rest of
/// the run has no `picture` signal, so a million tiny frames cost no more than a long film.
pub(crate) const MAX_PICTURES: usize = 100_000;

/// Samples read per thumbnail cell, across and down, evenly spread in it: the mean of 32 samples
/// is within a level or two of the mean of all the cell's pixels (the fallback's area scale), and
/// reading a fixed 18,432 a picture keeps the cost below a tenth of a 360p picture's decode.
const SAMPLES_ACROSS: usize = 8;
const SAMPLES_DOWN: usize = 4;

/// Formats with no luma to read: palette, Bayer, float, or not in memory.
const UNREADABLE: u64 = (ffi::AV_PIX_FMT_FLAG_PAL
    | ffi::AV_PIX_FMT_FLAG_BAYER
    | ffi::AV_PIX_FMT_FLAG_FLOAT
    | ffi::AV_PIX_FMT_FLAG_HWACCEL
    | ffi::AV_PIX_FMT_FLAG_BITSTREAM) as u64;

/// The picture's thumbnail: the luma's means over a THUMB_W x THUMB_H grid, in full-range 8-bit
/// levels, as swscale makes gray of it (so a white flash is 255 on either engine): a limited-range
/// luma plane's 16..235 stretched to 0..255; an RGB picture's luma is BT.601's
/// 0.299 R + 0.587 G + 0.114 B. None when the picture is gone or has no luma to read.
pub(crate) fn thumbnail(frame: &ff::frame::Video) -> Option<[u8; THUMB_BYTES]> {
    let (raw, w, h, format, desc) = super::layout::layout(frame)?;
    // SAFETY: a frame the decoder returned; `Component::of` checks that every read it makes is
    // inside the component's plane.
    unsafe {
        if (*desc).flags & UNREADABLE != 0 || (*desc).nb_components == 0 {
            return None;
        }
        let (w, h) = (w as usize, h as usize);
        let component = |i: usize| Component::of(raw, desc, i, w);
        let sums = if (*desc).flags & ffi::AV_PIX_FMT_FLAG_RGB as u64 != 0 {
            // The descriptor lists an RGB format's components as R, G, B, wherever they are.
            let (r, g, b) = (component(0)?, component(1)?, component(2)?);
            sample_sums(w, h, |y, x| {
                (19595 * r.get(y, x) + 38470 * g.get(y, x) + 7471 * b.get(y, x) + 32768) >> 16
            })
        } else {
            let luma = component(0)?;
            sample_sums(w, h, |y, x| luma.get(y, x))
        };
        // Limited range unless RGB, or the frame or its format says full (the yuvj formats, gray).
        let full = (*desc).flags & ffi::AV_PIX_FMT_FLAG_RGB as u64 != 0
            || (*raw).color_range == ffi::AVColorRange::AVCOL_RANGE_JPEG
            || (*desc).nb_components < 3
            || matches!(
                format,
                ffi::AVPixelFormat::AV_PIX_FMT_YUVJ420P
                    | ffi::AVPixelFormat::AV_PIX_FMT_YUVJ422P
                    | ffi::AVPixelFormat::AV_PIX_FMT_YUVJ444P
                    | ffi::AVPixelFormat::AV_PIX_FMT_YUVJ440P
                    | ffi::AVPixelFormat::AV_PIX_FMT_YUVJ411P
            );
        let samples = (SAMPLES_ACROSS * SAMPLES_DOWN) as f64;
        let mut thumb = [0u8; THUMB_BYTES];
        for (t, &sum) in thumb.iter_mut().zip(sums.iter()) {
            let mean = sum as f64 / samples;
            let level = if full {
                mean
            } else {
                (mean - 16.0) * 255.0 / 219.0
            };
            *t = level.round().clamp(0.0, 255.0) as u8;
        }
        Some(thumb)
    }
}

/// Where one component of a full-size plane lies in memory (its descriptor's entry), read as
/// 8-bit levels.
struct Component {
    data: *const u8,
    stride: usize,
    step: usize,
    /// Bytes to the component's word in a pixel.
    offset: usize,
    depth: u32,
    shift: u32,
    /// The word it is read from, as `av_read_image_line2` does: 1, 2 or 4 bytes (by the bits up
    /// to its top one).
    bytes: usize,
    big_endian: bool,
}

impl Component {
    /// Component `i` of a picture `w` pixels wide, on a full-size plane (luma and RGB components
    /// are; chroma is never asked for); None when a read at x < w would leave its rows.
    ///
    /// # Safety
    /// `raw` and `desc` are a decoded picture's frame and its format's description.
    unsafe fn of(
        raw: *const ffi::AVFrame,
        desc: *const ffi::AVPixFmtDescriptor,
        i: usize,
        w: usize,
    ) -> Option<Component> {
        if i >= (*desc).nb_components as usize {
            return None;
        }
        let c = (*desc).comp[i];
        let plane = c.plane as usize;
        let (depth, shift, step) = (c.depth as u32, c.shift as u32, c.step as usize);
        let data = (*raw).data[plane];
        let stride = (*raw).linesize[plane];
        if data.is_null()
            || stride <= 0
            || !(1..=16).contains(&depth)
            || shift + depth > 32
            || step == 0
        {
            return None;
        }
        let big_endian = (*desc).flags & ffi::AV_PIX_FMT_FLAG_BE as u64 != 0;
        let bytes = match shift + depth {
            0..=8 => 1,
            9..=16 => 2,
            _ => 4,
        };
        // An 8-bit component of a big-endian format is the low byte of its word.
        let offset = c.offset as usize + usize::from(bytes == 1 && big_endian);
        if (w - 1) * step + offset + bytes > stride as usize {
            return None;
        }
        Some(Component {
            data,
            stride: stride as usize,
            step,
            offset,
            depth,
            shift,
            bytes,
            big_endian,
        })
    }

    /// The sample at row y < h, column x < w, in 8-bit levels.
    #[inline]
    fn get(&self, y: usize, x: usize) -> u32 {
        // SAFETY: inside the plane's rows (checked by `of` for x < w; y < h rows exist).
        let at = unsafe { self.data.add(y * self.stride + self.offset + x * self.step) };
        if self.bytes == 1 && self.depth == 8 && self.shift == 0 {
            // The common case (8-bit planar or packed): a plain byte load.
            return u32::from(unsafe { *at });
        }
        let word = match self.bytes {
            1 => u32::from(unsafe { *at }),
            2 => {
                let b = unsafe { [*at, *at.add(1)] };
                u32::from(if self.big_endian {
                    u16::from_be_bytes(b)
                } else {
                    u16::from_le_bytes(b)
                })
            }
            _ => {
                let b = unsafe { [*at, *at.add(1), *at.add(2), *at.add(3)] };
                if self.big_endian {
                    u32::from_be_bytes(b)
                } else {
                    u32::from_le_bytes(b)
                }
            }
        };
        let v = (word >> self.shift) & ((1u32 << self.depth) - 1);
        if self.depth >= 8 {
            v >> (self.depth - 8)
        } else {
            // Widened by a shift, as swscale makes gray of RGB555 (31 of 5 bits is 248).
            v << (8 - self.depth)
        }
    }
}

/// Per thumbnail cell, the sum of SAMPLES_ACROSS x SAMPLES_DOWN samples of a w x h plane, evenly
/// spread in it (`sample(y, x)`; a cell smaller than that reads some pixels more than once).
fn sample_sums(w: usize, h: usize, sample: impl Fn(usize, usize) -> u32) -> [u32; THUMB_BYTES] {
    // Sample k of n across a span of `len` pixels split into `cells`: the centre of its share.
    let spread = |len: usize, cells: usize, n: usize| -> Vec<usize> {
        (0..cells * n)
            .map(|k| ((2 * k + 1) * len / (2 * cells * n)).min(len - 1))
            .collect()
    };
    let xs = spread(w, THUMB_W, SAMPLES_ACROSS);
    let ys = spread(h, THUMB_H, SAMPLES_DOWN);
    let mut sums = [0u32; THUMB_BYTES];
    for (j, &y) in ys.iter().enumerate() {
        let cells = &mut sums[(j / SAMPLES_DOWN) * THUMB_W..][..THUMB_W];
        for (c, chunk) in xs.chunks_exact(SAMPLES_ACROSS).enumerate() {
            cells[c] += chunk.iter().map(|&x| sample(y, x)).sum::<u32>();
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cell_is_the_mean_of_its_part_of_the_luma_plane() {
        // 640x360: cells of 20x20; the left half 40, the right half 200, one cell 120.
        let mut frame = ff::frame::Video::new(ff::format::Pixel::YUV420P, 640, 360);
        let stride = frame.stride(0);
        for (i, b) in frame.data_mut(0).iter_mut().enumerate() {
            let (x, y) = (i % stride, i / stride);
            *b = if (60..80).contains(&x) && (20..40).contains(&y) {
                120
            } else if x < 320 {
                40
            } else {
                200
            };
        }
        // The chroma planes are not luma.
        frame.data_mut(1).fill(255);
        // Limited range, stretched: 40 -> 28, 120 -> 121, 200 -> 214.
        let t = thumbnail(&frame).expect("a luma plane");
        assert_eq!(t[0], 28);
        assert_eq!(t[THUMB_W + 3], 121);
        assert_eq!(t[15], 28);
        assert_eq!(t[16], 214);
        assert_eq!(t[THUMB_BYTES - 1], 214);
        // Full range as stored.
        unsafe { (*frame.as_mut_ptr()).color_range = ffi::AVColorRange::AVCOL_RANGE_JPEG };
        let t = thumbnail(&frame).expect("a luma plane");
        assert_eq!((t[0], t[THUMB_W + 3], t[16]), (40, 120, 200));
    }

    #[test]
    fn ten_bit_luma_comes_down_to_eight_bit_levels() {
        let mut frame = ff::frame::Video::new(ff::format::Pixel::YUV420P10LE, 64, 36);
        for pair in frame.data_mut(0).chunks_exact_mut(2) {
            pair.copy_from_slice(&(800u16).to_le_bytes());
        }
        // 800 of 1023 is 200 of 255 in limited range: 214 stretched.
        let t = thumbnail(&frame).expect("a luma plane");
        assert!(t.iter().all(|&v| v == 214), "{t:?}");
    }

    #[test]
    fn rgb_luma_is_bt601_full_range_in_any_layout() {
        // swscale's gray of pure red, green, blue and white: 76, 150, 29, 255.
        let colours = [
            ([255, 0, 0], 76),
            ([0, 255, 0], 150),
            ([0, 0, 255], 29),
            ([255; 3], 255),
        ];
        for (rgb, luma) in colours {
            let mut packed = ff::frame::Video::new(ff::format::Pixel::BGRA, 64, 36);
            for px in packed.data_mut(0).chunks_exact_mut(4) {
                px.copy_from_slice(&[rgb[2], rgb[1], rgb[0], 255]);
            }
            let t = thumbnail(&packed).expect("RGB has a luma");
            assert!(t.iter().all(|&v| v == luma), "BGRA {rgb:?}: {t:?}");
            // Planar G, B, R.
            let mut planar = ff::frame::Video::new(ff::format::Pixel::GBRP, 64, 36);
            for (plane, value) in [(0, rgb[1]), (1, rgb[2]), (2, rgb[0])] {
                planar.data_mut(plane).fill(value);
            }
            let t = thumbnail(&planar).expect("RGB has a luma");
            assert!(t.iter().all(|&v| v == luma), "GBRP {rgb:?}: {t:?}");
        }
    }

    #[test]
    fn packed_rgb_words_are_read_whole() {
        // Red full, green half, blue none: RGB555LE (0RRRRRGG GGGBBBBB, a 16-bit word; 31 of 5
        // bits widens to 248, as swscale makes it: 0.299 * 248 + 0.587 * 128 = 149.3, ffmpeg's gray
        // 150) and X2RGB10LE (10 bits each in a 32-bit word: 0.299 * 255 + 0.587 * 128 = 151.4).
        let cases: [(ff::format::Pixel, Vec<u8>, u8); 2] = [
            (
                ff::format::Pixel::RGB555LE,
                ((31u16 << 10) | (16 << 5)).to_le_bytes().to_vec(),
                149,
            ),
            (
                ff::format::Pixel::X2RGB10LE,
                ((1023u32 << 20) | (512 << 10)).to_le_bytes().to_vec(),
                151,
            ),
        ];
        for (format, word, luma) in cases {
            let mut frame = ff::frame::Video::new(format, 64, 36);
            for px in frame.data_mut(0).chunks_exact_mut(word.len()) {
                px.copy_from_slice(&word);
            }
            let t = thumbnail(&frame).expect("RGB has a luma");
            assert!(t.iter().all(|&v| v == luma), "{format:?}: {t:?}");
        }
    }

    #[test]
    fn a_palette_has_no_thumbnail() {
        let frame = ff::frame::Video::new(ff::format::Pixel::PAL8, 64, 36);
        assert!(thumbnail(&frame).is_none());
    }
}
