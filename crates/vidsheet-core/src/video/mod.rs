//! Frame-exact access: the frame displayed at a time, for targets asked in ascending order.
//!
//! The frame for target t is the last frame whose presentation time is <= t (the first frame when
//! t precedes it, the last frame when t follows it). The source decodes forward from where it is
//! while the target lies in the current GOP, seeks to the keyframe at or before the target
//! otherwise (the rest of the current GOP would be decoded for nothing: the target's keyframe
//! needs no earlier picture), and seeks further back when a seek lands past the target. Without an
//! index it decodes forward up to a threshold. A sync sample that is not a true random-access
//! point shows up as decoder trouble between the seek and the chosen frame; decoding then starts
//! again from an earlier keyframe, finally from the start. Every loop is bounded so a corrupt file
//! ends in "no frame", never in a hang.
//!
//! - [`open`]: the stream's decoder;
//! - [`cost`]: what reaching a run of targets costs (how the render splits the work);
//! - [`seek`]: when to seek, where to, repositioning;
//! - [`skip`]: pictures no target can show, decoded without output;
//! - [`refs`]: referenced H.264 pictures no decoded picture needs, not decoded at all;
//! - [`pump`]: packets in, pictures out;
//! - [`late`]: pictures the decoder hands out after later ones;
//! - [`recover`]: trouble after a seek, and starting again earlier;
//! - [`reach`]: how far back a picture may reference (what recovery compares by);
//! - [`packets`]: the packets read on the way, kept for the zoom hints;
//! - [`timestamps`]: the untimed-packet clock and the label clock (both engines' rules).

mod cost;
mod fields;
mod h264;
mod late;
mod open;
mod packets;
mod pump;
mod reach;
mod recover;
mod refs;
mod seek;
mod skip;
mod timestamps;
#[cfg(test)]
mod witness_tests;

use std::collections::{BTreeSet, VecDeque};

use ff::format::context::Input;
use ff::{frame, Packet};
use ffmpeg_next as ff;

use crate::decode_log::DecodeLog;
use crate::media::Container;
use crate::orientation::Orientation;

pub(crate) use cost::DecodeRun;
pub(crate) use recover::{OpenGops, Verdict};

/// Seeks further back tried when a seek lands past the target, before decoding from the start.
const MAX_SEEK_RETRIES: u32 = 3;

/// A decoded picture and its presentation timestamp (stream time base).
pub(crate) struct Decoded {
    /// The picture; empty once the caller took what it needed early (see [`VideoSource::frame_at`]).
    pub frame: frame::Video,
    pub pts: i64,
    /// Distinguishes decoded pictures (same serial = same picture).
    pub serial: u64,
    /// Digest of the picture, kept when seek recovery may compare it (see [`recover`]).
    print: Option<u64>,
    /// Its packet's decode time, seconds on the labels' clock; NaN when unknown ([`packets`]).
    pub decode_time: f64,
}

pub(crate) struct VideoSource {
    path: String,
    /// How the file is opened again (a rewind): the demuxer of the first open, when restricted.
    container: Container,
    input: Input,
    index: usize,
    decoder: ff::decoder::Video,
    /// The decoder's error log. Declared after `decoder`, so dropped after it: frame threads may
    /// log until the decoder is freed.
    log: DecodeLog,
    /// Decoder threads (a failure reported by the decoder belongs to a packet this many back).
    threads: usize,
    /// Stream time base.
    tb_num: i64,
    tb_den: i64,
    pub orientation: Orientation,
    /// Container start time in microseconds (0 when unknown).
    pub start_us: i64,
    /// Bytes of one decoded picture (an estimate when the pixel format is not known yet).
    pub picture_bytes: u64,
    /// Pixels of one picture (0 when unknown).
    pub pixels: u64,
    /// Picture duration guess in stream units (for frames without timestamps).
    frame_step: i64,
    /// The reference frames of the stream's H.264 sequence parameter set (`max_num_ref_frames`),
    /// when the stream is H.264 and its extradata has one that can be read (from the bytes: a
    /// frame-threaded decoder does not report it). The reach's input ([`reach`]).
    sps_refs: Option<u32>,
    /// Where the stream header says the stream ends (stream units), when it says so.
    declared_end: Option<i64>,

