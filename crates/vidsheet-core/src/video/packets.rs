//! The packets read on the way to the cells, kept for src/core/zoom.ts (the zoom hints): each
//! video packet's time, size and keyframe flag, and the spans within which every packet was seen.
//! Only what is read anyway: the demuxer's per-packet index when it lists the whole stream
//! (MP4/MOV: known from the open, no extra read), else the packets the pump reads. The rule that
//! turns them into hints is TypeScript's.

use ff::ffi;
use ffmpeg_next as ff;

use super::VideoSource;
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
    }
}

impl VideoSource {
    /// A stream timestamp as seconds on the labels' clock (timestamp minus the container start).
    /// The same arithmetic as src/engine/ffmpeg's, so both engines place a packet on the same side
    /// of a frame time.
    pub(crate) fn label_seconds(&self, ts: i64) -> f64 {
        let num = (ts as i128).saturating_mul(self.tb_num as i128) as f64;
        num / self.tb_den as f64 - self.start_us as f64 / 1e6
    }

    /// The whole stream's packets from the demuxer's index, when that index lists every packet
    /// (MP4/MOV sample tables: read at the open, no extra I/O); None otherwise.
    pub(crate) fn index_packets(&self) -> Option<PacketLog> {
        let st = self.stream();
        // SAFETY: the stream of an open input; entries are read while the input is alive.
        unsafe {
            let n = ffi::avformat_index_get_entries_count(st);
            let frames = (*st).nb_frames;
            // Only an index with an entry per packet of the stream (a keyframe-only index such
            // as Matroska's cues, or one that grows while reading, lists less).
            if n <= 1 || frames <= 0 || (n as i64 - frames).abs() > 2 {
                return None;
            }
            let mut log = PacketLog::default();
            for i in 0..n {
                let e = ffi::avformat_index_get_entry(st, i);
                if e.is_null() {
                    return None;
                }
                let key = (*e).flags() & ffi::AVINDEX_KEYFRAME != 0;
                log.times.push(self.label_seconds((*e).timestamp));
                log.sizes.push((*e).size() as f64);
                log.keys.push(key as u8);
            }
            log.spans.extend([f64::NEG_INFINITY, f64::INFINITY]);
            Some(log)
        }
    }

    /// Turns on recording of the packets the pump reads.
    pub(crate) fn record_packets(&mut self) {
        self.packets = Some(PacketRecorder {
            from_start: self.from_start,
            last: f64::NEG_INFINITY,
            ..PacketRecorder::default()
        });
    }

    /// What was recorded (an empty log when recording was off).
    pub(crate) fn take_packets(&mut self) -> PacketLog {
        self.packets
            .take()
            .map(PacketRecorder::finish)
            .unwrap_or_default()
    }

    /// A packet the pump read (`serial`: the one the decoder tags its picture with).
    pub(super) fn note_packet(&mut self, packet: &ff::Packet, serial: u64) {
        let time = match packet.dts().or(packet.pts()) {
            Some(ts) => self.label_seconds(ts),
            None => return,
        };
        if self.recent.len() >= RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((serial, time));
        if let Some(rec) = self.packets.as_mut() {
            rec.record(time, packet.size() as f64, packet.is_key());
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
    pub(super) fn note_reposition(&mut self, from_start: bool) {
        if let Some(rec) = self.packets.as_mut() {
            rec.close(false);
            rec.from_start = from_start;
        }
    }

    /// The demuxer reached the end of the file.
    pub(super) fn note_end(&mut self) {
        if let Some(rec) = self.packets.as_mut() {
            rec.close(true);
        }
    }
}
