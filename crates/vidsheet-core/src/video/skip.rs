//! Pictures no target can show: decoded with AVDISCARD_NONREF (a non-reference picture is then
//! not decoded at all), which saves most B-frames of a GOP crossed on the way to a target.

use std::ops::Bound::{Excluded, Included, Unbounded};

use ff::Packet;
use ffmpeg_next as ff;

use super::VideoSource;

impl VideoSource {
    /// Announces every target of the job (absolute microseconds, any order) so frames no target
    /// can show may be skipped while decoding forward.
    pub(crate) fn set_targets(&mut self, targets_us: &[i64]) {
        let mut t: Vec<i64> = targets_us.iter().map(|&us| self.ts_floor(us)).collect();
        t.sort_unstable();
        self.targets = t;
        self.target_pos = 0;
    }

    /// Whether the frame in `packet` may be decoded with AVDISCARD_NONREF: it is not a keyframe,
    /// and a frame already known to come later (a packet read with a larger pts) is still at or
    /// before the first pending target at or after it, so no target can pick this one.
    pub(super) fn may_skip(&self, packet: &Packet) -> bool {
        // With faulty pts a frame is timed by the dts the decoder pairs it with, which depends on
        // every packet going through it (and the witnesses' pts say nothing).
        if !self.skip_nonref || self.pts_faulty || self.targets.is_empty() || packet.is_key() {
            return false;
        }
        if self.cur.is_none() && self.next.is_none() {
            // Nothing decoded since the last repositioning: this may be the first frame, which
            // targets before it show.
            return false;
        }
        let Some(p) = packet.pts() else { return false };
        let Some(&witness) = self.seen_pts.range((Excluded(p), Unbounded)).next() else {
            return false;
        };
        let pending = &self.targets[self.target_pos.min(self.targets.len())..];
        let i = pending.partition_point(|&t| t < p);
        match pending.get(i) {
            Some(&t_min) => witness <= t_min,
            None => true,
        }
    }

    /// Called once a target's frame is chosen (and settled): whether skipping may have hidden the
    /// answer, in which case skipping is given up for this stream and the target decoded again
    /// from where decoding last began (returns true). Skipping a picture rests on a later one
    /// (its witness) coming out at its pts, at or before the target; around damage the decoder
    /// may hold that one back and hand it out later, timed elsewhere, and the skipped picture was
    /// then the one on screen at the target. So when pictures were skipped since the last
    /// repositioning and a packet was read whose pts lies after the chosen frame, at or before
    /// the target, yet no frame came out at it, the choice is not trusted.
    pub(super) fn skip_hid_the_answer(&mut self, target: i64) -> bool {
        if !self.skip_nonref || self.skippable_sent == self.skippable_at_reposition {
            return false;
        }
        let Some(chosen) = self.cur.as_ref().map(|c| c.pts) else {
            return false;
        };
        if chosen >= target
            || self
                .seen_pts
                .range((Excluded(chosen), Included(target)))
                .next()
                .is_none()
        {
            return false;
        }
        self.skip_nonref = false;
        if self.from_start {
            self.rewind();
        } else {
            let at = self.entry.unwrap_or(chosen);
            self.seek_back(at);
        }
        true
    }

    /// Remembers a packet's pts as a witness for [`Self::may_skip`] (bounded: older witnesses
    /// than the last frame out are dropped when many accumulate).
    pub(super) fn witness(&mut self, pts: Option<i64>) {
        if let Some(p) = pts {
            self.seen_pts.insert(p);
            if self.seen_pts.len() > 1024 {
                let floor = self.last_pts.unwrap_or(i64::MIN);
                self.seen_pts.retain(|&v| v > floor);
            }
        }
    }
}
