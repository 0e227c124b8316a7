//! Opening inputs, choosing the video stream, orientation and probing.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::Once;

use ff::ffi;
use ff::format::context::Input;
use ffmpeg_next as ff;

use crate::error::{Error, Result};
use crate::plan::ProbeInfo;

/// Silences FFmpeg's own logging (stderr belongs to the host; errors travel as codes).
pub(crate) fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| unsafe {
        let level = if std::env::var_os("VIDSHEET_FFMPEG_LOG").is_some() {
            ffi::AV_LOG_WARNING
        } else {
            ffi::AV_LOG_QUIET
        };
        ffi::av_log_set_level(level);
    });
}

/// FFmpeg's text for an error code, e.g. "Invalid data found when processing input".
pub(crate) fn av_error(code: i32) -> String {
    let mut buf = [0 as std::ffi::c_char; 256];
    let text = unsafe {
        if ffi::av_strerror(code, buf.as_mut_ptr(), buf.len()) < 0 {
            return format!("error {code}");
        }
        std::ffi::CStr::from_ptr(buf.as_ptr())
            .to_string_lossy()
            .into_owned()
    };
    if text.is_empty() {
        format!("error {code}")
    } else {
        text
    }
}

/// Opens `path` as a local file only: no protocol prefixes (`http:`, `concat:`) are honoured and
/// playlists cannot reach beyond the file protocol.
pub(crate) fn open_input(path: &str) -> Result<Input> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::not_found(format!("input file not found: {path}")));
        }
        Err(e) => {
            return Err(Error::unreadable(format!(
                "cannot read the input file ({e})"
            )))
        }
        Ok(m) if m.is_dir() => {
            return Err(Error::unreadable(
                "the input is a directory, not a video file",
            ));
        }
        Ok(m) if !m.is_file() => {
            return Err(Error::unreadable("the input is not a regular file"));
        }
        Ok(_) => {}
    }
    let mut url = b"file:".to_vec();
    url.extend_from_slice(Path::new(path).as_os_str().as_bytes());
    let url = CString::new(url).map_err(|_| Error::not_found("input path contains a NUL byte"))?;
    unsafe {
        let mut opts: *mut ffi::AVDictionary = ptr::null_mut();
        ffi::av_dict_set(
            &mut opts,
            c"protocol_whitelist".as_ptr(),
            c"file".as_ptr(),
            0,
        );
        let mut ctx: *mut ffi::AVFormatContext = ptr::null_mut();
        let rc = ffi::avformat_open_input(&mut ctx, url.as_ptr(), ptr::null(), &mut opts);
        ffi::av_dict_free(&mut opts);
        if rc < 0 {
            return Err(Error::unreadable(format!(
                "the file is not a readable video ({})",
                av_error(rc)
            )));
        }
        let rc = ffi::avformat_find_stream_info(ctx, ptr::null_mut());
        if rc < 0 {
            ffi::avformat_close_input(&mut ctx);
            return Err(Error::unreadable(format!(
                "the file's streams could not be read ({})",
                av_error(rc)
            )));
        }
        Ok(Input::wrap(ctx))
    }
}

fn is_video(st: *const ffi::AVStream) -> bool {
    unsafe {
        let par = (*st).codecpar;
        !par.is_null() && (*par).codec_type == ffi::AVMediaType::AVMEDIA_TYPE_VIDEO
    }
}

fn is_cover_art(st: *const ffi::AVStream) -> bool {
    unsafe { (*st).disposition & ffi::AV_DISPOSITION_ATTACHED_PIC != 0 }
}

fn has_decoder(st: *const ffi::AVStream) -> bool {
    unsafe { !ffi::avcodec_find_decoder((*(*st).codecpar).codec_id).is_null() }
}

pub(crate) fn stream_ptr(input: &Input, index: usize) -> Option<*mut ffi::AVStream> {
    unsafe {
        let ctx = input.as_ptr();
        if index >= (*ctx).nb_streams as usize {
            return None;
        }
        let st = *(*ctx).streams.add(index);
        (!st.is_null()).then_some(st)
    }
}

fn stream_count(input: &Input) -> usize {
    unsafe { (*input.as_ptr()).nb_streams as usize }
}

