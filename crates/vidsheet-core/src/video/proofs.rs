//! Open GOPs, proven once per stream (the rule: fixtures/vectors/open-gop-proof.json). Entering
//! H.264 at a keyframe that is not an IDR always looks like trouble; whether later pictures really
//! reference across it only a second decode tells, which for a legitimate open GOP costs a whole
//! GOP per target. So the first such entry of a stream is verified by the ladder ([`super::recover`])
//! and, once proven, later entries whose only trouble is that kind are accepted without one. The
//! proof is shared by the job's decoders of the stream ([`OpenGops`]): one proves at a time, the
//! others wait for its verdict or trust an entry provisionally ([`super::witness`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use ffmpeg_next as ff;

use super::fingerprint::fingerprint;
use super::open_gops::{Claim, OpenGops, Proof, Verdict};
use super::recover::{proves, Attempt};
use super::VideoSource;

/// An entry proven by the decode under way. The first attempt at an entry chose a frame within
/// the reach of its keyframe, so it cannot prove the entry by its own restart's chosen frame; but
/// that restart, from the keyframe before, decodes on through keyframe + reach for this decoder's
/// later targets. So the first attempt decodes on to keyframe + reach (a few pictures more), and
/// the restart's pictures from the keyframe on are compared with it as they come out ([`proves`],
/// the chosen frame being the first picture past the reach both showed): the proof's second
/// decode is work done anyway. Given up (the claim released) when decoding is repositioned first.
pub(super) struct Verifying {
    pub(super) claim: Claim,
    pub(super) reach: i64,
    /// The first attempt, its prints through its last picture (`frame`).
    pub(super) first: Attempt,
    /// The restart's prints from the keyframe on.
    pub(super) prints: Vec<(i64, u64)>,
}

/// This decoder's side of the stream's open-GOP proof.
#[derive(Default)]
pub(super) struct Proving {
    /// This stream's open-GOP entries were proven clean; shared by the job's decoders of the
    /// stream.
    open_gops: Arc<OpenGops>,
    /// An open-GOP entry this decoder is proving with its current decode ([`Verifying`]).
    verifying: Option<Verifying>,
    /// Trust an entry provisionally rather than wait for another decoder's proof
    /// ([`VideoSource::trust_pending_proofs`]).
    may_trust_pending: bool,
    /// An entry was trusted provisionally and the verdict is not in ([`VideoSource::provisional`]).
    provisional: bool,
}

impl Proving {
    /// The stream's proof, shared with the job's other decoders.
    pub(super) fn gops(&self) -> &Arc<OpenGops> {
        &self.open_gops
    }

    pub(super) fn may_trust_pending(&self) -> bool {
        self.may_trust_pending
    }

    /// Whether this decoder is proving an entry with its current decode.
    pub(super) fn verifying(&self) -> bool {
        self.verifying.is_some()
    }

    /// The current decode proves `v` (None: none) from here on.
    pub(super) fn verify_with(&mut self, v: Option<Verifying>) {
        self.verifying = v;
    }

    /// A proof by the decode under way needs that decode whole: given up (the claim released).
    pub(super) fn stop_verifying(&mut self) {
        self.verifying = None;
    }

    /// An entry is trusted provisionally, while another decoder proves one.
    pub(super) fn trust_provisionally(&mut self) {
        self.provisional = true;
    }
}

impl VideoSource {
    /// The flag saying this stream's open-GOP entries were proven clean, to share with another
    /// decoder of the same stream ([`Self::share_proofs`]).
    pub(crate) fn proofs(&self) -> Arc<OpenGops> {
        Arc::clone(&self.proving.open_gops)
    }

    /// Shares what another decoder of the same stream proves, and proves for it.
    pub(crate) fn share_proofs(&mut self, proofs: Arc<OpenGops>) {
        self.proving.open_gops = proofs;
    }

    /// Lets this decoder trust an entry provisionally while another decoder proves one, instead
    /// of waiting for the verdict: its caller then follows [`Self::provisional`].
    pub(crate) fn trust_pending_proofs(&mut self) {
        self.proving.may_trust_pending = true;
    }

    /// Whether the frames returned since an entry was trusted provisionally must wait for the
    /// stream's verdict ([`Self::provisional_verdict`]) before they may be shown.
    pub(crate) fn provisional(&self) -> bool {
        self.proving.provisional
    }

    /// The stream's verdict for what was decoded provisionally (`wait`: see
    /// [`OpenGops::verdict`]). Once proven, nothing is provisional any more; not proven, what was
    /// decoded since is to be decoded again, by a decoder that waits (this one stays provisional).
    pub(crate) fn provisional_verdict(&mut self, wait: bool) -> Verdict {
        let verdict = self.proving.open_gops.verdict(wait);
        if verdict == Verdict::Proven {
            self.proving.provisional = false;
        }
        verdict
    }

