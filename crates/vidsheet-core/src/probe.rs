//! What a file holds, as facts for src/core/probe.ts: the declared duration and start time, every
//! video stream (display size, disposition, frame count, whether a frame of it decodes, where its
//! data ends) and where the audio ends. No rule is applied here: core picks the stream and decides
//! the clip's extent.

use ff::ffi;
use ff::format::context::Input;
use ff::util::error::{EAGAIN, ENOMEM};
use ff::{frame, Packet};
use ffmpeg_next as ff;

use crate::error::{Error, Result};
use crate::extent;
use crate::media::{self, Decoders, Opening};
use crate::orientation::display_size;
use crate::plan::{AudioStreamFacts, ProbeInfo, VideoStreamFacts};

/// Packets of one stream (and bytes) read at most before deciding that it does not decode.
const DECODE_PACKETS: u32 = 300;
const DECODE_BYTES: u64 = 16 << 20;
/// Bytes read on for a stream whose first packet has not come by (a video that starts late).
const LATE_START_BYTES: u64 = 64 << 20;
/// Consecutive demuxer errors (other than end of file) tolerated before treating it as the end.
const MAX_READ_ERRORS: u32 = 64;
/// Frames pulled from a decoder per packet at most (a decoder never loops; this is a bound).
const MAX_FRAMES_PER_PACKET: u32 = 64;
/// Index entries looked at to tell a per-packet index from a keyframe-only one.
const INDEX_SCAN: i32 = 1000;

/// Opens the file (whatever FFmpeg detects) and reports its facts.
pub fn probe(path: &str) -> Result<ProbeInfo> {
    probe_as(path, &Opening::any(), None)
}

/// Opens the file as `opening` allows and reports its facts, `format` naming the demuxer that
/// opened it (the one a restricted job fixes for its later opens).
///
/// Unbounded, every video stream is tried for a frame. Bounded (DESIGN §5a), decoders are opened
/// for one video stream and the first audio stream only: with `focus`, that video stream is the
/// one tried (src/engine/focus.ts walks the stream rule's candidates); without, nothing is tried
/// and no end is looked for: a survey whose sizes and dispositions rank the candidates.
pub fn probe_as(path: &str, opening: &Opening, focus: Option<u32>) -> Result<ProbeInfo> {
    media::init();
    let bounded = opening.bounds.is_some();
    let decoders = match focus {
        Some(i) => Decoders::Focus(i as usize),
        None => Decoders::Survey,
    };
    let mut input = media::open_input(path, opening, decoders)?;
    let reopen = opening.after(&input);
    let count = media::stream_count(&input);
    let video: Vec<usize> = (0..count)
        .filter(|&i| media::stream_ptr(&input, i).is_some_and(|st| media::is_video(st)))
        .collect();
    let audio: Vec<usize> = (0..count)
        .filter(|&i| media::stream_ptr(&input, i).is_some_and(|st| media::is_audio(st)))
        .collect();
    let declared = media::declared_duration(&input);
    let start_time = media::start_us(&input) as f64 / 1e6;

    let tried: Vec<usize> = match (bounded, focus) {
        (false, _) => video.clone(),
        (true, Some(i)) => video.iter().copied().filter(|&v| v == i as usize).collect(),
        (true, None) => Vec::new(),
    };
    let checked = decode_check(&mut input, &tried, opening)?;
    let decodes: Vec<bool> = video
        .iter()
        .map(|v| {
            tried
                .iter()
                .position(|t| t == v)
                .is_some_and(|k| checked[k])
        })
        .collect();
    // Attached pictures have no extent: one picture stored once.
    let timed: Vec<usize> = video
        .iter()
        .copied()
        .filter(|&i| media::stream_ptr(&input, i).is_some_and(|st| !media::is_attached_pic(st)))
        .chain(audio.iter().copied())
        .collect();
    let ends = if bounded && focus.is_none() {
        vec![None; timed.len()]
    } else {
        extent::readable_ends(&mut input, path, &reopen, &timed)
    };
    let end_of = |i: usize| {
        timed
            .iter()
            .position(|&s| s == i)
            .and_then(|k| ends.get(k).copied().flatten())
    };

    let mut video_streams = Vec::with_capacity(video.len());
    for (k, &i) in video.iter().enumerate() {
        let Some(st) = media::stream_ptr(&input, i) else {
            continue;
        };
        let (width, height) = display_size(st).unwrap_or((0, 0));
        video_streams.push(VideoStreamFacts {
            index: i as u32,
            width,
            height,
            is_default: media::is_default(st),
            attached_pic: media::is_attached_pic(st),
            frames: frame_count(st, declared),
            decodes: decodes.get(k).copied().unwrap_or(false),
            readable_end: end_of(i),
            programs: programs_of(&input, i),
        });
    }
    let audio_end = audio
        .iter()
        .filter_map(|&i| end_of(i))
        .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
    Ok(ProbeInfo {
        format: media::format_name(&input),
        duration: declared.unwrap_or(0.0),
        start_time,
        video_streams,
        has_audio: !audio.is_empty(),
        audio_streams: audio
            .iter()
            .map(|&i| AudioStreamFacts {
                index: i as u32,
                programs: programs_of(&input, i),
            })
            .collect(),
        audio_end,
    })
}

