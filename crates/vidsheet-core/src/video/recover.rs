//! Seek recovery: after a seek, the frame a sequential decode would give.
//!
//! A sync sample is not always a random-access point: an I-frame that later frames still reference
//! across, or an open GOP whose leading pictures need the previous one. Decoding from it, the
//! decoder conceals the missing references and says so in its log (see [`crate::decode_log`]),
//! sometimes in the frame's flags or its return codes; H.264 started on a picture that is not an
//! IDR instead invents grey reference pictures and says so only at debug level. From a seek until
//! the frame for a target is chosen, the source watches all of these, per packet.
//!
//! What follows is the recovery ladder ([`Ladder`]), one definition for both engines, checked by
//! the shared vectors in fixtures/vectors/recovery-ladder.json (the fallback's is
//! src/engine/ffmpeg/recovery.ts): an attempt is accepted when nothing reached its chosen frame;
//! or, compared with an attempt that started later by at least the reference reach (so that one
//! lacked pictures this one had), when both chose the very same picture (the frame does not depend
//! on where decoding started: a legitimate open GOP, or damage both decodes went through), or when
//! nothing was invented and only packets that failed in that one failed again (damaged data, what
//! a sequential decode meets too). Otherwise decoding starts again 1, 2, 4, ... keyframes before
//! the one the first attempt started from; after 16 restarts, or with no keyframe that far back,
//! from the start of the stream, which is final: a cell is unreadable only when a sequential
//! decode cannot show it either.
//!
//! Which trouble can reach the chosen frame: none from packets decoded before the keyframe
//! decoding started from; none from its leading pictures (decoded after it, shown before it: no
//! later frame references them) unless the chosen frame is itself shown before that keyframe;
//! everything else.
//!
//! Open GOPs, proven once per stream. Entering H.264 at a keyframe that is not an IDR (an open
//! GOP's recovery point) always looks like trouble: the decoder invents the reference pictures
//! before it, and fails to forget pictures the encoder drops there (`mmco: unref short failure`).
//! Whether later pictures really reference across that keyframe (a false sync sample, like
//! test/engine/truth.test.ts's false-sync.mp4, whose I-frames even carry a recovery point SEI)
//! only a second decode tells, which for a legitimate open GOP costs a whole GOP per target. So
//! the first such entry of a stream is verified as above, and when that verification proves the
//! entry clean, later entries of the stream whose only trouble is that kind ([`Findings::entry`])
//! are accepted without one. The proof ([`proves`]): decoded from the keyframe and from a start
//! at least the reference reach earlier, every picture shown from the keyframe to the chosen
//! frame came out the same, over at least the reference reach. Past the reach the pictures
//! invented at the keyframe are out of the decoder's reference window, so that entry is clean
//! for every later frame; an encoder that references across some keyframes does so within the
//! reach of one of them, and a stream whose keyframes are closer together than the reach (like
//! false-sync.mp4) is never proven. The proof is shared by the job's decoders of the stream.
//! The frame the proof runs to is the target's chosen frame, or, when that lies within the reach
//! of the keyframe, the first picture past the reach: both decodes go on that far, the second one
//! for later targets it decodes anyway ([`Verifying`]).
//!
//! A decoder that meets an entry while another decoder is proving one does not wait for the
//! verdict: it trusts the entry provisionally, as a proven one would be trusted, and says so
//! ([`VideoSource::provisional`]); its caller holds back every cell decoded from then on until the
//! verdict, and decodes them again, as if the proof had failed before, unless it is proven. What
//! is shown is thus what the verdict allows, whenever it comes. So a decoder whose first entry lies
//! just past a keyframe does not decode the GOP before for the proof when the decoder of the part
//! before still decodes that GOP: it asks that one to decode on through the keyframe and compare
//! ([`VideoSource::ask_witness`]), and enters again at the keyframe, trusting it provisionally.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ff::ffi;
use ffmpeg_next as ff;

use super::VideoSource;
use crate::decode_log::Logged;

/// Packets remembered after a seek while watching. A target further away is reached by a long
/// forward decode; its oldest packets are forgotten (their trouble with them).
const MAX_SENT: usize = 1 << 16;
/// Restarts further back tried for one target before decoding from the start.
const MAX_RESTARTS: u32 = 16;
/// The longest a decoder waits for another one's proof (a backstop: the prover releases its
/// claim when its verification ends, or when it stops).
const PROOF_WAIT: Duration = Duration::from_secs(30);

