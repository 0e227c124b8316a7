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
//! The driver is [`VideoSource`]: a short composition of parts, each a struct in the file that
//! owns its logic and its fields (only that file changes them), and the loop below that
//! coordinates them:
//!
//! - [`facts`]: what the stream is, read at the open ([`facts::Facts`]);
//! - [`open`]: the stream's decoder, and the parts it starts with;
//! - [`pump`]: packets in, pictures out ([`pump::Feed`]);
//! - [`clock`]: how pictures and untimed packets are timed ([`clock::Clock`]);
//! - [`late`]: the pictures around the target, and those handed out late ([`late::Shown`]);
//! - [`seek`]: when to seek, where to, repositioning ([`seek::Place`]);
//! - [`cost`]: what reaching a run of targets costs (how the render splits the work);
//! - [`skip`]: pictures no target can show, decoded without output ([`skip::Skipping`]);
//! - [`refs`]: referenced H.264 pictures no decoded picture needs, not decoded at all
//!   ([`refs::RefSkip`], over the reference model of [`dpb`]);
//! - [`watch`]: trouble after a seek, and what of it reaches the chosen frame;
//! - [`recover`]: the recovery ladder, starting again earlier ([`recover::Recovering`]);
//! - [`proofs`]: open-GOP entries proven once per stream ([`proofs::Proving`]), the proof
//!   shared by the job's decoders across threads ([`open_gops`]);
//! - [`witness`]: a proof asked of the decoder of the part before ([`witness::Part`]);
//! - [`fingerprint`]: a digest of a picture, what recovery compares;
//! - [`reach`]: how far back a picture may reference (what recovery compares by);
//! - [`packets`]: the packets read on the way, kept for the zoom hints ([`packets::Packets`]);
//! - [`h264`], [`fields`]: what the engine reads of the bitstream itself;
//! - [`timestamps`]: the untimed-packet clock and the label clock (both engines' rules).

mod clock;
mod cost;
mod dpb;
mod facts;
mod fields;
mod fingerprint;
mod h264;
mod late;
mod layout;
mod open;
mod open_gops;
mod packets;
mod proofs;
mod pump;
mod reach;
mod recover;
mod refs;
mod seek;
mod skip;
mod thumbs;
pub(crate) use thumbs::MAX_PICTURES;
pub(crate) mod timestamps;
mod watch;
mod witness;
#[cfg(test)]
mod witness_tests;

use ff::format::context::Input;
use ff::frame;
use ffmpeg_next as ff;

use crate::decode_log::DecodeLog;

pub(crate) use cost::DecodeRun;
pub(crate) use open_gops::{OpenGops, Verdict};

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

/// One stream's decoder and the parts that drive it, each owning its state: the loop below
/// coordinates them.
pub(crate) struct VideoSource {
    facts: facts::Facts,
    input: Input,
    decoder: ff::decoder::Video,
    /// The decoder's error log. Declared after `decoder`, so dropped after it: frame threads may
    /// log until the decoder is freed.
    log: DecodeLog,
    /// Decoder threads (a failure reported by the decoder belongs to a packet this many back).
    threads: usize,
    /// Packets in, pictures out ([`pump`]).
    feed: pump::Feed,
    /// The pictures around the current target ([`late`]).
    shown: late::Shown,
    /// How pictures and untimed packets are timed ([`clock`]).
    clock: clock::Clock,
    /// Where decoding stands in the stream ([`seek`]).
    place: seek::Place,
    /// Pictures no target can show ([`skip`]).
    skip: skip::Skipping,
    /// Referenced pictures no decoded picture needs ([`refs`]): the model and packets read ahead.
    refs: refs::RefSkip,
    /// What the decoder reported since the last seek, until a target is answered ([`watch`]).
    watch: watch::Watch,
    /// Restarts further back for the current target ([`recover`]).
    recovery: recover::Recovering,
    /// The stream's open-GOP proof, shared with the job's other decoders ([`proofs`]).
    proving: proofs::Proving,
    /// The part of the job this decoder decodes ([`witness`]).
    part: witness::Part,
    /// Packets read, for the zoom hints and pictures' decode times ([`packets`]).
    packets: packets::Packets,
}

