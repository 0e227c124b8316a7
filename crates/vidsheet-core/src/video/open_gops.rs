//! What is known of a stream's open-GOP entries, shared by the job's decoders of the stream
//! across threads: one decoder proves at a time, the others wait for its verdict (or trust an
//! entry provisionally and ask for it later), and which parts of the job are still decoding for a
//! proof asked of the part before ([`super::witness`]). A decoder that meets an entry before the
//! decoder of the part after has settled its first target trusts it provisionally too: that one
//! may yet ask it for a witness (a few pictures past its last target), which is far cheaper than
//! the proof of its own (a decode of the GOP before its entry).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::proofs::Verifying;

/// The longest a decoder waits for another one's proof (a backstop: the prover releases its
/// claim when its verification ends, or when it stops).
const PROOF_WAIT: Duration = Duration::from_secs(30);

/// What is known of a stream's open-GOP entries (see the module comment), shared by the job's
/// decoders of the stream: one of them verifies an entry at a time, so that two decoders meeting
/// their first entry together do not both pay for the proof.
#[derive(Default)]
pub(crate) struct OpenGops {
    state: Mutex<State>,
    changed: Condvar,
    /// Times a decoder waited for another one's verdict ([`OpenGops::waits`]).
    waits: AtomicU64,
    /// Decoders waiting in [`OpenGops::verdict`] now, their cells held back.
    holding: AtomicU64,
    /// The job's parts still decoding, and a proof's first decode handed to one of them
    /// ([`VideoSource::ask_witness`]).
    witnesses: Mutex<Witnesses>,
}

/// The stream's proof, and the part of the job whose first target a decoder that trusted an
/// entry provisionally awaits before proving one itself ([`OpenGops::may_trust`]).
#[derive(Default)]
struct State {
    proof: Proof,
    awaiting: Option<usize>,
}

/// Which parts of the job are still decoding ([`OpenGops::start_parts`]), which have settled
/// their first target (by then a part that needs a witness has asked for it), and a proof's first
/// decode asked of the decoder of a part: (that part, the decode to compare with).
#[derive(Default)]
struct Witnesses {
    running: Vec<bool>,
    settled: Vec<bool>,
    asked: Option<(usize, Verifying)>,
}

/// What a decoder that trusted an entry provisionally learns of the stream's proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Another decoder is still proving.
    Pending,
    /// The stream's entries are clean: what was decoded trusting one stands.
    Proven,
    /// Disproven, or the proof given up: what was decoded trusting an entry is decoded again.
    NotProven,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Proof {
    #[default]
    Unknown,
    /// A decoder is verifying an entry that can prove it.
    Proving,
    Proven,
    /// An entry of the kind was verified and is not clean: none is trusted.
    Disproven,
}

impl OpenGops {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn proven(&self) -> bool {
        self.lock().proof == Proof::Proven
    }

    /// Whether the stream's verdict is still to come.
    pub(super) fn open(&self) -> bool {
        matches!(self.lock().proof, Proof::Unknown | Proof::Proving)
    }

    /// Whether the decoder of `part` (None: a decoder outside the job's parts), meeting an entry
    /// of the kind, trusts it provisionally instead of proving it now: another decoder is proving
    /// one, or the decoder of the part after is still decoding and has not settled its first
    /// target (it may ask this one for a witness: see the module comment); the verdict is then
    /// awaited until it has.
    pub(super) fn may_trust(&self, part: Option<usize>) -> bool {
        let mut state = self.lock();
        match state.proof {
            Proof::Proving => true,
            Proof::Unknown => {
                let after = part.and_then(|p| p.checked_add(1));
                let undecided = after.is_some_and(|a| {
                    let w = self.witnesses();
                    w.running.get(a) == Some(&true) && w.settled.get(a) == Some(&false)
                });
                if undecided {
                    state.awaiting = after;
                }
                undecided
            }
            Proof::Proven | Proof::Disproven => false,
        }
    }

    /// The decoder of `part` has settled its first target: a proof it needs of the part before is
    /// asked by now ([`Self::may_trust`]).
    pub(crate) fn first_target_settled(&self, part: usize) {
        if let Some(settled) = self.witnesses().settled.get_mut(part) {
            *settled = true;
        }
        self.stop_awaiting(part);
    }

