//! Pictures handed out late. A decoder hands pictures out in presentation order, so the first one
//! past a target normally proves that no earlier one is still to come. Around damage it may not:
//! a picture held back comes out after one timed later (a TS with its middle zeroed hands out the
//! picture of pts 3.40 after the one of 4.36, timed by its decode time 4.32). A sequential decode
//! shows, at a target, the picture with the greatest time at or before it, whenever it came out;
//! so when a packet sent for decoding, timed after the chosen picture and at or before the target,
//! has not come out as a picture yet, decoding goes on a few pictures (the decoder's reorder depth)
//! and keeps the ones past the target, in order, for later targets.
//!
//! On a clean stream every such packet has come out before the first picture past the target
//! (pictures skipped on the way come before the chosen one, see [`super::skip`]), so nothing more
//! is decoded.

use std::ops::Bound::{Excluded, Included};

use super::{Decoded, VideoSource};

/// Owed packets kept before the oldest (those at or before the chosen picture) are dropped.
const MAX_OWED: usize = 1024;

impl VideoSource {
    /// A packet of pts `pts` was sent to be decoded into a picture of its own.
    pub(super) fn owe(&mut self, pts: Option<i64>) {
        if let Some(p) = pts {
            self.owed.insert(p);
            if self.owed.len() > MAX_OWED {
                let floor = self.cur.as_ref().map_or(i64::MIN, |c| c.pts);
                self.owed.retain(|&v| v > floor);
            }
        }
    }

    /// A picture came out of the packet of pts `raw_pts` (the frame's own pts, not its time).
    pub(super) fn paid(&mut self, raw_pts: Option<i64>) {
        if let Some(p) = raw_pts {
            self.owed.remove(&p);
        }
    }

    /// Whether a packet sent after the chosen picture's time, at or before `target` (stream
    /// units), has not come out yet.
    pub(super) fn owes_before(&self, target: i64) -> bool {
        let Some(chosen) = self.cur.as_ref().map(|c| c.pts) else {
            return false;
        };
        chosen < target
            && self
                .owed
                .range((Excluded(chosen), Included(target)))
                .next()
                .is_some()
    }

    /// Called with `next` past the target: takes the queued picture the target shows, if any;
    /// then, while a picture at or before the target is owed, decodes on up to the reorder depth,
    /// choosing by time (the greatest at or before the target) and queueing the others.
    pub(super) fn look_ahead(&mut self, target_us: i64) {
        let chosen = self.cur.as_ref().map_or(i64::MIN, |c| c.pts);
        let best = (0..self.ahead.len())
            .filter(|&i| self.ahead[i].pts >= chosen && self.le(self.ahead[i].pts, target_us))
            .max_by_key(|&i| (self.ahead[i].pts, i));
        if let Some(f) = best.and_then(|i| self.ahead.remove(i)) {
            self.cur = Some(f);
        }
        // Frames timed by decode time (faulty pts) come out in time order.
        if self.pts_faulty {
            return;
        }
        let target = self.ts_floor(target_us);
        let mut looked = 0;
        while self.owes_before(target) && looked <= self.reorder_depth() {
            let Some(f) = self.next_frame() else { return };
            looked += 1;
            if self.before_landing(f.pts) {
                continue;
            }
            let later = self.cur.as_ref().is_none_or(|c| f.pts >= c.pts);
            if later && self.le(f.pts, target_us) {
                self.cur = Some(f);
            } else {
                self.ahead.push_back(f);
            }
        }
    }

    /// Whether a queued picture is at or before the target (and not before the chosen one).
    pub(super) fn ahead_shows(&self, target_us: i64) -> bool {
        let chosen = self.cur.as_ref().map_or(i64::MIN, |c| c.pts);
        self.ahead
            .iter()
            .any(|f| f.pts >= chosen && self.le(f.pts, target_us))
    }

    /// The next picture: a queued one, else a decoded one.
    pub(super) fn pull(&mut self) -> Option<Decoded> {
        self.ahead.pop_front().or_else(|| self.next_frame())
    }

    /// Pictures the decoder may hold back to reorder (it raises the count when it finds the
    /// stream needs more).
    fn reorder_depth(&self) -> usize {
        // SAFETY: the decoder's own context, read between calls into it.
        let depth = unsafe { (*self.decoder.as_ptr()).has_b_frames };
        depth.max(1) as usize
    }
}
