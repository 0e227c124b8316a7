//! Seek recovery: after a seek, the frame a sequential decode would give. A sync sample is not
//! always a random-access point (an I-frame later frames reference across, an open GOP); decoding
//! from it, the decoder conceals or invents the missing references and says so ([`super::watch`]).
//! Once a target's frame is chosen, the recovery ladder ([`Ladder`]; the rule:
//! fixtures/vectors/recovery-ladder.json) accepts it or starts decoding again further back, finally
//! from the start of the stream; an open-GOP entry proven clean ([`super::proofs`]) is accepted.

use std::collections::{BTreeMap, BTreeSet};

use ff::ffi;
use ffmpeg_next as ff;

use super::open_gops::{Claim, Proof};
use super::watch::PacketId;
use super::VideoSource;

/// Restarts further back tried for one target before decoding from the start.
const MAX_RESTARTS: u32 = 16;

/// One decode towards the target: where it started, what reached its chosen frame, that frame.
pub(super) struct Attempt {
    /// Where decoding entered the stream (stream units).
    pub(super) start: i64,
    /// Packets whose trouble reached the chosen frame.
    pub(super) trouble: BTreeSet<PacketId>,
    /// The decoder invented reference pictures the chosen frame may predict from.
    pub(super) invented: bool,
    /// The chosen frame's pts and a digest of its picture (None: unknown).
    pub(super) frame: i64,
    pub(super) print: Option<u64>,
    /// The pts of the keyframe decoding started from, and whether all its trouble was what
    /// entering there produces ([`Findings::entry`]).
    pub(super) key: Option<i64>,
    pub(super) entry: bool,
    /// Digests of the pictures shown, (pts, digest), when kept to prove an entry.
    pub(super) prints: Vec<(i64, u64)>,
}

/// The recovery ladder's verdict on an attempt.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Accept,
    /// Start again this many keyframes (or spans, without an index) before the origin.
    Back(u32),
    /// Start again from the start of the stream.
    Rewind,
}

/// The recovery ladder for one target (the module comment gives the rule).
struct Ladder {
    /// How far back (stream units) a picture may reference: two starts at least this far apart
    /// give the target different pictures before the later start to predict from.
    reach: i64,
    /// The attempts not accepted so far.
    attempts: Vec<Attempt>,
}

impl Ladder {
    fn next(&mut self, attempt: Attempt) -> Next {
        if attempt.trouble.is_empty() && !attempt.invented {
            return Next::Accept;
        }
        // Only a start further back than any reference reaches gives the pictures before the
        // later start for real; a closer one may lack the same ones.
        let apart = |a: &&Attempt| a.start.saturating_sub(attempt.start) >= self.reach;
        // The same picture: it does not depend on the pictures before the later start.
        let converged = |a: &&Attempt| {
            attempt.print.is_some() && a.frame == attempt.frame && a.print == attempt.print
        };
        // Only packets that failed from the later start fail again: damaged data. (New failures,
        // or invented pictures, say this start lacks something as well.)
        let damaged = |a: &&Attempt| {
            !attempt.invented
                && !attempt.trouble.is_empty()
                && attempt.trouble.is_subset(&a.trouble)
        };
        if self
            .attempts
            .iter()
            .filter(apart)
            .any(|a| converged(&a) || damaged(&a))
        {
            return Next::Accept;
        }
        self.attempts.push(attempt);
        match self.attempts.len() as u32 {
            restarts @ 1..=MAX_RESTARTS => Next::Back(1 << (restarts - 1)),
            _ => Next::Rewind,
        }
    }
}

