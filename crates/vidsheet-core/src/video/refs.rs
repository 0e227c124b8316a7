//! Referenced H.264 B pictures no target needs: sent with AVDISCARD_BIDIR, so the decoder does
//! not decode them at all. That is exact only when every picture that IS decoded predicts from
//! the same pixels, in the same way, as in a full decode. FFmpeg 5.1 drops a discarded picture
//! before it enters its reference memory (its memory management operations are lost with it); the
//! next decoded picture then finds a `frame_num` gap and fills it with placeholders that share the
//! pixels of the newest reference before the gap and take its order count + 2 (h264_slice.c,
//! h264_field_start). So the decoder's reference state is modelled twice, for a full decode and
//! for this decode, as FFmpeg keeps it ([`super::dpb`]), and referenced pictures are skipped only
//! when every picture decoded until both states agree again (or the next IDR, or the end of the
//! stream) has:
//!
//! - the same order count as in the full decode (its output order and any B list built on it);
//! - reference lists holding the same pictures' pixels at every index it may use, none missing;
//! - where a placeholder (or a picture that predicted from one) stands in its lists, no use of
//!   its references' order counts (temporal direct, implicit weights: the placeholder's count is
//!   not the skipped picture's, and the motion a picture stores names its references by their
//!   `frame_num`);
//! - no two references in one slice's lists holding the same pixels (a placeholder and the
//!   picture it copies): the deblocking filter's "same reference" test compares buffers, and
//!   whether a placeholder shares its source's buffer is not modelled, so the case is refused;
//! - no placeholder first in a B slice's list 1: direct prediction reads that picture's motion,
//!   which a placeholder does not share with the picture it copies.
//!
//! In the full decode every memory management operation must find its picture. In this decode
//! one may name a picture the decoder does not hold: x264's B-pyramid unmarks, in each
//! referenced B-frame, the one before and the P-frame before last, which the sliding window has
//! already dropped when placeholders took the skipped B-frames' places. FFmpeg then logs "mmco:
//! unref short failure" and goes on as if the picture had been forgotten (h264_refs.c, unless
//! errors explode); [`RefSkip::sent`] reports the packet, so seek recovery does not take the line
//! for damage. Without that a decoded B-frame would need every B-frame before it back to the IDR.
//!
//! Pictures after the one being sent are judged from packets read ahead ([`LOOKAHEAD`], up to
//! the next IDR picture), in one plan ([`RefSkip::skip_referenced`]), which skips pictures only
//! as far as the decodes are seen to meet again within them after it. Non-reference pictures
//! count as skipped when the non-reference rule ([`super::skip`]) skips them (it only grows more
//! certain as more packets are read, and they stay skipped once a plan rests on it). Anything not
//! modelled (fields, MBAFF-capable streams, order count types 1 and 2, other memory management
//! operations, long-term pictures, slice groups, a packet that cannot be read) gives up: the
//! picture is decoded, and the model waits for the next IDR or flush.

use std::collections::VecDeque;

use ff::Packet;
use ffmpeg_next as ff;

use super::dpb::Dpb;
use super::h264::{self, ParamSets, Picture, SliceKind};
use super::VideoSource;

/// Packets read ahead at most to judge one referenced picture: a placeholder leaves the reference
/// memory after `max_num_ref_frames` later references, but a skipped picture's lost memory
/// management operations leave the decoder holding more references than a full decode until the
/// next IDR (x264's B-pyramid unmarks the previous B-frame so), which may be a GOP away; a
/// judgement that needs more decodes the picture.
pub(super) const LOOKAHEAD: usize = 320;

/// Bytes of packets read ahead at most: the memory a plan may hold per decoder (the 1080p bench
/// clip's GOP of 247 pictures is ~16 MB; past the bound a judgement decodes the picture).
pub(super) const LOOKAHEAD_BYTES: usize = 32 << 20;

/// Simulations one plan may run (each decodes one more picture than the last).
const MAX_PLANS: usize = 64;

/// A packet read and what it holds.
pub(super) struct Read {
    pub packet: Packet,
    /// The H.264 picture it holds, when it can be modelled.
    pub picture: Option<Picture>,
    /// Whether the non-reference rule skips it, once known ([`RefSkip::skip_referenced`]).
    pub nonref_skip: Option<bool>,
    /// A referenced picture no target can show (as far as known when last judged).
    pub candidate: bool,
    /// A referenced picture's decision, once a plan made it.
    pub plan: Option<bool>,
}

/// The referenced-picture model of one stream: its parameter sets, packets read ahead, and the
/// decoder's reference state for a full decode and for this one.
pub(super) struct RefSkip {
    /// The stream is H.264 with frame pictures only (else nothing here is used).
    enabled: bool,
    length_size: Option<usize>,
    /// The parameter sets of the stream's extradata, and those known at the packet last read.
    initial_sets: ParamSets,
    sets: ParamSets,
    /// Packets read ahead of the one being sent, in decode order.
    queue: VecDeque<Read>,
    /// The reference state of a full decode and of this decode; None until an IDR, or an intra
    /// picture right after the decoder is flushed, is sent after a repositioning, and after
    /// anything the model cannot follow.
    state: Option<(Dpb, Dpb)>,
    /// Pictures sent (ids for the model's pixels).
    next_id: u64,
    /// Nothing was sent since the decoder was flushed (or opened).
    flushed: bool,
    /// The last picture sent names a picture only skipping made the decoder forget, and frame
    /// threads log that with the next packet ([`Self::sent`]).
    unmark_carried: bool,
    /// The packets read ahead reach the end of the stream.
    at_end: bool,
}