/// The video stream av_find_best_stream picks, skipping cover art (an MP3 with an embedded
/// picture is an audio file, not a video).
pub(crate) fn best_video_stream(input: &mut Input) -> Result<usize> {
    let best = unsafe {
        ffi::av_find_best_stream(
            input.as_mut_ptr(),
            ffi::AVMediaType::AVMEDIA_TYPE_VIDEO,
            -1,
            -1,
            ptr::null_mut(),
            0,
        )
    };
    if best >= 0 {
        if let Some(st) = stream_ptr(input, best as usize) {
            if !is_cover_art(st) && has_decoder(st) {
                return Ok(best as usize);
            }
        }
    }
    (0..stream_count(input))
        .find(|&i| {
            stream_ptr(input, i)
                .is_some_and(|st| is_video(st) && !is_cover_art(st) && has_decoder(st))
        })
        .ok_or_else(|| Error::unreadable("the file has no decodable video stream"))
}

/// Checks that `index` (from the probe) names a decodable video stream.
pub(crate) fn check_video_stream(input: &Input, index: u32) -> Result<*mut ffi::AVStream> {
    match stream_ptr(input, index as usize) {
        Some(st) if is_video(st) && has_decoder(st) => Ok(st),
        _ => Err(Error::unreadable(format!(
            "stream {index} is not a decodable video stream"
        ))),
    }
}

/// How decoded pictures are turned upright, mirroring ffmpeg's autorotate (transpose, hflip,
/// vflip chosen from the display matrix). Applied as: transpose first, then flips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Orientation {
    pub transpose: bool,
    pub hflip: bool,
    pub vflip: bool,
}

impl Orientation {
    pub(crate) fn from_matrix(m: &[i32; 9]) -> Self {
        let angle = unsafe { ffi::av_display_rotation_get(m.as_ptr()) };
        if !angle.is_finite() {
            return Orientation::default();
        }
        let mut theta = -angle.round();
        theta -= 360.0 * (theta / 360.0 + 0.9 / 360.0).floor();
        let near = |a: f64| (theta - a).abs() < 1.0;
        if near(90.0) {
            if m[3] > 0 {
                // transpose=cclock_flip
                Orientation {
                    transpose: true,
                    hflip: false,
                    vflip: false,
                }
            } else {
                // transpose=clock
                Orientation {
                    transpose: true,
                    hflip: true,
                    vflip: false,
                }
            }
        } else if near(180.0) {
            Orientation {
                transpose: false,
                hflip: m[0] < 0,
                vflip: m[4] < 0,
            }
        } else if near(270.0) {
            if m[3] < 0 {
                // transpose=clock_flip
                Orientation {
                    transpose: true,
                    hflip: true,
                    vflip: true,
                }
            } else {
                // transpose=cclock
                Orientation {
                    transpose: true,
                    hflip: false,
                    vflip: true,
                }
            }
        } else if theta.abs() < 1.0 || (theta - 360.0).abs() < 1.0 {
            Orientation {
                transpose: false,
                hflip: false,
                vflip: m[4] < 0,
            }
        } else {
            // Arbitrary angles are not supported; show the picture as stored.
            Orientation::default()
        }
    }

    pub(crate) fn of_stream(st: *const ffi::AVStream) -> Self {
        unsafe {
            let mut size: usize = 0;
            let data = ffi::av_stream_get_side_data(
                st,
                ffi::AVPacketSideDataType::AV_PKT_DATA_DISPLAYMATRIX,
                &mut size,
            );
            if data.is_null() || size < 36 {
                return Orientation::default();
            }
            let mut m = [0i32; 9];
            for (i, v) in m.iter_mut().enumerate() {
                *v = ptr::read_unaligned((data as *const i32).add(i));
            }
            Orientation::from_matrix(&m)
        }
    }
}

fn rational(r: ffi::AVRational) -> Option<(i64, i64)> {
    (r.num > 0 && r.den > 0).then_some((r.num as i64, r.den as i64))
}

