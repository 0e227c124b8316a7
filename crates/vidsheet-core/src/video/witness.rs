//! A proof asked of the decoder of the part before: a decoder whose first entry lies just past a
//! keyframe does not decode the GOP before for the proof while the decoder of the part before still
//! decodes that GOP; it asks that one to decode on through the keyframe and compare, and enters
//! again at the keyframe, trusting the entry provisionally: its caller holds back every cell decoded
//! from then on until the verdict ([`VideoSource::provisional`]).

use super::proofs::Verifying;
use super::VideoSource;

/// The part of the job a decoder decodes.
#[derive(Default)]
pub(super) struct Part {
    /// The part, and the last target of the part before (stream units): see
    /// [`VideoSource::set_part`].
    part: Option<usize>,
    before: Option<i64>,
}

impl VideoSource {
    /// Makes this decoder the one of `part` of the job, the part before it (if any) ending with a
    /// target at `before` (µs): see [`Self::ask_witness`].
    pub(crate) fn set_part(&mut self, part: usize, before: Option<i64>) {
        self.part.part = Some(part);
        self.part.before = before.map(|us| self.facts.ts_floor(us));
    }

    /// Whether an entry met now is trusted provisionally ([`super::OpenGops::may_trust`]).
    pub(super) fn may_trust_entry(&self) -> bool {
        self.proving.gops().may_trust(self.part.part)
    }

    /// This decoder's first target is settled: a witness it needs of the part before is asked
    /// by now ([`super::OpenGops::first_target_settled`]).
    pub(crate) fn first_target_settled(&self) {
        if let Some(part) = self.part.part {
            self.proving.gops().first_target_settled(part);
        }
    }

    /// The proof's first decode `v` (an entry met just past its keyframe, decoded on past the
    /// reach: [`Self::decode_on_to_prove`]) needs a decode from the keyframe before. The decoder of
    /// the part before decodes that GOP for its own last targets: asked while it still decodes, it
    /// decodes on through this keyframe and compares ([`Self::serve_witness`]), and this decoder
    /// enters at the keyframe again, trusting the entry provisionally, instead of decoding the GOP
    /// before itself. Some(v), given back, when there is no such part.
    pub(super) fn ask_witness(&mut self, v: Verifying) -> Option<Verifying> {
        let Some(key) = v.first.key else {
            return Some(v);
        };
        let index_key = self.keyframe_index(key).filter(|&k| k != i64::MIN);
        let gop_before = index_key.and_then(|k| self.index_keyframe_back(k, 1));
        let Some((index_key, part)) = index_key.zip(self.part.part.and_then(|p| p.checked_sub(1)))
        else {
            return Some(v);
        };
        // The part before ends in the GOP before this keyframe, so it decodes up to it.
        let ends_before = self.part.before.is_some_and(|b| {
            b < key && gop_before.is_some() && self.keyframe_index(b) == gop_before
        });
        if !ends_before || !self.proving.may_trust_pending() {
            return Some(v);
        }
        if let Some(v) = self.proving.gops().ask(part, v) {
            return Some(v);
        }
        let ts = self.index_seek_ts(index_key);
        if !(self.renew_decoder() && self.try_seek(ts)) {
            self.rewind_for_trouble();
        }
        None
    }

    /// Gives the proof asked of this decoder ([`Self::ask_witness`]), once its own cells are
    /// done: when its decode entered at least the reach before the keyframe asked about and the
    /// next keyframe it meets decoding on is that one, decodes on (every picture shown) and
    /// compares ([`Self::verify`]); else gives the ask up. Either way this part is done.
    pub(crate) fn serve_witness(&mut self) {
        let Some(part) = self.part.part else {
            return;
        };
        if let Some(v) = self.proving.gops().asked_of(part) {
            let at = self.shown.latest();
            let serves = match (v.first.key, at) {
                (Some(key), Some(at)) => {
                    let next_key = self.index_keyframe_after(at.saturating_add(1));
                    let key_index = self.keyframe_index(key);
                    // The last picture out may be a leading picture of the keyframe's own GOP
                    // (decoded after it, shown before it) when decoding skipped every picture
                    // from the last target to the keyframe.
                    at < key
                        && !self.feed.drained()
                        && self
                            .place
                            .entry()
                            .is_some_and(|e| e <= key.saturating_sub(v.reach))
                        && next_key.is_some()
                        && (next_key == key_index || self.keyframe_index(at) == key_index)
                }
                _ => false,
            };
            if serves {
                self.skip.stop();
                // Every picture from here on is decoded (and shown to the proof): referenced
                // pictures a plan would skip too.
                self.refs.forget_plans();
                self.proving.verify_with(Some(v));
                // verify() ends the proof at the last picture the first decode showed.
                while self.proving.verifying() {
                    if self.next_frame().is_none() {
                        break;
                    }
                }
                self.proving.stop_verifying();
            }
        }
        self.proving.gops().part_done(part);
    }
}
