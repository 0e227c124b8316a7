//! Opening inputs safely and reading what the container says about its streams.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::Once;

use ff::ffi;
use ff::format::context::Input;
use ffmpeg_next as ff;

use crate::decode_log;
use crate::error::{Error, Result};

/// Silences FFmpeg's own logging (stderr belongs to the host; errors travel as codes), installs
/// the callback that records decoder errors (see [`crate::decode_log`]) and bounds the allocator's
/// arenas before any decoder thread starts (see [`crate::memory::limit_arenas`]).
pub(crate) fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| unsafe {
        crate::memory::limit_arenas();
        let level = if std::env::var_os("VIDSHEET_FFMPEG_LOG").is_some() {
            ffi::AV_LOG_WARNING
        } else {
            ffi::AV_LOG_QUIET
        };
        ffi::av_log_set_level(level);
    });
    decode_log::install();
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

/// How an open chooses the input's container format (DESIGN §5a "Containers a server opens").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Container {
    /// Whatever FFmpeg detects: the local surfaces, where the files are the user's own.
    Any,
    /// FFmpeg's detection, refused unless the demuxer's name is one of these (a server's
    /// allow-list, src/core/containers.ts), before the demuxer reads anything of the file: a
    /// playlist or list is never followed, not even to be refused afterwards.
    Allowed(Vec<String>),
    /// This demuxer, without detection: an earlier open in the same job detected and allowed it.
    Fixed(String),
}

impl Container {
    /// What every later open of the same input uses: a restricted open fixes the demuxer it found.
    pub(crate) fn after(&self, input: &Input) -> Container {
        match self {
            Container::Any => Container::Any,
            Container::Allowed(_) | Container::Fixed(_) => Container::Fixed(format_name(input)),
        }
    }
}

/// What an open may cost (DESIGN §5a "Decode cost is bounded before and during a job"): a server's
/// job passes bounds, the local surfaces none (the files are the user's own, opened as FFmpeg
/// opens them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// FFmpeg's `max_pixels` for every decoder the open starts (and the engine's own): a picture
    /// larger than this is refused by the decoder before its buffer is allocated.
    pub max_pixels: i64,
}

/// FFmpeg's `max_streams` for a bounded open: a file declaring more streams is not opened.
pub const MAX_STREAMS: u32 = 32;

/// How a job opens its input: which demuxer, and within which bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    pub container: Container,
    pub bounds: Option<Bounds>,
}

impl Opening {
    /// FFmpeg's detection, no bounds: the local surfaces.
    pub fn any() -> Opening {
        Opening {
            container: Container::Any,
            bounds: None,
        }
    }

    /// What every later open of the same input uses (see [`Container::after`]).
    pub(crate) fn after(&self, input: &Input) -> Opening {
        Opening {
            container: self.container.after(input),
            bounds: self.bounds,
        }
    }

    /// Sets the bounds on a decoder context this crate opens itself (before `avcodec_open2`).
    ///
    /// # Safety
    /// `ctx` must be a valid, not yet opened codec context.
    pub(crate) unsafe fn bound_decoder(&self, ctx: *mut ffi::AVCodecContext) {
        if let Some(b) = self.bounds {
            (*ctx).max_pixels = b.max_pixels;
        }
    }
}

/// Which streams' decoders FFmpeg's stream analysis (`avformat_find_stream_info`) may open in a
/// bounded open; every other stream is analysed from its container and parser alone. An unbounded
/// open lets it open them all, as FFmpeg does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Decoders<'a> {
    /// These streams only (none: a demux-only open).
    Streams(&'a [usize]),
    /// This video stream and the first audio stream: the probe of one candidate.
    Focus(usize),
    /// The video streams whose header does not say their size (a transport stream's: only a
    /// decoder's look at the parameter sets tells) and the first audio stream: the survey that
    /// ranks the candidates.
    Survey,
}

