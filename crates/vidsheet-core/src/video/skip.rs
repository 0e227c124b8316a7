//! Pictures no target can show: decoded with AVDISCARD_NONREF (a non-reference picture is then
//! not decoded at all), which saves most B-frames of a GOP crossed on the way to a target.
//!
//! A packet is judged by its pts as the time of the picture it makes. Not so an MPEG-2 field
//! picture stored as a packet of its own (some MP4 muxers give each field a sample): its frame is
//! shown at the first field's time, and the second field's later pts would let a target at the
//! first field's time skip its own frame's second half (the decoder then drops the frame). So a
//! second field follows the decision taken for the first.

use std::ops::Bound::{Excluded, Included, Unbounded};

use ff::{codec, Packet};
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

    /// Whether `packet` is decoded with AVDISCARD_NONREF: [`Self::may_skip`], except that the
    /// second field of a field pair (see the module doc) is treated as its first field was; and
    /// whether it is such a second field (its picture comes out at its first field's time).
    pub(super) fn skip_decision(&mut self, packet: &Packet) -> (bool, bool) {
        let field = if self.decoder.id() == codec::Id::MPEG2VIDEO {
            packet.data().and_then(lone_field)
        } else {
            None
        };
        match (field, self.first_field.take()) {
            (Some(s), Some((first, skip))) if s != first => (skip, true),
            (Some(s), _) => {
                let skip = self.may_skip(packet);
                self.first_field = Some((s, skip));
                (skip, false)
            }
            (None, _) => (self.may_skip(packet), false),
        }
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

/// The picture structure (1 top field, 2 bottom field) of an MPEG-2 packet holding exactly one
/// picture that is a field; None for a frame picture, a packet of two fields or anything unreadable.
fn lone_field(data: &[u8]) -> Option<u8> {
    const PICTURE: [u8; 4] = [0, 0, 1, 0x00];
    const EXTENSION: [u8; 4] = [0, 0, 1, 0xb5];
    let find = |from: usize, code: &[u8; 4]| {
        data.get(from..)?
            .windows(4)
            .position(|w| w == code)
            .map(|i| from + i)
    };
    let picture = find(0, &PICTURE)?;
    if find(picture + 4, &PICTURE).is_some() {
        return None;
    }
    // The first extension after the picture header is its picture coding extension (identifier 8);
    // picture_structure is the low two bits of its third byte.
    let ext = find(picture + 4, &EXTENSION)?;
    if data.get(ext + 4)? >> 4 != 8 {
        return None;
    }
    let structure = data.get(ext + 6)? & 3;
    matches!(structure, 1 | 2).then_some(structure)
}

#[cfg(test)]
mod tests {
    use super::lone_field;

    /// A picture header then a picture coding extension whose third byte is `third`.
    fn picture(third: u8) -> Vec<u8> {
        let mut v = vec![0, 0, 1, 0x00, 0x00, 0x0f, 0xff, 0xf8];
        v.extend([0, 0, 1, 0xb5, 0x8f, 0xff, third, 0x00]);
        v.extend([0, 0, 1, 0x01, 0x42]);
        v
    }

    #[test]
    fn a_lone_field_is_told_by_its_structure() {
        assert_eq!(lone_field(&picture(0x01)), Some(1));
        assert_eq!(lone_field(&picture(0xf2)), Some(2));
        assert_eq!(lone_field(&picture(0x03)), None, "a frame picture");
        let pair = [picture(0x01), picture(0x02)].concat();
        assert_eq!(lone_field(&pair), None, "both fields in one packet");
    }

    #[test]
    fn anything_else_is_no_field() {
        assert_eq!(lone_field(&[]), None);
        assert_eq!(
            lone_field(&[0, 0, 1, 0x00, 0, 0, 1, 0xb5, 0x8f]),
            None,
            "cut short"
        );
        let mut sequence_ext = picture(0x01);
        sequence_ext[12] = 0x1f; // extension identifier 1: not a picture coding extension
        assert_eq!(lone_field(&sequence_ext), None);
    }
}