    /// Last decoded frame with pts <= the current target.
    cur: Option<Decoded>,
    /// First decoded frame with pts > the current target (not yet consumed).
    next: Option<Decoded>,
    /// Frames decoded after `next` while looking for a late one ([`late`]), in output order.
    ahead: VecDeque<Decoded>,
    /// Pts of packets sent since the last repositioning whose picture has not come out ([`late`]).
    owed: BTreeSet<i64>,
    /// Decoding started at the beginning of the file (not after a seek).
    from_start: bool,
    /// The decoder has returned end of stream.
    drained: bool,
    sent_eof: bool,
    /// A packet the decoder could not take yet, and its serial.
    stash: Option<(Packet, u64, ff::ffi::AVDiscard)>,
    serial: u64,
    /// Packets sent to the decoder (the serial of the latest).
    packet_serial: u64,
    last_pts: Option<i64>,
    /// The decoder judged this stream's pts faulty (see [`VideoSource::stamp`]): frames are timed
    /// by their decode timestamps from then on.
    pts_faulty: bool,
    /// Pts of the very first frame of the file, once seen.
    first_pts: Option<i64>,
    /// Longest keyframe distance seen while decoding forward (stream units).
    gop: i64,
    last_key_pts: Option<i64>,
    /// Decoding from the start produced nothing: the stream is undecodable.
    dead: bool,
    /// Seeks and rewinds issued.
    pub seeks: u64,
    /// Every target of the job (stream units, ascending) and the first one not yet answered:
    /// lets the decoder skip non-reference frames no target can show.
    targets: Vec<i64>,
    target_pos: usize,
    /// Pts of packets read since the last repositioning (witnesses for skipping).
    seen_pts: BTreeSet<i64>,
    /// How this stream's packets are read for a lone field picture ([`fields`]).
    fields: fields::FieldReader,
    /// Whether a packet without any timestamp is timed by the clock below (not where a packet
    /// may hold a field picture: see `time_untimed` in pump.rs).
    times_untimed: bool,
    /// The decode time of the next packet: the last decode time read since the last
    /// repositioning plus that packet's duration; None when not known.
    clock: Option<i64>,
    /// The last packet held a lone field picture that opens a frame: that field and whether it
    /// was skipped (its second field, the next packet, follows that decision).
    first_field: Option<(fields::Field, bool)>,
    /// Skip non-reference frames that no pending target can show (on by default).
    pub skip_nonref: bool,
    /// Packets sent with AVDISCARD_NONREF.
    pub skippable_sent: u64,
    /// `skippable_sent` at the last repositioning.
    skippable_at_reposition: u64,
    /// The decoder refused or failed on a packet since the last repositioning (damaged data: that
    /// packet gave no picture).
    packet_failed: bool,

    /// Where decoding entered the stream since the last repositioning: the first packet's dts
    /// (else pts).
    entry: Option<i64>,
    /// The next packet sent is the first since a seek to a keyframe of the demuxer's index, so it
    /// is that keyframe, whatever its flags say.
    landing: bool,
    /// What the decoder reported since the last seek, until a target is answered.
    watch: recover::Watch,
    /// Restarts further back for the current target.
    recovery: Option<recover::Recovery>,
    /// An open-GOP entry this decoder is proving with its current decode ([`recover::Verifying`]).
    verifying: Option<recover::Verifying>,
    /// Trust an entry provisionally rather than wait for another decoder's proof
    /// ([`VideoSource::trust_pending_proofs`]).
    may_trust_pending: bool,
    /// An entry was trusted provisionally and the verdict is not in ([`VideoSource::provisional`]).
    provisional: bool,
    /// The part of the job this decoder decodes, and the last target of the part before
    /// (stream units): see [`VideoSource::set_part`].
    part: Option<usize>,
    before: Option<i64>,
    /// This stream's open-GOP entries were proven clean ([`recover`]); shared by the job's
    /// decoders of the stream.
    open_gops: std::sync::Arc<recover::OpenGops>,
    /// Seeking in this stream gave decoder trouble that only decoding from the start cured: later
    /// targets are reached by decoding forward.
    forward_only: bool,
    /// Referenced pictures no decoded picture needs ([`refs`]): the model and packets read ahead.
    refs: refs::RefSkip,
    /// Skip referenced pictures too when [`refs`] shows none needs them (with `skip_nonref`). On
    /// by default (on the 1080p bench clip's 3x3 overview it halves the pictures decoded); tests
    /// turn it off for a decode that skips none.
    pub skip_referenced: bool,
    /// Packets read, recorded for the zoom hints when asked ([`packets`]).
    packets: Option<packets::PacketRecorder>,
    /// The latest packets' serials and decode times (a picture's own packet is among them).
    recent: std::collections::VecDeque<(u64, f64)>,
}

