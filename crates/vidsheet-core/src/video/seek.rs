//! The seek policy: decode forward or seek, to which keyframe, and repositioning the demuxer and
//! decoder (a seek, or a rewind to the very start).

use ff::ffi;
use ffmpeg_next as ff;

use super::VideoSource;
use crate::media;

impl VideoSource {
    /// Whether reaching the target by decoding forward would cost more than a seek.
    pub(super) fn should_seek(&self, target_us: i64) -> bool {
        let target = self.ts_floor(target_us);
        let pos = self.next.as_ref().or(self.cur.as_ref()).map(|d| d.pts);
        if self.forward_only && (pos.is_some() || self.from_start) {
            // Seeks here land on pictures that need earlier ones: keep decoding forward.
            return false;
        }
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
        self.note_reposition(self.from_start);
        self.decoder.flush();
        self.cur = None;
        self.next = None;
        self.ahead.clear();
        self.owed.clear();
        self.drained = false;
        self.sent_eof = false;
        self.stash = None;
        self.refs.reposition();
        self.last_pts = None;
        self.last_key_pts = None;
        self.clock = None;
        self.seen_pts.clear();
        self.skippable_at_reposition = self.skippable_sent;
        self.packet_failed = false;
        self.first_field = None;
        self.entry = None;
        // A proof by the decode that was under way needs that decode whole.
        self.verifying = None;
        // Trouble is watched from a seek until a target is answered; from the start there is no
        // seek artefact to watch for.
        let watch = !self.from_start;
        self.watch.begin(watch);
        self.log.watch(watch);
    }

    /// Seeks to the keyframe at or before `ts` (stream units). False when the demuxer cannot
    /// seek there (position and decoder state are then left as they were).
    pub(super) fn try_seek(&mut self, ts: i64) -> bool {
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
        self.from_start = false;
        self.landing = self.keyframe_index(ts).is_some_and(|k| k != i64::MIN);
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
        self.seeks += 1;
        self.landing = false;
        match media::open_input(&self.path, &self.container) {
            Ok(input) => {
                self.input = input;
                self.discard_other_streams();
                self.from_start = true;
                // A decode from the start is the sequential one: the decoder judges the pts
                // afresh, as it did there (see `stamp`). A flush keeps its counts of faulty
                // timestamps (FFmpeg 5.1), so what it saw later in the file is forgotten here.
                self.pts_faulty = false;
                // SAFETY: the decoder's own context, between calls into it.
                unsafe {
                    let raw = self.decoder.as_mut_ptr();
                    (*raw).pts_correction_num_faulty_pts = 0;
                    (*raw).pts_correction_num_faulty_dts = 0;
                }
                self.reset_decoding();
            }
            Err(_) => {
                self.from_start = true;
                self.reset_decoding();
                self.dead = true;
            }
        }
    }
}
