//! Frame-exact access: the frame displayed at a time, for targets asked in ascending order.
//!
//! The frame for target t is the last frame whose presentation time is <= t (the first frame when
//! t precedes it, the last frame when t follows it). The source decodes forward from where it is
//! while the target lies in the current GOP, seeks to the keyframe at or before the target
//! otherwise (the rest of the current GOP would be decoded for nothing: the target's keyframe
//! needs no earlier picture), and seeks further back when a seek lands past the target. Without an
//! index it decodes forward up to a threshold. Every loop is bounded so a corrupt file ends in "no
//! frame", never in a hang.

use ff::ffi;
use ff::format::context::Input;
use ff::util::error::EAGAIN;
use ff::{frame, Packet};
use ffmpeg_next as ff;
use std::collections::BTreeSet;
use std::ops::Bound::{Excluded, Unbounded};

use crate::error::{Error, Result};
use crate::media::{self, Orientation};

/// Packets of the video stream sent without any frame coming out before the decoder is declared
/// stuck (corrupt data).
const MAX_IDLE_PACKETS: u32 = 4096;
/// Consecutive demuxer errors (other than end of file) tolerated before treating it as the end.
const MAX_READ_ERRORS: u32 = 64;
/// Seeks further back tried when a seek lands past the target, before decoding from the start.
const MAX_SEEK_RETRIES: u32 = 3;

/// A decoded picture and its presentation timestamp (stream time base).
pub(crate) struct Decoded {
    /// The picture; empty once the caller took what it needed early (see [`VideoSource::frame_at`]).
    pub frame: frame::Video,
    pub pts: i64,
    /// Distinguishes decoded pictures (same serial = same picture).
    pub serial: u64,
}

/// Consecutive targets reached by one forward decode (see [`VideoSource::decode_runs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeRun {
    /// End of the run (exclusive index into the targets).
    pub end: usize,
    /// Estimated pictures decoded for it.
    pub pictures: u64,
}

pub(crate) struct VideoSource {
    path: String,
    input: Input,
    index: usize,
    decoder: ff::decoder::Video,
    /// Stream time base.
    tb_num: i64,
    tb_den: i64,
    pub orientation: Orientation,
    /// Container start time in microseconds (0 when unknown).
    pub start_us: i64,
    /// Bytes of one decoded picture (an estimate when the pixel format is not known yet).
    pub picture_bytes: u64,
    /// Picture duration guess in stream units (for frames without timestamps).
    frame_step: i64,
    /// Where the stream header says the stream ends (stream units), when it says so.
    declared_end: Option<i64>,

    /// Last decoded frame with pts <= the current target.
    cur: Option<Decoded>,
    /// First decoded frame with pts > the current target (not yet consumed).
    next: Option<Decoded>,
    /// Decoding started at the beginning of the file (not after a seek).
    from_start: bool,
    /// The decoder has returned end of stream.
    drained: bool,
    sent_eof: bool,
    stash: Option<Packet>,
    serial: u64,
    last_pts: Option<i64>,
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
    /// Skip non-reference frames that no pending target can show (on by default).
    pub skip_nonref: bool,
    /// Packets sent with AVDISCARD_NONREF.
    pub skippable_sent: u64,
}

/// Bytes of one picture of the stream: its size times the bits per pixel of its format (24 when
/// the format is unknown).
unsafe fn picture_bytes(par: *const ffi::AVCodecParameters) -> u64 {
    if par.is_null() {
        return 0;
    }
    let (w, h) = ((*par).width.max(0) as u64, (*par).height.max(0) as u64);
    let nb = ffi::AVPixelFormat::AV_PIX_FMT_NB as i32;
    let bits = if (0..nb).contains(&(*par).format) {
        // SAFETY: AVPixelFormat is a C enum with contiguous values 0..AV_PIX_FMT_NB.
        let format = std::mem::transmute::<i32, ffi::AVPixelFormat>((*par).format);
        let desc = ffi::av_pix_fmt_desc_get(format);
        if desc.is_null() {
            24
        } else {
            ffi::av_get_padded_bits_per_pixel(desc).max(8) as u64
        }
    } else {
        24
    };
    w.saturating_mul(h).saturating_mul(bits) / 8
}