impl VideoSource {
    /// What the stream is.
    pub(crate) fn facts(&self) -> &facts::Facts {
        &self.facts
    }

    /// Pictures decoded so far.
    pub(crate) fn decoded_frames(&self) -> u64 {
        self.feed.decoded()
    }

    /// An allocation failed while decoding (the worker's memory limit, DESIGN §5a): the source
    /// gives no more pictures, and the job fails rather than show the cells it could not decode.
    pub(crate) fn out_of_memory(&self) -> bool {
        self.feed.out_of_memory()
    }

    fn stream(&self) -> *mut ff::ffi::AVStream {
        unsafe { *(*self.input.as_ptr()).streams.add(self.facts.index()) }
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
        if self.place.dead() {
            return None;
        }
        let ts = self.facts.ts_floor(target_us);
        self.skip.pass_targets_before(ts);
        // Same picture as the previous target? Not while a later one may still come (see
        // [`late`]): decoding on settles that.
        if let (Some(_), Some(n)) = (self.shown.cur(), self.shown.next()) {
            if !self.facts.le(n.pts, target_us)
                && !self.shown.ahead_shows(&self.facts, target_us)
                && !self.shown.owes_before(ts)
            {
                return self.shown.cur();
            }
        }
        if self.feed.drained() {
            // Every remaining frame is already here; past the end the last frame stays on screen.
            if self.shown.next().is_none() && self.shown.cur().is_some() {
                return self.last_frame_for(target_us);
            }
        } else if self.should_seek(target_us) {
            // A demuxer that cannot seek forward is simply decoded forward.
            self.try_seek(self.facts.ts_floor(target_us));
        }

        let mut retries = 0;
        loop {
            self.decode_until(target_us, early);
            if self.shown.cur().is_some() {
                if self.restart_on_trouble() {
                    continue;
                }
                if self.skip_hid_the_answer(ts) {
                    continue;
                }
                if self.feed.drained() && self.shown.next().is_none() {
                    return self.last_frame_for(target_us);
                }
                return self.shown.cur();
            }
            if self.shown.next().is_some() {
                if self.place.at_file_start() {
                    // The target precedes the first frame: show the first frame.
                    self.settle();
                    return self.shown.next();
                }
                // The seek landed after the target: go further back.
                retries += 1;
                let landed = self.shown.next().map_or(0, |n| n.pts);
                if retries > MAX_SEEK_RETRIES {
                    self.rewind();
                } else {
                    let back = match retries {
                        1 => self.facts.seconds_in_ts(1),
                        2 => self.facts.seconds_in_ts(5).max(self.clock.gop()),
                        _ => self
                            .facts
                            .seconds_in_ts(20)
                            .max(self.clock.gop().saturating_mul(3)),
                    };
                    let ts = landed
                        .min(self.facts.ts_floor(target_us))
                        .saturating_sub(back);
                    self.seek_back(ts);
                }
                continue;
            }
            // Nothing decoded at all since the last (re)positioning.
            if self.place.at_file_start() {
                self.place.give_up();
                return None;
            }
            retries += 1;
            if retries > MAX_SEEK_RETRIES {
                self.rewind();
            } else {
                let ts = self
                    .facts
                    .ts_floor(target_us)
                    .saturating_sub(self.facts.seconds_in_ts(5 * retries as i64));
                self.seek_back(ts);
            }
        }
    }

    /// The last frame of the stream for a target past it, unless the stream stopped well before
    /// the end its own header declares (a truncated or damaged file): a cell there has no frame.
    fn last_frame_for(&self, target_us: i64) -> Option<&Decoded> {
        let last = self.shown.cur()?;
        let tolerance = self.facts.seconds_in_ts(1);
        let end = last
            .pts
            .saturating_add(self.facts.frame_step())
            .saturating_add(tolerance);
        let truncated = self
            .facts
            .declared_end()
            .is_some_and(|declared| declared > end);
        if truncated && self.facts.ts_floor(target_us) > end {
            return None;
        }
        Some(last)
    }
}
