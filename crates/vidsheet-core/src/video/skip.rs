//! Pictures no target can show: decoded with AVDISCARD_NONREF (a non-reference picture is then
//! not decoded at all), which saves most B-frames of a GOP crossed on the way to a target.

use std::ops::Bound::{Excluded, Unbounded};

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