fn is_eagain(e: &ff::Error) -> bool {
    matches!(e, ff::Error::Other { errno } if *errno == EAGAIN)
}

impl VideoSource {
    /// Opens the video stream `stream` of `path` with a decoder using up to `threads` threads
    /// (frame and slice threading when more than one).
    pub(crate) fn open(path: &str, stream: u32, threads: usize) -> Result<VideoSource> {
        let input = media::open_input(path)?;
        let st = media::check_video_stream(&input, stream)?;
        let index = stream as usize;
        let (tb, orientation, frame_rate) = unsafe {
            (
                (*st).time_base,
                Orientation::of_stream(st),
                (*st).avg_frame_rate,
            )
        };
        if tb.num <= 0 || tb.den <= 0 {
            return Err(Error::unreadable("the video stream has no time base"));
        }
        let params = input
            .stream(index)
            .map(|s| s.parameters())
            .ok_or_else(|| Error::unreadable("the video stream vanished"))?;
        let mut ctx = ff::codec::Context::from_parameters(params).map_err(|e| {
            Error::unreadable(format!(
                "the video stream cannot be decoded ({})",
                media::av_error(e.into())
            ))
        })?;
        unsafe {
            let raw = ctx.as_mut_ptr();
            (*raw).pkt_timebase = tb;
            (*raw).thread_count = threads.clamp(1, 16) as i32;
            (*raw).thread_type = ffi::FF_THREAD_FRAME | ffi::FF_THREAD_SLICE;
        }
        let decoder = ctx.decoder().video().map_err(|e| {
            Error::unreadable(format!(
                "the video decoder failed to start ({})",
                media::av_error(e.into())
            ))
        })?;
        let frame_step = if frame_rate.num > 0 && frame_rate.den > 0 {
            ((tb.den as i64 * frame_rate.den as i64) / (tb.num as i64 * frame_rate.num as i64))
                .max(1)
        } else {
            1
        };
        let start_us = media::start_us(&input);
        let picture_bytes = unsafe { picture_bytes((*st).codecpar) };
        let declared_end = unsafe {
            let (start, duration) = ((*st).start_time, (*st).duration);
            (duration != ffi::AV_NOPTS_VALUE && duration > 0).then(|| {
                let start = if start == ffi::AV_NOPTS_VALUE {
                    0
                } else {
                    start
                };
                start.saturating_add(duration)
            })
        };
        let mut src = VideoSource {
            path: path.to_string(),
            input,
            index,
            decoder,
            tb_num: tb.num as i64,
            tb_den: tb.den as i64,
            orientation,
            start_us,
            picture_bytes,
            frame_step,
            declared_end,
            cur: None,
            next: None,
            from_start: true,
            drained: false,
            sent_eof: false,
            stash: None,
            serial: 0,
            last_pts: None,
            first_pts: None,
            gop: 0,
            last_key_pts: None,
            dead: false,
            seeks: 0,
            targets: Vec::new(),
            target_pos: 0,
            seen_pts: BTreeSet::new(),
            skip_nonref: true,
            skippable_sent: 0,
        };
        src.discard_other_streams();
        Ok(src)
    }

    fn discard_other_streams(&mut self) {
        unsafe {
            let ctx = self.input.as_mut_ptr();
            for i in 0..(*ctx).nb_streams as usize {
                let st = *(*ctx).streams.add(i);
                if !st.is_null() && i != self.index {
                    (*st).discard = ffi::AVDiscard::AVDISCARD_ALL;
                }
            }
        }
    }