/// A packet's identity across attempts: its byte position and pts (i64::MIN when unknown).
type PacketId = (i64, i64);

struct Sent {
    serial: u64,
    pts: Option<i64>,
    pos: i64,
}

/// What the decoder reported since the last seek.
#[derive(Default)]
pub(super) struct Watch {
    pub active: bool,
    /// Packets sent, in serial order.
    sent: VecDeque<Sent>,
    /// The random-access point decoding started from: its serial and pts.
    key: Option<(u64, Option<i64>)>,
    /// Serials of packets the decoder refused or failed on.
    failed: Vec<u64>,
    /// Frames that came out flagged corrupt or with decode errors: their packet's serial, their pts.
    flagged: Vec<(u64, i64)>,
    /// Digests of the pictures that came out, (pts, digest), while an entry is being proven.
    prints: Vec<(i64, u64)>,
    /// Serials of packets at which the decoder logs what only skipped referenced pictures made
    /// ([`super::refs`]: a frame_num gap it fills, a picture it is told to forget and never
    /// held): no reference is missing there, nothing is damaged.
    planned: Vec<u64>,
}

/// What reached the chosen frame of one attempt.
#[derive(Default)]
struct Findings {
    /// Packets whose decoding failed or logged an error.
    trouble: BTreeSet<PacketId>,
    /// The decoder invented reference pictures.
    invented: bool,
    /// Everything found is what entering at a keyframe that is not an IDR produces, for a frame
    /// shown from that keyframe on: pictures invented at the keyframe itself, failures to forget
    /// pictures that were never there (see the module comment).
    entry: bool,
}

impl Watch {
    pub(super) fn begin(&mut self, active: bool) {
        self.active = active;
        self.sent.clear();
        self.key = None;
        self.failed.clear();
        self.flagged.clear();
        self.prints.clear();
        self.planned.clear();
    }

    pub(super) fn planned(&mut self, serial: u64) {
        if self.active && self.planned.len() < MAX_SENT {
            self.planned.push(serial);
        }
    }

    pub(super) fn sent(&mut self, serial: u64, pts: Option<i64>, pos: i64, key: bool) {
        if !self.active {
            return;
        }
        if self.key.is_none() && key {
            self.key = Some((serial, pts));
        }
        if self.sent.len() >= MAX_SENT {
            self.sent.pop_front();
        }
        self.sent.push_back(Sent { serial, pts, pos });
    }

    pub(super) fn failed(&mut self, serial: u64) {
        if self.active && self.failed.last() != Some(&serial) && self.failed.len() < MAX_SENT {
            self.failed.push(serial);
        }
    }

    pub(super) fn flagged(&mut self, serial: u64, pts: i64) {
        if self.active && self.flagged.len() < MAX_SENT {
            self.flagged.push((serial, pts));
        }
    }

    pub(super) fn printed(&mut self, pts: i64, print: u64) {
        if self.active && self.prints.len() < MAX_SENT {
            self.prints.push((pts, print));
        }
    }

    fn find(&self, serial: u64) -> Option<&Sent> {
        let first = self.sent.front()?.serial;
        let i = serial.checked_sub(first)? as usize;
        self.sent.get(i).filter(|s| s.serial == serial)
    }

    /// Whether trouble in the packet `serial` (pts `pts`) can reach the frame chosen (pts `chosen`).
    fn reaches(&self, serial: u64, pts: Option<i64>, chosen: i64) -> bool {
        match self.key {
            // No random-access point yet: whatever came out may carry it.
            None => true,
            Some((key_serial, key_pts)) => {
                if key_pts.is_some_and(|k| chosen < k) {
                    true
                } else if serial < key_serial {
                    false
                } else {
                    match (pts, key_pts) {
                        (Some(p), Some(k)) => p >= k,
                        _ => true,
                    }
                }
            }
        }
    }