impl RefSkip {
    /// The model for a stream (`par`: its codec parameters).
    pub(super) fn of_stream(par: *const ff::ffi::AVCodecParameters) -> RefSkip {
        let sets = ParamSets::of_stream(par);
        let enabled = h264::stream_sps(par).is_some_and(|s| s.frame_mbs_only);
        RefSkip {
            enabled,
            length_size: h264::avcc_length_size(par),
            initial_sets: sets.clone(),
            sets,
            queue: VecDeque::new(),
            state: None,
            next_id: 0,
            flushed: true,
            unmark_carried: false,
            at_end: false,
        }
    }

    /// What a packet just read holds (parameter sets it carries are learned: call in decode
    /// order); `model` false (referenced pictures are not skipped) reads nothing of it.
    pub(super) fn read(&mut self, packet: Packet, model: bool) -> Read {
        let picture = if self.enabled && model {
            packet
                .data()
                .and_then(|d| h264::packet_picture(d, self.length_size, &mut self.sets))
        } else {
            None
        };
        Read {
            packet,
            picture,
            nonref_skip: None,
            candidate: false,
            plan: None,
        }
    }

    /// The demuxer moved: packets read ahead are stale, the decoder starts afresh, and in-band
    /// parameter sets read later in the stream may not be those of the packets now read.
    pub(super) fn reposition(&mut self) {
        self.queue.clear();
        self.at_end = false;
        self.sets = self.initial_sets.clone();
        self.state = None;
        self.flushed = true;
        self.unmark_carried = false;
    }

    /// Whether the referenced picture `pic` (about to be sent) is skipped: planned already, or
    /// planned now with the packets read ahead in [`Self::queue`] (their `nonref_skip` and
    /// `candidate` filled in). A plan skips every candidate it can (`candidate`: `pic` itself may
    /// be skipped as far as the targets go): it simulates this decode with them skipped, and where
    /// a decoded picture would differ from the full decode, or the decodes would not meet again
    /// (a state both share, the next IDR or the end of the stream) within what was read ahead,
    /// decodes the latest skipped picture before that point instead. Its decisions up to the last
    /// picture it skips are kept on the packets read ahead (the reasons only grow more certain),
    /// so a later judgement never undoes one this rested on; the pictures after it are judged
    /// again when sent, and any decision then is safe: decoding them all is what this plan
    /// proved exact, and a skip is proved by a plan of its own. (Without an IDR ahead, as in
    /// open GOPs, skipping every candidate never lets the decodes meet: each plan stops short.)
    pub(super) fn skip_referenced(
        &mut self,
        pic: &Picture,
        planned: Option<bool>,
        candidate: bool,
    ) -> bool {
        if let Some(skip) = planned {
            return skip;
        }
        if !candidate {
            return false;
        }
        let mut skip: Vec<bool> = std::iter::once(true)
            .chain(self.queue.iter().map(|r| r.candidate))
            .collect();
        for _ in 0..MAX_PLANS {
            let at = match self.simulate(pic, &skip) {
                Ok(end) => {
                    // The last picture skipped among those judged (`skip` goes on past `end`,
                    // where nothing was simulated).
                    let last = skip[..=end].iter().rposition(|&s| s).unwrap_or(0);
                    for (read, &s) in self.queue.iter_mut().zip(&skip[1..]).take(last) {
                        if read.picture.as_ref().is_some_and(|p| p.reference) {
                            read.plan = Some(s);
                        }
                    }
                    return skip[0];
                }
                Err(at) => at,
            };
            match (0..at.min(skip.len())).rev().find(|&j| skip[j]) {
                Some(0) | None => return false,
                Some(j) => skip[j] = false,
            }
        }
        false
    }

    /// Sends `pic` then the packets read ahead through both models, the pictures `skip` marks
    /// (0: `pic`) skipped: Ok(how many packets read ahead the judgement covers) when every
    /// decoded picture decodes as in the full decode up to an IDR, the end of the stream or a
    /// shared state; Err(index of the first that does not, or of the end of what was read).
    fn simulate(&self, pic: &Picture, skip: &[bool]) -> Result<usize, usize> {
        let Some((full, this)) = &self.state else {
            return Err(0);
        };
        let (mut full, mut this) = (full.clone(), this.clone());
        let mut id = self.next_id;
        // The full decode's own operations must all find their pictures.
        let full_ok = matches!(full.apply(pic, id, true), Some(Some(u)) if full.whole(&u));
        if !full_ok || this.apply(pic, id, !skip[0]).is_none() {
            return Err(0);
        }
        for (i, read) in self.queue.iter().enumerate() {
            let at = i + 1;
            id += 1;
            if this.same_as(&full) {
                return Ok(i);
            }
            let Some(next) = &read.picture else {
                return Err(at);
            };
            if next.idr {
                return Ok(i);
            }
            let skipped = if next.reference {
                skip[at]
            } else {
                read.nonref_skip == Some(true)
            };
            let Some(Some(want)) = full.apply(next, id, true) else {
                return Err(at);
            };
            if !full.whole(&want) {
                return Err(at);
            }
            let Some(got) = this.apply(next, id, !skipped) else {
                return Err(at);
            };
            if let Some(got) = got {
                let differs = got.poc != want.poc
                    || got.unknown
                    || got.lists != want.lists
                    || got.aliased
                    || got.colocated_stand_in
                    || (got.stand_ins && next.slices.iter().any(|s| s.uses_order_counts))
                    || got.lists.iter().flatten().flatten().any(Option::is_none);
                if differs {
                    return Err(at);
                }
            }
        }
        if this.same_as(&full) || self.at_end {
            Ok(self.queue.len())
        } else {
            Err(self.queue.len() + 1)
        }
    }