impl Decoders<'_> {
    /// Whether stream `index` of the opened (not yet analysed) `ctx` may get a decoder.
    unsafe fn allow(&self, ctx: *const ffi::AVFormatContext, index: usize) -> bool {
        let st = *(*ctx).streams.add(index);
        if st.is_null() {
            return false;
        }
        let first_audio = (0..(*ctx).nb_streams as usize).find(|&i| {
            let s = *(*ctx).streams.add(i);
            !s.is_null() && is_audio(s)
        });
        match *self {
            Decoders::Streams(list) => list.contains(&index),
            Decoders::Focus(video) => index == video || Some(index) == first_audio,
            Decoders::Survey => {
                let par = (*st).codecpar;
                let size_unknown =
                    is_video(st) && (par.is_null() || (*par).width <= 0 || (*par).height <= 0);
                size_unknown || Some(index) == first_audio
            }
        }
    }
}

/// The name of the demuxer an open input uses, as FFmpeg names it (`mov,mp4,m4a,3gp,3g2,mj2`).
pub(crate) fn format_name(input: &Input) -> String {
    unsafe { demuxer_name((*input.as_ptr()).iformat) }
}

/// The input is MP4/MOV (FFmpeg's mov demuxer), whose index is built from the sample table.
pub(crate) fn is_mov(input: &Input) -> bool {
    format_name(input).split(',').next() == Some("mov")
}

unsafe fn demuxer_name(fmt: *const ffi::AVInputFormat) -> String {
    if fmt.is_null() || (*fmt).name.is_null() {
        return String::new();
    }
    CStr::from_ptr((*fmt).name).to_string_lossy().into_owned()
}

/// The demuxer FFmpeg's own detection picks for `url`, the way `avformat_open_input` picks it
/// (a format that needs no file first, then the file's first bytes), without opening it.
unsafe fn detect(url: &CStr) -> Result<*const ffi::AVInputFormat> {
    let mut pd: ffi::AVProbeData = std::mem::zeroed();
    pd.filename = url.as_ptr();
    // FFmpeg's AVPROBE_SCORE_RETRY (a macro expression, so not in the bindings).
    let mut score = ffi::AVPROBE_SCORE_MAX / 4;
    let fmt = ffi::av_probe_input_format2(&pd, 0, &mut score);
    if !fmt.is_null() {
        return Ok(fmt);
    }
    let mut opts: *mut ffi::AVDictionary = ptr::null_mut();
    ffi::av_dict_set(
        &mut opts,
        c"protocol_whitelist".as_ptr(),
        c"file".as_ptr(),
        0,
    );
    let mut pb: *mut ffi::AVIOContext = ptr::null_mut();
    let rc = ffi::avio_open2(
        &mut pb,
        url.as_ptr(),
        ffi::AVIO_FLAG_READ,
        ptr::null(),
        &mut opts,
    );
    ffi::av_dict_free(&mut opts);
    if rc < 0 {
        return Err(Error::unreadable(format!(
            "cannot read the input file ({})",
            av_error(rc)
        )));
    }
    let mut fmt: *const ffi::AVInputFormat = ptr::null();
    let rc = ffi::av_probe_input_buffer2(pb, &mut fmt, url.as_ptr(), ptr::null_mut(), 0, 0);
    ffi::avio_closep(&mut pb);
    if rc < 0 || fmt.is_null() {
        return Err(Error::unreadable(format!(
            "the file is not a readable video ({})",
            av_error(rc)
        )));
    }
    Ok(fmt)
}

/// The demuxer an open fixes and the format whitelist it sets (null and none: FFmpeg detects).
unsafe fn choose(
    url: &CStr,
    container: &Container,
) -> Result<(*const ffi::AVInputFormat, Option<CString>)> {
    let whitelist = |names: String| {
        CString::new(names).map_err(|_| Error::unreadable("a container name contains a NUL byte"))
    };
    match container {
        Container::Any => Ok((ptr::null(), None)),
        Container::Allowed(names) => {
            let fmt = detect(url)?;
            let name = demuxer_name(fmt);
            if !names.contains(&name) {
                return Err(Error::unreadable(format!(
                    "the container format ({name}) is not allowed here"
                )));
            }
            Ok((fmt, Some(whitelist(names.join(","))?)))
        }
        Container::Fixed(name) => {
            let c_name = whitelist(name.clone())?;
            let fmt = ffi::av_find_input_format(c_name.as_ptr());
            if fmt.is_null() || demuxer_name(fmt) != *name {
                return Err(Error::unreadable(format!("no demuxer is named {name}")));
            }
            Ok((fmt, Some(c_name)))
        }
    }
}

