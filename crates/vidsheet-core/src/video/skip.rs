//! Pictures no target can show: decoded with AVDISCARD_NONREF (a non-reference picture is then
//! not decoded at all), which saves most B-frames of a GOP crossed on the way to a target.
//!
//! A packet is judged by its pts as the time of the picture it makes. Not so a field picture
//! stored as a packet of its own (MPEG-2 in some MP4s, H.264 PAFF in broadcast transport
//! streams; [`super::fields`]): its frame is shown at the first field's time, and the second
//! field's later pts would let a target at the first field's time skip its own frame's second
//! half (the decoder then drops the frame). So a second field follows the decision taken for the
//! first.

use std::collections::BTreeSet;
use std::ops::Bound::{Excluded, Included, Unbounded};

use ff::{codec, ffi, Packet};
use ffmpeg_next as ff;

use super::h264::Picture;
use super::{fields, refs, VideoSource};

/// What skipping knows: the job's targets, the packets read (witnesses), and how much it skipped.
pub(super) struct Skipping {
    /// Every target of the job (stream units, ascending) and the first one not yet answered:
    /// lets the decoder skip non-reference frames no target can show.
    targets: Vec<i64>,
    target_pos: usize,
    /// Pts of packets read since the last repositioning (witnesses for skipping).
    seen_pts: BTreeSet<i64>,
    /// How this stream's packets are read for a lone field picture ([`fields`]).
    fields: fields::FieldReader,
    /// The last packet held a lone field picture that opens a frame: that field and whether it
    /// was skipped (its second field, the next packet, follows that decision).
    first_field: Option<(fields::Field, bool)>,
    /// Skip non-reference frames that no pending target can show (on by default).
    skip_nonref: bool,
    /// Skip referenced pictures too when [`refs`] shows none needs them (with `skip_nonref`). On
    /// by default (on the 1080p bench clip's 3x3 overview it halves the pictures decoded); tests
    /// turn it off for a decode that skips none.
    skip_referenced: bool,
    /// Packets sent with AVDISCARD_NONREF.
    skippable_sent: u64,
    /// `skippable_sent` at the last repositioning.
    skippable_at_reposition: u64,
    /// The decoder refused or failed on a packet since the last repositioning (damaged data: that
    /// packet gave no picture).
    packet_failed: bool,
}

impl Skipping {
    /// Skipping for a stream decoded by `codec` (`par`: its codec parameters): on.
    pub(super) fn of_stream(codec: codec::Id, par: *const ffi::AVCodecParameters) -> Skipping {
        Skipping {
            targets: Vec::new(),
            target_pos: 0,
            seen_pts: BTreeSet::new(),
            fields: fields::FieldReader::of_stream(codec, par),
            first_field: None,
            skip_nonref: true,
            skip_referenced: true,
            skippable_sent: 0,
            skippable_at_reposition: 0,
            packet_failed: false,
        }
    }

    /// Targets before `ts` (stream units) are answered.
    pub(super) fn pass_targets_before(&mut self, ts: i64) {
        while self.target_pos < self.targets.len() && self.targets[self.target_pos] < ts {
            self.target_pos += 1;
        }
    }

    /// The targets not yet answered (stream units, ascending).
    pub(super) fn pending(&self) -> &[i64] {
        &self.targets[self.target_pos.min(self.targets.len())..]
    }

    pub(super) fn nonref_on(&self) -> bool {
        self.skip_nonref
    }

    pub(super) fn referenced_on(&self) -> bool {
        self.skip_referenced
    }

    /// Every picture from here on is decoded.
    pub(super) fn stop(&mut self) {
        self.skip_nonref = false;
    }

    /// A packet was sent, `skipped` or not.
    pub(super) fn sent(&mut self, skipped: bool) {
        self.skippable_sent += skipped as u64;
    }

    /// The decoder refused or failed on a packet.
    pub(super) fn packet_failed(&mut self) {
        self.packet_failed = true;
    }

    /// Decoding was repositioned: the witnesses and the field pair are of the old position.
    pub(super) fn reposition(&mut self) {
        self.seen_pts.clear();
        self.skippable_at_reposition = self.skippable_sent;
        self.packet_failed = false;
        self.first_field = None;
    }

    /// Remembers a packet's pts as a witness for [`Self::may_skip`] (bounded: older witnesses
    /// than the last frame out, `last_pts`, are dropped when many accumulate).
    pub(super) fn witness(&mut self, pts: Option<i64>, last_pts: Option<i64>) {
        if let Some(p) = pts {
            self.seen_pts.insert(p);
            if self.seen_pts.len() > 1024 {
                let floor = last_pts.unwrap_or(i64::MIN);
                self.seen_pts.retain(|&v| v > floor);
            }
        }
    }

