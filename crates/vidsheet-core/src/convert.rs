//! Decoded frame -> upright RGB24 of an exact size: field drop for interlaced pictures, any pixel
//! format through swscale (honouring the frame's YUV matrix and range), then the display matrix.

use std::ptr;
use std::sync::Arc;

use ffmpeg_next::ffi;
use ffmpeg_next::util::error::ENOMEM;

use crate::orientation::Orientation;

/// Tightly packed RGB24 pixels (stride = 3 * w).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub w: u32,
    pub h: u32,
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    format: i32,
    src_w: i32,
    src_h: i32,
    dst_w: i32,
    dst_h: i32,
    colorspace: i32,
    full_range: bool,
}

/// A swscale context reused while the source and destination stay the same.
pub(crate) struct Scaler {
    ctx: *mut ffi::SwsContext,
    key: Option<Key>,
    /// An allocation failed (the worker's memory limit, DESIGN §5a): the job fails.
    out_of_memory: bool,
}

// The context is only ever used by the thread that owns the Scaler.
unsafe impl Send for Scaler {}

impl Drop for Scaler {
    fn drop(&mut self) {
        unsafe { ffi::sws_freeContext(self.ctx) };
    }
}

const FULL_RANGE_FORMATS: [ffi::AVPixelFormat; 5] = [
    ffi::AVPixelFormat::AV_PIX_FMT_YUVJ420P,
    ffi::AVPixelFormat::AV_PIX_FMT_YUVJ422P,
    ffi::AVPixelFormat::AV_PIX_FMT_YUVJ444P,
    ffi::AVPixelFormat::AV_PIX_FMT_YUVJ440P,
    ffi::AVPixelFormat::AV_PIX_FMT_YUVJ411P,
];

fn pixel_format(value: i32) -> Option<ffi::AVPixelFormat> {
    let nb = ffi::AVPixelFormat::AV_PIX_FMT_NB as i32;
    if !(0..nb).contains(&value) {
        return None;
    }
    // SAFETY: AVPixelFormat is a C enum with contiguous values 0..AV_PIX_FMT_NB (checked above).
    Some(unsafe { std::mem::transmute::<i32, ffi::AVPixelFormat>(value) })
}

impl Scaler {
    pub(crate) fn new() -> Self {
        Scaler {
            ctx: ptr::null_mut(),
            key: None,
            out_of_memory: false,
        }
    }

    /// Converts `frame` to RGB24 of exactly `dst_w x dst_h`. Interlaced frames are reduced to their
    /// first field (a line double in effect) before scaling, which removes combing at cell sizes.
    /// None when the frame cannot be converted (unknown or hardware pixel format, empty frame).
    pub(crate) fn convert(
        &mut self,
        frame: *const ffi::AVFrame,
        dst_w: u32,
        dst_h: u32,
    ) -> Option<Image> {
        if frame.is_null() || dst_w == 0 || dst_h == 0 || dst_w > 16384 || dst_h > 16384 {
            return None;
        }
        unsafe {
            let f = &*frame;
            let format = pixel_format(f.format)?;
            let desc = ffi::av_pix_fmt_desc_get(format);
            if desc.is_null() || f.width <= 0 || f.height <= 0 || f.data[0].is_null() {
                return None;
            }
            let flags = (*desc).flags;
            if flags & (ffi::AV_PIX_FMT_FLAG_HWACCEL | ffi::AV_PIX_FMT_FLAG_BITSTREAM) as u64 != 0 {
                return None;
            }
            let paletted = flags & ffi::AV_PIX_FMT_FLAG_PAL as u64 != 0;
            let is_rgb = flags & ffi::AV_PIX_FMT_FLAG_RGB as u64 != 0;
            let field = f.interlaced_frame != 0 && f.height >= 4 && !paletted;

            let mut src: [*const u8; 4] = [ptr::null(); 4];
            let mut strides = [0i32; 4];
            for i in 0..4 {
                src[i] = f.data[i];
                strides[i] = if field && !f.data[i].is_null() {
                    f.linesize[i].saturating_mul(2)
                } else {
                    f.linesize[i]
                };
            }
            let src_h = if field { f.height / 2 } else { f.height };

            let full_range = f.color_range == ffi::AVColorRange::AVCOL_RANGE_JPEG
                || FULL_RANGE_FORMATS.contains(&format);
            let key = Key {
                format: f.format,
                src_w: f.width,
                src_h,
                dst_w: dst_w as i32,
                dst_h: dst_h as i32,
                colorspace: f.colorspace as i32,
                full_range,
            };
            if self.key != Some(key) {
                self.ctx = ffi::sws_getCachedContext(
                    self.ctx,
                    f.width,
                    src_h,
                    format,
                    dst_w as i32,
                    dst_h as i32,
                    ffi::AVPixelFormat::AV_PIX_FMT_RGB24,
                    (ffi::SWS_BICUBIC | ffi::SWS_ACCURATE_RND | ffi::SWS_FULL_CHR_H_INT) as _,
                    ptr::null_mut(),
                    ptr::null_mut(),
                    ptr::null(),
                );
                if self.ctx.is_null() {
                    self.key = None;
                    return None;
                }
                if !is_rgb {
                    ffi::sws_setColorspaceDetails(
                        self.ctx,
                        ffi::sws_getCoefficients(key.colorspace),
                        full_range as i32,
                        ffi::sws_getCoefficients(ffi::SWS_CS_DEFAULT as _),
                        1,
                        0,
                        1 << 16,
                        1 << 16,
                    );
                }
                self.key = Some(key);
            }

            let row = dst_w as usize * 3;
            let stride = (row + 63) & !63;
            let mut buf = Vec::new();
            if buf.try_reserve_exact(stride * dst_h as usize + 64).is_err() {
                self.out_of_memory = true;
                return None;
            }
            buf.resize(stride * dst_h as usize + 64, 0u8);
            let dst: [*mut u8; 4] = [
                buf.as_mut_ptr(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            ];
            let dst_strides = [stride as i32, 0, 0, 0];
            let out = ffi::sws_scale(
                self.ctx,
                src.as_ptr(),
                strides.as_ptr(),
                0,
                src_h,
                dst.as_ptr(),
                dst_strides.as_ptr(),
            );
            if out <= 0 {
                self.out_of_memory |= out == ffi::AVERROR(ENOMEM);
                return None;
            }
            let mut data = Vec::new();
            if data.try_reserve_exact(row * dst_h as usize).is_err() {
                self.out_of_memory = true;
                return None;
            }
            for y in 0..dst_h as usize {
                data.extend_from_slice(&buf[y * stride..y * stride + row]);
            }
            Some(Image {
                w: dst_w,
                h: dst_h,
                data,
            })
        }
    }
}

impl Scaler {
    /// Whether an allocation failed in a conversion (see [`Scaler::out_of_memory`]'s field).
    pub(crate) fn out_of_memory(&self) -> bool {
        self.out_of_memory
    }
}

/// Scaled, upright images of decoded pictures, the last one kept: cells showing the same picture
/// at the same size are scaled once.
pub(crate) struct ScaleCache {
    scaler: Scaler,
    last: Option<((u64, u32, u32), Arc<Image>)>,
    orientation: Orientation,
}

impl ScaleCache {
    pub(crate) fn new(orientation: Orientation) -> Self {
        ScaleCache {
            scaler: Scaler::new(),
            last: None,
            orientation,
        }
    }

