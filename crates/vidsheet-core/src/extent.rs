//! Where a file's data really ends: per stream, the latest presentation end (timestamp plus
//! duration) of a complete packet present in the file, in seconds from the container start.
//!
//! Containers lie about their duration (a truncated copy keeps its original header, a fragmented
//! MP4 declares 2^32 ticks, a program stream under-declares), so src/core/probe.ts compares this
//! with the declared duration. Finding it stays cheap on long files and never decodes:
//! - MP4/MOV: the demuxer's sample index and the file size, without reading any sample (a sample
//!   whose bytes lie past the end of the file is not there). Index times are decode times, moved
//!   to presentation by the stream's initial reordering delay: exact for the whole clip, within
//!   the B-frames of one GOP for a cut one, far inside DESIGN's tolerance;
//! - elsewhere, and for a fragmented MP4 whose index covers only the fragments read so far: a
//!   demux from about 10 s before the declared end to the end of the file, or from the start when
//!   that seek fails or finds no timestamped packet (bounded by the file).

use ff::ffi;
use ff::format::context::Input;
use ff::packet::Ref;
use ff::Packet;
use ffmpeg_next as ff;

use crate::media::{self, Decoders, Opening};

mod index;
use index::from_index;

/// How far before the declared end the read near the end starts, in AV_TIME_BASE units.
const TAIL_US: i64 = 10 * ffi::AV_TIME_BASE as i64;
/// Consecutive demuxer errors (other than end of file) tolerated before treating it as the end.
const MAX_READ_ERRORS: u32 = 64;
/// A packet (or sample) lasting over this many of its stream's usual frame steps counts as one
/// step (DESIGN §2: a still held for seconds, as a screen recording's, is not data).
const MAX_STEPS: i64 = 4;

/// The readable end of each stream in `streams` (indices), seconds from the container start; None
/// where no complete packet with a timestamp was found.
/// `opening` is how the file is opened again (a fresh demuxer after a failed seek).
pub(crate) fn readable_ends(
    input: &mut Input,
    path: &str,
    opening: &Opening,
    streams: &[usize],
) -> Vec<Option<f64>> {
    if streams.is_empty() {
        return Vec::new();
    }
    let file_size = std::fs::metadata(path).ok().map(|m| m.len());
    let indexed = match file_size {
        Some(size) if media::is_mov(input) => from_index(input, size, streams),
        _ => None,
    };
    let ends = match indexed {
        // A cut file: the index only bounds where the data stops. Its times are decode times, and
        // the last samples in decode order are not the last in presentation order (B-frames), so
        // the packets just before that point are read for their presentation times.
        Some((ends, true)) => near_index_end(input, streams, &ends, file_size).unwrap_or(ends),
        Some((ends, false)) => ends,
        None => from_packets(input, path, opening, streams, file_size),
    };
    let start = media::start_us(input) as f64 / 1e6;
    streams
        .iter()
        .zip(ends)
        .map(|(&i, end)| {
            let st = media::stream_ptr(input, i)?;
            let (num, den) = media::time_base(st)?;
            let secs = end? as f64 * num as f64 / den as f64 - start;
            secs.is_finite().then_some(secs)
        })
        .collect()
}

/// One picture's (or audio frame's) duration in stream units, from the frame rates (the rule:
/// [`crate::video::timestamps::frame_step`]); None when unknown.
pub(crate) fn frame_duration(st: *const ffi::AVStream) -> Option<i64> {
    let time_base = media::time_base(st)?;
    let (avg, real) = unsafe { ((*st).avg_frame_rate, (*st).r_frame_rate) };
    let rate = |r: ffi::AVRational| (r.num as i64, r.den as i64);
    crate::video::timestamps::frame_step(None, time_base, rate(avg), rate(real))
}

/// A cut MP4/MOV: the packets from shortly before the earliest index end (`ends`, stream units)
/// to where the data stops, each stream read on its own (DESIGN §2): the demuxer hands the samples
/// of all streams out by time, so a read of them all stops at the first sample missing from the
/// cut file, of any stream, though other streams' samples before the cut follow it in time; a read
/// of one stream passes the others' samples over without reading them. None when a seek fails or
/// no read finds a packet.
fn near_index_end(
    input: &mut Input,
    streams: &[usize],
    ends: &[Option<i64>],
    file_size: Option<u64>,
) -> Option<Vec<Option<i64>>> {
    let earliest_us = streams
        .iter()
        .zip(ends)
        .filter_map(|(&i, end)| {
            let (num, den) = media::time_base(media::stream_ptr(input, i)?)?;
            let us = (*end)? as i128 * num as i128 * ffi::AV_TIME_BASE as i128 / den as i128;
            i64::try_from(us).ok()
        })
        .min()?;
    let mut read = Vec::with_capacity(streams.len());
    for &i in streams {
        keep_only(input, &[i]);
        if !seek_before(input, earliest_us.saturating_sub(TAIL_US)) {
            return None;
        }
        read.extend(demux_to_end(input, &[i], file_size, false));
    }
    read.iter().any(Option::is_some).then_some(read)
}