    /// Announces every target of the job (absolute microseconds, any order) so frames no target
    /// can show may be skipped while decoding forward.
    pub(crate) fn set_targets(&mut self, targets_us: &[i64]) {
        let mut t: Vec<i64> = targets_us.iter().map(|&us| self.ts_floor(us)).collect();
        t.sort_unstable();
        self.targets = t;
        self.target_pos = 0;
    }

    /// Splits ascending targets (absolute microseconds) into runs that one forward decode serves
    /// (how [`Self::frame_at`] will reach them): targets sharing the keyframe at or before them in
    /// the demuxer's index or, where there is no index, targets less than the seek threshold
    /// apart. Each run: its end (exclusive index into `targets_us`) and the pictures decoding it
    /// costs, estimated from its keyframe (or, without an index, from the seek threshold before
    /// its first target) to its last target.
    pub(crate) fn decode_runs(&self, targets_us: &[i64]) -> Vec<DecodeRun> {
        const MAX_COST: i64 = 1 << 40;
        let mut runs = Vec::new();
        let mut i = 0;
        while i < targets_us.len() {
            let first = self.ts_floor(targets_us[i]);
            let key = self.keyframe_index(first);
            let mut last = first;
            let mut j = i + 1;
            while j < targets_us.len() {
                let t = self.ts_floor(targets_us[j]);
                let same = match key {
                    Some(k) => self.keyframe_index(t) == Some(k),
                    None => t.saturating_sub(last) <= self.threshold(),
                };
                if !same {
                    break;
                }
                last = t;
                j += 1;
            }
            let from = match key {
                Some(k) if k != i64::MIN => k.min(first),
                Some(_) => first,
                None => first.saturating_sub(self.threshold()),
            };
            let pictures = last.saturating_sub(from).clamp(0, MAX_COST) / self.frame_step + 1;
            runs.push(DecodeRun {
                end: j,
                pictures: pictures as u64,
            });
            i = j;
        }
        runs
    }