impl VideoSource {
    /// The flag saying this stream's open-GOP entries were proven clean, to share with another
    /// decoder of the same stream ([`Self::share_proofs`]).
    pub(crate) fn proofs(&self) -> std::sync::Arc<OpenGops> {
        std::sync::Arc::clone(&self.open_gops)
    }

    /// Shares what another decoder of the same stream proves, and proves for it ([`recover`]).
    pub(crate) fn share_proofs(&mut self, proofs: std::sync::Arc<OpenGops>) {
        self.open_gops = proofs;
    }

    /// Pictures decoded so far.
    pub(crate) fn decoded_frames(&self) -> u64 {
        self.serial
    }

    fn stream(&self) -> *mut ff::ffi::AVStream {
        unsafe { *(*self.input.as_ptr()).streams.add(self.index) }
    }

    /// pts <= target, compared exactly: pts * num * 1e6 <= target_us * den.
    fn le(&self, pts: i64, target_us: i64) -> bool {
        (pts as i128) * (self.tb_num as i128) * 1_000_000
            <= (target_us as i128) * (self.tb_den as i128)
    }

    /// The largest stream timestamp <= target.
    fn ts_floor(&self, target_us: i64) -> i64 {
        let n = (target_us as i128) * (self.tb_den as i128);
        let d = (self.tb_num as i128) * 1_000_000;
        let q = n.div_euclid(d);
        q.clamp(i64::MIN as i128 + 1, i64::MAX as i128) as i64
    }

    fn seconds_in_ts(&self, secs: i64) -> i64 {
        ((secs as i128 * self.tb_den as i128) / self.tb_num as i128).clamp(1, i64::MAX as i128)
            as i64
    }

