//! How far back a picture may reference: what seek recovery needs to know whether two decodes
//! that started at different places could differ because of the pictures before the later start.
//! H.264 says it in its sequence parameter set (`max_num_ref_frames`); read from the stream's
//! extradata ([`super::h264`]) because a frame-threaded decoder does not report it.

use ff::ffi;
use ffmpeg_next as ff;

use super::h264;

/// Reference pictures a picture may predict from, at most (H.264, HEVC).
pub(super) const MAX_REFERENCES: u32 = 16;

/// The reference pictures of the stream's H.264 sequence parameter set; None for another codec
/// or when it cannot be read.
pub(super) fn h264_references(par: *const ffi::AVCodecParameters) -> Option<u32> {
    let refs = h264::stream_sps(par)?.max_num_ref_frames;
    (refs <= MAX_REFERENCES).then_some(refs)
}