    /// Sends a picture through the model (`skipped`: discarded as a referenced picture or by the
    /// non-reference rule; None: not a modelled picture, which stops the model until an IDR).
    /// Returns whether the decoder logs, at this packet, what only the skipped referenced
    /// pictures made (the plan allowed for it: no sign of a missing reference or of damage, see
    /// [`super::recover`]): it fills a `frame_num` gap, or its memory management names a picture
    /// the decoder does not hold (a skipped picture's own operations were lost with it).
    /// `deferred_marking`: the decoder runs frame threads, where FFmpeg carries out a picture's
    /// memory management only when the next packet is handed to a thread
    /// (ff_h264_update_thread_context), so the line it logs then names that packet.
    pub(super) fn sent(
        &mut self,
        pic: Option<&Picture>,
        skipped: bool,
        deferred_marking: bool,
    ) -> bool {
        let carried = std::mem::take(&mut self.unmark_carried);
        let (gap, unmark) = self.follow(pic, skipped);
        if deferred_marking {
            self.unmark_carried = unmark;
            gap || carried
        } else {
            gap || unmark
        }
    }

    /// [`Self::sent`]'s model step: whether the decoder fills a `frame_num` gap only the skipped
    /// pictures made, and whether the picture's memory management names a picture only they
    /// made the decoder forget.
    fn follow(&mut self, pic: Option<&Picture>, skipped: bool) -> (bool, bool) {
        let id = self.next_id;
        self.next_id += 1;
        let Some(pic) = pic else {
            self.state = None;
            self.flushed = false;
            return (false, false);
        };
        let flushed = std::mem::take(&mut self.flushed);
        if pic.idr {
            self.state = Some((Dpb::at_idr(), Dpb::at_idr()));
        } else if flushed && pic.slices.iter().all(|s| s.kind == SliceKind::I) {
            // The first picture after a flush, an intra one (an open GOP's keyframe, a recovery
            // point): the decoder's state from here is known too.
            self.state = Some((Dpb::after_flush(), Dpb::after_flush()));
        }
        let Some((full, this)) = &mut self.state else {
            return (false, false);
        };
        let max_fn = 1i64 << pic.sps.log2_max_frame_num;
        let frame_num = pic.frame_num as i64;
        let gap = |d: &Dpb| {
            !pic.idr
                && frame_num != d.prev_frame_num
                && frame_num != (d.prev_frame_num + 1).rem_euclid(max_fn)
        };
        let gap_planned = !skipped && gap(this) && !gap(full);
        let want = full.apply(pic, id, true);
        let got = this.apply(pic, id, !skipped);
        match (want, got) {
            (Some(Some(want)), Some(got)) if full.whole(&want) => (
                gap_planned,
                got.is_some_and(|g| g.missed_unmark && !want.missed_unmark),
            ),
            _ => {
                self.state = None;
                (false, false)
            }
        }
    }

    /// Drops the decisions plans made for the packets read ahead (decoding turns to every
    /// picture).
    pub(super) fn forget_plans(&mut self) {
        for read in self.queue.iter_mut() {
            read.plan = None;
            read.nonref_skip = None;
        }
    }

    /// The model follows the decoder (an IDR was sent since the last repositioning).
    pub(super) fn active(&self) -> bool {
        self.state.is_some()
    }

    /// The next packet read ahead, to be sent.
    pub(super) fn pop_read(&mut self) -> Option<Read> {
        self.queue.pop_front()
    }

    /// Judges the packets read ahead for a plan by the non-reference rule (`may_skip`): whether
    /// it skips each (once judged skipped, always: a referenced picture may rest on it), and
    /// whether each referenced B picture is a candidate.
    pub(super) fn judge_ahead(&mut self, may_skip: impl Fn(&Packet) -> bool) {
        for read in self.queue.iter_mut() {
            let (nonref, bidir) = match &read.picture {
                Some(p) => (!p.reference, p.reference && bidirectional(p)),
                None => (false, false),
            };
            let skip = read.nonref_skip == Some(true) || nonref && may_skip(&read.packet);
            read.nonref_skip = Some(skip);
            read.candidate = bidir && may_skip(&read.packet);
        }
    }
}