    /// The frame displayed at `target_us` (container-relative target already converted to the
    /// absolute microsecond timeline: start_time + time). Targets must not decrease between calls.
    /// None when no frame can be decoded for it.
    ///
    /// Knowing that a frame is the answer takes decoding the one after it. A frame that is most
    /// likely the answer (the target falls within one frame duration after it) is first handed to
    /// `early`; when that returns true, the caller has taken what it needs from the picture and its
    /// pixels are released at once, before decoding on: the decoder then needs one picture less of
    /// memory. The frame returned may thus have an empty picture (same `serial` as the one handed
    /// to `early`). A frame handed early that recovery then replaces is simply never returned.
    pub(crate) fn frame_at(
        &mut self,
        target_us: i64,
        early: &mut dyn FnMut(&Decoded) -> bool,
    ) -> Option<&Decoded> {
        if self.dead {
            return None;
        }
        let ts = self.ts_floor(target_us);
        while self.target_pos < self.targets.len() && self.targets[self.target_pos] < ts {
            self.target_pos += 1;
        }
        // Same picture as the previous target? Not while a later one may still come (see
        // [`late`]): decoding on settles that.
        if let (Some(_), Some(n)) = (&self.cur, &self.next) {
            if !self.le(n.pts, target_us) && !self.ahead_shows(target_us) && !self.owes_before(ts) {
                return self.cur.as_ref();
            }
        }
        if self.drained {
            // Every remaining frame is already here; past the end the last frame stays on screen.
            if self.next.is_none() && self.cur.is_some() {
                return self.last_frame_for(target_us);
            }
        } else if self.should_seek(target_us) {
            // A demuxer that cannot seek forward is simply decoded forward.
            self.try_seek(self.ts_floor(target_us));
        }

        let mut retries = 0;
        loop {
            self.decode_until(target_us, early);
            if self.cur.is_some() {
                if self.restart_on_trouble() {
                    continue;
                }
                if self.skip_hid_the_answer(ts) {
                    continue;
                }
                if self.drained && self.next.is_none() {
                    return self.last_frame_for(target_us);
                }
                return self.cur.as_ref();
            }
            if self.next.is_some() {
                if self.from_start {
                    // The target precedes the first frame: show the first frame.
                    self.settle();
                    return self.next.as_ref();
                }
                // The seek landed after the target: go further back.
                retries += 1;
                let landed = self.next.as_ref().map_or(0, |n| n.pts);
                if retries > MAX_SEEK_RETRIES {
                    self.rewind();
                } else {
                    let back = match retries {
                        1 => self.seconds_in_ts(1),
                        2 => self.seconds_in_ts(5).max(self.gop),
                        _ => self.seconds_in_ts(20).max(self.gop.saturating_mul(3)),
                    };
                    let ts = landed.min(self.ts_floor(target_us)).saturating_sub(back);
                    self.seek_back(ts);
                }
                continue;
            }
            // Nothing decoded at all since the last (re)positioning.
            if self.from_start {
                self.dead = true;
                return None;
            }
            retries += 1;
            if retries > MAX_SEEK_RETRIES {
                self.rewind();
            } else {
                let ts = self
                    .ts_floor(target_us)
                    .saturating_sub(self.seconds_in_ts(5 * retries as i64));
                self.seek_back(ts);
            }
        }
    }

    /// The last frame of the stream for a target past it, unless the stream stopped well before
    /// the end its own header declares (a truncated or damaged file): a cell there has no frame.
    fn last_frame_for(&self, target_us: i64) -> Option<&Decoded> {
        let last = self.cur.as_ref()?;
        let tolerance = self.seconds_in_ts(1);
        let end = last
            .pts
            .saturating_add(self.frame_step)
            .saturating_add(tolerance);
        let truncated = self.declared_end.is_some_and(|declared| declared > end);
        if truncated && self.ts_floor(target_us) > end {
            return None;
        }
        Some(last)
    }

    /// Decodes forward until `next` holds a frame past the target or the stream ends; `cur` is
    /// then the last frame <= target seen since the last repositioning.
    fn decode_until(&mut self, target_us: i64, early: &mut dyn FnMut(&Decoded) -> bool) {
        // Early hand-overs per call: a stream whose frames come closer together than its declared
        // rate would otherwise have every frame near the target handed over.
        let mut early_left = 2;
        loop {
            if let Some(mut n) = self.next.take() {
                if self.cur.as_ref().is_some_and(|c| n.pts < c.pts) {
                    // The clock went back (a restarted program, a damaged timestamp): the frame
                    // shown at a time is the one with the greatest pts <= it, not this one.
                } else if self.le(n.pts, target_us) {
                    if early_left > 0 && !self.le(n.pts.saturating_add(self.frame_step), target_us)
                    {
                        early_left -= 1;
                        if n.print.is_none() && self.needs_print() {
                            n.print = recover::fingerprint(&n.frame);
                        }
                        if early(&n) {
                            n.frame = frame::Video::empty();
                        }
                    }
                    self.cur = Some(n);
                } else {
                    self.next = Some(n);
                    self.look_ahead(target_us);
                    return;
                }
            }
            match self.pull() {
                Some(f) if self.before_landing(f.pts) => {}
                Some(f) => self.next = Some(f),
                None => return,
            }
        }
    }

    /// A frame far before the packet a seek entered the stream at (more than a second or a GOP:
    /// more than any leading picture) belongs to another timeline (a clock restarted later in the
    /// file), not to the part the seek went to.
    fn before_landing(&self, pts: i64) -> bool {
        match self.entry {
            Some(entry) if !self.from_start => {
                let slack = self.seconds_in_ts(1).max(self.gop);
                pts < entry.saturating_sub(slack)
            }
            _ => false,
        }
    }
}
