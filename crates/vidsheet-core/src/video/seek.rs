//! The seek policy: decode forward or seek, to which keyframe, and repositioning the demuxer and
//! decoder (a seek, or a rewind to the very start).

use ff::ffi;
use ffmpeg_next as ff;

use super::VideoSource;
use crate::media;

/// Where decoding stands in the stream: from its start or after a seek, and where it entered.
pub(super) struct Place {
    /// Decoding started at the beginning of the file (not after a seek).
    from_start: bool,
    /// Where decoding entered the stream since the last repositioning: the first packet's dts
    /// (else pts).
    entry: Option<i64>,
    /// The next packet sent is the first since a seek to a keyframe of the demuxer's index, so it
    /// is that keyframe, whatever its flags say.
    landing: bool,
    /// Seeks and rewinds issued.
    seeks: u64,
    /// Seeking in this stream gave decoder trouble that only decoding from the start cured: later
    /// targets are reached by decoding forward.
    forward_only: bool,
    /// Decoding from the start produced nothing: the stream is undecodable.
    dead: bool,
}

impl Place {
    pub(super) fn at_start() -> Place {
        Place {
            from_start: true,
            entry: None,
            landing: false,
            seeks: 0,
            forward_only: false,
            dead: false,
        }
    }

    pub(super) fn at_file_start(&self) -> bool {
        self.from_start
    }

    /// A picture at or before the file's first one came out: this position is the start.
    pub(super) fn found_start(&mut self) {
        self.from_start = true;
    }

    pub(super) fn entry(&self) -> Option<i64> {
        self.entry
    }

    /// A packet (decode time, else presentation time `ts`) was sent: the entry, if the first.
    pub(super) fn entered(&mut self, ts: Option<i64>) {
        if self.entry.is_none() {
            self.entry = ts;
        }
    }

    /// Whether the packet being sent is the index keyframe a seek landed on (asked once).
    pub(super) fn take_landing(&mut self) -> bool {
        std::mem::take(&mut self.landing)
    }

    pub(super) fn dead(&self) -> bool {
        self.dead
    }

    /// Decoding from the start produced nothing.
    pub(super) fn give_up(&mut self) {
        self.dead = true;
    }

    /// Later targets are reached by decoding forward.
    pub(super) fn distrust_seeking(&mut self) {
        self.forward_only = true;
    }
}

impl VideoSource {
    /// Seeks and rewinds issued.
    pub(crate) fn seeks(&self) -> u64 {
        self.place.seeks
    }

