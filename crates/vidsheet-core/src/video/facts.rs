//! What the stream is: read once at the open, never changed after it, and the time arithmetic
//! on the stream's time base.

use ff::ffi;
use ff::format::context::Input;
use ffmpeg_next as ff;

use super::{h264, timestamps};
use crate::error::{Error, Result};
use crate::media::{self, Opening};
use crate::orientation::Orientation;

/// Bytes of one picture of the stream: its size times the bits per pixel of its format (24 when
/// the format is unknown).
unsafe fn picture_bytes(par: *const ffi::AVCodecParameters) -> u64 {
    if par.is_null() {
        return 0;
    }
    let (w, h) = ((*par).width.max(0) as u64, (*par).height.max(0) as u64);
    let nb = ffi::AVPixelFormat::AV_PIX_FMT_NB as i32;
    let bits = if (0..nb).contains(&(*par).format) {
        // SAFETY: AVPixelFormat is a C enum with contiguous values 0..AV_PIX_FMT_NB.
        let format = std::mem::transmute::<i32, ffi::AVPixelFormat>((*par).format);
        let desc = ffi::av_pix_fmt_desc_get(format);
        if desc.is_null() {
            24
        } else {
            ffi::av_get_padded_bits_per_pixel(desc).max(8) as u64
        }
    } else {
        24
    };
    w.saturating_mul(h).saturating_mul(bits) / 8
}

/// What the stream is, read at the open and never changed after it.
pub(crate) struct Facts {
    path: String,
    /// How the file is opened again (a rewind): the demuxer of the first open, when restricted.
    container: Opening,
    index: usize,
    /// Stream time base.
    tb_num: i64,
    tb_den: i64,
    orientation: Orientation,
    /// Container start time in microseconds (0 when unknown).
    start_us: i64,
    /// Bytes of one decoded picture (an estimate when the pixel format is not known yet).
    picture_bytes: u64,
    /// Pixels of one picture (0 when unknown).
    pixels: u64,
    /// The stream's average and real frame rates (num, den; 0 or below: unknown).
    rates: ((i64, i64), (i64, i64)),
    /// Picture duration guess in stream units, for frames without timestamps
    /// ([`timestamps::frame_step`] without a packet duration; 1 when unknown).
    frame_step: i64,
    /// The reference frames of the stream's H.264 sequence parameter set (`max_num_ref_frames`),
    /// when the stream is H.264 and its extradata has one that can be read (from the bytes: a
    /// frame-threaded decoder does not report it). The reach's input ([`super::reach`]).
    sps_refs: Option<u32>,
    /// Where the stream header says the stream ends (stream units), when it says so.
    declared_end: Option<i64>,
}

impl Facts {
    /// The facts of stream `index` of `input` (`st`), opened from `path` as `container` allows.
    pub(super) fn read(
        path: &str,
        container: Opening,
        input: &Input,
        index: usize,
        st: *mut ffi::AVStream,
    ) -> Result<Facts> {
        let (tb, orientation, avg, real) = unsafe {
            (
                (*st).time_base,
                Orientation::of_stream(st),
                (*st).avg_frame_rate,
                (*st).r_frame_rate,
            )
        };
        if tb.num <= 0 || tb.den <= 0 {
            return Err(Error::unreadable("the video stream has no time base"));
        }
        let rates = (
            (avg.num as i64, avg.den as i64),
            (real.num as i64, real.den as i64),
        );
        let time_base = (tb.num as i64, tb.den as i64);
        let frame_step = timestamps::frame_step(None, time_base, rates.0, rates.1).unwrap_or(1);
        let start_us = media::start_us(input);
        let picture_bytes = unsafe { picture_bytes((*st).codecpar) };
        let pixels = unsafe {
            let par = (*st).codecpar;
            (*par).width.max(0) as u64 * (*par).height.max(0) as u64
        };
        let sps_refs =
            h264::stream_sps(unsafe { (*st).codecpar }).map(|sps| sps.max_num_ref_frames);
        let declared_end = unsafe {
            let (start, duration) = ((*st).start_time, (*st).duration);
            (duration != ffi::AV_NOPTS_VALUE && duration > 0).then(|| {
                let start = if start == ffi::AV_NOPTS_VALUE {
                    0
                } else {
                    start
                };
                start.saturating_add(duration)
            })
        };
        Ok(Facts {
            path: path.to_string(),
            container,
            index,
            tb_num: tb.num as i64,
            tb_den: tb.den as i64,
            orientation,
            start_us,
            picture_bytes,
            pixels,
            rates,
            frame_step,
            sps_refs,
            declared_end,
        })
    }

    pub(crate) fn orientation(&self) -> Orientation {
        self.orientation
    }

    pub(crate) fn start_us(&self) -> i64 {
        self.start_us
    }

    pub(crate) fn picture_bytes(&self) -> u64 {
        self.picture_bytes
    }

    pub(crate) fn pixels(&self) -> u64 {
        self.pixels
    }

    pub(super) fn path(&self) -> &str {
        &self.path
    }

    pub(super) fn container(&self) -> &Opening {
        &self.container
    }

    pub(super) fn index(&self) -> usize {
        self.index
    }

    pub(super) fn frame_step(&self) -> i64 {
        self.frame_step
    }

    /// The step of a frame whose packet lasted `duration` ([`timestamps::frame_step`]; 1 when
    /// unknown).
    pub(super) fn step_of(&self, duration: i64) -> i64 {
        let (avg, real) = self.rates;
        let time_base = (self.tb_num, self.tb_den);
        timestamps::frame_step(Some(duration), time_base, avg, real).unwrap_or(1)
    }

    pub(super) fn sps_refs(&self) -> Option<u32> {
        self.sps_refs
    }

    pub(super) fn declared_end(&self) -> Option<i64> {
        self.declared_end
    }

    /// pts <= target, compared exactly: pts * num * 1e6 <= target_us * den.
    pub(super) fn le(&self, pts: i64, target_us: i64) -> bool {
        (pts as i128) * (self.tb_num as i128) * 1_000_000
            <= (target_us as i128) * (self.tb_den as i128)
    }

    /// The largest stream timestamp <= target.
    pub(super) fn ts_floor(&self, target_us: i64) -> i64 {
        let n = (target_us as i128) * (self.tb_den as i128);
        let d = (self.tb_num as i128) * 1_000_000;
        let q = n.div_euclid(d);
        q.clamp(i64::MIN as i128 + 1, i64::MAX as i128) as i64
    }

    pub(super) fn seconds_in_ts(&self, secs: i64) -> i64 {
        ((secs as i128 * self.tb_den as i128) / self.tb_num as i128).clamp(1, i64::MAX as i128)
            as i64
    }

    /// A stream timestamp on the labels' clock ([`super::timestamps`]).
    pub(super) fn label_seconds(&self, ts: i64) -> f64 {
        super::timestamps::label_seconds(ts, (self.tb_num, self.tb_den), self.start_us)
    }
}