    /// Nothing more is to come from `part` for a decoder awaiting it.
    fn stop_awaiting(&self, part: usize) {
        let mut state = self.lock();
        if state.awaiting == Some(part) {
            state.awaiting = None;
            self.changed.notify_all();
        }
    }

    /// The verdict for what a decoder trusted provisionally while another one was proving; with
    /// `wait`, waits for it while the proof is under way ([`PROOF_WAIT`] at most: then not proven).
    pub(crate) fn verdict(&self, wait: bool) -> Verdict {
        let deadline = Instant::now() + PROOF_WAIT;
        let mut state = self.lock();
        loop {
            // A decoder proving, or a part that may yet ask for a witness.
            let coming = state.proof == Proof::Proving
                || (state.proof == Proof::Unknown && state.awaiting.is_some());
            match state.proof {
                Proof::Proven => return Verdict::Proven,
                _ if coming && wait => {
                    let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                        return Verdict::NotProven;
                    };
                    self.holding.fetch_add(1, Ordering::Relaxed);
                    state = self
                        .changed
                        .wait_timeout(state, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    self.holding.fetch_sub(1, Ordering::Relaxed);
                }
                _ if coming => return Verdict::Pending,
                Proof::Unknown | Proof::Proving | Proof::Disproven => return Verdict::NotProven,
            }
        }
    }

    fn witnesses(&self) -> MutexGuard<'_, Witnesses> {
        self.witnesses.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job decodes its cells in `parts` parts, each by its own decoder, all starting now.
    pub(crate) fn start_parts(&self, parts: usize) {
        let mut w = self.witnesses();
        w.running = vec![true; parts];
        w.settled = vec![false; parts];
    }

    /// The decoder of `part` is done: an ask left for it is given up (the claim released).
    pub(crate) fn part_done(&self, part: usize) {
        let dropped = {
            let mut w = self.witnesses();
            if let Some(running) = w.running.get_mut(part) {
                *running = false;
            }
            match w.asked.take() {
                Some((to, v)) if to == part => Some(v),
                other => {
                    w.asked = other;
                    None
                }
            }
        };
        drop(dropped);
        self.stop_awaiting(part);
    }

    /// Hands `v` to the decoder of `part` while it is still decoding; else gives it back.
    pub(super) fn ask(&self, part: usize, v: Verifying) -> Option<Verifying> {
        let mut w = self.witnesses();
        if w.asked.is_none() && w.running.get(part) == Some(&true) {
            w.asked = Some((part, v));
            None
        } else {
            Some(v)
        }
    }

    /// The proof's first decode asked of the decoder of `part`, if any; else `part` is done (at
    /// once, so that no ask comes in between).
    pub(super) fn asked_of(&self, part: usize) -> Option<Verifying> {
        let asked = {
            let mut w = self.witnesses();
            match w.asked.take() {
                Some((to, v)) if to == part => Some(v),
                other => {
                    w.asked = other;
                    if let Some(running) = w.running.get_mut(part) {
                        *running = false;
                    }
                    None
                }
            }
        };
        if asked.is_none() {
            self.stop_awaiting(part);
        }
        asked
    }

