//! What reaching the targets costs, in decoded pictures: lets the render split the cells over
//! parallel decoders where that pays (see render.rs).

use super::VideoSource;

/// Consecutive targets reached by one forward decode (see [`VideoSource::decode_runs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeRun {
    /// End of the run (exclusive index into the targets).
    pub end: usize,
    /// Estimated pictures decoded for it.
    pub pictures: u64,
}

impl VideoSource {
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
            let first = self.facts.ts_floor(targets_us[i]);
            let key = self.keyframe_index(first);
            let mut last = first;
            let mut j = i + 1;
            while j < targets_us.len() {
                let t = self.facts.ts_floor(targets_us[j]);
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
            let pictures =
                last.saturating_sub(from).clamp(0, MAX_COST) / self.facts.frame_step() + 1;
            runs.push(DecodeRun {
                end: j,
                pictures: pictures as u64,
            });
            i = j;
        }
        runs
    }

    /// Distance (stream units) up to which decoding forward is taken as cheaper than a seek when
    /// there is no index to tell where the keyframes are.
    pub(super) fn threshold(&self) -> i64 {
        self.facts.seconds_in_ts(2).max(self.clock.gop())
    }
}
