//! The audio measurement (`audioPeaks`): the whole first audio stream decoded, downmixed to mono
//! (average of the channels, native sample rate), bin k = max |sample| over samples whose time
//! falls in [k ms, k+1 ms) relative to the container start time, plus the peak over every bin of
//! the clip. Raw: normalising and bucketing are src/core/audio.ts's alone.

use ff::ffi;
use ff::util::error::EAGAIN;
use ff::{frame, Packet};
use ffmpeg_next as ff;

use crate::error::{Error, Result};
use crate::media::{self, Container, Decoders, Opening};
use crate::plan::AudioPeaks;

const MAX_READ_ERRORS: u32 = 64;
const MAX_DECODE_ERRORS: u32 = 4096;

/// Raw (not normalised) bins for the ms range asked for, plus the clip peak.
#[derive(Debug, Clone, PartialEq)]
struct Envelope {
    /// A stream was found and at least one frame decoded.
    pub present: bool,
    /// Max over every bin k >= 0 of the whole clip.
    pub peak: f32,
    /// ms of bins[0].
    pub lo: i64,
    /// Exactly hi - lo bins when present; empty when not.
    pub bins: Vec<f32>,
}

impl Envelope {
    fn absent(lo: i64) -> Self {
        Envelope {
            present: false,
            peak: 0.0,
            lo,
            bins: Vec::new(),
        }
    }
}

/// Raw peaks per ms over [`start_ms`, `end_ms`) (container-relative) and the whole clip's peak, for
/// the first audio stream of `path`. Never fails on the media: no decodable audio gives
/// `present: false`. Fractional bounds widen to whole ms; a range that is not one (not finite,
/// beyond ±1e12 ms like plan times, or ending before it starts) is rejected.
pub fn audio_peaks(path: &str, start_ms: f64, end_ms: f64) -> Result<AudioPeaks> {
    audio_peaks_as(path, &Container::Any, start_ms, end_ms, None)
}

/// [`audio_peaks`] on the file opened as `container` says (a restricted job's fixed demuxer), of
/// audio stream `stream` when given (src/core/probe.ts `chooseAudioStream`; one that is not an
/// audio stream of the file measures the first).
pub fn audio_peaks_as(
    path: &str,
    container: &Container,
    start_ms: f64,
    end_ms: f64,
    stream: Option<u32>,
) -> Result<AudioPeaks> {
    let bounded = |v: f64| v.is_finite() && v.abs() <= 1e12;
    if !bounded(start_ms) || !bounded(end_ms) || end_ms < start_ms {
        return Err(Error::failed(format!(
            "audio range {start_ms}..{end_ms} ms is not a range of finite times within ±1e12 ms"
        )));
    }
    media::init();
    // Exact: whole numbers within ±1e12.
    let (lo, hi) = (start_ms.floor() as i64, end_ms.ceil() as i64);
    let env = envelope(path, container, stream, lo, hi);
    Ok(AudioPeaks {
        present: env.present,
        clip_peak: env.peak as f64,
        start_ms: env.lo as f64,
        peaks: if env.present { env.bins } else { Vec::new() },
    })
}

fn is_eagain(e: &ff::Error) -> bool {
    matches!(e, ff::Error::Other { errno } if *errno == EAGAIN)
}

/// Samples placed by timestamp into 1 ms bins (the rule and its vectors:
/// fixtures/vectors/audio-binner.json; the fallback's is src/engine/ffmpeg/audio.ts `PeakBinner`).
struct Binner {
    start_us: i64,
    tb_num: i128,
    tb_den: i128,
    lo: i64,
    hi: i64,
    peak: f32,
    bins: Vec<f32>,
    /// Samples are placed by counting from the last resync point (origin pts, sample rate):
    /// container timestamps are often coarser than a sample (Matroska: 1 ms), so following every
    /// frame's pts would jitter samples across bins. A frame whose pts strays from the count by
    /// more than the tolerance (a gap or an overlap) starts a new origin.
    origin: Option<(i64, i64)>,
    counted: i128,
    mono: Vec<f32>,
}