impl VideoSource {
    /// Reads packets of the stream ahead until `n` wait, or [`LOOKAHEAD_BYTES`], or the next IDR
    /// picture (a plan's judgement ends there); stops quietly at the end or a read error (the
    /// pump meets it again when the packets read ahead are used up). Their pts are witnesses
    /// already ([`super::skip`]): those packets exist.
    pub(super) fn read_ahead(&mut self, n: usize) {
        let mut others = 0;
        let idr = |r: &Read| r.picture.as_ref().is_some_and(|p| p.idr);
        let queue = &mut self.refs.queue;
        if queue.iter().any(idr) {
            return;
        }
        let mut bytes: usize = queue.iter().map(|r| r.packet.size()).sum();
        while self.refs.queue.len() < n && others < n * 16 && bytes < LOOKAHEAD_BYTES {
            let mut packet = Packet::empty();
            match packet.read(&mut self.input) {
                Ok(()) => {}
                Err(ff::Error::Eof) => {
                    self.refs.at_end = true;
                    return;
                }
                Err(_) => return,
            }
            if packet.stream() != self.facts.index() {
                others += 1;
                continue;
            }
            self.clock.read(&packet);
            self.skip.witness(packet.pts(), self.clock.last_pts());
            bytes += packet.size();
            let read = self.refs.read(packet, self.skip.referenced_on());
            let last = idr(&read);
            self.refs.queue.push_back(read);
            if last {
                return;
            }
        }
    }
}

