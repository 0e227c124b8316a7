//! How pictures and untimed packets are timed: the decoder's best-effort timestamp, judged once
//! for the stream (pts faulty: decode timestamps from then on), and the untimed-packet clock
//! ([`super::timestamps`]); with the longest keyframe distance seen, which sizes seeks back.

use ff::{codec, ffi, frame, Packet};
use ffmpeg_next as ff;

use super::{h264, timestamps};

/// The timing state of one stream's decode.
pub(super) struct Clock {
    /// Whether a packet without any timestamp is timed by the clock below (not where a packet
    /// may hold a field picture: see [`Clock::time_untimed`]).
    times_untimed: bool,
    /// The decode time of the next packet: the last decode time read since the last
    /// repositioning plus that packet's duration; None when not known.
    next_dts: Option<i64>,
    last_pts: Option<i64>,
    /// The frame step of the last frame timed (fixtures/vectors/frame-step.json): a frame
    /// without any timestamp is shown that long after it.
    last_step: i64,
    /// The decoder judged this stream's pts faulty (see [`Clock::time`]): frames are timed by
    /// their decode timestamps from then on.
    pts_faulty: bool,
    /// Pts of the very first frame of the file, once seen.
    first_pts: Option<i64>,
    /// Longest keyframe distance seen while decoding forward (stream units).
    gop: i64,
    last_key_pts: Option<i64>,
}

impl Clock {
    /// The clock of a stream decoded by `codec` (`par`: its codec parameters).
    pub(super) fn of_stream(codec: codec::Id, par: *const ffi::AVCodecParameters) -> Clock {
        Clock {
            times_untimed: codec != codec::Id::H264
                || h264::stream_sps(par).is_some_and(|s| s.frame_mbs_only),
            next_dts: None,
            last_pts: None,
            last_step: 1,
            pts_faulty: false,
            first_pts: None,
            gop: 0,
            last_key_pts: None,
        }
    }

    pub(super) fn pts_faulty(&self) -> bool {
        self.pts_faulty
    }

    pub(super) fn first_pts(&self) -> Option<i64> {
        self.first_pts
    }

    pub(super) fn last_pts(&self) -> Option<i64> {
        self.last_pts
    }

    pub(super) fn gop(&self) -> i64 {
        self.gop
    }

    /// Decoding was repositioned: the clocks start again.
    pub(super) fn reposition(&mut self) {
        self.last_pts = None;
        self.last_key_pts = None;
        self.next_dts = None;
    }

    /// A decode from the start is the sequential one: the decoder judges the pts afresh.
    pub(super) fn forget_faulty(&mut self) {
        self.pts_faulty = false;
    }

    /// A packet of the stream was read. Pts below dts: the decoder will call the pts faulty (see
    /// [`Self::time`]; the rule: [`timestamps::pts_faulty`]); known before the first frame after
    /// a seek is timed.
    pub(super) fn read(&mut self, packet: &Packet) {
        self.pts_faulty = timestamps::pts_faulty(self.pts_faulty, packet.pts(), packet.dts());
    }

    /// Gives a packet without any timestamp the decode time one packet duration after the packet
    /// before it (the rule: fixtures/vectors/timestamps.json, `untimed_decode_time`). Not where a
    /// packet may hold a field picture: the decoder shows a pair whose first field has no
    /// timestamp at its second's.
    pub(super) fn time_untimed(&mut self, packet: &mut Packet) {
        if !self.times_untimed {
            return;
        }
        let (dts, clock) = timestamps::untimed_decode_time(
            self.next_dts,
            packet.pts(),
            packet.dts(),
            packet.duration(),
        );
        packet.set_dts(dts);
        self.next_dts = clock;
    }

    /// A frame's presentation time: the decoder's best-effort timestamp, what ffplay and the
    /// ffmpeg CLI show a frame at (its pts while the decoded pts ascend, else its decode time; a
    /// stream whose pts sit below its dts, broken composition offsets, is so shown in decode
    /// order). A sequential decode keeps that judgement from the file's start; after a seek the
    /// decoder holds only what it counted before the flush (FFmpeg 5.1 keeps its counts of faulty
    /// timestamps across one), not what lies before the seek point. So once it has called the pts
    /// faulty, or a packet's pts sits below its dts (which it will call faulty), this source times
    /// frames by their decode timestamps for good, as a sequential decode goes on doing; a decode
    /// restarted from the start forgets the counts (`seek.rs`). A frame without any timestamp is
    /// shown one frame step after the frame before it. `step`: this frame's frame step;
    /// `from_start`: decoding started at the beginning of the file.
    pub(super) fn time(&mut self, f: &frame::Video, step: i64, from_start: bool) -> i64 {
        let best = f.timestamp();
        // SAFETY: a frame the decoder just returned.
        let (raw_pts, raw_dts) = unsafe { ((*f.as_ptr()).pts, (*f.as_ptr()).pkt_dts) };
        let known = |ts: i64| (ts != ffi::AV_NOPTS_VALUE).then_some(ts);
        if best.is_some() && known(raw_pts).is_some() && best != known(raw_pts) {
            self.pts_faulty = true;
        }
        let by_dts = if self.pts_faulty {
            known(raw_dts)
        } else {
            None
        };
        let pts = by_dts
            .or(best)
            .or_else(|| f.pts())
            .or_else(|| self.last_pts.map(|p| p.saturating_add(self.last_step)))
            .unwrap_or(0);
        if from_start && self.first_pts.is_none() {
            self.first_pts = Some(pts);
        }
        if f.is_key() {
            if let Some(k) = self.last_key_pts {
                if pts > k {
                    self.gop = self.gop.max(pts - k);
                }
            }
            self.last_key_pts = Some(pts);
        }
        self.last_pts = Some(pts);
        self.last_step = step;
        pts
    }
}