impl Binner {
    /// Bins for ms [`lo`, `hi`) from the container start `start_us`, pts in `num/den` units.
    fn new(start_us: i64, (num, den): (i32, i32), lo: i64, hi: i64) -> Self {
        Binner {
            start_us,
            tb_num: num as i128,
            tb_den: den as i128,
            lo,
            hi: hi.max(lo),
            peak: 0.0,
            bins: Vec::new(),
            origin: None,
            counted: 0,
            mono: Vec::new(),
        }
    }

    /// The clip peak and exactly hi - lo bins.
    fn finish(mut self) -> (f32, Vec<f32>) {
        self.bins.resize((self.hi - self.lo).max(0) as usize, 0.0);
        (self.peak, self.bins)
    }

    /// Tolerance between a frame's pts and the counted position: 2 ms, in stream units.
    fn tolerance(&self) -> i128 {
        ((2 * self.tb_den) / (1000 * self.tb_num)).max(1)
    }

    fn add(&mut self, pts: Option<i64>, rate: i64, mono: &[f32]) {
        let n = mono.len() as i128;
        if n == 0 || rate <= 0 {
            return;
        }
        let rate_i = rate as i128;
        // Counted position of this frame's first sample, in stream units (rounded down).
        let counted_ts = self.origin.filter(|o| o.1 == rate).map(|(o, _)| {
            o as i128 + (self.counted * self.tb_den).div_euclid(rate_i * self.tb_num)
        });
        match (pts, counted_ts) {
            (Some(p), Some(c)) if (p as i128 - c).abs() <= self.tolerance() => {}
            (None, Some(_)) => {}
            (Some(p), _) => {
                self.origin = Some((p, rate));
                self.counted = 0;
            }
            (None, None) => return,
        }
        let Some((origin, _)) = self.origin else {
            return;
        };
        // Sample j (counted from the origin) is at t_j ms with t_j * D = A + j * B,
        // D = den * rate * 1000.
        let d = self.tb_den * rate_i * 1000;
        let a = origin as i128 * self.tb_num * rate_i * 1_000_000
            - self.start_us as i128 * self.tb_den * rate_i;
        let b = self.tb_den * 1_000_000;
        let base = self.counted;
        self.counted += n;
        let mut i: i128 = 0;
        while i < n {
            let k = (a + (base + i) * b).div_euclid(d);
            // First sample of bin k + 1.
            let end = (((k + 1) * d - a + b - 1).div_euclid(b) - base).clamp(i + 1, n);
            if k >= 0 {
                let m = mono[i as usize..end as usize]
                    .iter()
                    .fold(0f32, |m, v| m.max(v.abs()));
                if m > self.peak {
                    self.peak = m;
                }
                let k = k.min(i64::MAX as i128) as i64;
                if k >= self.lo && k < self.hi {
                    let idx = (k - self.lo) as usize;
                    if idx >= self.bins.len() {
                        self.bins.resize(idx + 1, 0.0);
                    }
                    if m > self.bins[idx] {
                        self.bins[idx] = m;
                    }
                }
            }
            i = end;
        }
    }
}