    /// Whether an allocation failed while scaling: the job fails (DESIGN §5a).
    pub(crate) fn out_of_memory(&self) -> bool {
        self.scaler.out_of_memory()
    }

    /// Picture `serial` (`frame`, whose pixels may be gone once scaled) as `w x h` upright. None
    /// when it cannot be converted (or its pixels are gone and it is not the last one scaled).
    pub(crate) fn get(
        &mut self,
        serial: u64,
        frame: *const ffi::AVFrame,
        w: u32,
        h: u32,
    ) -> Option<Arc<Image>> {
        let key = (serial, w, h);
        if let Some((k, img)) = &self.last {
            if *k == key {
                return Some(Arc::clone(img));
            }
        }
        let (sw, sh) = if self.orientation.transpose {
            (h, w)
        } else {
            (w, h)
        };
        let img = self
            .scaler
            .convert(frame, sw, sh)
            .map(|img| Arc::new(orient(img, self.orientation)))?;
        self.last = Some((key, Arc::clone(&img)));
        Some(img)
    }
}

/// Applies the display orientation (transpose, then flips) to an RGB image.
pub(crate) fn orient(img: Image, o: Orientation) -> Image {
    if o == Orientation::default() {
        return img;
    }
    let (ow, oh) = if o.transpose {
        (img.h, img.w)
    } else {
        (img.w, img.h)
    };
    let mut data = vec![0u8; img.data.len()];
    let iw = img.w as usize;
    for oy in 0..oh as usize {
        let ty = if o.vflip { oh as usize - 1 - oy } else { oy };
        for ox in 0..ow as usize {
            let tx = if o.hflip { ow as usize - 1 - ox } else { ox };
            let (sx, sy) = if o.transpose { (ty, tx) } else { (tx, ty) };
            let s = (sy * iw + sx) * 3;
            let d = (oy * ow as usize + ox) * 3;
            data[d..d + 3].copy_from_slice(&img.data[s..s + 3]);
        }
    }
    Image { w: ow, h: oh, data }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(w: u32, h: u32) -> Image {
        // Pixel value encodes its position: r = x, g = y.
        let mut data = Vec::new();
        for y in 0..h {
            for x in 0..w {
                data.extend_from_slice(&[x as u8, y as u8, 0]);
            }
        }
        Image { w, h, data }
    }

    fn px(i: &Image, x: u32, y: u32) -> (u8, u8) {
        let o = ((y * i.w + x) * 3) as usize;
        (i.data[o], i.data[o + 1])
    }

    #[test]
    fn clockwise_rotation_moves_top_left_to_top_right() {
        let src = img(4, 2);
        let out = orient(
            src,
            Orientation {
                transpose: true,
                hflip: true,
                vflip: false,
            },
        );
        assert_eq!((out.w, out.h), (2, 4));
        assert_eq!(px(&out, 1, 0), (0, 0));
        assert_eq!(px(&out, 0, 0), (0, 1));
        assert_eq!(px(&out, 1, 3), (3, 0));
    }

    #[test]
    fn counter_clockwise_rotation_moves_top_left_to_bottom_left() {
        let out = orient(
            img(4, 2),
            Orientation {
                transpose: true,
                hflip: false,
                vflip: true,
            },
        );
        assert_eq!((out.w, out.h), (2, 4));
        assert_eq!(px(&out, 0, 3), (0, 0));
        assert_eq!(px(&out, 0, 0), (3, 0));
    }
}