    /// What can reach the frame chosen for the target (pts `chosen`), given the serials the
    /// decoder's log named.
    fn findings(&self, logged: &Logged, chosen: i64) -> Findings {
        let mut out = Findings::default();
        // A serial from before the seek (or long forgotten) says nothing about this decode.
        let known = |serials: &[i64]| -> Vec<&Sent> {
            serials
                .iter()
                .filter_map(|&s| u64::try_from(s).ok())
                .filter_map(|s| self.find(s))
                .filter(|s| self.reaches(s.serial, s.pts, chosen))
                .collect()
        };
        let id = |s: &Sent| (s.pos, s.pts.unwrap_or(i64::MIN));
        let failed: Vec<i64> = self.failed.iter().map(|&s| s as i64).collect();
        let mut other = false;
        for s in known(&logged.errors).into_iter().chain(known(&failed)) {
            out.trouble.insert(id(s));
            other = true;
        }
        for s in known(&logged.unrefs) {
            if self.planned.contains(&s.serial) {
                continue;
            }
            out.trouble.insert(id(s));
        }
        for &(serial, pts) in &self.flagged {
            if self.reaches(serial, Some(pts), chosen) {
                let pos = self.find(serial).map_or(-1, |s| s.pos);
                out.trouble.insert((pos, pts));
                other = true;
            }
        }
        let invented: Vec<&Sent> = known(&logged.gaps)
            .into_iter()
            .filter(|s| !self.planned.contains(&s.serial))
            .collect();
        out.invented = !invented.is_empty();
        out.entry = match self.key {
            Some((key, Some(key_pts))) => {
                out.invented
                    && !other
                    && chosen >= key_pts
                    && invented.iter().all(|s| s.serial == key)
            }
            _ => false,
        };
        out
    }
}

