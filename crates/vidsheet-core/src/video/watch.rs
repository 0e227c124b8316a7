//! The trouble watch: from a seek until a target's frame is chosen, what the decoder reported,
//! per packet (its log, failed calls, frames flagged corrupt), and which of it can reach the
//! chosen frame: none from packets decoded before the keyframe decoding started from; none from
//! its leading pictures (decoded after it, shown before it: no later frame references them)
//! unless the chosen frame is itself shown before that keyframe; everything else.

use std::collections::{BTreeSet, VecDeque};

use crate::decode_log::Logged;

/// Packets remembered after a seek while watching. A target further away is reached by a long
/// forward decode; its oldest packets are forgotten (their trouble with them).
const MAX_SENT: usize = 1 << 16;

/// A packet's identity across attempts: its byte position and pts (i64::MIN when unknown).
pub(super) type PacketId = (i64, i64);

struct Sent {
    serial: u64,
    pts: Option<i64>,
    pos: i64,
}

/// What the decoder reported since the last seek.
#[derive(Default)]
pub(super) struct Watch {
    active: bool,
    /// Packets sent, in serial order.
    sent: VecDeque<Sent>,
    /// The random-access point decoding started from: its serial and pts.
    key: Option<(u64, Option<i64>)>,
    /// That keyframe is an H.264 IDR picture, read from its slice header ([`Self::key_is_idr`]).
    key_idr: bool,
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
pub(super) struct Findings {
    /// Packets whose decoding failed or logged an error.
    pub(super) trouble: BTreeSet<PacketId>,
    /// The decoder invented reference pictures.
    pub(super) invented: bool,
    /// Everything found is what entering at a keyframe that is not an IDR produces, for a frame
    /// shown from that keyframe on: pictures invented at the keyframe itself, failures to forget
    /// pictures that were never there (see the module comment).
    pub(super) entry: bool,
}

impl Watch {
    /// Whether trouble is watched (from a seek until a target is answered).
    pub(super) fn active(&self) -> bool {
        self.active
    }

    /// The pts of the random-access point decoding started from, when known.
    pub(super) fn key_pts(&self) -> Option<i64> {
        self.key.and_then(|(_, pts)| pts)
    }

    /// The digests kept for a proof, taken.
    pub(super) fn take_prints(&mut self) -> Vec<(i64, u64)> {
        std::mem::take(&mut self.prints)
    }

    pub(super) fn begin(&mut self, active: bool) {
        self.active = active;
        self.sent.clear();
        self.key = None;
        self.key_idr = false;
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

    /// The packet `serial` holds an IDR picture: when it is the keyframe decoding started from,
    /// no picture from there on references one before it, so there is no open-GOP entry to prove.
    pub(super) fn key_is_idr(&mut self, serial: u64) {
        if self.key.is_some_and(|(key, _)| key == serial) {
            self.key_idr = true;
        }
    }

    /// Decoding started from an IDR keyframe ([`Self::key_is_idr`]).
    pub(super) fn idr_entry(&self) -> bool {
        self.key_idr
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
    pub(super) fn findings(&self, logged: &Logged, chosen: i64) -> Findings {
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

    #[test]
    fn without_a_keyframe_everything_counts() {
        let w = watch_with(&[(1, 10), (2, 20)], usize::MAX);
        let logged = Logged {
            errors: vec![1],
            ..Logged::default()
        };
        assert_eq!(w.findings(&logged, 20).trouble.len(), 1);
    }
}