    /// Whether the frame in `packet` may be decoded with AVDISCARD_NONREF: it is not a keyframe,
    /// and a frame already known to come later (a packet read with a larger pts) is still at or
    /// before the first pending target at or after it, so no target can pick this one.
    fn may_skip(&self, packet: &Packet) -> bool {
        if !self.skip_nonref || self.targets.is_empty() || packet.is_key() {
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

    /// Pictures decoded so far.
    pub(crate) fn decoded_frames(&self) -> u64 {
        self.serial
    }

    fn stream(&self) -> *mut ffi::AVStream {
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
    /// to `early`).
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
        // Same picture as the previous target?
        if let (Some(_), Some(n)) = (&self.cur, &self.next) {
            if !self.le(n.pts, target_us) {
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
                if self.drained && self.next.is_none() {
                    return self.last_frame_for(target_us);
                }
                return self.cur.as_ref();
            }
            if self.next.is_some() {
                if self.from_start {
                    // The target precedes the first frame: show the first frame.
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
                if self.le(n.pts, target_us) {
                    if early_left > 0 && !self.le(n.pts.saturating_add(self.frame_step), target_us)
                    {
                        early_left -= 1;
                        if early(&n) {
                            n.frame = frame::Video::empty();
                        }
                    }
                    self.cur = Some(n);
                } else {
                    self.next = Some(n);
                    return;
                }
            }
            match self.next_frame() {
                Some(f) => self.next = Some(f),
                None => return,
            }
        }
    }

    /// Whether reaching the target by decoding forward would cost more than a seek.
    fn should_seek(&self, target_us: i64) -> bool {
        let target = self.ts_floor(target_us);
        let pos = self.next.as_ref().or(self.cur.as_ref()).map(|d| d.pts);
        let pos = match pos {
            Some(p) => p,
            None if self.from_start => {
                // Fresh at the start of the file: stay unless the index puts the target beyond
                // the first GOP, or (no index) beyond the threshold.
                match self.keyframe_index(target) {
                    Some(kf_target) => {
                        return self
                            .index_keyframe_after(i64::MIN + 1)
                            .is_some_and(|first| kf_target > first);
                    }
                    None => {
                        let start = self.first_pts.unwrap_or(0);
                        return target.saturating_sub(start) > self.threshold();
                    }
                }
            }
            None => return true,
        };
        if target <= pos {
            return false;
        }
        match self.keyframe_index(target) {
            Some(kf_target) => match self.index_keyframe_after(pos.saturating_add(1)) {
                // Target in the current GOP: keep decoding; in a later one: seek to its keyframe.
                Some(next_kf) => kf_target >= next_kf,
                None => false,
            },
            None => target - pos > self.threshold(),
        }
    }

    fn threshold(&self) -> i64 {
        self.seconds_in_ts(2).max(self.gop)
    }

    /// Timestamp of the keyframe at or before `ts` (i64::MIN when `ts` precedes the first one)
    /// when the demuxer's index covers `ts`; None when there is no usable index there.
    fn keyframe_index(&self, ts: i64) -> Option<i64> {
        unsafe {
            let st = self.stream();
            let n = ffi::avformat_index_get_entries_count(st);
            if n <= 0 {
                return None;
            }
            let last = ffi::avformat_index_get_entry(st, n - 1);
            if last.is_null() || (*last).timestamp < ts.saturating_sub(self.threshold()) {
                // The index ends well before the target (built while reading, or partial).
                return None;
            }
            let e = ffi::avformat_index_get_entry_from_timestamp(st, ts, ffi::AVSEEK_FLAG_BACKWARD);
            if e.is_null() {
                return Some(i64::MIN);
            }
            Some((*e).timestamp)
        }
    }

    fn index_keyframe_after(&self, ts: i64) -> Option<i64> {
        unsafe {
            let e = ffi::avformat_index_get_entry_from_timestamp(self.stream(), ts, 0);
            (!e.is_null()).then(|| (*e).timestamp)
        }
    }

    fn reset_decoding(&mut self) {
        self.decoder.flush();
        self.cur = None;
        self.next = None;
        self.drained = false;
        self.sent_eof = false;
        self.stash = None;
        self.last_pts = None;
        self.last_key_pts = None;
        self.seen_pts.clear();
    }

    /// Seeks to the keyframe at or before `ts` (stream units). False when the demuxer cannot
    /// seek there (position and decoder state are then left as they were).
    fn try_seek(&mut self, ts: i64) -> bool {
        self.seeks += 1;
        let ctx = unsafe { self.input.as_mut_ptr() };
        let stream = self.index as i32;
        let mut rc = unsafe { ffi::av_seek_frame(ctx, stream, ts, ffi::AVSEEK_FLAG_BACKWARD) };
        if rc < 0 {
            rc = unsafe { ffi::avformat_seek_file(ctx, stream, i64::MIN, ts, ts, 0) };
        }
        if rc < 0 {
            return false;
        }
        self.reset_decoding();
        self.from_start = false;
        true
    }

    /// Seeks back to (at or before) `ts`; decodes from the start when the demuxer cannot.
    fn seek_back(&mut self, ts: i64) {
        if !self.try_seek(ts) {
            self.rewind();
        }
    }

    /// Back to the very beginning: reopen the file (works for every demuxer, seekable or not).
    fn rewind(&mut self) {
        self.seeks += 1;
        match media::open_input(&self.path) {
            Ok(input) => {
                self.input = input;
                self.discard_other_streams();
                self.reset_decoding();
                self.from_start = true;
            }
            Err(_) => {
                self.reset_decoding();
                self.dead = true;
            }
        }
    }

    /// The next decoded picture in presentation order, or None at the end of the stream (or when
    /// the decoder makes no progress).
    fn next_frame(&mut self) -> Option<Decoded> {
        if self.drained || self.dead {
            return None;
        }
        let mut idle = 0u32;
        let mut read_errors = 0u32;
        let mut decode_errors = 0u32;
        loop {
            let mut f = frame::Video::empty();
            match self.decoder.receive_frame(&mut f) {
                Ok(()) => return Some(self.stamp(f)),
                Err(ff::Error::Eof) => {
                    self.drained = true;
                    return None;
                }
                Err(e) if is_eagain(&e) => {}
                Err(_) => {
                    decode_errors += 1;
                    if decode_errors > MAX_IDLE_PACKETS {
                        self.drained = true;
                        return None;
                    }
                    continue;
                }
            }
            if self.sent_eof {
                // EAGAIN after end of stream should not happen; do not spin.
                self.drained = true;
                return None;
            }
            // Feed one packet of our stream.
            loop {
                if let Some(p) = self.stash.take() {
                    idle += 1;
                    if idle > MAX_IDLE_PACKETS {
                        self.drained = true;
                        return None;
                    }
                    unsafe {
                        (*self.decoder.as_mut_ptr()).skip_frame = ffi::AVDiscard::AVDISCARD_DEFAULT
                    };
                    match self.decoder.send_packet(&p) {
                        Err(e) if is_eagain(&e) => {
                            self.stash = Some(p);
                        }
                        _ => {}
                    }
                    break;
                }
                let mut packet = Packet::empty();
                match packet.read(&mut self.input) {
                    Ok(()) => {
                        read_errors = 0;
                        if packet.stream() != self.index {
                            continue;
                        }
                        idle += 1;
                        if idle > MAX_IDLE_PACKETS {
                            self.drained = true;
                            return None;
                        }
                        let skip = self.may_skip(&packet);
                        if let Some(p) = packet.pts() {
                            self.seen_pts.insert(p);
                            if self.seen_pts.len() > 1024 {
                                let floor = self.last_pts.unwrap_or(i64::MIN);
                                self.seen_pts.retain(|&v| v > floor);
                            }
                        }
                        self.skippable_sent += skip as u64;
                        unsafe {
                            (*self.decoder.as_mut_ptr()).skip_frame = if skip {
                                ffi::AVDiscard::AVDISCARD_NONREF
                            } else {
                                ffi::AVDiscard::AVDISCARD_DEFAULT
                            };
                        }
                        match self.decoder.send_packet(&packet) {
                            Ok(()) => {}
                            Err(e) if is_eagain(&e) => {
                                self.stash = Some(packet);
                            }
                            Err(_) => continue, // corrupt packet: skip it
                        }
                        break;
                    }
                    Err(ff::Error::Eof) => {
                        let _ = self.decoder.send_eof();
                        self.sent_eof = true;
                        break;
                    }
                    Err(e) if is_eagain(&e) => {
                        read_errors += 1;
                        if read_errors > MAX_READ_ERRORS {
                            let _ = self.decoder.send_eof();
                            self.sent_eof = true;
                            break;
                        }
                    }
                    Err(_) => {
                        read_errors += 1;
                        if read_errors > MAX_READ_ERRORS {
                            let _ = self.decoder.send_eof();
                            self.sent_eof = true;
                            break;
                        }
                    }
                }
            }
        }
    }

    fn stamp(&mut self, f: frame::Video) -> Decoded {
        let pts = f
            .timestamp()
            .or_else(|| f.pts())
            .or_else(|| self.last_pts.map(|p| p.saturating_add(self.frame_step)))
            .unwrap_or(0);
        if self.from_start && self.first_pts.is_none() {
            self.first_pts = Some(pts);
        }
        if f.is_key() {
            if let Some(k) = self.last_key_pts {
                if pts > k {
                    self.gop = self.gop.max(pts - k);
                }
            }
            self.last_key_pts = Some(pts);
        }
        self.last_pts = Some(pts);
        self.serial += 1;
        // A frame at or before the file's first pts means this position is the start.
        if !self.from_start && self.cur.is_none() && self.next.is_none() {
            if let Some(first) = self.first_pts {
                if pts <= first {
                    self.from_start = true;
                }
            }
        }
        Decoded {
            frame: f,
            pts,
            serial: self.serial,
        }
    }
}