/// Opens `path` as a local file only: no protocol prefixes (`http:`, `concat:`) are honoured and
/// playlists cannot reach beyond the file protocol. `container` says which demuxer may open it;
/// a restricted one also sets FFmpeg's format whitelist (defence in depth: FFmpeg checks it
/// before the demuxer reads, and hands it on to any file a demuxer would open inside this one).
///
/// Bounded ([`Opening::bounds`]), the open sets `max_streams` ([`MAX_STREAMS`]) and every decoder
/// the stream analysis starts gets `max_pixels`; only `decoders` get one at all. A file over
/// either limit is an unreadable video; memory running out (the worker's limit) is a failure.
pub(crate) fn open_input(path: &str, opening: &Opening, decoders: Decoders) -> Result<Input> {
    let container = &opening.container;
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
        let (fmt, whitelist) = choose(&url, container)?;
        let mut opts: *mut ffi::AVDictionary = ptr::null_mut();
        ffi::av_dict_set(
            &mut opts,
            c"protocol_whitelist".as_ptr(),
            c"file".as_ptr(),
            0,
        );
        if let Some(list) = &whitelist {
            ffi::av_dict_set(&mut opts, c"format_whitelist".as_ptr(), list.as_ptr(), 0);
        }
        if opening.bounds.is_some() {
            let max = CString::new(MAX_STREAMS.to_string()).unwrap_or_default();
            ffi::av_dict_set(&mut opts, c"max_streams".as_ptr(), max.as_ptr(), 0);
        }
        let mut ctx: *mut ffi::AVFormatContext = ptr::null_mut();
        decode_log::streams_exceeded();
        let rc = ffi::avformat_open_input(&mut ctx, url.as_ptr(), fmt, &mut opts);
        ffi::av_dict_free(&mut opts);
        if rc < 0 {
            return Err(open_failure(rc, "the file is not a readable video"));
        }
        let rc = match opening.bounds {
            None => ffi::avformat_find_stream_info(ctx, ptr::null_mut()),
            Some(bounds) => find_stream_info_bounded(ctx, bounds, decoders),
        };
        if rc < 0 {
            ffi::avformat_close_input(&mut ctx);
            return Err(open_failure(rc, "the file's streams could not be read"));
        }
        // Some demuxers (MPEG-TS) skip a stream over the limit and go on: the file is still over it.
        if decode_log::streams_exceeded() {
            ffi::avformat_close_input(&mut ctx);
            return Err(too_many_streams());
        }
        Ok(Input::wrap(ctx))
    }
}

/// The stream analysis with one option set per stream: `max_pixels` for the streams `decoders`
/// allows, and for the others a `max_pixels` of -1, a value `avcodec_open2` refuses, so no decoder
/// of theirs opens (FFmpeg then reads their parameters from the container and parser only, as for
/// a codec it lacks). The refusal must hold on every attempt: the analysis opens a decoder up front
/// and again at the stream's first packet, and an option `avcodec_open2` accepts (a codec
/// whitelist no decoder is on, say) is taken out of the stream's options by the first attempt.
///
/// Options alone do not hold: FFmpeg 5.1 opens the decoder for a packet with the options of the
/// first stream still lacking parameters, whichever stream the packet is of (a stale index), so a
/// refused stream could open with an allowed stream's. So the refused streams are also discarded
/// while the analysis runs: the demuxer drops their packets and no decoder sees one (measured: 4
/// AVI tracks sharing one 8000x4400 PNG took 463 MB with options alone, one track's 151 MB so).
unsafe fn find_stream_info_bounded(
    ctx: *mut ffi::AVFormatContext,
    bounds: Bounds,
    decoders: Decoders,
) -> i32 {
    let n = (*ctx).nb_streams as usize;
    let pixels = CString::new(bounds.max_pixels.to_string()).unwrap_or_default();
    let mut options: Vec<*mut ffi::AVDictionary> = vec![ptr::null_mut(); n.max(1)];
    let mut refused = Vec::new();
    for (i, dict) in options.iter_mut().enumerate().take(n) {
        let value = if decoders.allow(ctx, i) {
            pixels.as_ptr()
        } else {
            refused.push(i);
            c"-1".as_ptr()
        };
        ffi::av_dict_set(dict, c"max_pixels".as_ptr(), value, 0);
    }
    let discard = |how: ffi::AVDiscard| {
        for &i in &refused {
            let st = *(*ctx).streams.add(i);
            if !st.is_null() {
                (*st).discard = how;
            }
        }
    };
    discard(ffi::AVDiscard::AVDISCARD_ALL);
    let rc = ffi::avformat_find_stream_info(ctx, options.as_mut_ptr());
    discard(ffi::AVDiscard::AVDISCARD_DEFAULT);
    for dict in options.iter_mut() {
        ffi::av_dict_free(dict);
    }
    rc
}