/// Whether `earlier`, a later attempt for the same target, proves `first`'s entry clean (see the
/// module comment): `first` found nothing but what entering at its keyframe produces and ran to a
/// frame (`frame`: the chosen one, or one it decoded on to) at least `reach` after that keyframe;
/// `earlier` started at least `reach` before it, showed the very same picture there, and every
/// picture both showed from the keyframe to that frame is the same. (Pictures only one decode
/// showed are non-reference ones it chose to skip: nothing depends on them.) None when the two
/// cannot tell (`first` is not such an entry, or `earlier` did not start far enough back);
/// Some(false) when they disprove it.
pub(super) fn proves(first: &Attempt, earlier: &Attempt, reach: i64) -> Option<bool> {
    let key = first.key?;
    if !first.entry
        || first.frame.saturating_sub(key) < reach
        || first.start.saturating_sub(earlier.start) < reach
    {
        return None;
    }
    let theirs: BTreeMap<i64, u64> = earlier.prints.iter().copied().collect();
    let compared: Vec<bool> = first
        .prints
        .iter()
        .filter(|(pts, _)| (key..=first.frame).contains(pts))
        .filter_map(|(pts, print)| theirs.get(pts).map(|other| other == print))
        .collect();
    Some(
        first.print.is_some()
            && (first.frame, first.print) == (earlier.frame, earlier.print)
            && !compared.is_empty()
            && compared.iter().all(|&same| same),
    )
}

/// Restarts for one target.
struct Recovery {
    /// Where the first suspect decode entered the stream (its index keyframe when there is one).
    origin: i64,
    ladder: Ladder,
    /// This decoder's claim on proving the stream's open GOPs, held from a first attempt that
    /// can prove until the next attempt's verdict.
    claim: Option<Claim>,
}

/// This decoder's restarts for the current target, if any.
#[derive(Default)]
pub(super) struct Recovering {
    current: Option<Recovery>,
}

impl Recovering {
    /// Where the pictures a proof compares start (see [`proves`]): from the keyframe of the first
    /// attempt (`watch_key`, the keyframe the decode under way entered at), which may yet claim
    /// the proof, or of the first attempt a later one answers. None when no picture is kept.
    pub(super) fn prints_from(&self, watch_key: Option<i64>) -> Option<Option<i64>> {
        match &self.current {
            None => Some(watch_key),
            Some(r) if r.claim.is_some() => Some(r.ladder.attempts.first().and_then(|a| a.key)),
            Some(_) => None,
        }
    }
}

impl VideoSource {
    /// Called once the frame for a target is chosen. When trouble since the last seek can reach
    /// it, repositions earlier and returns true (decode again); otherwise the target is settled
    /// and this returns false.
    pub(super) fn restart_on_trouble(&mut self) -> bool {
        let Some(chosen) = self.shown.cur_pts() else {
            return false;
        };
        if !self.watch.active() || self.place.at_file_start() {
            self.settle();
            return false;
        }
        let logged = self.log.read();
        let found = self.watch.findings(&logged, chosen);
        if found.trouble.is_empty() && !found.invented {
            self.settle();
            return false;
        }
        if found.entry
            && self.recovery.current.is_none()
            && !self.proving.verifying()
            && self.proving.may_trust_pending()
            && self.may_trust_entry()
        {
            // Another decoder is proving the stream's entries, or the part after may ask this
            // decoder for a witness: this one is trusted as a proven one would be,
            // provisionally; the caller holds back what is decoded from here until the verdict
            // (see the module comment).
            self.proving.trust_provisionally();
            self.settle();
            return false;
        }
        let reach = self.reference_reach();
        let key = self.watch.key_pts();
        // A first attempt at an entry of the kind waits for any other decoder's proof, then
        // claims its own when it can give one (see [`proves`]).
        let can_prove = key.is_some_and(|k| chosen.saturating_sub(k) >= reach);
        // A chosen frame within the reach of the keyframe: the restart this attempt needs anyway
        // decodes on past keyframe + reach for later targets, so the entry is proven by decoding
        // this attempt on that far too (see [`Verifying`]).
        let goes_on = !can_prove && key.is_some_and(|k| self.restart_passes_reach(k, reach));
        let claim = if found.entry && self.recovery.current.is_none() {
            self.proving.gops().claim(can_prove || goes_on)
        } else {
            None
        };
        let (claim, later) = match claim {
            Some(claim) if goes_on => (None, self.decode_on_to_prove(claim, reach)),
            claim => (claim, None),
        };
        let asked = later.is_some();
        let later = later.and_then(|v| self.ask_witness(v));
        if asked && later.is_none() {
            return true;
        }
        if found.entry && self.proving.gops().proven() {
            // An entry like the one proven clean in this stream (see the module comment).
            self.settle();
            return false;
        }
        let print = self.shown.cur_print();
        let start = self.place.entry().unwrap_or(chosen);
        let origin = match &self.recovery.current {
            Some(r) => r.origin,
            // Restarts step back from the index keyframe decoding entered at.
            None => self
                .keyframe_index(start)
                .filter(|&k| k != i64::MIN)
                .unwrap_or(start),
        };
        let recovery = self.recovery.current.get_or_insert_with(|| Recovery {
            origin,
            ladder: Ladder {
                reach,
                attempts: Vec::new(),
            },
            claim,
        });
        let attempt = Attempt {
            start,
            trouble: found.trouble,
            invented: found.invented,
            frame: chosen,
            print,
            key,
            entry: found.entry,
            prints: self.watch.take_prints(),
        };
        if let Some(first) = recovery.ladder.attempts.first() {
            // The attempt after the one that claimed the proof gives the verdict.
            if let Some(claim) = recovery.claim.take() {
                match proves(first, &attempt, reach) {
                    Some(true) => claim.settle(Proof::Proven),
                    Some(false) => claim.settle(Proof::Disproven),
                    None => drop(claim),
                }
            }
        }
        match recovery.ladder.next(attempt) {
            Next::Accept => {
                self.settle();
                return false;
            }
            Next::Back(back) => match self.restart_point(origin, back) {
                // A fresh decoder: going back, the one here may hold parameter sets from later.
                Some(ts) if self.renew_decoder() && self.try_seek(ts) => {
                    // The restart is the proof's earlier decode.
                    self.proving.verify_with(later);
                }
                _ => self.rewind_for_trouble(),
            },
            Next::Rewind => self.rewind_for_trouble(),
        }
        true
    }
    /// The reference reach in stream units ([`super::reach`]), by the decoder's delay now.
    pub(super) fn reference_reach(&self) -> i64 {
        let delay = unsafe { (*self.decoder.as_ptr()).has_b_frames } as i64;
        super::reach::reference_reach(self.decoder.id().name(), self.facts.sps_refs(), delay)
            .saturating_mul(self.facts.frame_step())
    }

