//! Pictures no target can show: decoded with AVDISCARD_NONREF (a non-reference picture is then
//! not decoded at all), which saves most B-frames of a GOP crossed on the way to a target.
//!
//! A packet is judged by its pts as the time of the picture it makes. Not so a field picture
//! stored as a packet of its own (MPEG-2 in some MP4s, H.264 PAFF in broadcast transport
//! streams; [`super::fields`]): its frame is shown at the first field's time, and the second
//! field's later pts would let a target at the first field's time skip its own frame's second
//! half (the decoder then drops the frame). So a second field follows the decision taken for the
//! first.

use std::ops::Bound::{Excluded, Included, Unbounded};

use ff::{ffi, Packet};
use ffmpeg_next as ff;

use super::h264::{Picture, SliceKind};
use super::{fields, refs, VideoSource};

impl VideoSource {
    /// Announces every target of the job (absolute microseconds, any order) so frames no target
    /// can show may be skipped while decoding forward.
    pub(crate) fn set_targets(&mut self, targets_us: &[i64]) {
        let mut t: Vec<i64> = targets_us.iter().map(|&us| self.ts_floor(us)).collect();
        t.sort_unstable();
        self.targets = t;
        self.target_pos = 0;
    }

    /// Whether `packet` is decoded with AVDISCARD_NONREF: [`Self::may_skip`], except that the
    /// second field of a field pair (see the module doc) is treated as its first field was; and
    /// whether it is such a second field (its picture comes out at its first field's time).
    pub(super) fn skip_decision(&mut self, packet: &Packet) -> (bool, bool) {
        let field = packet.data().and_then(|d| self.fields.lone_field(d));
        let open = self.first_field.take();
        let (second, next) = fields::pair_field(open.map(|(f, _)| f), field);
        let skip = match open {
            Some((_, skip)) if second => skip,
            _ => self.may_skip(packet),
        };
        self.first_field = next.map(|f| (f, skip));
        (skip, second)
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

    /// How a referenced picture (`picture`, the one in `packet`) is sent: AVDISCARD_BIDIR when it
    /// is a B picture no target can show ([`Self::may_skip`]) and, judged from the packets read
    /// ahead, no decoded picture needs ([`refs`]), or when an earlier plan said so (`planned`);
    /// AVDISCARD_DEFAULT otherwise.
    pub(super) fn referenced_discard(
        &mut self,
        packet: &Packet,
        picture: Option<&Picture>,
        planned: Option<bool>,
    ) -> ffi::AVDiscard {
        let keep = ffi::AVDiscard::AVDISCARD_DEFAULT;
        let Some(pic) = picture else { return keep };
        if !self.skip_referenced || !pic.reference || pic.idr || !self.refs.active() {
            return keep;
        }
        // The packets read ahead are witnesses too: read them before asking.
        self.read_ahead(refs::LOOKAHEAD);
        let candidate = bidirectional(pic) && self.may_skip(packet);
        if planned.is_none() && candidate {
            for i in 0..self.refs.queue.len() {
                let read = &self.refs.queue[i];
                let (nonref, bidir) = match &read.picture {
                    Some(p) => (!p.reference, p.reference && bidirectional(p)),
                    None => (false, false),
                };
                // Once judged skipped, always: a referenced picture may rest on it.
                let skip = read.nonref_skip == Some(true) || nonref && self.may_skip(&read.packet);
                let candidate = bidir && self.may_skip(&read.packet);
                self.refs.queue[i].nonref_skip = Some(skip);
                self.refs.queue[i].candidate = candidate;
            }
        }
        if !self.refs.skip_referenced(pic, planned, candidate) {
            return keep;
        }
        ffi::AVDiscard::AVDISCARD_BIDIR
    }

    /// Reads packets of the stream ahead until `n` wait ([`refs`]), or [`refs::LOOKAHEAD_BYTES`],
    /// or the next IDR picture (a plan's judgement ends there); stops quietly at the end or a
    /// read error (the pump meets it again when the packets read ahead are used up). Their pts
    /// are witnesses already ([`Self::may_skip`]): those packets exist.
    fn read_ahead(&mut self, n: usize) {
        let mut others = 0;
        let idr = |r: &refs::Read| r.picture.as_ref().is_some_and(|p| p.idr);
        if self.refs.queue.iter().any(idr) {
            return;
        }
        let mut bytes: usize = self.refs.queue.iter().map(|r| r.packet.size()).sum();
        while self.refs.queue.len() < n && others < n * 16 && bytes < refs::LOOKAHEAD_BYTES {
            let mut packet = Packet::empty();
            match packet.read(&mut self.input) {
                Ok(()) => {}
                Err(ff::Error::Eof) => {
                    self.refs.at_end = true;
                    return;
                }
                Err(_) => return,
            }
            if packet.stream() != self.index {
                others += 1;
                continue;
            }
            if let (Some(p), Some(d)) = (packet.pts(), packet.dts()) {
                self.pts_faulty |= p < d;
            }
            self.witness(packet.pts());
            bytes += packet.size();
            let read = self.refs.read(packet, self.skip_referenced);
            let last = idr(&read);
            self.refs.queue.push_back(read);
            if last {
                return;
            }
        }
    }

    /// Called once a target's frame is chosen (and settled): whether skipping may have hidden the
    /// answer, in which case skipping is given up for this stream and the target decoded again
    /// from where decoding last began (returns true). Skipping a picture rests on a later one
    /// (its witness) coming out at its pts, at or before the target. Damage breaks that two ways:
    ///
    /// - the decoder may hold the witness back and hand it out later, timed elsewhere, and the
    ///   skipped picture was then the one on screen at the target: a packet was read whose pts
    ///   lies after the chosen frame, at or before the target, yet no frame came out at it;
    /// - where a packet gave no picture (the decoder refused or failed on it), pictures may come
    ///   out of order, and the decoder's best-effort timestamps (see `stamp`) call the pts faulty
    ///   when a picture's pts falls below the one before it, often a skipped one: without it the
    ///   pictures keep their pts, where a sequential decode shows them at their decode times.
    ///
    /// On undamaged data neither happens, and nothing is decoded twice.
    pub(super) fn skip_hid_the_answer(&mut self, target: i64) -> bool {
        if !self.skip_nonref || self.skippable_sent == self.skippable_at_reposition {
            return false;
        }
        let Some(chosen) = self.cur.as_ref().map(|c| c.pts) else {
            return false;
        };
        let held_back = chosen < target
            && self
                .seen_pts
                .range((Excluded(chosen), Included(target)))
                .next()
                .is_some();
        if !held_back && !self.packet_failed {
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

/// A non-IDR picture of B slices only: AVDISCARD_BIDIR discards it whole (FFmpeg judges by the
/// first slice). Only these are candidates: a referenced P picture is, almost always, what the
/// next P picture predicts from.
fn bidirectional(pic: &Picture) -> bool {
    !pic.idr && pic.slices.iter().all(|s| s.kind == SliceKind::B)
}