/// An open that failed: out of memory is the job's failure (the worker's memory limit, DESIGN
/// §5a), unless it is FFmpeg's way of refusing a file over `max_streams`, which is the file's.
fn open_failure(rc: i32, what: &str) -> Error {
    if decode_log::streams_exceeded() {
        return too_many_streams();
    }
    let text = format!("{what} ({})", av_error(rc));
    if rc == ffi::AVERROR(ff::util::error::ENOMEM) {
        Error::failed(format!("out of memory: {text}"))
    } else {
        Error::unreadable(text)
    }
}

fn too_many_streams() -> Error {
    Error::unreadable(format!("the file has more than {MAX_STREAMS} streams"))
}

fn media_type(st: *const ffi::AVStream) -> Option<ffi::AVMediaType> {
    unsafe {
        let par = (*st).codecpar;
        (!par.is_null()).then(|| (*par).codec_type)
    }
}

pub(crate) fn is_video(st: *const ffi::AVStream) -> bool {
    media_type(st) == Some(ffi::AVMediaType::AVMEDIA_TYPE_VIDEO)
}

pub(crate) fn is_audio(st: *const ffi::AVStream) -> bool {
    media_type(st) == Some(ffi::AVMediaType::AVMEDIA_TYPE_AUDIO)
}

/// Cover art or another attached picture: a single picture stored once, not a video.
pub(crate) fn is_attached_pic(st: *const ffi::AVStream) -> bool {
    unsafe { (*st).disposition & ffi::AV_DISPOSITION_ATTACHED_PIC != 0 }
}

pub(crate) fn is_default(st: *const ffi::AVStream) -> bool {
    unsafe { (*st).disposition & ffi::AV_DISPOSITION_DEFAULT != 0 }
}

pub(crate) fn has_decoder(st: *const ffi::AVStream) -> bool {
    unsafe {
        let par = (*st).codecpar;
        !par.is_null() && !ffi::avcodec_find_decoder((*par).codec_id).is_null()
    }
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

pub(crate) fn stream_count(input: &Input) -> usize {
    unsafe { (*input.as_ptr()).nb_streams as usize }
}

/// Checks that `index` (the stream the plan names) is a decodable video stream.
pub(crate) fn check_video_stream(input: &Input, index: u32) -> Result<*mut ffi::AVStream> {
    match stream_ptr(input, index as usize) {
        Some(st) if is_video(st) && has_decoder(st) => Ok(st),
        _ => Err(Error::unreadable(format!(
            "stream {index} is not a decodable video stream"
        ))),
    }
}

/// A stream's time base as (num, den), when valid.
pub(crate) fn time_base(st: *const ffi::AVStream) -> Option<(i64, i64)> {
    let tb = unsafe { (*st).time_base };
    (tb.num > 0 && tb.den > 0).then_some((tb.num as i64, tb.den as i64))
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

/// The duration the container declares in seconds: the format's, else the longest stream's.
pub(crate) fn declared_duration(input: &Input) -> Option<f64> {
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
            let Some((num, den)) = time_base(st) else {
                continue;
            };
            if d == ffi::AV_NOPTS_VALUE || d <= 0 {
                continue;
            }
            let secs = d as f64 * num as f64 / den as f64;
            if best.is_none_or(|b| secs > b) {
                best = Some(secs);
            }
        }
        best.filter(|d| d.is_finite() && *d > 0.0)
    }
}

pub(crate) fn first_audio_stream(input: &Input) -> Option<usize> {
    (0..stream_count(input)).find(|&i| stream_ptr(input, i).is_some_and(|st| is_audio(st)))
}