/// Average of the channels of `f` as f32 samples, any sample format.
fn downmix(f: &frame::Audio, out: &mut Vec<f32>) -> bool {
    out.clear();
    unsafe {
        let raw = f.as_ptr();
        let n = (*raw).nb_samples.max(0) as usize;
        let channels = f.channels() as usize;
        if n == 0 || channels == 0 || (*raw).extended_data.is_null() {
            return false;
        }
        let fmt = (*raw).format;
        let nb = ffi::AVSampleFormat::AV_SAMPLE_FMT_NB as i32;
        if !(0..nb).contains(&fmt) {
            return false;
        }
        let fmt: ffi::AVSampleFormat = std::mem::transmute::<i32, ffi::AVSampleFormat>(fmt);
        let planar = ffi::av_sample_fmt_is_planar(fmt) != 0;
        let packed = ffi::av_get_packed_sample_fmt(fmt);
        let bps = ffi::av_get_bytes_per_sample(fmt).max(0) as usize;
        if bps == 0 {
            return false;
        }
        let plane_bytes = if planar { n * bps } else { n * bps * channels };
        if ((*raw).linesize[0].max(0) as usize) < plane_bytes {
            return false;
        }
        let planes = if planar { channels } else { 1 };
        let mut ptrs = Vec::with_capacity(planes);
        for p in 0..planes {
            let ptr = *(*raw).extended_data.add(p);
            if ptr.is_null() {
                return false;
            }
            ptrs.push(std::slice::from_raw_parts(ptr as *const u8, plane_bytes));
        }
        let read = |bytes: &[u8], idx: usize| -> f32 {
            let s = &bytes[idx * bps..idx * bps + bps];
            use ffi::AVSampleFormat::*;
            match packed {
                AV_SAMPLE_FMT_U8 => (s[0] as f32 - 128.0) / 128.0,
                AV_SAMPLE_FMT_S16 => i16::from_ne_bytes([s[0], s[1]]) as f32 / 32768.0,
                AV_SAMPLE_FMT_S32 => {
                    i32::from_ne_bytes([s[0], s[1], s[2], s[3]]) as f32 / 2147483648.0
                }
                AV_SAMPLE_FMT_FLT => {
                    let v = f32::from_ne_bytes([s[0], s[1], s[2], s[3]]);
                    if v.is_finite() {
                        v
                    } else {
                        0.0
                    }
                }
                AV_SAMPLE_FMT_DBL => {
                    let v = f64::from_ne_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
                    if v.is_finite() {
                        v as f32
                    } else {
                        0.0
                    }
                }
                AV_SAMPLE_FMT_S64 => {
                    i64::from_ne_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]) as f32
                        / 9223372036854775808.0
                }
                _ => 0.0,
            }
        };
        out.reserve(n);
        let inv = 1.0 / channels as f32;
        for i in 0..n {
            let mut sum = 0f32;
            for c in 0..channels {
                sum += if planar {
                    read(ptrs[c], i)
                } else {
                    read(ptrs[0], i * channels + c)
                };
            }
            out.push(sum * inv);
        }
        true
    }
}