/// The ids of the programs (MPEG-TS services) that list stream `index`, in program order.
fn programs_of(input: &Input, index: usize) -> Vec<u32> {
    let mut ids = Vec::new();
    unsafe {
        let ctx = input.as_ptr();
        for p in 0..(*ctx).nb_programs as usize {
            let program = *(*ctx).programs.add(p);
            if program.is_null() || (*program).stream_index.is_null() {
                continue;
            }
            let listed = (0..(*program).nb_stream_indexes as usize)
                .any(|k| *(*program).stream_index.add(k) as usize == index);
            if listed {
                ids.push((*program).id as u32);
            }
        }
    }
    ids
}

/// Frames the stream holds: the container's count, else the size of a per-packet index, else
/// duration x average frame rate; None when none is known.
fn frame_count(st: *mut ffi::AVStream, declared: Option<f64>) -> Option<u64> {
    unsafe {
        if (*st).nb_frames > 0 {
            return Some((*st).nb_frames as u64);
        }
        // An index that lists non-key packets lists every packet (a keyframe-only index, such as
        // Matroska cues, counts GOPs, not frames).
        let n = ffi::avformat_index_get_entries_count(st);
        let per_packet = (0..n.min(INDEX_SCAN)).any(|i| {
            let e = ffi::avformat_index_get_entry(st, i);
            !e.is_null() && (*e).flags() & ffi::AVINDEX_KEYFRAME == 0
        });
        if per_packet {
            return Some(n as u64);
        }
        let rate = (*st).avg_frame_rate;
        let rate = if rate.num > 0 && rate.den > 0 {
            rate
        } else {
            (*st).r_frame_rate
        };
        if rate.num <= 0 || rate.den <= 0 {
            return None;
        }
        let own = media::time_base(st).and_then(|(num, den)| {
            let d = (*st).duration;
            (d != ffi::AV_NOPTS_VALUE && d > 0).then(|| d as f64 * num as f64 / den as f64)
        });
        let seconds = own.or(declared)?;
        let frames = (seconds * rate.num as f64 / rate.den as f64).round();
        (frames.is_finite() && frames >= 1.0).then(|| frames.min(u64::MAX as f64) as u64)
    }
}

/// A stream's decoder during the decode check.
struct Trial {
    decoder: Option<ff::decoder::Video>,
    packets: u32,
    bytes: u64,
    decoded: bool,
    done: bool,
    /// The decoder ran out of memory (the worker's limit): the job fails, the file is not judged.
    out_of_memory: bool,
}

impl Trial {
    fn open(input: &Input, index: usize, opening: &Opening) -> Trial {
        let decoder = (|| {
            let st = media::stream_ptr(input, index)?;
            if !media::has_decoder(st) {
                return None;
            }
            let params = input.stream(index)?.parameters();
            let mut ctx = ff::codec::Context::from_parameters(params).ok()?;
            unsafe {
                let raw = ctx.as_mut_ptr();
                (*raw).pkt_timebase = (*st).time_base;
                // One thread: a frame comes out as soon as it is decoded.
                (*raw).thread_count = 1;
                opening.bound_decoder(raw);
            }
            ctx.decoder().video().ok()
        })();
        let done = decoder.is_none();
        Trial {
            decoder,
            packets: 0,
            bytes: 0,
            decoded: false,
            done,
            out_of_memory: false,
        }
    }