    /// Whether reaching the target by decoding forward would cost more than a seek.
    pub(super) fn should_seek(&self, target_us: i64) -> bool {
        let target = self.facts.ts_floor(target_us);
        let pos = self.shown.position();
        if self.place.forward_only && (pos.is_some() || self.place.from_start) {
            // Seeks here land on pictures that need earlier ones: keep decoding forward.
            return false;
        }
        let pos = match pos {
            Some(p) => p,
            None if self.place.from_start => {
                // Fresh at the start of the file: stay unless the index puts the target beyond
                // the first GOP, or (no index) beyond the threshold.
                match self.keyframe_index(target) {
                    Some(kf_target) => {
                        return self
                            .index_keyframe_after(i64::MIN + 1)
                            .is_some_and(|first| kf_target > first);
                    }
                    None => {
                        let start = self.clock.first_pts().unwrap_or(0);
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

    /// Timestamp of the keyframe at or before `ts` (i64::MIN when `ts` precedes the first one)
    /// when the demuxer's index covers `ts`; None when there is no usable index there.
    pub(super) fn keyframe_index(&self, ts: i64) -> Option<i64> {
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

    pub(super) fn index_keyframe_after(&self, ts: i64) -> Option<i64> {
        unsafe {
            let e = ffi::avformat_index_get_entry_from_timestamp(self.stream(), ts, 0);
            (!e.is_null()).then(|| (*e).timestamp)
        }
    }

    /// The index keyframe `back` keyframes before the one at `ts`; None when the index holds no
    /// keyframe that early.
    pub(super) fn index_keyframe_back(&self, ts: i64, back: u32) -> Option<i64> {
        let mut at = ts;
        for _ in 0..back {
            let e = unsafe {
                ffi::avformat_index_get_entry_from_timestamp(
                    self.stream(),
                    at.checked_sub(1)?,
                    ffi::AVSEEK_FLAG_BACKWARD,
                )
            };
            if e.is_null() {
                return None;
            }
            at = unsafe { (*e).timestamp };
        }
        Some(at)
    }

    /// What to seek to for decoding to start at the index keyframe `k`: halfway to the next
    /// keyframe of the index. A seek takes a presentation time, while some demuxers index decode
    /// times: MP4's subtracts the stream's reordering shift from the seek time first, so seeking
    /// to `k` itself lands a whole GOP early when frames are reordered (measured on x264's
    /// B-frame streams: every restart decoded one GOP more than it meant to). Halfway lands on
    /// `k` whichever time the index holds, as long as that shift is less than half a GOP.
    pub(super) fn index_seek_ts(&self, k: i64) -> i64 {
        self.index_keyframe_after(k.saturating_add(1))
            .filter(|&next| next > k)
            .map_or(k, |next| k + (next - k) / 2)
    }

    fn reset_decoding(&mut self) {
        self.packets.reposition(self.place.from_start);
        self.decoder.flush();
        self.shown.clear();
        self.feed.reposition();
        self.refs.reposition();
        self.clock.reposition();
        self.skip.reposition();
        self.place.entry = None;
        // A proof by the decode that was under way needs that decode whole.
        self.proving.stop_verifying();
        // Trouble is watched from a seek until a target is answered; from the start there is no
        // seek artefact to watch for.
        let watch = !self.place.from_start;
        self.watch.begin(watch);
        self.log.watch(watch);
    }

    /// Seeks to the keyframe at or before `ts` (stream units). False when the demuxer cannot
    /// seek there (position and decoder state are then left as they were).
    pub(super) fn try_seek(&mut self, ts: i64) -> bool {
        self.place.seeks += 1;
        let ctx = unsafe { self.input.as_mut_ptr() };
        let stream = self.facts.index() as i32;
        let mut rc = unsafe { ffi::av_seek_frame(ctx, stream, ts, ffi::AVSEEK_FLAG_BACKWARD) };
        if rc < 0 {
            rc = unsafe { ffi::avformat_seek_file(ctx, stream, i64::MIN, ts, ts, 0) };
        }
        if rc < 0 {
            return false;
        }
        self.place.from_start = false;
        self.place.landing = self.keyframe_index(ts).is_some_and(|k| k != i64::MIN);
        self.reset_decoding();
        true
    }

    /// Seeks back to (at or before) `ts`; decodes from the start when the demuxer cannot.
    pub(super) fn seek_back(&mut self, ts: i64) {
        if !self.try_seek(ts) {
            self.rewind();
        }
    }

    /// Back to the very beginning: reopen the file (works for every demuxer, seekable or not).
    pub(super) fn rewind(&mut self) {
        self.place.seeks += 1;
        self.place.landing = false;
        match media::open_input(
            self.facts.path(),
            self.facts.container(),
            media::Decoders::Streams(&[self.facts.index()]),
        ) {
            Ok(input) => {
                self.input = input;
                self.discard_other_streams();
                self.place.from_start = true;
                // A decode from the start is the sequential one: the decoder judges the pts
                // afresh, as it did there (see `stamp`). A flush keeps its counts of faulty
                // timestamps (FFmpeg 5.1), so what it saw later in the file is forgotten here.
                self.clock.forget_faulty();
                // SAFETY: the decoder's own context, between calls into it.
                unsafe {
                    let raw = self.decoder.as_mut_ptr();
                    (*raw).pts_correction_num_faulty_pts = 0;
                    (*raw).pts_correction_num_faulty_dts = 0;
                }
                self.reset_decoding();
            }
            Err(_) => {
                self.place.from_start = true;
                self.reset_decoding();
                self.place.dead = true;
            }
        }
    }

    /// A frame far before the packet a seek entered the stream at (more than a second or a GOP:
    /// more than any leading picture) belongs to another timeline (a clock restarted later in the
    /// file), not to the part the seek went to.
    pub(super) fn before_landing(&self, pts: i64) -> bool {
        match self.place.entry {
            Some(entry) if !self.place.from_start => {
                let slack = self.facts.seconds_in_ts(1).max(self.clock.gop());
                pts < entry.saturating_sub(slack)
            }
            _ => false,
        }
    }
}
