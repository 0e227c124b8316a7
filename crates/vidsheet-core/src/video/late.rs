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

use std::collections::{BTreeSet, VecDeque};
use std::ops::Bound::{Excluded, Included};

use ff::frame;
use ffmpeg_next as ff;

use super::facts::Facts;
use super::{fingerprint, Decoded, VideoSource};

/// Owed packets kept before the oldest (those at or before the chosen picture) are dropped.
const MAX_OWED: usize = 1024;

/// The pictures around the current target, and the packets whose pictures have not come out.
#[derive(Default)]
pub(super) struct Shown {
    /// Last decoded frame with pts <= the current target.
    cur: Option<Decoded>,
    /// First decoded frame with pts > the current target (not yet consumed).
    next: Option<Decoded>,
    /// Frames decoded after `next` while looking for a late one, in output order.
    ahead: VecDeque<Decoded>,
    /// Pts of packets sent since the last repositioning whose picture has not come out.
    owed: BTreeSet<i64>,
}

impl Shown {
    pub(super) fn cur(&self) -> Option<&Decoded> {
        self.cur.as_ref()
    }

    pub(super) fn next(&self) -> Option<&Decoded> {
        self.next.as_ref()
    }

    /// The chosen picture's pts.
    pub(super) fn cur_pts(&self) -> Option<i64> {
        self.cur.as_ref().map(|c| c.pts)
    }

    /// Where decoding stands: the pts of the picture past the target, else of the chosen one.
    pub(super) fn position(&self) -> Option<i64> {
        self.next.as_ref().or(self.cur.as_ref()).map(|d| d.pts)
    }

    /// Whether a picture came out since the last repositioning (and is kept here).
    pub(super) fn any(&self) -> bool {
        self.cur.is_some() || self.next.is_some()
    }

    /// The latest pts of the pictures kept (chosen, next, queued).
    pub(super) fn latest(&self) -> Option<i64> {
        self.cur
            .iter()
            .chain(self.next.iter())
            .chain(self.ahead.iter())
            .map(|d| d.pts)
            .max()
    }

    /// The chosen picture's digest, taken now if not yet ([`fingerprint`]).
    pub(super) fn cur_print(&mut self) -> Option<u64> {
        self.cur.as_mut().and_then(|c| {
            if c.print.is_none() {
                c.print = fingerprint::fingerprint(&c.frame);
            }
            c.print
        })
    }

    /// Decoding was repositioned: nothing kept, nothing owed.
    pub(super) fn clear(&mut self) {
        self.cur = None;
        self.next = None;
        self.ahead.clear();
        self.owed.clear();
    }

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

    /// Whether a queued picture is at or before the target (and not before the chosen one).
    pub(super) fn ahead_shows(&self, facts: &Facts, target_us: i64) -> bool {
        let chosen = self.cur.as_ref().map_or(i64::MIN, |c| c.pts);
        self.ahead
            .iter()
            .any(|f| f.pts >= chosen && facts.le(f.pts, target_us))
    }

    /// Takes the queued picture the target shows, if any, as the chosen one.
    fn choose_ahead(&mut self, facts: &Facts, target_us: i64) {
        let chosen = self.cur.as_ref().map_or(i64::MIN, |c| c.pts);
        let best = (0..self.ahead.len())
            .filter(|&i| self.ahead[i].pts >= chosen && facts.le(self.ahead[i].pts, target_us))
            .max_by_key(|&i| (self.ahead[i].pts, i));
        if let Some(f) = best.and_then(|i| self.ahead.remove(i)) {
            self.cur = Some(f);
        }
    }
}

impl VideoSource {
    /// Decodes forward until `next` holds a frame past the target or the stream ends; `cur` is
    /// then the last frame <= target seen since the last repositioning.
    pub(super) fn decode_until(&mut self, target_us: i64, early: &mut dyn FnMut(&Decoded) -> bool) {
        // Early hand-overs per call: a stream whose frames come closer together than its declared
        // rate would otherwise have every frame near the target handed over.
        let mut early_left = 2;
        loop {
            if let Some(mut n) = self.shown.next.take() {
                if self.shown.cur.as_ref().is_some_and(|c| n.pts < c.pts) {
                    // The clock went back (a restarted program, a damaged timestamp): the frame
                    // shown at a time is the one with the greatest pts <= it, not this one.
                } else if self.facts.le(n.pts, target_us) {
                    let step = self.facts.frame_step();
                    if early_left > 0 && !self.facts.le(n.pts.saturating_add(step), target_us) {
                        early_left -= 1;
                        if n.print.is_none() && self.needs_print() {
                            n.print = fingerprint::fingerprint(&n.frame);
                        }
                        if early(&n) {
                            n.frame = frame::Video::empty();
                        }
                    }
                    self.shown.cur = Some(n);
                } else {
                    self.shown.next = Some(n);
                    self.look_ahead(target_us);
                    return;
                }
            }
            match self.pull() {
                Some(f) if self.before_landing(f.pts) => {}
                Some(f) => self.shown.next = Some(f),
                None => return,
            }
        }
    }

    /// Called with `next` past the target: takes the queued picture the target shows, if any;
    /// then, while a picture at or before the target is owed, decodes on up to the reorder depth,
    /// choosing by time (the greatest at or before the target) and queueing the others.
    fn look_ahead(&mut self, target_us: i64) {
        self.shown.choose_ahead(&self.facts, target_us);
        // Frames timed by decode time (faulty pts) come out in time order.
        if self.clock.pts_faulty() {
            return;
        }
        let target = self.facts.ts_floor(target_us);
        let mut looked = 0;
        while self.shown.owes_before(target) && looked <= self.reorder_depth() {
            let Some(f) = self.next_frame() else { return };
            looked += 1;
            if self.before_landing(f.pts) {
                continue;
            }
            let later = self.shown.cur.as_ref().is_none_or(|c| f.pts >= c.pts);
            if later && self.facts.le(f.pts, target_us) {
                self.shown.cur = Some(f);
            } else {
                self.shown.ahead.push_back(f);
            }
        }
    }

    /// The next picture: a queued one, else a decoded one.
    fn pull(&mut self) -> Option<Decoded> {
        self.shown.ahead.pop_front().or_else(|| self.next_frame())
    }

    /// Pictures the decoder may hold back to reorder (it raises the count when it finds the
    /// stream needs more).
    fn reorder_depth(&self) -> usize {
        // SAFETY: the decoder's own context, read between calls into it.
        let depth = unsafe { (*self.decoder.as_ptr()).has_b_frames };
        depth.max(1) as usize
    }
}