    /// Whether the frame in `packet` may be decoded with AVDISCARD_NONREF: it is not a keyframe,
    /// and a frame already known to come later (a packet read with a larger pts) is still at or
    /// before the first pending target at or after it, so no target can pick this one.
    /// `pts_faulty`: the stream's pts were judged faulty; `decoded_any`: a picture came out since
    /// the last repositioning.
    pub(super) fn may_skip(&self, packet: &Packet, pts_faulty: bool, decoded_any: bool) -> bool {
        // With faulty pts a frame is timed by the dts the decoder pairs it with, which depends on
        // every packet going through it (and the witnesses' pts say nothing).
        if !self.skip_nonref || pts_faulty || self.targets.is_empty() || packet.is_key() {
            return false;
        }
        if !decoded_any {
            // Nothing decoded since the last repositioning: this may be the first frame, which
            // targets before it show.
            return false;
        }
        let Some(p) = packet.pts() else { return false };
        let Some(&witness) = self.seen_pts.range((Excluded(p), Unbounded)).next() else {
            return false;
        };
        let pending = self.pending();
        let i = pending.partition_point(|&t| t < p);
        match pending.get(i) {
            Some(&t_min) => witness <= t_min,
            None => true,
        }
    }

    /// Whether `packet` is decoded with AVDISCARD_NONREF: [`Self::may_skip`], except that the
    /// second field of a field pair (see the module doc) is treated as its first field was; and
    /// whether it is such a second field (its picture comes out at its first field's time).
    fn decide(&mut self, packet: &Packet, pts_faulty: bool, decoded_any: bool) -> (bool, bool) {
        let field = packet.data().and_then(|d| self.fields.lone_field(d));
        let open = self.first_field.take();
        let (second, next) = fields::pair_field(open.map(|(f, _)| f), field);
        let skip = match open {
            Some((_, skip)) if second => skip,
            _ => self.may_skip(packet, pts_faulty, decoded_any),
        };
        self.first_field = next.map(|f| (f, skip));
        (skip, second)
    }

    /// Whether skipping may have hid the answer `chosen` (pts) for `target` (see
    /// [`VideoSource::skip_hid_the_answer`]); if so, skipping is given up for this stream.
    fn hid_the_answer(&mut self, chosen: i64, target: i64) -> bool {
        if !self.skip_nonref || self.skippable_sent == self.skippable_at_reposition {
            return false;
        }
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
        true
    }
}

impl VideoSource {
    /// Announces every target of the job (absolute microseconds, any order) so frames no target
    /// can show may be skipped while decoding forward.
    pub(crate) fn set_targets(&mut self, targets_us: &[i64]) {
        let mut t: Vec<i64> = targets_us
            .iter()
            .map(|&us| self.facts.ts_floor(us))
            .collect();
        t.sort_unstable();
        self.skip.targets = t;
        self.skip.target_pos = 0;
    }

    /// Skips referenced pictures too (`on`, the default) or not.
    #[cfg(test)]
    pub(super) fn set_skip_referenced(&mut self, on: bool) {
        self.skip.skip_referenced = on;
    }

    /// Packets sent with AVDISCARD_NONREF.
    pub(crate) fn skippable_sent(&self) -> u64 {
        self.skip.skippable_sent
    }

    /// [`Skipping::decide`] for `packet`, as things stand.
    pub(super) fn skip_decision(&mut self, packet: &Packet) -> (bool, bool) {
        let (faulty, any) = (self.clock.pts_faulty(), self.shown.any());
        self.skip.decide(packet, faulty, any)
    }

    /// How a referenced picture (`picture`, the one in `packet`) is sent: AVDISCARD_BIDIR when it
    /// is a B picture no target can show ([`Skipping::may_skip`]) and, judged from the packets
    /// read ahead, no decoded picture needs ([`refs`]), or when an earlier plan said so
    /// (`planned`); AVDISCARD_DEFAULT otherwise.
    pub(super) fn referenced_discard(
        &mut self,
        packet: &Packet,
        picture: Option<&Picture>,
        planned: Option<bool>,
    ) -> ffi::AVDiscard {
        let keep = ffi::AVDiscard::AVDISCARD_DEFAULT;
        let Some(pic) = picture else { return keep };
        if !self.skip.skip_referenced || !pic.reference || pic.idr || !self.refs.active() {
            return keep;
        }
        // The packets read ahead are witnesses too: read them before asking.
        self.read_ahead(refs::LOOKAHEAD);
        let (faulty, any) = (self.clock.pts_faulty(), self.shown.any());
        let skip = &self.skip;
        let may_skip = |p: &Packet| skip.may_skip(p, faulty, any);
        let candidate = refs::bidirectional(pic) && may_skip(packet);
        if planned.is_none() && candidate {
            self.refs.judge_ahead(may_skip);
        }
        if !self.refs.skip_referenced(pic, planned, candidate) {
            return keep;
        }
        ffi::AVDiscard::AVDISCARD_BIDIR
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
        let Some(chosen) = self.shown.cur_pts() else {
            return false;
        };
        if !self.skip.hid_the_answer(chosen, target) {
            return false;
        }
        if self.place.at_file_start() {
            self.rewind();
        } else {
            let at = self.place.entry().unwrap_or(chosen);
            self.seek_back(at);
        }
        true
    }
}