    /// Stops watching: the current target is answered.
    pub(super) fn settle(&mut self) {
        if self.watch.active() {
            self.watch.begin(false);
            self.log.watch(false);
        }
        self.recovery.current = None;
    }

    /// Where to start again `back` steps before `origin`: that many index keyframes, or without
    /// an index that many times the longest GOP seen (at least a second). None when that is at or
    /// before the start of the stream.
    fn restart_point(&self, origin: i64, back: u32) -> Option<i64> {
        if self.keyframe_index(origin).is_some() {
            return self
                .index_keyframe_back(origin, back)
                .map(|k| self.index_seek_ts(k));
        }
        let span = self.clock.gop().max(self.facts.seconds_in_ts(1));
        let ts = origin.saturating_sub(span.saturating_mul(back as i64));
        let start = unsafe { (*self.stream()).start_time };
        let start = if start == ffi::AV_NOPTS_VALUE {
            self.clock.first_pts().unwrap_or(0)
        } else {
            start
        };
        (ts > start).then_some(ts)
    }

    /// Decoding from the start is the only cure left; seeking in this stream is not to be trusted
    /// again, so later targets are reached by decoding forward.
    pub(super) fn rewind_for_trouble(&mut self) {
        self.place.distrust_seeking();
        self.rewind();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(start: i64, frame: i64, prints: &[(i64, u64)]) -> Attempt {
        Attempt {
            start,
            trouble: BTreeSet::new(),
            invented: true,
            frame,
            print: prints.iter().find(|p| p.0 == frame).map(|p| p.1),
            key: Some(1000),
            entry: true,
            prints: prints.to_vec(),
        }
    }

    #[test]
    fn an_entry_is_proven_by_every_picture_over_the_reach_not_just_the_chosen_one() {
        let reach = 100;
        // Keyframe at 1000, chosen frame 1200; the earlier start at 800 (reach 100 before).
        let same = [(990, 9), (1000, 1), (1100, 2), (1200, 3), (1300, 4)];
        let first = attempt(1000, 1200, &same);
        let earlier = |prints: &[(i64, u64)]| attempt(800, 1200, prints);
        assert_eq!(proves(&first, &earlier(&same), reach), Some(true));
        // A picture between the keyframe and the chosen one differs: the entry is not clean,
        // though the chosen picture is the same.
        let one_off = [(1000, 1), (1100, 7), (1200, 3)];
        assert_eq!(proves(&first, &earlier(&one_off), reach), Some(false));
        // The chosen picture differs.
        let chosen_off = [(1000, 1), (1100, 2), (1200, 8)];
        assert_eq!(proves(&first, &earlier(&chosen_off), reach), Some(false));
        // Pictures before the keyframe (leading) or after the chosen one do not count.
        let outside = [(990, 5), (1000, 1), (1100, 2), (1200, 3), (1300, 6)];
        assert_eq!(proves(&first, &earlier(&outside), reach), Some(true));
        // Cannot tell: the chosen frame within the reach of the keyframe (false-sync.mp4's
        // keyframes are all closer together than the reach), the earlier start too close, or
        // more than the entry found.
        let near = attempt(1000, 1050, &[(1000, 1), (1050, 2)]);
        assert_eq!(
            proves(&near, &attempt(800, 1050, &[(1000, 1), (1050, 2)]), reach),
            None
        );
        assert_eq!(proves(&first, &attempt(950, 1200, &same), reach), None);
        let mut damaged = attempt(1000, 1200, &same);
        damaged.entry = false;
        assert_eq!(proves(&damaged, &earlier(&same), reach), None);
    }

    /// One decode of fixtures/vectors/open-gop-proof.json.
    #[derive(serde::Deserialize)]
    struct VectorDecode {
        start: i64,
        key: Option<i64>,
        entry: bool,
        frame: i64,
        print: Option<u64>,
        prints: Vec<(i64, u64)>,
    }

    #[derive(serde::Deserialize)]
    struct ProofCase {
        name: String,
        reach: i64,
        first: VectorDecode,
        earlier: VectorDecode,
        expect: Option<bool>,
    }

    #[test]
    fn the_proof_follows_the_shared_vectors() {
        let attempt = |d: VectorDecode| Attempt {
            start: d.start,
            trouble: BTreeSet::new(),
            invented: d.entry,
            frame: d.frame,
            print: d.print,
            key: d.key,
            entry: d.entry,
            prints: d.prints,
        };
        let cases = crate::vectors::cases::<ProofCase>("open-gop-proof.json");
        assert!(cases.len() >= 11);
        for case in cases {
            let (first, earlier) = (attempt(case.first), attempt(case.earlier));
            assert_eq!(
                proves(&first, &earlier, case.reach),
                case.expect,
                "{}",
                case.name
            );
        }
    }

    /// One attempt of fixtures/vectors/recovery-ladder.json.
    #[derive(serde::Deserialize)]
    struct VectorAttempt {
        start: i64,
        trouble: Vec<i64>,
        #[serde(default)]
        invented: bool,
        #[serde(default)]
        frame: i64,
        print: Option<u64>,
        expect: String,
    }

    #[derive(serde::Deserialize)]
    struct VectorCase {
        name: String,
        reach: i64,
        attempts: Vec<VectorAttempt>,
    }

    #[test]
    fn the_ladder_follows_the_shared_vectors() {
        for case in crate::vectors::cases::<VectorCase>("recovery-ladder.json") {
            let mut ladder = Ladder {
                reach: case.reach,
                attempts: Vec::new(),
            };
            for (i, a) in case.attempts.into_iter().enumerate() {
                let verdict = match ladder.next(Attempt {
                    start: a.start,
                    trouble: a.trouble.iter().map(|&p| (p, p)).collect(),
                    invented: a.invented,
                    frame: a.frame,
                    print: a.print,
                    key: None,
                    entry: false,
                    prints: Vec::new(),
                }) {
                    Next::Accept => "accept".to_string(),
                    Next::Back(n) => format!("back {n}"),
                    Next::Rewind => "rewind".to_string(),
                };
                assert_eq!(verdict, a.expect, "{}: attempt {}", case.name, i + 1);
            }
        }
    }
}
