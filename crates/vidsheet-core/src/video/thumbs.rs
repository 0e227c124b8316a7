//! The `picture` signal's material (src/core/pictures.ts): a tiny luma thumbnail of every picture
//! decoded, read straight from the decoder's luma plane. The fallback's twin is
//! src/engine/ffmpeg/thumbs.ts (an area scale of the same plane).

use ff::ffi;
use ffmpeg_next as ff;

/// The thumbnail's grid (src/core/pictures.ts `THUMB`): 32x18 means, row by row.
pub(crate) const THUMB_W: usize = 32;
pub(crate) const THUMB_H: usize = 18;
pub(crate) const THUMB_BYTES: usize = THUMB_W * THUMB_H;

/// Samples read per thumbnail cell at most, across and down: a cell's mean from a grid of 16x8 of
/// its samples is within a level or two of the mean of all of them, and reading all of a 1080p
/// picture's 2 million would cost a sixth of its decode.
const SAMPLES_ACROSS: usize = 16;
const SAMPLES_DOWN: usize = 8;

/// Formats whose first component is no luma (RGB, palette, Bayer, float) or not in memory.
const NO_LUMA: u64 = (ffi::AV_PIX_FMT_FLAG_RGB
    | ffi::AV_PIX_FMT_FLAG_PAL
    | ffi::AV_PIX_FMT_FLAG_BAYER
    | ffi::AV_PIX_FMT_FLAG_FLOAT
    | ffi::AV_PIX_FMT_FLAG_HWACCEL
    | ffi::AV_PIX_FMT_FLAG_BITSTREAM) as u64;

/// The picture's thumbnail: the luma plane's means over a THUMB_W x THUMB_H grid, in full-range
/// 8-bit levels (a limited-range plane's 16..235 stretched to 0..255, as swscale makes gray of it,
/// so a white flash is 255 on either engine). None when the picture is gone or has no luma plane.
pub(crate) fn thumbnail(frame: &ff::frame::Video) -> Option<[u8; THUMB_BYTES]> {
    // SAFETY: a frame the decoder returned; every read below is inside its luma plane's rows
    // (x < w, y < h, each row `linesize` bytes apart, `step` bytes a sample).
    unsafe {
        let raw = frame.as_ptr();
        if raw.is_null() || (*raw).data[0].is_null() {
            return None;
        }
        let (w, h) = ((*raw).width, (*raw).height);
        let nb = ffi::AVPixelFormat::AV_PIX_FMT_NB as i32;
        if w <= 0 || h <= 0 || !(0..nb).contains(&(*raw).format) {
            return None;
        }
        // SAFETY: AVPixelFormat is a C enum with contiguous values 0..AV_PIX_FMT_NB.
        let format = std::mem::transmute::<i32, ffi::AVPixelFormat>((*raw).format);
        let desc = ffi::av_pix_fmt_desc_get(format);
        if desc.is_null() || (*desc).flags & NO_LUMA != 0 || (*desc).nb_components == 0 {
            return None;
        }
        let luma = (*desc).comp[0];
        let plane = luma.plane as usize;
        let (depth, step, shift) = (luma.depth as u32, luma.step as usize, luma.shift as u32);
        let data = (*raw).data[plane];
        let stride = (*raw).linesize[plane];
        let wide = depth > 8;
        if data.is_null() || stride <= 0 || !(1..=16).contains(&depth) || step == 0 {
            return None;
        }
        let big_endian = (*desc).flags & ffi::AV_PIX_FMT_FLAG_BE as u64 != 0;
        let (w, h) = (w as usize, h as usize);
        if (w - 1) * step + luma.offset as usize + usize::from(wide) >= stride as usize {
            return None;
        }
        let sample = |x: usize, y: usize| -> u32 {
            let at = data.add(y * stride as usize + x * step + luma.offset as usize);
            let v = if wide {
                let pair = [*at, *at.add(1)];
                u32::from(if big_endian {
                    u16::from_be_bytes(pair)
                } else {
                    u16::from_le_bytes(pair)
                })
            } else {
                u32::from(*at)
            };
            let v = (v >> shift) & ((1 << depth) - 1);
            if depth >= 8 {
                v >> (depth - 8)
            } else {
                v << (8 - depth)
            }
        };
        // Limited range unless the frame or its format says full (the yuvj formats, gray).
        let full = (*raw).color_range == ffi::AVColorRange::AVCOL_RANGE_JPEG
            || (*desc).nb_components < 3
            || matches!(
                format,
                ffi::AVPixelFormat::AV_PIX_FMT_YUVJ420P
                    | ffi::AVPixelFormat::AV_PIX_FMT_YUVJ422P
                    | ffi::AVPixelFormat::AV_PIX_FMT_YUVJ444P
                    | ffi::AVPixelFormat::AV_PIX_FMT_YUVJ440P
                    | ffi::AVPixelFormat::AV_PIX_FMT_YUVJ411P
            );
        let level = |mean: f64| if full { mean } else { (mean - 16.0) * 255.0 / 219.0 };
        let thumb = means(w, h, sample, level);
        Some(thumb)
    }
}

/// The grid's means of `sample` over a w x h picture, from a spread of samples in each cell, each
/// mapped by `level` to a byte.
fn means(
    w: usize,
    h: usize,
    sample: impl Fn(usize, usize) -> u32,
    level: impl Fn(f64) -> f64,
) -> [u8; THUMB_BYTES] {
    let across = (w / (THUMB_W * SAMPLES_ACROSS)).max(1);
    let down = (h / (THUMB_H * SAMPLES_DOWN)).max(1);
    let mut sums = [0u64; THUMB_BYTES];
    let mut counts = [0u64; THUMB_BYTES];
    // Cells split the picture as evenly as whole pixels allow; samples start half a stride in.
    let mut y = down / 2;
    while y < h {
        let row = (y * THUMB_H / h) * THUMB_W;
        let mut x = across / 2;
        while x < w {
            let cell = row + x * THUMB_W / w;
            sums[cell] += u64::from(sample(x, y));
            counts[cell] += 1;
            x += across;
        }
        y += down;
    }
    let mut out = [0u8; THUMB_BYTES];
    for (i, o) in out.iter_mut().enumerate() {
        if counts[i] > 0 {
            let mean = sums[i] as f64 / counts[i] as f64;
            *o = level(mean).round().clamp(0.0, 255.0) as u8;
        }
    }
    out
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
    fn rgb_has_no_luma_thumbnail() {
        let frame = ff::frame::Video::new(ff::format::Pixel::RGB24, 64, 36);
        assert!(thumbnail(&frame).is_none());
    }
}