    fn feed(&mut self, packet: &Packet) {
        let Some(decoder) = self.decoder.as_mut() else {
            return;
        };
        self.packets += 1;
        self.bytes += packet.size() as u64;
        // A packet the decoder refuses is simply not a frame; the next one may be.
        if let Err(e) = decoder.send_packet(packet) {
            self.note(e);
        }
        self.drain();
        if !self.done && (self.packets >= DECODE_PACKETS || self.bytes >= DECODE_BYTES) {
            self.finish();
        }
    }

    /// End of the trial: frames the decoder still holds (reordering delay) come out now.
    fn finish(&mut self) {
        if self.done {
            return;
        }
        if let Some(decoder) = self.decoder.as_mut() {
            let _ = decoder.send_eof();
        }
        self.drain();
        self.done = true;
        self.decoder = None;
    }

    fn drain(&mut self) {
        let Some(decoder) = self.decoder.as_mut() else {
            return;
        };
        let mut f = frame::Video::empty();
        for _ in 0..MAX_FRAMES_PER_PACKET {
            match decoder.receive_frame(&mut f) {
                Ok(()) => {
                    self.decoded = true;
                    self.done = true;
                }
                Err(ff::Error::Other { errno }) if errno == EAGAIN => break,
                Err(e) => {
                    self.note(e);
                    break;
                }
            }
        }
        if self.done || self.out_of_memory {
            self.done = true;
            self.decoder = None;
        }
    }

    fn note(&mut self, e: ff::Error) {
        if matches!(e, ff::Error::Other { errno } if errno == ENOMEM) {
            self.out_of_memory = true;
        }
    }
}

/// Whether a frame of each of `streams` decodes: the file's first packets are read (the demuxer
/// hands back those its stream probing already read) until every stream gave a frame or read its
/// share of packets or bytes; a stream none of whose packets came by is then given more bytes.
fn decode_check(input: &mut Input, streams: &[usize], opening: &Opening) -> Result<Vec<bool>> {
    let mut trials: Vec<Trial> = streams
        .iter()
        .map(|&i| Trial::open(input, i, opening))
        .collect();
    // Packets of other streams are read too (interleaved audio, subtitles): bounded overall.
    let max_packets = DECODE_PACKETS as u64 * media::stream_count(input).max(1) as u64;
    let max_bytes = DECODE_BYTES * (streams.len() as u64 + 1);
    read_trials(input, streams, &mut trials, max_packets, max_bytes);
    // A stream none of whose packets came by yet starts later in the file (after a long audio
    // prelude, say): read on, by bytes only, until it decodes.
    if trials.iter().any(|t| !t.done && t.packets == 0) {
        read_trials(input, streams, &mut trials, u64::MAX, LATE_START_BYTES);
    }
    let mut decoded = Vec::with_capacity(trials.len());
    for mut t in trials {
        t.finish();
        if t.out_of_memory {
            return Err(Error::failed("out of memory while decoding a frame"));
        }
        decoded.push(t.decoded);
    }
    Ok(decoded)
}

/// Reads packets into the trials of `streams` until each is done, the file ends, or the bounds
/// (packets and bytes of every stream) are reached.
fn read_trials(
    input: &mut Input,
    streams: &[usize],
    trials: &mut [Trial],
    max_packets: u64,
    max_bytes: u64,
) {
    let (mut packets, mut bytes, mut errors) = (0u64, 0u64, 0u32);
    while trials.iter().any(|t| !t.done) && packets < max_packets && bytes < max_bytes {
        let mut packet = Packet::empty();
        match packet.read(input) {
            Ok(()) => {
                errors = 0;
                packets += 1;
                bytes += packet.size() as u64;
                if let Some(k) = streams.iter().position(|&s| s == packet.stream()) {
                    if !trials[k].done {
                        trials[k].feed(&packet);
                    }
                }
            }
            Err(ff::Error::Eof) => break,
            Err(_) => {
                errors += 1;
                if errors > MAX_READ_ERRORS {
                    break;
                }
            }
        }
    }
}