/// A non-IDR picture of B slices only: AVDISCARD_BIDIR discards it whole (FFmpeg judges by the
/// first slice). Only these are candidates: a referenced P picture is, almost always, what the
/// next P picture predicts from.
pub(super) fn bidirectional(pic: &Picture) -> bool {
    !pic.idr && pic.slices.iter().all(|s| s.kind == SliceKind::B)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::video::dpb::GREY;
    use h264::{SliceRefs, Sps};

    const SPS: Sps = Sps {
        sps_id: 0,
        max_num_ref_frames: 4,
        poc_type: 0,
        log2_max_poc_lsb: 8,
        chroma_array_type: 1,
        gaps_allowed: false,
        log2_max_frame_num: 4,
        separate_colour_plane: false,
        frame_mbs_only: true,
    };

    /// A one-slice picture: `kind`, reference or not, frame_num, order count (frames: 2 per
    /// picture), one active reference per list, list 0 modifications.
    fn pic(
        kind: SliceKind,
        reference: bool,
        frame_num: u32,
        poc: u32,
        mods: &[(u32, u32)],
    ) -> Picture {
        let active = match kind {
            SliceKind::I => [0, 0],
            SliceKind::P => [1, 0],
            SliceKind::B => [1, 1],
        };
        Picture {
            idr: kind == SliceKind::I && frame_num == 0,
            reference,
            frame_num,
            poc_lsb: poc,
            bottom_offset: 0,
            unmark: Vec::new(),
            slices: vec![SliceRefs {
                kind,
                active,
                modifications: [mods.to_vec(), Vec::new()],
                uses_order_counts: false,
            }],
            sps: SPS,
        }
    }

    /// x264's `ref=1`, `b-pyramid=normal`, 3 B-frames, in decode order: I0 P4 B2 b1 b3 P8 B6 b5
    /// b7 P12 B10 b9 b11 ... P24 (a P picture names the previous P by a modification: by default its
    /// list would start with the B-frame coded after that P).
    fn pyramid() -> Vec<Picture> {
        use SliceKind::*;
        let mut v = vec![pic(I, true, 0, 0, &[])];
        for k in 1..=6u32 {
            let f = 2 * k - 1; // frame_num of P_k
            let p_mod: &[(u32, u32)] = if k == 1 { &[] } else { &[(0, 1)] };
            v.push(pic(P, true, f, 8 * k, p_mod));
            if k < 6 {
                v.push(pic(B, true, f + 1, 8 * k - 4, &[]));
                v.push(pic(B, false, f + 2, 8 * k - 6, &[]));
                v.push(pic(B, false, f + 2, 8 * k - 2, &[]));
            }
        }
        v
    }

    /// Judges `pics[at]` after sending `pics[..at]` (decoded, but those in `skip`), the pictures
    /// after it read ahead with non-reference ones in `nonref_skip` skipped.
    fn judge(pics: &[Picture], at: usize, skip: &[usize], nonref_skip: &[usize]) -> bool {
        let mut m = RefSkip {
            enabled: true,
            length_size: None,
            initial_sets: ParamSets::default(),
            sets: ParamSets::default(),
            queue: VecDeque::new(),
            state: None,
            next_id: 0,
            flushed: true,
            unmark_carried: false,
            at_end: false,
        };
        for (i, p) in pics[..at].iter().enumerate() {
            m.sent(
                Some(p),
                skip.contains(&i) || nonref_skip.contains(&i),
                false,
            );
        }
        for (i, p) in pics.iter().enumerate().skip(at + 1) {
            m.queue.push_back(Read {
                packet: Packet::empty(),
                picture: Some(p.clone()),
                nonref_skip: Some(nonref_skip.contains(&i)),
                candidate: false,
                plan: None,
            });
        }
        m.skip_referenced(&pics[at], None, true)
    }

    /// The non-reference b-frames of [`pyramid`] (decode order indices) but `decoded`.
    fn b_frames_but(decoded: &[usize]) -> Vec<usize> {
        (3..21)
            .filter(|i| i % 4 == 3 || i % 4 == 0)
            .filter(|i| !decoded.contains(i))
            .collect()
    }

    #[test]
    fn a_pyramid_b_frame_is_skipped_when_its_b_frames_are() {
        let pics = pyramid();
        // Decode order indices: 0 I0, 1 P4, 2 B2, 3 b1, 4 b3, 5 P8, 6 B6, 7 b5, 8 b7, 9 P12, ...
        assert!(judge(&pics, 2, &[], &b_frames_but(&[])));
        // b1 shown by a target: it predicts from B2.
        assert!(!judge(&pics, 2, &[], &b_frames_but(&[3])));
        // b5 decoded: its list 0 would start with B2's placeholder (order count P4 + 2 = b5's),
        // which holds P4's pixels, as the full decode's list 0 does: still exact.
        assert!(judge(&pics, 2, &[], &b_frames_but(&[7])));
        // With temporal direct, a picture predicting through the placeholder is not exact.
        let mut temporal = pics.clone();
        temporal[7].slices[0].uses_order_counts = true;
        assert!(!judge(&temporal, 2, &[], &b_frames_but(&[7])));
        assert!(judge(&temporal, 2, &[], &b_frames_but(&[])));
        // Nor one predicting from B6, which predicted through it (b7: list 0 is B6), while b9
        // (P8 and B10) is unaffected.
        temporal[8].slices[0].uses_order_counts = true;
        temporal[11].slices[0].uses_order_counts = true;
        assert!(!judge(&temporal, 2, &[], &b_frames_but(&[8])));
        assert!(judge(&temporal, 2, &[], &b_frames_but(&[11])));
        // The packets read ahead end before the placeholder's consequences do: decoded.
        assert!(!judge(&pics[..12], 2, &[], &b_frames_but(&[])));
        // B6 judged with B2 already skipped.
        assert!(judge(&pics, 6, &[2], &b_frames_but(&[])));
    }

    #[test]
    fn a_p_frame_without_its_modification_would_predict_from_the_skipped_b_frame() {
        let mut pics = pyramid();
        // P8 takes the default list: B2 (the newest reference) at index 0.
        pics[5].slices[0].modifications[0].clear();
        assert!(!judge(&pics, 2, &[], &b_frames_but(&[])));
        // A P picture is needed by the next P.
        assert!(!judge(&pyramid(), 1, &[], &b_frames_but(&[])));
    }

    #[test]
    fn gap_placeholders_copy_the_newest_reference_and_slide_out() {
        let pics = pyramid();
        let mut dpb = Dpb::at_idr();
        for (i, p) in pics.iter().enumerate().take(6) {
            // B2 (index 2) and the b-frames skipped.
            let decoded = !(2..=4).contains(&i);
            assert!(dpb.apply(p, i as u64, decoded).is_some());
        }
        // P8, B2's placeholder (P4's pixels, P4's order count + 2), P4, I0.
        let pixels: Vec<u64> = dpb.short.iter().map(|e| e.pixels).collect();
        assert_eq!(pixels, vec![5, 1, 1, 0]);
        assert_eq!(dpb.short[1].poc, dpb.short[2].poc + 2);
        assert!(dpb.short[1].gap);
        // B6 (predicting from the placeholder: tainted) and P12 slide I0 and P4 out; two more
        // references (B10, P16) slide the placeholder out; B6, tainted, stays.
        for (i, p) in pics.iter().enumerate().skip(6).take(4) {
            assert!(dpb.apply(p, i as u64, !matches!(i, 7 | 8)).is_some());
        }
        let frame_nums: Vec<u32> = dpb.short.iter().map(|e| e.frame_num).collect();
        assert_eq!(frame_nums, vec![5, 4, 3, 2]);
        assert!(dpb.short[1].tainted && dpb.short[3].gap);
        for (i, p) in pics.iter().enumerate().skip(10).take(4) {
            assert!(dpb.apply(p, i as u64, !matches!(i, 11 | 12)).is_some());
        }
        let frame_nums: Vec<u32> = dpb.short.iter().map(|e| e.frame_num).collect();
        assert_eq!(frame_nums, vec![7, 6, 5, 4]);
        assert!(dpb.short.iter().all(|e| !e.gap) && dpb.short[3].tainted);
    }

    #[test]
    fn modifications_move_a_reference_to_the_front_and_drop_its_later_copy() {
        use SliceKind::*;
        let mut dpb = Dpb::at_idr();
        for (i, p) in [
            pic(I, true, 0, 0, &[]),
            pic(P, true, 1, 2, &[]),
            pic(P, true, 2, 4, &[]),
        ]
        .iter()
        .enumerate()
        {
            assert!(dpb.apply(p, i as u64, true).is_some());
        }
        // Three references, newest first: 2, 1, 0. A P picture with 3 active references naming
        // picture 0 (frame_num 3 - 3) first.
        let mut p = pic(P, true, 3, 6, &[(0, 2)]);
        p.slices[0].active = [3, 0];
        let uses = dpb.apply(&p, 3, true).and_then(|u| u);
        let lists = uses.map(|u| u.lists[0][0].clone());
        assert_eq!(lists, Some(vec![Some(0), Some(2), Some(1)]));
    }

    /// [`pyramid`] with x264's memory management: each referenced B-frame but the first unmarks
    /// the one before and the P-frame before last (the full decode then holds two P-frames and
    /// one B-frame).
    fn pyramid_unmarking() -> Vec<Picture> {
        let mut pics = pyramid();
        for p in pics.iter_mut() {
            if p.reference && p.slices[0].kind == SliceKind::B && p.frame_num >= 4 {
                let p_before_last = if p.frame_num == 4 { 0 } else { p.frame_num - 5 };
                p.unmark = vec![p.frame_num - p_before_last - 1, 1];
            }
        }
        pics
    }

    #[test]
    fn a_b_frame_naming_a_picture_skipping_dropped_is_exact_and_its_log_line_planned() {
        let pics = pyramid_unmarking();
        // Decode order: 6 B6, 10 B10, 11 b9. b9 shown: B10 decoded, which unmarks P4 (index 1)
        // and B6. With B2 and B6 skipped their placeholders slid P4 out: the unmark misses.
        assert!(judge(&pics, 6, &[2], &b_frames_but(&[11])));
        assert!(judge(&pics, 2, &[], &b_frames_but(&[11])));
        // Sent so, the decoder logs what the plan made: the frame_num gaps at P8 and P12, the
        // missed unmark at B10; nothing else.
        let nonref = b_frames_but(&[11]);
        let planned = |deferred: bool| {
            let mut m = RefSkip::of_stream(std::ptr::null());
            let sent: Vec<usize> = pics
                .iter()
                .enumerate()
                .filter(|&(i, p)| {
                    m.sent(Some(p), i == 2 || i == 6 || nonref.contains(&i), deferred)
                })
                .map(|(i, _)| i)
                .collect();
            assert!(m.active());
            sent
        };
        assert_eq!(planned(false), vec![5, 9, 10]);
        // With frame threads B10's memory management runs, and logs, as the next packet (b9)
        // is handed to a thread.
        assert_eq!(planned(true), vec![5, 9, 11]);
        // The full decode's own unmarks all find their pictures.
        let mut full = Dpb::at_idr();
        for (i, p) in pics.iter().enumerate() {
            let uses = full.apply(p, i as u64, true).and_then(|u| u);
            assert!(uses.is_some_and(|u| !u.missed_unmark), "picture {i}");
        }
    }

    #[test]
    fn after_a_flush_an_intra_picture_finds_grey_placeholders_of_unknown_order() {
        use SliceKind::*;
        // A recovery point, frame_num 9, after a flush: the gap from -1 is shortened to
        // max_num_ref_frames (4) placeholders, 5..8 (h264_field_start), the first grey (nothing
        // to copy), the rest copying it; the intra picture then slides the oldest out.
        let mut dpb = Dpb::after_flush();
        let uses = dpb
            .apply(&pic(I, true, 9, 40, &[]), 0, true)
            .and_then(|u| u);
        assert!(uses.is_some_and(|u| !u.unknown && u.lists[0][0].is_empty()));
        let frame_nums: Vec<u32> = dpb.short.iter().map(|e| e.frame_num).collect();
        assert_eq!(frame_nums, vec![9, 8, 7, 6]);
        assert!(dpb.short[1..]
            .iter()
            .all(|e| e.pixels == GREY && e.poc_unknown));
        // Both decodes filled them alike: no stand-ins for a skipped picture.
        assert!(dpb.short.iter().all(|e| !e.gap && !e.tainted));
        // A B picture's lists are ordered by order counts the model does not know.
        let b = pic(B, false, 10, 38, &[]);
        let uses = Dpb::clone(&dpb).apply(&b, 1, true).and_then(|u| u);
        assert!(uses.is_some_and(|u| u.unknown));
        // A P picture's are ordered by frame_num: known.
        let uses = dpb
            .apply(&pic(P, true, 10, 48, &[]), 1, true)
            .and_then(|u| u);
        assert!(uses.is_some_and(|u| !u.unknown && u.lists[0][0] == vec![Some(0)]));
        // Two more references slide the placeholders out; B lists are known again.
        for (i, f) in [11u32, 12].into_iter().enumerate() {
            assert!(dpb
                .apply(&pic(P, true, f, 8 * f, &[]), 2 + i as u64, true)
                .is_some());
        }
        assert!(dpb.short.iter().all(|e| !e.poc_unknown));
        let uses = dpb
            .apply(&pic(B, false, 13, 92, &[]), 4, true)
            .and_then(|u| u);
        assert!(uses.is_some_and(|u| !u.unknown));
        // A gap of more than max_num_ref_frames is shortened outside a flush too: from 13 to 6
        // (wrapping at 16) it fills 2..5, copying P12 with its order count + 2, + 4, ...
        let p12 = dpb.short[0];
        assert!(dpb.apply(&pic(P, true, 6, 8, &[]), 5, true).is_some());
        let frame_nums: Vec<u32> = dpb.short.iter().map(|e| e.frame_num).collect();
        assert_eq!(frame_nums, vec![6, 5, 4, 3]);
        assert!(dpb.short[1..]
            .iter()
            .all(|e| e.gap && e.pixels == p12.pixels));
        assert_eq!(dpb.short[3].poc, p12.poc + 4);
    }

    #[test]
    fn the_model_starts_at_an_intra_picture_only_right_after_a_flush() {
        use SliceKind::*;
        let intra = pic(I, true, 9, 40, &[]);
        let mut m = RefSkip::of_stream(std::ptr::null());
        m.sent(Some(&intra), false, false);
        assert!(m.active());
        // After a repositioning a P picture comes first: the references it found are unknown.
        m.reposition();
        m.sent(Some(&pic(P, true, 3, 12, &[])), false, false);
        m.sent(Some(&intra), false, false);
        assert!(!m.active());
        m.reposition();
        m.sent(Some(&intra), false, false);
        assert!(m.active());
    }

    #[test]
    fn a_placeholder_first_in_list_1_is_refused_for_its_motion() {
        use SliceKind::*;
        // I0, then P (frame_num 2, order 8) after a gap: a placeholder for frame_num 1 copies I0
        // (order 0 + 2).
        let mut dpb = Dpb::at_idr();
        assert!(dpb.apply(&pic(I, true, 0, 0, &[]), 0, true).is_some());
        assert!(dpb.apply(&pic(P, true, 2, 8, &[]), 1, true).is_some());
        // A B picture at order 1: list 1 starts with the placeholder, whose motion (read by direct
        // prediction) is not I0's.
        let uses = Dpb::clone(&dpb)
            .apply(&pic(B, false, 3, 1, &[]), 2, true)
            .and_then(|u| u);
        assert!(uses.is_some_and(|u| u.colocated_stand_in && u.lists[0][1] == vec![Some(0)]));
        // At order 4 the placeholder leads list 0 (its pixels are all that is read) and P leads
        // list 1.
        let uses = dpb
            .apply(&pic(B, false, 3, 4, &[]), 2, true)
            .and_then(|u| u);
        assert!(uses.is_some_and(|u| !u.colocated_stand_in && u.stand_ins));
    }

    #[test]
    fn a_placeholder_and_the_picture_it_copies_in_one_slice_are_told_apart() {
        use SliceKind::*;
        let mut dpb = Dpb::at_idr();
        assert!(dpb.apply(&pic(I, true, 0, 0, &[]), 0, true).is_some());
        // frame_num 2 after 0: a placeholder for 1 copies I0. One active reference: the
        // placeholder alone; two: the placeholder and I0, the same pixels in two buffers.
        let one = pic(P, false, 2, 4, &[]);
        let uses = Dpb::clone(&dpb).apply(&one, 1, true).and_then(|u| u);
        assert!(uses.is_some_and(|u| u.lists[0][0] == vec![Some(0)] && !u.aliased));
        let mut two = one.clone();
        two.slices[0].active = [2, 0];
        let uses = dpb.apply(&two, 1, true).and_then(|u| u);
        assert!(uses.is_some_and(|u| u.lists[0][0] == vec![Some(0), Some(0)] && u.aliased));
    }
}

