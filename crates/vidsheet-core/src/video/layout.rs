//! What a decoded picture is in memory: its size and its pixel format's description, read once
//! for the passes over its samples ([`super::fingerprint`], [`super::thumbs`]).

use ff::ffi;
use ffmpeg_next as ff;

/// A picture's frame, width, height, pixel format and that format's description (never null).
pub(super) type Layout = (
    *const ffi::AVFrame,
    i32,
    i32,
    ffi::AVPixelFormat,
    *const ffi::AVPixFmtDescriptor,
);

/// The picture's layout; None when the picture is gone or its format unknown.
pub(super) fn layout(frame: &ff::frame::Video) -> Option<Layout> {
    // SAFETY: a frame the decoder returned (or an empty one: its pointers are checked).
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
        (!desc.is_null()).then_some((raw, w, h, format, desc))
    }
}