/// One decode towards the target: where it started, what reached its chosen frame, that frame.
struct Attempt {
    /// Where decoding entered the stream (stream units).
    start: i64,
    /// Packets whose trouble reached the chosen frame.
    trouble: BTreeSet<PacketId>,
    /// The decoder invented reference pictures the chosen frame may predict from.
    invented: bool,
    /// The chosen frame's pts and a digest of its picture (None: unknown).
    frame: i64,
    print: Option<u64>,
    /// The pts of the keyframe decoding started from, and whether all its trouble was what
    /// entering there produces ([`Findings::entry`]).
    key: Option<i64>,
    entry: bool,
    /// Digests of the pictures shown, (pts, digest), when kept to prove an entry.
    prints: Vec<(i64, u64)>,
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
fn proves(first: &Attempt, earlier: &Attempt, reach: i64) -> Option<bool> {
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

/// What is known of a stream's open-GOP entries (see the module comment), shared by the job's
/// decoders of the stream: one of them verifies an entry at a time, so that two decoders meeting
/// their first entry together do not both pay for the proof.
#[derive(Default)]
pub(crate) struct OpenGops {
    state: Mutex<Proof>,
    changed: Condvar,
    /// Times a decoder waited for another one's verdict ([`OpenGops::waits`]).
    waits: AtomicU64,
    /// Decoders waiting in [`OpenGops::verdict`] now, their cells held back.
    holding: AtomicU64,
    /// The job's parts still decoding, and a proof's first decode handed to one of them
    /// ([`VideoSource::ask_witness`]).
    witnesses: Mutex<Witnesses>,
}

/// Which parts of the job are still decoding ([`OpenGops::start_parts`]), and a proof's first
/// decode asked of the decoder of a part: (that part, the decode to compare with).
#[derive(Default)]
struct Witnesses {
    running: Vec<bool>,
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
enum Proof {
    #[default]
    Unknown,
    /// A decoder is verifying an entry that can prove it.
    Proving,
    Proven,
    /// An entry of the kind was verified and is not clean: none is trusted.
    Disproven,
}

impl OpenGops {
    fn lock(&self) -> MutexGuard<'_, Proof> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn proven(&self) -> bool {
        *self.lock() == Proof::Proven
    }

    /// Whether the stream's verdict is still to come.
    fn open(&self) -> bool {
        matches!(*self.lock(), Proof::Unknown | Proof::Proving)
    }

    /// Whether a decoder is proving an entry now.
    fn proving(&self) -> bool {
        *self.lock() == Proof::Proving
    }

    /// The verdict for what a decoder trusted provisionally while another one was proving; with
    /// `wait`, waits for it while the proof is under way ([`PROOF_WAIT`] at most: then not proven).
    pub(crate) fn verdict(&self, wait: bool) -> Verdict {
        let deadline = Instant::now() + PROOF_WAIT;
        let mut state = self.lock();
        loop {
            match *state {
                Proof::Proven => return Verdict::Proven,
                Proof::Proving if wait => {
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
                Proof::Proving => return Verdict::Pending,
                Proof::Unknown | Proof::Disproven => return Verdict::NotProven,
            }
        }
    }

    fn witnesses(&self) -> MutexGuard<'_, Witnesses> {
        self.witnesses.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job decodes its cells in `parts` parts, each by its own decoder, all starting now.
    pub(crate) fn start_parts(&self, parts: usize) {
        self.witnesses().running = vec![true; parts];
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
    }

    /// Hands `v` to the decoder of `part` while it is still decoding; else gives it back.
    fn ask(&self, part: usize, v: Verifying) -> Option<Verifying> {
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
    fn asked_of(&self, part: usize) -> Option<Verifying> {
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
    }

    /// Times a decoder of the job waited for another one's verdict in [`OpenGops::claim`]
    /// (a decoder that may trust an entry provisionally does not).
    pub(crate) fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// For an entry of the kind: while another decoder holds the claim, waits for its verdict;
    /// then claims the proof when this entry can give it (`can_prove`). None when the stream's
    /// verdict is in, the entry cannot prove, or on time out.
    fn claim(self: &Arc<Self>, can_prove: bool) -> Option<Claim> {
        let deadline = Instant::now() + PROOF_WAIT;
        let mut state = self.lock();
        loop {
            match *state {
                Proof::Unknown if can_prove => {
                    *state = Proof::Proving;
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
struct Claim(Arc<OpenGops>);

impl Claim {
    fn settle(self, verdict: Proof) {
        *self.0.lock() = verdict;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        if *state == Proof::Proving {
            *state = Proof::Unknown;
        }
        self.0.changed.notify_all();
    }
}

/// An entry proven by the decode under way. The first attempt at an entry chose a frame within
/// the reach of its keyframe, so it cannot prove the entry by its own restart's chosen frame; but
/// that restart, from the keyframe before, decodes on through keyframe + reach for this decoder's
/// later targets. So the first attempt decodes on to keyframe + reach (a few pictures more), and
/// the restart's pictures from the keyframe on are compared with it as they come out ([`proves`],
/// the chosen frame being the first picture past the reach both showed): the proof's second
/// decode is work done anyway. Given up (the claim released) when decoding is repositioned first.
pub(super) struct Verifying {
    claim: Claim,
    reach: i64,
    /// The first attempt, its prints through its last picture (`frame`).
    first: Attempt,
    /// The restart's prints from the keyframe on.
    prints: Vec<(i64, u64)>,
}

/// Restarts for one target.
pub(super) struct Recovery {
    /// Where the first suspect decode entered the stream (its index keyframe when there is one).
    origin: i64,
    ladder: Ladder,
    /// This decoder's claim on proving the stream's open GOPs, held from a first attempt that
    /// can prove until the next attempt's verdict.
    claim: Option<Claim>,
}

impl VideoSource {
    /// Called once the frame for a target is chosen. When trouble since the last seek can reach
    /// it, repositions earlier and returns true (decode again); otherwise the target is settled
    /// and this returns false.
    pub(super) fn restart_on_trouble(&mut self) -> bool {
        let Some(chosen) = self.cur.as_ref().map(|c| c.pts) else {
            return false;
        };
        if !self.watch.active || self.from_start {
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
            && self.recovery.is_none()
            && self.verifying.is_none()
            && self.may_trust_pending
            && self.open_gops.proving()
        {
            // Another decoder is proving the stream's entries: this one is trusted as a proven
            // one would be, provisionally; the caller holds back what is decoded from here until
            // the verdict (see the module comment).
            self.provisional = true;
            self.settle();
            return false;
        }
        let reach = self.reference_reach();
        let key = self.watch.key.and_then(|(_, pts)| pts);
        // A first attempt at an entry of the kind waits for any other decoder's proof, then
        // claims its own when it can give one (see [`proves`]).
        let can_prove = key.is_some_and(|k| chosen.saturating_sub(k) >= reach);
        // A chosen frame within the reach of the keyframe: the restart this attempt needs anyway
        // decodes on past keyframe + reach for later targets, so the entry is proven by decoding
        // this attempt on that far too (see [`Verifying`]).
        let goes_on = !can_prove && key.is_some_and(|k| self.restart_passes_reach(k, reach));
        let claim = if found.entry && self.recovery.is_none() {
            self.open_gops.claim(can_prove || goes_on)
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
        if found.entry && self.open_gops.proven() {
            // An entry like the one proven clean in this stream (see the module comment).
            self.settle();
            return false;
        }
        let print = self.cur.as_mut().and_then(|c| {
            if c.print.is_none() {
                c.print = fingerprint(&c.frame);
            }
            c.print
        });
        let start = self.entry.unwrap_or(chosen);
        let origin = match &self.recovery {
            Some(r) => r.origin,
            // Restarts step back from the index keyframe decoding entered at.
            None => self
                .keyframe_index(start)
                .filter(|&k| k != i64::MIN)
                .unwrap_or(start),
        };
        let recovery = self.recovery.get_or_insert_with(|| Recovery {
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
            prints: std::mem::take(&mut self.watch.prints),
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
                    self.verifying = later;
                }
                _ => self.rewind_for_trouble(),
            },
            Next::Rewind => self.rewind_for_trouble(),
        }
        true
    }

    /// Makes this decoder the one of `part` of the job, the part before it (if any) ending with a
    /// target at `before` (µs): see [`Self::ask_witness`].
    pub(crate) fn set_part(&mut self, part: usize, before: Option<i64>) {
        self.part = Some(part);
        self.before = before.map(|us| self.ts_floor(us));
    }

    /// The proof's first decode `v` (an entry met just past its keyframe, decoded on past the
    /// reach: [`Self::decode_on_to_prove`]) needs a decode from the keyframe before. The decoder of
    /// the part before decodes that GOP for its own last targets: asked while it still decodes, it
    /// decodes on through this keyframe and compares ([`Self::serve_witness`]), and this decoder
    /// enters at the keyframe again, trusting the entry provisionally, instead of decoding the GOP
    /// before itself. Some(v), given back, when there is no such part.
    fn ask_witness(&mut self, v: Verifying) -> Option<Verifying> {
        let Some(key) = v.first.key else {
            return Some(v);
        };
        let index_key = self.keyframe_index(key).filter(|&k| k != i64::MIN);
        let gop_before = index_key.and_then(|k| self.index_keyframe_back(k, 1));
        let Some((index_key, part)) = index_key.zip(self.part.and_then(|p| p.checked_sub(1)))
        else {
            return Some(v);
        };
        // The part before ends in the GOP before this keyframe, so it decodes up to it.
        let ends_before = self.before.is_some_and(|b| {
            b < key && gop_before.is_some() && self.keyframe_index(b) == gop_before
        });
        if !ends_before || !self.may_trust_pending {
            return Some(v);
        }
        if let Some(v) = self.open_gops.ask(part, v) {
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
        let Some(part) = self.part else {
            return;
        };
        if let Some(v) = self.open_gops.asked_of(part) {
            let at = self
                .cur
                .iter()
                .chain(self.next.iter())
                .chain(self.ahead.iter())
                .map(|d| d.pts)
                .max();
            let serves = match (v.first.key, at) {
                (Some(key), Some(at)) => {
                    let next_key = self.index_keyframe_after(at.saturating_add(1));
                    let key_index = self.keyframe_index(key);
                    // The last picture out may be a leading picture of the keyframe's own GOP
                    // (decoded after it, shown before it) when decoding skipped every picture
                    // from the last target to the keyframe.
                    at < key
                        && !self.drained
                        && self.entry.is_some_and(|e| e <= key.saturating_sub(v.reach))
                        && next_key.is_some()
                        && (next_key == key_index || self.keyframe_index(at) == key_index)
                }
                _ => false,
            };
            if serves {
                self.skip_nonref = false;
                // Every picture from here on is decoded (and shown to the proof): referenced
                // pictures a plan would skip too.
                self.refs.forget_plans();
                self.verifying = Some(v);
                // verify() ends the proof at the last picture the first decode showed.
                while self.verifying.is_some() {
                    if self.next_frame().is_none() {
                        break;
                    }
                }
                self.verifying = None;
            }
        }
        self.open_gops.part_done(part);
    }

    /// Lets this decoder trust an entry provisionally while another decoder proves one, instead
    /// of waiting for the verdict: its caller then follows [`Self::provisional`].
    pub(crate) fn trust_pending_proofs(&mut self) {
        self.may_trust_pending = true;
    }

    /// Whether the frames returned since an entry was trusted provisionally must wait for the
    /// stream's verdict ([`Self::provisional_verdict`]) before they may be shown.
    pub(crate) fn provisional(&self) -> bool {
        self.provisional
    }

    /// The stream's verdict for what was decoded provisionally (`wait`: see
    /// [`OpenGops::verdict`]). Once proven, nothing is provisional any more; not proven, what was
    /// decoded since is to be decoded again, by a decoder that waits (this one stays provisional).
    pub(crate) fn provisional_verdict(&mut self, wait: bool) -> Verdict {
        let verdict = self.open_gops.verdict(wait);
        if verdict == Verdict::Proven {
            self.provisional = false;
        }
        verdict
    }

    /// Whether a frame coming out now must keep a fingerprint (see [`fingerprint`]) before its
    /// picture may be released: the decode is watched and the decoder already reported something.
    pub(super) fn needs_print(&self) -> bool {
        self.watch.active && self.log.any()
    }

    /// Called for every picture that comes out: while an entry may yet be proven (trouble
    /// reported, nothing proven), keeps its digest for the proof and returns it.
    pub(super) fn print_to_prove(&mut self, frame: &ff::frame::Video, pts: i64) -> Option<u64> {
        if self.verifying.is_some() {
            return self.verify(frame, pts);
        }
        if !self.needs_print() || !self.open_gops.open() {
            return None;
        }
        // Only pictures a proof compares (see [`proves`]): from the keyframe of the first
        // attempt, which may yet claim the proof, or of the first attempt a later one answers.
        let from = match &self.recovery {
            None => self.watch.key.and_then(|(_, pts)| pts),
            Some(r) if r.claim.is_some() => r.ladder.attempts.first().and_then(|a| a.key),
            Some(_) => return None,
        };
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
    fn restart_passes_reach(&self, key: i64, reach: i64) -> bool {
        let past = key.saturating_add(reach);
        let next_key = self.index_keyframe_after(key.saturating_add(1));
        let index_key = self.keyframe_index(key).filter(|&k| k != i64::MIN);
        let far_enough = index_key
            .and_then(|k| self.index_keyframe_back(k, 1))
            .is_none_or(|earlier| earlier <= key.saturating_sub(reach));
        far_enough
            && self.targets[self.target_pos.min(self.targets.len())..]
                .iter()
                .any(|&t| t >= past && next_key.is_none_or(|n| t < n))
    }

    /// The first attempt at an entry, its chosen frame within `reach` of the keyframe: decodes on
    /// (the pictures are dropped: a restart follows) to the first picture at least `reach` past
    /// the keyframe, and keeps what the proof compares. None, the claim released, when the
    /// trouble found on the way is more than the entry's.
    fn decode_on_to_prove(&mut self, claim: Claim, reach: i64) -> Option<Verifying> {
        let (_, key) = self.watch.key?;
        let key = key?;
        let past = key.saturating_add(reach);
        let shown = |d: &super::Decoded| d.pts;
        let mut last = self
            .cur
            .iter()
            .chain(self.next.iter())
            .chain(self.ahead.iter())
            .map(shown)
            .max()?;
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
                start: self.entry?,
                trouble: found.trouble,
                invented: found.invented,
                frame: last,
                print: None,
                key: Some(key),
                entry: true,
                prints: std::mem::take(&mut self.watch.prints),
            },
            prints: Vec::new(),
        })
    }

    /// A picture of the decode that proves an entry ([`Verifying`]): keeps its digest; at the first
    /// picture `reach` past the keyframe that the first attempt showed too, gives the verdict.
    fn verify(&mut self, frame: &ff::frame::Video, pts: i64) -> Option<u64> {
        let v = self.verifying.as_mut()?;
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
            self.verifying = None;
        } else if pts >= key.saturating_add(v.reach) && theirs.is_some() {
            let v = self.verifying.take()?;
            let first = Attempt {
                frame: pts,
                print: theirs,
                ..v.first
            };
            let earlier = Attempt {
                start: self.entry.unwrap_or(i64::MAX),
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

    /// The reference reach in stream units ([`super::reach`]), by the decoder's delay now.
    pub(super) fn reference_reach(&self) -> i64 {
        let delay = unsafe { (*self.decoder.as_ptr()).has_b_frames } as i64;
        super::reach::reference_reach(self.decoder.id().name(), self.sps_refs, delay)
            .saturating_mul(self.frame_step)
    }

    /// Stops watching: the current target is answered.
    pub(super) fn settle(&mut self) {
        if self.watch.active {
            self.watch.begin(false);
            self.log.watch(false);
        }
        self.recovery = None;
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
        let span = self.gop.max(self.seconds_in_ts(1));
        let ts = origin.saturating_sub(span.saturating_mul(back as i64));
        let start = unsafe { (*self.stream()).start_time };
        let start = if start == ffi::AV_NOPTS_VALUE {
            self.first_pts.unwrap_or(0)
        } else {
            start
        };
        (ts > start).then_some(ts)
    }

    /// Decoding from the start is the only cure left; seeking in this stream is not to be trusted
    /// again, so later targets are reached by decoding forward.
    fn rewind_for_trouble(&mut self) {
        self.forward_only = true;
        self.rewind();
    }
}

/// A 64-bit digest of a picture's visible samples (row padding excluded), to tell whether two
/// decodes gave the very same picture. None when the picture is gone or its format unknown.
pub(super) fn fingerprint(frame: &ff::frame::Video) -> Option<u64> {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    unsafe {
        let raw = frame.as_ptr();
        if raw.is_null() || (*raw).data[0].is_null() {
            return None;
        }
        let (w, h) = ((*raw).width, (*raw).height);
        let nb = ffi::AVPixelFormat::AV_PIX_FMT_NB as i32;
        if w <= 0 || h <= 0 || !(0..nb).contains(&(*raw).format) {
            return None;
        }
        // SAFETY: AVPixelFormat is a C enum with contiguous values 0..AV_PIX_FMT_NB.
        let format = std::mem::transmute::<i32, ffi::AVPixelFormat>((*raw).format);
        let desc = ffi::av_pix_fmt_desc_get(format);
        if desc.is_null() {
            return None;
        }
        // Four interleaved lanes: each word changes its lane's state for good (every step is a
        // bijection of the state), and the lanes' multiplications overlap instead of waiting on
        // each other (one lane hashed a 1080p picture in ~2 ms, as long as decoding it).
        let seed = K ^ ((w as u64) << 32 | h as u64);
        let mut lanes = [seed, seed ^ 1, seed ^ 2, seed ^ 3];
        let mix = |lane: u64, v: u64| (lane ^ v).wrapping_mul(K).rotate_left(29);
        let word = |b: &[u8]| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        for plane in 0..ffi::av_pix_fmt_count_planes(format).clamp(0, 4) as usize {
            let data = (*raw).data[plane];
            let stride = (*raw).linesize[plane];
            let row = ffi::av_image_get_linesize(format, w, plane as i32);
            if data.is_null() || row <= 0 || stride < row {
                return None;
            }
            let rows = if plane == 1 || plane == 2 {
                -((-h) >> (*desc).log2_chroma_h)
            } else {
                h
            };
            for y in 0..rows as usize {
                let line = std::slice::from_raw_parts(data.add(y * stride as usize), row as usize);
                let mut blocks = line.chunks_exact(32);
                for block in &mut blocks {
                    lanes[0] = mix(lanes[0], word(&block[0..8]));
                    lanes[1] = mix(lanes[1], word(&block[8..16]));
                    lanes[2] = mix(lanes[2], word(&block[16..24]));
                    lanes[3] = mix(lanes[3], word(&block[24..32]));
                }
                for &b in blocks.remainder() {
                    lanes[0] = mix(lanes[0], b as u64);
                }
            }
        }
        let hash = lanes.iter().fold(seed, |hash, &lane| mix(hash, lane));
        Some(hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch_with(packets: &[(u64, i64)], key: usize) -> Watch {
        let mut w = Watch::default();
        w.begin(true);
        for (i, &(serial, pts)) in packets.iter().enumerate() {
            w.sent(serial, Some(pts), serial as i64 * 100, i == key);
        }
        w
    }

    /// Decode order after a seek: 2 packets before the keyframe (serials 1, 2), the keyframe
    /// (3, pts 100), two leading pictures shown before it (4, 5), then later frames.
    fn entered_open_gop() -> Watch {
        watch_with(
            &[
                (1, 10),
                (2, 20),
                (3, 100),
                (4, 80),
                (5, 90),
                (6, 130),
                (7, 110),
            ],
            2,
        )
    }

    #[test]
    fn trouble_before_the_keyframe_or_in_leading_pictures_does_not_count() {
        let w = entered_open_gop();
        let logged = |errors: &[i64], gaps: &[i64]| Logged {
            errors: errors.to_vec(),
            gaps: gaps.to_vec(),
            unrefs: Vec::new(),
        };
        let trouble = |errors: &[i64], chosen| w.findings(&logged(errors, &[]), chosen).trouble;
        assert!(trouble(&[1, 2, 4, 5], 110).is_empty());
        // A frame after the keyframe that failed reaches the chosen frame.
        assert_eq!(trouble(&[6], 110).len(), 1);
        // A chosen leading picture is reached by its own trouble.
        assert_eq!(trouble(&[4], 80).len(), 1);
        // Serials from before the seek are ignored.
        assert!(trouble(&[0], 110).is_empty());
        // References invented before the keyframe itself reach every later frame.
        assert!(w.findings(&logged(&[], &[3]), 110).invented);
        assert!(!w.findings(&logged(&[], &[1]), 110).invented);
    }

    #[test]
    fn an_entry_is_only_what_entering_at_a_keyframe_produces() {
        let w = entered_open_gop();
        let entry = |errors: &[i64], gaps: &[i64], unrefs: &[i64], chosen| {
            let logged = Logged {
                errors: errors.to_vec(),
                gaps: gaps.to_vec(),
                unrefs: unrefs.to_vec(),
            };
            w.findings(&logged, chosen).entry
        };
        // Pictures invented at the keyframe, pictures never there failing to be forgotten.
        assert!(entry(&[], &[3], &[], 110));
        assert!(entry(&[], &[3], &[6], 130));
        // Anything else: another error, pictures invented later, nothing invented at all.
        assert!(!entry(&[6], &[3], &[], 130));
        assert!(!entry(&[], &[3, 6], &[], 130));
        assert!(!entry(&[], &[], &[6], 130));
        // A leading picture (shown before the keyframe) is not covered.
        assert!(!entry(&[], &[3], &[], 90));
        // Unrefs are trouble like any error until an entry is trusted.
        let logged = Logged {
            unrefs: vec![6],
            ..Logged::default()
        };
        assert_eq!(w.findings(&logged, 130).trouble.len(), 1);
    }

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
    fn a_fingerprint_sees_every_sample_and_nothing_else() {
        // 70 pixels wide: luma rows of two 32-byte blocks and 6 bytes more, chroma rows of one
        // block and 3 bytes; every lane, the remainders and both chroma planes are touched.
        let mut frame = ff::frame::Video::new(ff::format::Pixel::YUV420P, 70, 6);
        for plane in 0..3 {
            let stride = frame.stride(plane);
            for (i, b) in frame.data_mut(plane).iter_mut().enumerate() {
                *b = (i % stride) as u8 ^ plane as u8;
            }
        }
        let base = fingerprint(&frame).expect("a picture");
        // Row padding is not the picture.
        let stride = frame.stride(0);
        if stride > 70 {
            frame.data_mut(0)[stride - 1] ^= 0xFF;
            assert_eq!(fingerprint(&frame), Some(base));
            frame.data_mut(0)[stride - 1] ^= 0xFF;
        }
        for (plane, row, x) in [
            (0, 0, 0),
            (0, 1, 9),
            (0, 2, 17),
            (0, 3, 31),
            (0, 5, 64),
            (0, 5, 69),
            (1, 0, 33),
            (2, 2, 5),
        ] {
            let at = row * frame.stride(plane) + x;
            frame.data_mut(plane)[at] ^= 1;
            assert_ne!(
                fingerprint(&frame),
                Some(base),
                "plane {plane} ({x}, {row})"
            );
            frame.data_mut(plane)[at] ^= 1;
        }
        assert_eq!(fingerprint(&frame), Some(base));
        // The same samples in two lanes swapped are another picture.
        let row = frame.data_mut(0);
        row.swap(0, 8);
        assert_ne!(fingerprint(&frame), Some(base));
    }

    #[test]
    fn without_a_keyframe_everything_counts() {
        let w = watch_with(&[(1, 10), (2, 20)], usize::MAX);
        let logged = Logged {
            errors: vec![1],
            ..Logged::default()
        };
        assert_eq!(w.findings(&logged, 20).trouble.len(), 1);
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