/// Real decodes: every target's picture with referenced pictures skipped is the very picture a
/// decode that skips none shows (same digest of every sample), on x264 clips synthesised by the
/// ffmpeg CLI.
#[cfg(test)]
mod exact {
    use super::super::{fingerprint, VideoSource};
    use crate::common;
    use crate::media::Opening;

    /// `seconds` of testsrc2 at 25 fps encoded with x264 `params` (cached by its arguments), GOP
    /// `gop`, 3 B-frames that always happen.
    fn clip(name: &str, preset: &str, params: &str, gop: u32, seconds: u32) -> String {
        let source = format!("testsrc2=s=320x180:r=25:d={seconds}");
        let params = format!("b-adapt=0:bframes=3:rc-lookahead=0:{params}");
        let gop = gop.to_string();
        common::cached_clip(
            name,
            &[
                "-f",
                "lavfi",
                "-i",
                &source,
                "-c:v",
                "libx264",
                "-preset",
                preset,
                "-bf",
                "3",
                "-x264-params",
                &params,
                "-g",
                &gop,
                "-keyint_min",
                &gop,
                "-sc_threshold",
                "0",
            ],
        )
    }

    /// The digest of each target's picture (targets in ms from the start, ascending), and the
    /// pictures decoded, with referenced pictures skipped or not, by a decoder of `threads`
    /// threads (frame threading hands each picture's discard setting to its thread).
    fn decode(
        path: &str,
        targets_ms: &[i64],
        skip_referenced: bool,
        threads: usize,
    ) -> (Vec<Option<u64>>, u64) {
        let mut src = VideoSource::open(path, &Opening::any(), 0, threads).expect("open");
        src.set_skip_referenced(skip_referenced);
        let us: Vec<i64> = targets_ms
            .iter()
            .map(|ms| src.facts.start_us() + ms * 1000)
            .collect();
        src.set_targets(&us);
        let prints = us
            .iter()
            .map(|&t| {
                let f = src.frame_at(t, &mut |_| false)?;
                fingerprint::fingerprint(&f.frame)
            })
            .collect();
        (prints, src.decoded_frames())
    }