/// Decodes audio stream `stream` (else the first) of `path` and returns raw bins for ms [lo, hi)
/// plus the clip peak. Never fails: a file without a decodable audio stream gives `present: false`.
fn envelope(path: &str, container: &Container, stream: Option<u32>, lo: i64, hi: i64) -> Envelope {
    let absent = || Envelope::absent(lo);
    // Only the local surfaces measure audio (hosted and remote jobs are visual only, src/job.ts):
    // the open is unbounded, like theirs.
    let opening = Opening {
        container: container.clone(),
        bounds: None,
    };
    let Ok(mut input) = media::open_input(path, &opening, Decoders::Streams(&[])) else {
        return absent();
    };
    let chosen = stream
        .map(|s| s as usize)
        .filter(|&s| media::stream_ptr(&input, s).is_some_and(|st| media::is_audio(st)));
    let Some(index) = chosen.or_else(|| media::first_audio_stream(&input)) else {
        return absent();
    };
    let start_us = media::start_us(&input);
    let Some(st) = media::stream_ptr(&input, index) else {
        return absent();
    };
    let tb = unsafe { (*st).time_base };
    if tb.num <= 0 || tb.den <= 0 {
        return absent();
    }
    unsafe {
        let ctx = input.as_mut_ptr();
        for i in 0..(*ctx).nb_streams as usize {
            let s = *(*ctx).streams.add(i);
            if !s.is_null() && i != index {
                (*s).discard = ffi::AVDiscard::AVDISCARD_ALL;
            }
        }
    }
    let Some(params) = input.stream(index).map(|s| s.parameters()) else {
        return absent();
    };
    let Ok(mut ctx) = ff::codec::Context::from_parameters(params) else {
        return absent();
    };
    unsafe { (*ctx.as_mut_ptr()).pkt_timebase = tb };
    let Ok(mut decoder) = ctx.decoder().audio() else {
        return absent();
    };

    let mut binner = Binner::new(start_us, (tb.num, tb.den), lo, hi);
    let mut decoded_any = false;
    let mut read_errors = 0u32;
    let mut decode_errors = 0u32;
    let mut eof = false;
    let mut frame = frame::Audio::empty();
    loop {
        // Drain every frame the decoder has.
        loop {
            match decoder.receive_frame(&mut frame) {
                Ok(()) => {
                    let rate = unsafe { (*frame.as_ptr()).sample_rate } as i64;
                    let mut mono = std::mem::take(&mut binner.mono);
                    if downmix(&frame, &mut mono) {
                        decoded_any = true;
                        binner.add(frame.timestamp().or(frame.pts()), rate, &mono);
                    }
                    binner.mono = mono;
                }
                Err(e) if is_eagain(&e) => break,
                Err(ff::Error::Eof) => {
                    eof = true;
                    break;
                }
                Err(_) => {
                    decode_errors += 1;
                    if decode_errors > MAX_DECODE_ERRORS {
                        eof = true;
                    }
                    break;
                }
            }
        }
        if eof {
            break;
        }
        let mut packet = Packet::empty();
        match packet.read(&mut input) {
            Ok(()) => {
                read_errors = 0;
                if packet.stream() == index {
                    if let Err(e) = decoder.send_packet(&packet) {
                        if !is_eagain(&e) {
                            decode_errors += 1;
                            if decode_errors > MAX_DECODE_ERRORS {
                                break;
                            }
                        }
                    }
                }
            }
            Err(ff::Error::Eof) => {
                if decoder.send_eof().is_err() {
                    break;
                }
            }
            Err(_) => {
                read_errors += 1;
                if read_errors > MAX_READ_ERRORS && decoder.send_eof().is_err() {
                    break;
                }
                if read_errors > MAX_READ_ERRORS * 2 {
                    break;
                }
            }
        }
    }
    if !decoded_any {
        return absent();
    }
    let (peak, bins) = binner.finish();
    Envelope {
        present: true,
        peak,
        lo,
        bins,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Samples as a list, or n samples of `fill` but the ones `at` lists.
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Samples {
        List(Vec<f32>),
        Sparse {
            n: usize,
            #[serde(default)]
            fill: f32,
            // Keys are indices (as strings: an untagged enum cannot read them as numbers).
            #[serde(default)]
            at: BTreeMap<String, f32>,
        },
    }

    #[derive(serde::Deserialize)]
    struct Frame {
        pts: Option<i64>,
        rate: i64,
        samples: Samples,
    }

    #[derive(serde::Deserialize)]
    struct Expect {
        peak: f32,
        bins: BTreeMap<i64, f32>,
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Case {
        name: String,
        start_us: i64,
        time_base: (i32, i32),
        range: (i64, i64),
        frames: Vec<Frame>,
        expect: Expect,
    }

    #[test]
    fn the_binner_follows_the_shared_vectors() {
        for case in crate::vectors::cases::<Case>("audio-binner.json") {
            let (lo, hi) = case.range;
            let mut b = Binner::new(case.start_us, case.time_base, lo, hi);
            for f in case.frames {
                let mono = match f.samples {
                    Samples::List(v) => v,
                    Samples::Sparse { n, fill, at } => {
                        let mut v = vec![fill; n];
                        for (j, s) in at {
                            v[j.parse::<usize>().expect("a sample index")] = s;
                        }
                        v
                    }
                };
                b.add(f.pts, f.rate, &mono);
            }
            let (peak, bins) = b.finish();
            let want: Vec<f32> = (lo..hi)
                .map(|k| case.expect.bins.get(&k).copied().unwrap_or(0.0))
                .collect();
            assert_eq!(peak, case.expect.peak, "{}: peak", case.name);
            assert_eq!(bins, want, "{}: bins", case.name);
        }
    }
}
