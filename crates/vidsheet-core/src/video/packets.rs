//! The packets read on the way to the cells, kept for the zoom hints (src/core/packet-log.ts): each
//! video packet's time, size and keyframe flag, and the spans within which every packet was seen.
//! Only what is read anyway: the demuxer's per-packet index when it lists the whole stream
//! (MP4/MOV: known from the open, no extra read), else the packets the pump reads. The rule that
//! turns them into hints is TypeScript's.

use std::collections::VecDeque;

use ff::ffi;
use ffmpeg_next as ff;

use super::facts::Facts;
use super::thumbs;
use super::VideoSource;
use crate::media;
use crate::plan::PacketLog;

/// Packets remembered for [`VideoSource::decode_time_of`]: a decoder outputs a picture within its
/// reorder delay and thread count of its packet, far fewer than this.
const RECENT: usize = 512;

/// Packets recorded while decoding, and the spans of contiguous reading.
#[derive(Default)]
pub(crate) struct PacketRecorder {
    log: PacketLog,
    /// Start of the span being read (seconds), once a packet of it is in.
    open: Option<f64>,
    /// Time of the latest packet of that span.
    last: f64,
    /// The span being read began at the stream's start (nothing earlier exists).
    from_start: bool,
    /// Time packets by their presentation timestamp (Matroska: the container stores only those;
    /// the demuxer guesses decode times, and not right after a seek).
    by_pts: bool,
}

impl PacketRecorder {
    fn record(&mut self, time: f64, size: f64, key: bool) {
        if !time.is_finite() {
            return;
        }
        self.log.times.push(time);
        self.log.sizes.push(size);
        self.log.keys.push(key as u8);
        if self.open.is_none() {
            self.open = Some(if self.from_start {
                f64::NEG_INFINITY
            } else {
                time
            });
        }
        self.last = self.last.max(time);
    }

    /// The reading jumped (a seek or a rewind): the span read so far ends at its last packet, or
    /// at the stream's end when `at_end`.
    fn close(&mut self, at_end: bool) {
        if let Some(start) = self.open.take() {
            self.log.spans.push(start);
            self.log
                .spans
                .push(if at_end { f64::INFINITY } else { self.last });
        }
        self.last = f64::NEG_INFINITY;
    }

    /// A packet that cannot be placed was read: the span so far ends, and the next one does not
    /// start at the stream's start.
    fn hole(&mut self) {
        self.close(false);
        self.from_start = false;
    }

    pub(crate) fn finish(mut self) -> PacketLog {
        self.close(false);
        self.log
    }
}

impl PacketLog {
    /// Appends another log (a worker's).
    pub(crate) fn extend(&mut self, other: PacketLog) {
        self.cells.extend(other.cells);
        self.times.extend(other.times);
        self.sizes.extend(other.sizes);
        self.keys.extend(other.keys);
        self.spans.extend(other.spans);
        self.index_keys.extend(other.index_keys);
        self.pictures.extend(other.pictures);
        self.thumbs.extend(other.thumbs);
    }
}

impl VideoSource {
    /// A stream timestamp as seconds on the labels' clock (the rule: fixtures/vectors/
    /// timestamps.json, `label_seconds`).
    pub(crate) fn label_seconds(&self, ts: i64) -> f64 {
        self.facts.label_seconds(ts)
    }

    /// The stream's packets within `span` (seconds, labels' clock) from the demuxer's index, when
    /// that index lists every packet (MP4/MOV sample tables: read at the open, no extra I/O);
    /// None otherwise.
    pub(crate) fn index_packets(&self, span: (f64, f64)) -> Option<PacketLog> {
        let st = self.stream();
        // SAFETY: the stream of an open input; entries are read while the input is alive.
        unsafe {
            let n = ffi::avformat_index_get_entries_count(st);
            let frames = (*st).nb_frames;
            // Only an index with an entry per packet of the stream (a keyframe-only index such
            // as Matroska's cues, or one that grows while reading, lists less). MP4/MOV's lists
            // every packet the demuxer gives, which is fewer than the stream's samples where an
            // edit ends early (FFmpeg leaves the samples after the edit's end out of it).
            let listed = if media::is_mov(&self.input) {
                n as i64 <= frames + 2
            } else {
                (n as i64 - frames).abs() <= 2
            };
            if n <= 1 || frames <= 0 || !listed {
                return None;
            }
            // A sample whose bytes lie past the end of the file is not there (as for the clip's
            // extent: extent/index.rs): a cut file's index still lists them, and no listing of
            // the packets (the fallback's) can read them.
            let file_size = ffi::avio_size((*self.input.as_ptr()).pb);
            let mut log = PacketLog::default();
            for i in 0..n {
                let e = ffi::avformat_index_get_entry(st, i);
                if e.is_null() {
                    return None;
                }
                let stop = (*e).pos.saturating_add((*e).size() as i64);
                if file_size >= 0 && (*e).pos >= 0 && stop > file_size {
                    continue;
                }
                let time = self.label_seconds((*e).timestamp);
                if time < span.0 || time > span.1 {
                    continue;
                }
                let key = (*e).flags() & ffi::AVINDEX_KEYFRAME != 0;
                log.times.push(time);
                log.sizes.push((*e).size() as f64);
                log.keys.push(key as u8);
            }
            log.spans.extend([span.0, span.1]);
            Some(log)
        }
    }