    /// Targets spread over `seconds` (a few on each picture type, pairs within one GOP).
    fn targets(seconds: i64) -> Vec<i64> {
        let mut t: Vec<i64> = (0..14)
            .map(|i| 300 + i * seconds * 1000 / 15 + (i * 37) % 160)
            .collect();
        t.extend([2040, 2080, 9000, 9120]);
        t.sort();
        t
    }

    #[test]
    fn a_b_pyramid_of_one_reference_skips_its_referenced_b_frames_exactly() {
        // The bench clip's structure (ref=1, b-pyramid normal, spatial direct, no weights), in
        // one slice per picture and in two (each slice header repeats the memory management).
        for (name, params) in [
            ("pyramid.mp4", "ref=1:b-pyramid=normal"),
            ("sliced.mp4", "ref=1:b-pyramid=normal:slices=2"),
            // Open GOPs: one IDR, then recovery points the decoder is flushed at (after a seek),
            // where the model starts from the placeholders FFmpeg fills the gap with.
            ("open.mp4", "ref=1:b-pyramid=normal:open-gop=1"),
        ] {
            let path = clip(name, "ultrafast", params, 100, 20);
            let t = targets(20);
            let (want, before) = decode(&path, &t, false, 1);
            let (got, after) = decode(&path, &t, true, 1);
            assert!(want.iter().all(Option::is_some));
            assert_eq!(got, want, "pictures at {t:?} of {name}");
            let (threaded, _) = decode(&path, &t, true, 2);
            assert_eq!(threaded, want, "pictures at {t:?} of {name}, frame threads");
            eprintln!(
                "{name}: {after} pictures decoded, {before} without skipping referenced ones"
            );
            // Every referenced B-frame but those next to a target (a third of the pictures
            // decoded without) is skipped, and seek recovery takes none of the log lines the
            // skipping makes for damage (it would decode again from further back).
            assert!(
                after * 10 < before * 7,
                "referenced B-frames are skipped in {name}: {after} pictures decoded, {before} without"
            );
        }
    }