fn keep_only(input: &mut Input, streams: &[usize]) {
    for i in 0..media::stream_count(input) {
        if let Some(st) = media::stream_ptr(input, i) {
            unsafe {
                (*st).discard = if streams.contains(&i) {
                    ffi::AVDiscard::AVDISCARD_DEFAULT
                } else {
                    ffi::AVDiscard::AVDISCARD_ALL
                };
            }
        }
    }
}

/// Ends from the packets near the end of the file, else from every packet.
fn from_packets(
    input: &mut Input,
    path: &str,
    opening: &Opening,
    streams: &[usize],
    file_size: Option<u64>,
) -> Vec<Option<i64>> {
    let start = media::start_us(input);
    let declared = media::declared_duration(input)
        .map(|d| start.saturating_add((d * ffi::AV_TIME_BASE as f64) as i64));
    if let Some(end) = declared {
        let target = end.saturating_sub(TAIL_US);
        if target > start {
            keep_only(input, streams);
            if seek_before(input, target) {
                let ends = demux_to_end(input, streams, file_size, false);
                // Clearly short of the declared end, the file is cut, and a demuxer whose seek
                // lands past the data may stamp the packets it then reads with the times the seek
                // asked for (MXF does: its index table gives the time, the bytes are the first
                // ones). Only a read from the start tells.
                let short = latest_us(input, streams, &ends)
                    .is_some_and(|latest| latest < end.saturating_sub(tolerance_us(end - start)));
                if ends.iter().any(Option::is_some) && !short {
                    return ends;
                }
            }
        }
    }
    // From the start, on a fresh demuxer: this one may be anywhere after a failed seek.
    // Packets only: no stream needs a decoder.
    match media::open_input(path, opening, Decoders::Streams(&[])) {
        Ok(mut fresh) => {
            keep_only(&mut fresh, streams);
            demux_to_end(&mut fresh, streams, file_size, true)
        }
        Err(_) => vec![None; streams.len()],
    }
}

/// DESIGN §2's tolerance between a declared duration and the readable end, max(1 s, 2 %), in
/// AV_TIME_BASE units (src/core/probe.ts `extentToleranceMs` decides the extent; here it only
/// decides whether a read near the end is enough).
fn tolerance_us(declared_us: i64) -> i64 {
    (ffi::AV_TIME_BASE as i64).max(declared_us / 50)
}

/// The latest of `ends` (stream units, one per stream of `streams`) in AV_TIME_BASE units.
fn latest_us(input: &Input, streams: &[usize], ends: &[Option<i64>]) -> Option<i64> {
    streams
        .iter()
        .zip(ends)
        .filter_map(|(&i, end)| {
            let (num, den) = media::time_base(media::stream_ptr(input, i)?)?;
            let us = (*end)? as i128 * num as i128 * ffi::AV_TIME_BASE as i128 / den as i128;
            i64::try_from(us).ok()
        })
        .max()
}

/// Positions the demuxer at or before `target_us` (AV_TIME_BASE, absolute).
fn seek_before(input: &mut Input, target_us: i64) -> bool {
    let ctx = unsafe { input.as_mut_ptr() };
    let rc = unsafe { ffi::av_seek_frame(ctx, -1, target_us, ffi::AVSEEK_FLAG_BACKWARD) };
    rc >= 0 || unsafe { ffi::avformat_seek_file(ctx, -1, i64::MIN, target_us, target_us, 0) } >= 0
}