    /// Matroska/WebM: the keyframes the demuxer's index holds (the Cues, parsed at the first seek,
    /// and any keyframe met while reading), as presentation times on the labels' clock; empty for other
    /// containers (MP4's index lists every packet: [`Self::index_packets`]; others have none).
    pub(crate) fn index_keyframes(&self) -> Vec<f64> {
        if !self.is_matroska() {
            return Vec::new();
        }
        let st = self.stream();
        let mut keys = Vec::new();
        // SAFETY: the stream of an open input; entries are read while the input is alive.
        unsafe {
            let n = ffi::avformat_index_get_entries_count(st);
            for i in 0..n.max(0) {
                let e = ffi::avformat_index_get_entry(st, i);
                if !e.is_null() && (*e).flags() & ffi::AVINDEX_KEYFRAME != 0 {
                    keys.push(self.label_seconds((*e).timestamp));
                }
            }
        }
        keys
    }

    fn is_matroska(&self) -> bool {
        media::format_name(&self.input)
            .split(',')
            .any(|n| n == "matroska")
    }

    /// Turns on recording of the packets the pump reads.
    pub(crate) fn record_packets(&mut self) {
        self.packets.recorder = Some(PacketRecorder {
            from_start: self.place.at_file_start(),
            last: f64::NEG_INFINITY,
            by_pts: self.is_matroska(),
            ..PacketRecorder::default()
        });
    }

    /// Turns on a thumbnail of every picture decoded ([`thumbs`]), `limit` of them at most.
    pub(crate) fn record_pictures(&mut self, limit: usize) {
        self.packets.pictures.get_or_insert_with(|| Pictures {
            limit,
            ..Pictures::default()
        });
    }

    /// What was recorded (an empty log when recording was off), with the index's keyframes as
    /// they stand after the decoding (Matroska parses its Cues at the first seek).
    pub(crate) fn take_packets(&mut self) -> PacketLog {
        let mut log = match self.packets.recorder.take() {
            Some(rec) => {
                let mut log = rec.finish();
                log.index_keys = self.index_keyframes();
                log
            }
            None => PacketLog::default(),
        };
        if let Some(pictures) = self.packets.pictures.take() {
            log.pictures = pictures.times;
            log.thumbs = pictures.thumbs;
        }
        log
    }
}

/// The pictures decoded, when asked: their times (labels' clock) and thumbnails.
#[derive(Default)]
struct Pictures {
    times: Vec<f64>,
    thumbs: Vec<u8>,
    /// Recorded at most.
    limit: usize,
}

/// The packets read: recorded for the zoom hints when asked, and the latest ones' decode times.
#[derive(Default)]
pub(super) struct Packets {
    /// Packets read, recorded for the zoom hints when asked.
    recorder: Option<PacketRecorder>,
    /// Pictures decoded, recorded for the zoom hints when asked.
    pictures: Option<Pictures>,
    /// The latest packets' serials and decode times (a picture's own packet is among them).
    recent: VecDeque<(u64, f64)>,
}

impl Packets {
    /// A packet the pump read (`serial`: the one the decoder tags its picture with).
    pub(super) fn note(&mut self, packet: &ff::Packet, serial: u64, facts: &Facts) {
        let by_pts = self.recorder.as_ref().is_some_and(|rec| rec.by_pts);
        let stamp = if by_pts {
            packet.pts().or(packet.dts())
        } else {
            packet.dts().or(packet.pts())
        };
        let time = match stamp {
            Some(ts) => facts.label_seconds(ts),
            None => {
                // Cannot be placed (Ogg: only a page's last packet has a time): a hole, which
                // ends the span (src/core/packet-log.ts).
                if let Some(rec) = self.recorder.as_mut() {
                    rec.hole();
                }
                return;
            }
        };
        if self.recent.len() >= RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((serial, time));
        if let Some(rec) = self.recorder.as_mut() {
            rec.record(time, packet.size() as f64, packet.is_key());
        }
    }

    /// A picture decoded, at `time` (labels' clock), when pictures are recorded. A picture
    /// without a luma plane ([`thumbs::thumbnail`]) is left out.
    pub(super) fn picture(&mut self, time: f64, frame: &ff::frame::Video) {
        let Some(pictures) = self.pictures.as_mut().filter(|p| p.times.len() < p.limit) else {
            return;
        };
        if let Some(thumb) = thumbs::thumbnail(frame) {
            pictures.times.push(time);
            pictures.thumbs.extend_from_slice(&thumb);
        }
    }

    /// The decode time of the packet with this serial, if it is recent; NaN otherwise.
    pub(super) fn decode_time_of(&self, serial: i64) -> f64 {
        let serial = serial.max(0) as u64;
        self.recent
            .iter()
            .rev()
            .find(|(s, _)| *s == serial)
            .map_or(f64::NAN, |&(_, t)| t)
    }

    /// The demuxer moved (`from_start`: back to the very beginning).
    pub(super) fn reposition(&mut self, from_start: bool) {
        if let Some(rec) = self.recorder.as_mut() {
            rec.close(false);
            rec.from_start = from_start;
        }
    }

    /// The demuxer reached the end of the file.
    pub(super) fn end(&mut self) {
        if let Some(rec) = self.recorder.as_mut() {
            rec.close(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PacketRecorder;

    #[test]
    fn a_packet_without_a_time_ends_the_span() {
        let mut rec = PacketRecorder {
            from_start: true,
            last: f64::NEG_INFINITY,
            ..PacketRecorder::default()
        };
        rec.record(0.0, 10.0, true);
        rec.record(0.04, 5.0, false);
        rec.hole();
        rec.record(0.12, 5.0, false);
        rec.record(0.16, 5.0, false);
        let log = rec.finish();
        // Two spans: from the stream's start to the packet before the hole, then after it only.
        assert_eq!(log.spans, vec![f64::NEG_INFINITY, 0.04, 0.12, 0.16]);
        assert_eq!(log.times, vec![0.0, 0.04, 0.12, 0.16]);
        assert_eq!(log.keys, vec![1, 0, 0, 0]);
    }
}