/// Display size: width stretched by the sample aspect ratio, then swapped for 90/270 rotations.
pub(crate) fn display_size(st: *const ffi::AVStream) -> Option<(u32, u32)> {
    unsafe {
        let par = (*st).codecpar;
        let (w, h) = ((*par).width, (*par).height);
        if w <= 0 || h <= 0 {
            return None;
        }
        let sar =
            rational((*st).sample_aspect_ratio).or_else(|| rational((*par).sample_aspect_ratio));
        let mut dw = w as i64;
        if let Some((n, d)) = sar {
            if n != d {
                dw = ((w as i64 * n + d / 2) / d).max(1);
            }
        }
        let dw = u32::try_from(dw).ok()?;
        let dh = h as u32;
        if Orientation::of_stream(st).transpose {
            Some((dh, dw))
        } else {
            Some((dw, dh))
        }
    }
}

/// Container start time in microseconds (0 when unknown).
pub(crate) fn start_us(input: &Input) -> i64 {
    let s = unsafe { (*input.as_ptr()).start_time };
    if s == ffi::AV_NOPTS_VALUE {
        0
    } else {
        s
    }
}

fn duration_seconds(input: &Input) -> Option<f64> {
    unsafe {
        let ctx = input.as_ptr();
        let d = (*ctx).duration;
        if d != ffi::AV_NOPTS_VALUE && d > 0 {
            return Some(d as f64 / ffi::AV_TIME_BASE as f64);
        }
        let mut best: Option<f64> = None;
        for i in 0..stream_count(input) {
            let Some(st) = stream_ptr(input, i) else {
                continue;
            };
            let d = (*st).duration;
            let tb = (*st).time_base;
            if d == ffi::AV_NOPTS_VALUE || d <= 0 || tb.num <= 0 || tb.den <= 0 {
                continue;
            }
            let secs = d as f64 * tb.num as f64 / tb.den as f64;
            if best.is_none_or(|b| secs > b) {
                best = Some(secs);
            }
        }
        best
    }
}

pub(crate) fn has_audio(input: &Input) -> bool {
    first_audio_stream(input).is_some()
}

pub(crate) fn first_audio_stream(input: &Input) -> Option<usize> {
    (0..stream_count(input)).find(|&i| {
        stream_ptr(input, i).is_some_and(|st| unsafe {
            (*(*st).codecpar).codec_type == ffi::AVMediaType::AVMEDIA_TYPE_AUDIO
        })
    })
}

/// Opens the file and reports what the planner needs.
pub fn probe(path: &str) -> Result<ProbeInfo> {
    init();
    let mut input = open_input(path)?;
    let index = best_video_stream(&mut input)?;
    let st = stream_ptr(&input, index).ok_or_else(|| Error::unreadable("video stream vanished"))?;
    let (width, height) = display_size(st)
        .ok_or_else(|| Error::unreadable("the video stream has no picture size"))?;
    let duration = duration_seconds(&input)
        .filter(|d| d.is_finite() && *d > 0.0)
        .ok_or_else(|| Error::unreadable("the video has no known duration"))?;
    Ok(ProbeInfo {
        duration,
        start_time: start_us(&input) as f64 / 1e6,
        video_stream: index as u32,
        width,
        height,
        has_audio: has_audio(&input),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rot(deg: f64, hflip: bool) -> [i32; 9] {
        let mut m = [0i32; 9];
        unsafe {
            ffi::av_display_rotation_set(m.as_mut_ptr(), deg);
            ffi::av_display_matrix_flip(m.as_mut_ptr(), hflip as i32, 0);
        }
        m
    }

    #[test]
    fn orientation_follows_ffmpeg_autorotate() {
        // `-display_rotation 90` (counter-clockwise) is shown rotated clockwise: transpose=clock.
        assert_eq!(
            Orientation::from_matrix(&rot(90.0, false)),
            Orientation {
                transpose: true,
                hflip: true,
                vflip: false
            }
        );
        assert_eq!(
            Orientation::from_matrix(&rot(-90.0, false)),
            Orientation {
                transpose: true,
                hflip: false,
                vflip: true
            }
        );
        assert_eq!(
            Orientation::from_matrix(&rot(180.0, false)),
            Orientation {
                transpose: false,
                hflip: true,
                vflip: true
            }
        );
        assert_eq!(
            Orientation::from_matrix(&rot(0.0, false)),
            Orientation::default()
        );
        // A mirrored matrix reads as 180 degrees with m[0] < 0: hflip, as ffmpeg does.
        assert_eq!(
            Orientation::from_matrix(&rot(0.0, true)),
            Orientation {
                transpose: false,
                hflip: true,
                vflip: false
            }
        );
    }
}