/// Reads every packet to the end of the file (no decoding): per stream, the readable end
/// [`PacketEnds`] finds in them (`from_start`: the demuxer is at the start of the file).
fn demux_to_end(
    input: &mut Input,
    streams: &[usize],
    file_size: Option<u64>,
    from_start: bool,
) -> Vec<Option<i64>> {
    let clocks = streams
        .iter()
        .map(|&i| {
            let st = media::stream_ptr(input, i);
            let start = st
                .map(|st| unsafe { (*st).start_time })
                .filter(|&t| t != ffi::AV_NOPTS_VALUE);
            StreamClock {
                frame: st.and_then(|st| frame_duration(st)),
                clock: from_start.then(|| start.unwrap_or(0)),
            }
        })
        .collect();
    let mut ends = PacketEnds::new(file_size, clocks);
    let mut errors = 0u32;
    loop {
        let mut packet = Packet::empty();
        match packet.read(input) {
            Ok(()) => {
                errors = 0;
                if let Some(k) = streams.iter().position(|&s| s == packet.stream()) {
                    ends.add(
                        k,
                        &PacketFacts {
                            pts: packet.pts(),
                            dts: packet.dts(),
                            duration: packet.duration(),
                            pos: packet.position() as i64,
                            size: packet.size() as i64,
                            corrupt: packet.is_corrupt(),
                            // SAFETY: the packet just read.
                            discard: unsafe { (*packet.as_ptr()).flags } & ffi::AV_PKT_FLAG_DISCARD
                                != 0,
                        },
                    );
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
    ends.finish()
}

/// What the readable-end rule needs of a stream: its frame duration (stream units) when known,
/// and where its next packet without timestamps starts (at first the stream's start on a read
/// from the start of the file; None: unknown, after a seek).
struct StreamClock {
    frame: Option<i64>,
    clock: Option<i64>,
}

/// One packet as a read hands it out (stream units; `pos` -1 when unknown).
struct PacketFacts {
    pts: Option<i64>,
    dts: Option<i64>,
    duration: i64,
    pos: i64,
    size: i64,
    corrupt: bool,
    /// Flagged to be discarded: an MP4 sample outside the edit list, never presented.
    discard: bool,
}

/// The readable-end rule over the packets of one read, per stream: the latest pts + duration of
/// a complete packet (the rule and its vectors: fixtures/vectors/readable-end.json; the
/// fallback's is src/engine/packet-ends.ts `PacketEnds`). A packet flagged corrupt (a packet cut by
/// the end of a truncated file is) or to be discarded (an MP4 sample outside the edit list, never
/// presented), or lying past the end of the file, is passed over; one without
/// timestamps starts where the previous one of its stream ended; one without a duration lasts as
/// long as the last one of its stream counted for, else a frame; one lasting over four of its
/// stream's usual frame steps (a frame when known, else what the last one counted for) counts as
/// one step.
struct PacketEnds {
    file_size: Option<u64>,
    streams: Vec<StreamClock>,
    /// Per stream, the duration its last counted packet was given (above 0).
    last_duration: Vec<Option<i64>>,
    ends: Vec<Option<i64>>,
}

impl PacketEnds {
    fn new(file_size: Option<u64>, streams: Vec<StreamClock>) -> Self {
        let n = streams.len();
        PacketEnds {
            file_size,
            streams,
            last_duration: vec![None; n],
            ends: vec![None; n],
        }
    }

    /// A packet of stream `k` (an index into the streams given to [`PacketEnds::new`]).
    fn add(&mut self, k: usize, p: &PacketFacts) {
        let past_the_end = match (u64::try_from(p.pos), self.file_size) {
            (Ok(pos), Some(size)) => pos.saturating_add(p.size.max(0) as u64) > size,
            _ => false,
        };
        let stream = &mut self.streams[k];
        let Some(ts) = p.pts.or(p.dts).or(stream.clock) else {
            return;
        };
        if p.corrupt || p.discard || past_the_end {
            return;
        }
        let last = self.last_duration[k];
        let mut duration = if p.duration > 0 {
            p.duration
        } else {
            last.or(stream.frame).unwrap_or(0)
        };
        if let Some(step) = stream.frame.or(last) {
            if duration > step.saturating_mul(MAX_STEPS) {
                duration = step;
            }
        }
        if duration > 0 {
            self.last_duration[k] = Some(duration);
        }
        let end = ts.saturating_add(duration);
        stream.clock = Some(end);
        self.ends[k] = Some(self.ends[k].map_or(end, |e| e.max(end)));
    }

    fn finish(self) -> Vec<Option<i64>> {
        self.ends
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(serde::Deserialize)]
    struct Stream {
        frame: Option<i64>,
        start: Option<i64>,
    }

    #[derive(serde::Deserialize)]
    struct Packet {
        stream: usize,
        pts: Option<i64>,
        dts: Option<i64>,
        duration: i64,
        pos: i64,
        size: i64,
        #[serde(default)]
        corrupt: bool,
        #[serde(default)]
        discard: bool,
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Case {
        name: String,
        file_size: u64,
        from_start: bool,
        streams: BTreeMap<usize, Stream>,
        packets: Vec<Packet>,
        expect: BTreeMap<usize, Option<i64>>,
    }

    #[test]
    fn the_readable_end_follows_the_shared_vectors() {
        for case in crate::vectors::cases::<Case>("readable-end.json") {
            let indices: Vec<usize> = case.streams.keys().copied().collect();
            let clocks = case
                .streams
                .values()
                .map(|s| StreamClock {
                    frame: s.frame,
                    clock: case.from_start.then(|| s.start.unwrap_or(0)),
                })
                .collect();
            let mut ends = PacketEnds::new(Some(case.file_size), clocks);
            for p in &case.packets {
                if let Some(k) = indices.iter().position(|&i| i == p.stream) {
                    let facts = PacketFacts {
                        pts: p.pts,
                        dts: p.dts,
                        duration: p.duration,
                        pos: p.pos,
                        size: p.size,
                        corrupt: p.corrupt,
                        discard: p.discard,
                    };
                    ends.add(k, &facts);
                }
            }
            let want: Vec<Option<i64>> = case.expect.values().copied().collect();
            assert_eq!(ends.finish(), want, "{}", case.name);
        }
    }
}