    /// Whether a frame coming out now must keep a fingerprint (see [`fingerprint`]) before its
    /// picture may be released: the decode is watched and the decoder already reported something.
    pub(super) fn needs_print(&self) -> bool {
        self.watch.active() && self.log.any()
    }

    /// Called for every picture that comes out: while an entry may yet be proven (trouble
    /// reported, nothing proven), keeps its digest for the proof and returns it.
    pub(super) fn print_to_prove(&mut self, frame: &ff::frame::Video, pts: i64) -> Option<u64> {
        if self.proving.verifying.is_some() {
            return self.verify(frame, pts);
        }
        // Entered at an IDR picture: nothing here is an open-GOP entry (the decoder's log then
        // holds what skipped referenced pictures made), and a digest costs about as much as
        // decoding the picture (a tenth of a 1080p overview's CPU when taken for every picture).
        if !self.needs_print() || !self.proving.open_gops.open() || self.watch.idr_entry() {
            return None;
        }
        // Only pictures a proof compares (see [`proves`]).
        let from = self.recovery.prints_from(self.watch.key_pts())?;
        if from.is_some_and(|from| pts < from) {
            return None;
        }
        let print = fingerprint(frame)?;
        self.watch.printed(pts, print);
        Some(print)
    }

    /// Whether a restart one keyframe before the keyframe at `key` starts at least `reach` before
    /// it and, decoding on for this decoder's targets, shows pictures at least `reach` past it
    /// without seeking (a target there, before the next keyframe of the index).
    pub(super) fn restart_passes_reach(&self, key: i64, reach: i64) -> bool {
        let past = key.saturating_add(reach);
        let next_key = self.index_keyframe_after(key.saturating_add(1));
        let index_key = self.keyframe_index(key).filter(|&k| k != i64::MIN);
        let far_enough = index_key
            .and_then(|k| self.index_keyframe_back(k, 1))
            .is_none_or(|earlier| earlier <= key.saturating_sub(reach));
        far_enough
            && self
                .skip
                .pending()
                .iter()
                .any(|&t| t >= past && next_key.is_none_or(|n| t < n))
    }

    /// The first attempt at an entry, its chosen frame within `reach` of the keyframe: decodes on
    /// (the pictures are dropped: a restart follows) to the first picture at least `reach` past
    /// the keyframe, and keeps what the proof compares. None, the claim released, when the
    /// trouble found on the way is more than the entry's.
    pub(super) fn decode_on_to_prove(&mut self, claim: Claim, reach: i64) -> Option<Verifying> {
        let key = self.watch.key_pts()?;
        let past = key.saturating_add(reach);
        let mut last = self.shown.latest()?;
        while last < past {
            match self.next_frame() {
                Some(f) => last = last.max(f.pts),
                None => break,
            }
        }
        let found = self.watch.findings(&self.log.read(), last);
        if last < past || !found.entry {
            return None;
        }
        Some(Verifying {
            claim,
            reach,
            first: Attempt {
                start: self.place.entry()?,
                trouble: found.trouble,
                invented: found.invented,
                frame: last,
                print: None,
                key: Some(key),
                entry: true,
                prints: self.watch.take_prints(),
            },
            prints: Vec::new(),
        })
    }

    /// A picture of the decode that proves an entry ([`Verifying`]): keeps its digest; at the first
    /// picture `reach` past the keyframe that the first attempt showed too, gives the verdict.
    fn verify(&mut self, frame: &ff::frame::Video, pts: i64) -> Option<u64> {
        let v = self.proving.verifying.as_mut()?;
        let key = v.first.key?;
        if pts < key {
            return None;
        }
        let print = fingerprint(frame);
        if let Some(print) = print {
            v.prints.push((pts, print));
        }
        let last = v.first.prints.last().map_or(i64::MIN, |p| p.0);
        let theirs = v.first.prints.iter().find(|p| p.0 == pts).map(|p| p.1);
        if pts > last || print.is_none() {
            // Past what the first attempt showed, or a picture that cannot be compared.
            self.proving.verifying = None;
        } else if pts >= key.saturating_add(v.reach) && theirs.is_some() {
            let v = self.proving.verifying.take()?;
            let first = Attempt {
                frame: pts,
                print: theirs,
                ..v.first
            };
            let earlier = Attempt {
                start: self.place.entry().unwrap_or(i64::MAX),
                trouble: BTreeSet::new(),
                invented: false,
                frame: pts,
                print,
                key: None,
                entry: false,
                prints: v.prints,
            };
            match proves(&first, &earlier, v.reach) {
                Some(true) => v.claim.settle(Proof::Proven),
                Some(false) => v.claim.settle(Proof::Disproven),
                None => {}
            }
        }
        print
    }
}