    /// Times a decoder of the job waited for another one's verdict in [`OpenGops::claim`]
    /// (a decoder that may trust an entry provisionally does not).
    pub(crate) fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// For an entry of the kind: while another decoder holds the claim, waits for its verdict;
    /// then claims the proof when this entry can give it (`can_prove`). None when the stream's
    /// verdict is in, the entry cannot prove, or on time out.
    pub(super) fn claim(self: &Arc<Self>, can_prove: bool) -> Option<Claim> {
        let deadline = Instant::now() + PROOF_WAIT;
        let mut state = self.lock();
        loop {
            match state.proof {
                Proof::Unknown if can_prove => {
                    state.proof = Proof::Proving;
                    return Some(Claim(Arc::clone(self)));
                }
                Proof::Unknown => return None,
                Proof::Proving => {
                    let left = deadline.checked_duration_since(Instant::now())?;
                    self.waits.fetch_add(1, Ordering::Relaxed);
                    state = self
                        .changed
                        .wait_timeout(state, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                Proof::Proven | Proof::Disproven => return None,
            }
        }
    }
}

#[cfg(test)]
impl OpenGops {
    /// A proof under way in a decoder outside the job (tests): the stream's state, shared with the
    /// job's decoders, and the verdict to give (true: proven), given once a decoder of the job
    /// waits for it with its cells held back.
    pub(crate) fn proving_elsewhere() -> (Arc<OpenGops>, impl FnOnce(bool) + Send) {
        let gops = Arc::new(OpenGops::default());
        let claim = gops.claim(true);
        let shared = Arc::clone(&gops);
        let give = move |proven: bool| {
            // Not waited for within the backstop: given anyway (the test's counters then fail).
            let deadline = Instant::now() + PROOF_WAIT;
            while shared.holding.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if let Some(claim) = claim {
                claim.settle(if proven {
                    Proof::Proven
                } else {
                    Proof::Disproven
                });
            }
        };
        (gops, give)
    }
}

/// A decoder's claim on the proof; released (Unknown again) unless settled, also when the
/// decoder stops.
pub(super) struct Claim(Arc<OpenGops>);

impl Claim {
    pub(super) fn settle(self, verdict: Proof) {
        self.0.lock().proof = verdict;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        if state.proof == Proof::Proving {
            state.proof = Proof::Unknown;
        }
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_decoder_proves_at_a_time_the_others_wait_for_its_verdict() {
        let gops = Arc::new(OpenGops::default());
        // An entry that cannot prove claims nothing.
        assert!(gops.claim(false).is_none());
        let claim = gops.claim(true).expect("the first claim");
        let other = Arc::clone(&gops);
        let waiter = std::thread::spawn(move || (other.claim(true).is_none(), other.proven()));
        std::thread::sleep(Duration::from_millis(50));
        claim.settle(Proof::Proven);
        assert_eq!(waiter.join().ok(), Some((true, true)));
        // A claim given up (its decoder stopped) lets the next decoder claim.
        let gops = Arc::new(OpenGops::default());
        drop(gops.claim(true));
        assert!(gops.claim(true).is_some());
        // Disproven: nothing trusted, nothing claimed.
        let gops = Arc::new(OpenGops::default());
        if let Some(claim) = gops.claim(true) {
            claim.settle(Proof::Disproven);
        }
        assert!(!gops.proven() && gops.claim(true).is_none());
    }

    #[test]
    fn an_entry_is_trusted_until_the_part_after_settles_its_first_target() {
        let gops = Arc::new(OpenGops::default());
        gops.start_parts(2);
        // The last part has no part after to wait for; the first waits for the second.
        assert!(!gops.may_trust(Some(1)));
        assert!(gops.may_trust(Some(0)));
        assert_eq!(gops.verdict(false), Verdict::Pending);
        // A waiting verdict wakes when the part after settles without asking for a witness.
        let other = Arc::clone(&gops);
        let waiter = std::thread::spawn(move || {
            let t = Instant::now();
            (other.verdict(true), t.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        gops.first_target_settled(1);
        let (verdict, waited) = waiter.join().expect("the waiter");
        assert_eq!(verdict, Verdict::NotProven);
        assert!(waited < PROOF_WAIT / 2, "woke after {waited:?}");
        // Settled: nothing left to wait for, the entry is proven by its own decoder.
        assert!(!gops.may_trust(Some(0)));
        // Another decoder proving: trusted again, whatever the part after does.
        let claim = gops.claim(true).expect("a claim");
        assert!(gops.may_trust(Some(0)) && gops.may_trust(None));
        claim.settle(Proof::Proven);
        assert!(!gops.may_trust(Some(0)));
        assert_eq!(gops.verdict(false), Verdict::Proven);
        // A part after that stops before settling releases the wait too.
        let gops = Arc::new(OpenGops::default());
        gops.start_parts(3);
        assert!(gops.may_trust(Some(1)));
        gops.part_done(2);
        assert_eq!(gops.verdict(true), Verdict::NotProven);
        // Outside a job's parts nothing is awaited.
        assert!(!OpenGops::default().may_trust(Some(0)) && !gops.may_trust(None));
    }
}