    #[test]
    fn a_dense_window_two_gops_in_shows_what_a_decode_of_every_frame_shows() {
        // 36 targets in 10 s from 20.5 s of a clip with 9.88 s GOPs: the skipping decode enters
        // mid-stream (at an IDR, or at a recovery point after a flush) and runs on through a
        // keyframe, its plans stopping short of it in open GOPs. The oracle decodes every frame
        // from the start (nothing skipped, no seek); a target shows the last frame at or before
        // it.
        for (name, open) in [("window.mp4", ""), ("window-open.mp4", ":open-gop=1")] {
            let params = format!("ref=1:b-pyramid=normal{open}");
            let path = clip(name, "ultrafast", &params, 247, 60);
            let every: Vec<i64> = (0..=762).map(|i| i * 40).collect();
            let (frames, _) = decode(&path, &every, false, 1);
            let t: Vec<i64> = (0..36).map(|i| 20_500 + i * 10_000 / 36).collect();
            let want: Vec<Option<u64>> = t.iter().map(|&ms| frames[(ms / 40) as usize]).collect();
            assert!(want.iter().all(Option::is_some));
            let (_, before) = decode(&path, &t, false, 1);
            for threads in [1, 2] {
                let (got, after) = decode(&path, &t, true, threads);
                let wrong: Vec<i64> = t
                    .iter()
                    .zip(got.iter().zip(&want))
                    .filter(|(_, (g, w))| g != w)
                    .map(|(&ms, _)| ms)
                    .collect();
                assert!(
                    wrong.is_empty(),
                    "{name}, {threads} threads: wrong pictures at {wrong:?} ms"
                );
                eprintln!("{name}, {threads} threads: {after} pictures decoded, {before} without skipping referenced ones");
                // Open GOPs too: referenced B-frames are skipped (the model starts at the
                // recovery point decoding enters at), with frame threads too (seek recovery
                // takes none of the lines the skipping makes for damage); many lie next to one
                // of the 36 targets.
                assert!(
                    after * 5 < before * 4,
                    "{name}, {threads} threads: {after} pictures decoded, {before} without"
                );
            }
        }
    }

    #[test]
    fn more_references_weighted_b_frames_and_a_strict_pyramid_stay_exact() {
        for (name, preset, params) in [
            ("ref3.mp4", "medium", "ref=3:b-pyramid=normal"),
            ("strict.mp4", "medium", "ref=2:b-pyramid=strict:weightb=1"),
            (
                "temporal.mp4",
                "fast",
                "ref=2:b-pyramid=normal:direct=temporal",
            ),
            // One reference with the deblocking filter and CABAC on, without and with implicit
            // weights.
            (
                "superfast.mp4",
                "superfast",
                "ref=1:b-pyramid=normal:weightb=0",
            ),
            (
                "veryfast.mp4",
                "veryfast",
                "ref=1:b-pyramid=normal:weightb=1",
            ),
        ] {
            let path = clip(name, preset, params, 100, 12);
            let t = targets(12);
            let (want, before) = decode(&path, &t, false, 1);
            let (got, after) = decode(&path, &t, true, 1);
            assert!(want.iter().all(Option::is_some));
            assert_eq!(got, want, "pictures at {t:?} of {name}");
            eprintln!(
                "{name}: {after} pictures decoded, {before} without skipping referenced ones"
            );
        }
    }
}
