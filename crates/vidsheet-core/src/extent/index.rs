//! MP4/MOV: the readable end from the demuxer's sample index and the file size, without reading any
//! sample (a sample whose bytes lie past the end of the file is not there).

use ff::ffi;
use ff::format::context::Input;
use ffmpeg_next as ff;

use super::{frame_duration, MAX_STEPS};
use crate::media;

/// Bytes after the last indexed sample still taken as the file's trailing boxes (an index at the
/// end of the file, metadata), not as fragments the index does not list yet.
const INDEX_SLACK_BYTES: u64 = 8 << 20;

/// What the sample index says about one stream.
#[derive(Debug, Default)]
struct IndexExtent {
    /// Latest end (stream units) of a sample wholly inside the file.
    end: Option<i64>,
    /// Some sample lies (partly) past the end of the file: the file is truncated.
    truncated: bool,
    /// Byte just past the last sample.
    bytes_end: u64,
}

fn index_extent(st: *mut ffi::AVStream, file_size: u64) -> IndexExtent {
    let mut out = IndexExtent::default();
    let n = unsafe { ffi::avformat_index_get_entries_count(st) };
    let frame = frame_duration(st);
    let mut last_step: Option<i64> = None;
    for i in 0..n.max(0) {
        let e = unsafe { ffi::avformat_index_get_entry(st, i) };
        if e.is_null() {
            continue;
        }
        let (pos, size, ts, flags) =
            unsafe { ((*e).pos, (*e).size(), (*e).timestamp, (*e).flags()) };
        if pos < 0 || size <= 0 || ts == ffi::AV_NOPTS_VALUE {
            continue;
        }
        let stop = (pos as u64).saturating_add(size as u64);
        out.bytes_end = out.bytes_end.max(stop);
        if stop > file_size {
            out.truncated = true;
            continue;
        }
        // Samples outside the edit list are never presented.
        if flags & ffi::AVINDEX_DISCARD_FRAME != 0 {
            continue;
        }
        let next = if i + 1 < n {
            let e2 = unsafe { ffi::avformat_index_get_entry(st, i + 1) };
            (!e2.is_null()).then(|| unsafe { (*e2).timestamp })
        } else {
            None
        };
        // The usual frame step: a frame when known, else the step the sample before counted for.
        let usual = frame.or(last_step);
        let step = match next {
            Some(t) if t > ts => {
                let step = match usual {
                    Some(u) if t - ts > u.saturating_mul(MAX_STEPS) => u,
                    _ => t - ts,
                };
                last_step = Some(step);
                step
            }
            Some(_) => 0,
            None => usual.unwrap_or(0),
        };
        let end = ts.saturating_add(step);
        out.end = Some(out.end.map_or(end, |e: i64| e.max(end)));
    }
    // Index timestamps are decode times; presentation runs later by the reordering delay, which
    // the stream's first presentation time shows against its first decode time.
    let first = (n > 0)
        .then(|| unsafe { ffi::avformat_index_get_entry(st, 0) })
        .filter(|e| !e.is_null())
        .map(|e| unsafe { (*e).timestamp });
    let start = unsafe { (*st).start_time };
    if let (Some(first), true) = (first, start != ffi::AV_NOPTS_VALUE) {
        let delay = start
            .saturating_sub(first)
            .clamp(0, frame.unwrap_or(0).saturating_mul(16));
        out.end = out.end.map(|e| e.saturating_add(delay));
    }
    out
}

/// MP4/MOV: ends from the sample index, and whether the file is cut short of it. None when the
/// index does not cover the file (a fragmented file: fragments not read yet are not indexed), so
/// the packets must be read.
pub(super) fn from_index(
    input: &Input,
    file_size: u64,
    streams: &[usize],
) -> Option<(Vec<Option<i64>>, bool)> {
    let mut truncated = false;
    let mut bytes_end = 0u64;
    let mut extents = Vec::with_capacity(streams.len());
    for i in 0..media::stream_count(input) {
        let Some(st) = media::stream_ptr(input, i) else {
            continue;
        };
        let x = index_extent(st, file_size);
        truncated |= x.truncated;
        bytes_end = bytes_end.max(x.bytes_end);
        if streams.contains(&i) {
            extents.push((i, x.end));
        }
    }
    let slack = INDEX_SLACK_BYTES.max(file_size / 100);
    if !truncated && file_size.saturating_sub(bytes_end) > slack {
        return None;
    }
    Some((
        streams
            .iter()
            .map(|s| extents.iter().find(|(i, _)| i == s).and_then(|(_, e)| *e))
            .collect(),
        truncated,
    ))
}
