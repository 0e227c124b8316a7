//! The reference state of an H.264 decoder, modelled as FFmpeg 5.1 keeps it (h264_refs.c: P lists
//! in the order references were stored, B lists by order count with its `add_sorted`, the list1
//! swap, modifications, truncation; sliding-window marking, "mark unused" operations, the early
//! removal of gap placeholders; h264_slice.c's `frame_num` gap filling): what [`super::refs`]
//! compares a full decode with a decode that skips referenced pictures by.
//!
//! The model starts at an IDR picture, or at an intra picture right after the decoder is flushed
//! (an open GOP's recovery point, where a seek enters): FFmpeg then fills the `frame_num` gap
//! from its flushed state with at most `max_num_ref_frames` placeholders, the first grey, of order
//! counts it does not set (B lists are not judged while one is held), and the leading pictures'
//! memory management may name pictures from before the keyframe in a full decode too.

use super::h264::{self, Picture, SliceKind};

/// One short-term reference the decoder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) frame_num: u32,
    pub(super) poc: i64,
    /// The picture whose pixels it holds (its own, or for a placeholder the one it copies).
    pub(super) pixels: u64,
    /// A placeholder the decoder made for a `frame_num` gap.
    pub(super) gap: bool,
    /// A placeholder marked for early removal (the stream does not allow gaps).
    pub(super) invalid_gap: bool,
    /// It was decoded with a placeholder (or such a picture) in its lists: the motion it stores
    /// names references other than the full decode's.
    pub(super) tainted: bool,
    /// Its order count is not known: a placeholder the decoder made right after a flush, which
    /// has no picture to copy (grey, with whatever count its buffer held) or copies one such.
    pub(super) poc_unknown: bool,
}

/// The pixels of the placeholders the decoder paints grey (no reference to copy after a flush).
pub(super) const GREY: u64 = u64::MAX;

/// The reference state of an H.264 decoder between pictures, as FFmpeg keeps it.
#[derive(Debug, Clone)]
pub(super) struct Dpb {
    /// Short-term references, newest first (FFmpeg's `short_ref`).
    pub(super) short: Vec<Entry>,
    /// -1 after a flush (FFmpeg's `ff_h264_flush_change`), until a picture is decoded.
    pub(super) prev_frame_num: i64,
    pub(super) prev_poc_msb: i64,
    pub(super) prev_poc_lsb: i64,
    /// Decoding entered at an intra picture after a flush, not at an IDR: the memory management
    /// of its leading pictures may name pictures from before it, which the decoder never held,
    /// in a full decode too.
    pub(super) entered: bool,
}

/// What a decoded picture predicts from: for each slice, the pixels at each index of its lists
/// (None: a missing reference), and whether a placeholder or tainted picture is among them.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Uses {
    pub(super) poc: i64,
    pub(super) lists: Vec<[Vec<Option<u64>>; 2]>,
    pub(super) stand_ins: bool,
    /// Two different references in one slice's lists hold the same pixels (a placeholder and
    /// the picture it copies): refused, see the module doc.
    pub(super) aliased: bool,
    /// A B slice's list 1 starts with a placeholder: direct prediction reads the motion of that
    /// picture (the co-located one), which a placeholder does not share with the picture whose
    /// pixels it copies (its buffers are whatever the pool held). Refused.
    pub(super) colocated_stand_in: bool,
    /// Its B lists could not be built: a reference's order count is not known (`lists` is
    /// empty); such a picture cannot be judged.
    pub(super) unknown: bool,
    /// Its memory management named a picture the decoder does not hold (it logs "mmco: unref
    /// short failure" and goes on, as if the picture had been forgotten).
    pub(super) missed_unmark: bool,
}

impl Dpb {
    /// The state right after an IDR picture's decode starts (FFmpeg's `idr()`).
    pub(super) fn at_idr() -> Dpb {
        Dpb {
            short: Vec::new(),
            prev_frame_num: 0,
            prev_poc_msb: 1 << 16,
            prev_poc_lsb: -1,
            entered: false,
        }
    }

    /// The state after a flush (or a fresh decoder): no references, `frame_num` -1, order counts as
    /// after an IDR. A non-IDR picture then fills a `frame_num` gap of at most `max_num_ref_frames`
    /// placeholders, the first grey ([`Self::apply`]).
    pub(super) fn after_flush() -> Dpb {
        Dpb {
            prev_frame_num: -1,
            entered: true,
            ..Dpb::at_idr()
        }
    }

    /// Whether `uses`, a full decode's, is as a full decode of the stream is: every memory
    /// management operation found its picture (short of pictures from before a recovery point
    /// decoding entered at).
    pub(super) fn whole(&self, uses: &Uses) -> bool {
        !uses.missed_unmark || self.entered
    }

    /// The decoder holds what a full decode holds: the same references (no placeholder, none
    /// that predicted from one) with the same order counts; from here on both decode alike.
    pub(super) fn same_as(&self, full: &Dpb) -> bool {
        let key = |d: &Dpb| -> Vec<(u32, i64, u64)> {
            d.short
                .iter()
                .map(|e| (e.frame_num, e.poc, e.pixels))
                .collect()
        };
        !self.short.iter().any(|e| e.gap || e.tainted)
            && key(self) == key(full)
            && (self.prev_poc_msb, self.prev_poc_lsb) == (full.prev_poc_msb, full.prev_poc_lsb)
    }

    /// Marks `cur` as a short-term reference (after the pictures `unmark` names, else by the
    /// sliding window), then drops placeholders too old to be referenced (h264_refs.c
    /// `ff_h264_execute_ref_pic_marking`). Returns whether a picture `unmark` names is not held
    /// (FFmpeg logs it and goes on with the next operation); None when the model cannot follow (a
    /// `frame_num` already held, more references than the stream allows).
    fn mark(&mut self, cur: Entry, pic: &Picture, unmark: &[u32]) -> Option<bool> {
        let max_refs = pic.sps.max_num_ref_frames.max(1) as usize;
        let max_fn = 1u32 << pic.sps.log2_max_frame_num;
        let mut missed = false;
        for &d in unmark {
            // The picture whose picNum is CurrPicNum - (d + 1), found by its frame_num.
            let frame_num = cur.frame_num.wrapping_sub(d.wrapping_add(1)) & (max_fn - 1);
            match self.short.iter().position(|e| e.frame_num == frame_num) {
                Some(i) => {
                    self.short.remove(i);
                }
                None => missed = true,
            }
        }
        if self.short.iter().any(|e| e.frame_num == cur.frame_num) {
            return None;
        }
        if unmark.is_empty() && !self.short.is_empty() && self.short.len() >= max_refs {
            self.short.pop();
        }
        self.short.insert(0, cur);
        if self.short.len() > max_refs {
            return None;
        }
        let refs = pic.sps.max_num_ref_frames;
        self.short.retain(|e| {
            !e.invalid_gap || (cur.frame_num.wrapping_sub(e.frame_num) & (max_fn - 1)) <= refs
        });
        Some(missed)
    }

    /// Sends a picture through the model: `decoded` false is a discarded picture (nothing
    /// changes). Returns what a decoded picture predicts from; None when the model cannot follow.
    pub(super) fn apply(&mut self, pic: &Picture, id: u64, decoded: bool) -> Option<Option<Uses>> {
        if !decoded {
            return Some(None);
        }
        if pic.idr {
            if pic.frame_num != 0 {
                return None;
            }
            *self = Dpb::at_idr();
        }
        let max_fn = 1i64 << pic.sps.log2_max_frame_num;
        let frame_num = pic.frame_num as i64;
        let refs = pic.sps.max_num_ref_frames as i64;
        let after_flush = self.prev_frame_num < 0;
        // A gap of more than max_num_ref_frames is shortened to that many (h264_field_start);
        // after a flush (prev_frame_num -1) this fills at most that many placeholders.
        if frame_num != self.prev_frame_num {
            let mut unwrapped = self.prev_frame_num;
            if unwrapped > frame_num {
                unwrapped -= max_fn;
            }
            if frame_num - unwrapped > refs {
                self.prev_frame_num = (frame_num - refs - 1).rem_euclid(max_fn);
            }
        }
        // Gap filling (h264_field_start): each missing frame_num gets a placeholder holding the
        // newest reference's pixels, its order count + 2; with no reference at all (after a
        // flush), grey pixels and an order count the model cannot know. Right after a flush
        // both decodes fill alike: those placeholders are no stand-ins for a skipped picture.
        let mut filled = 0;
        while frame_num != self.prev_frame_num
            && frame_num != (self.prev_frame_num + 1).rem_euclid(max_fn)
        {
            filled += 1;
            if filled > 32 {
                return None;
            }
            let newest = self.short.first().copied();
            // A gap with no reference to copy is only known right after a flush.
            if newest.is_none() && !after_flush {
                return None;
            }
            self.prev_frame_num = (self.prev_frame_num + 1).rem_euclid(max_fn);
            let placeholder = Entry {
                frame_num: self.prev_frame_num as u32,
                poc: newest.map_or(0, |n| n.poc + 2),
                pixels: newest.map_or(GREY, |n| n.pixels),
                gap: !after_flush,
                invalid_gap: !pic.sps.gaps_allowed,
                tainted: false,
                poc_unknown: newest.is_none_or(|n| n.poc_unknown),
            };
            self.mark(placeholder, pic, &[])?;
        }
        // Order count type 0 (8.2.1.1, with FFmpeg's state after an IDR or a flush: no previous
        // lsb counts as this one, ff_h264_init_poc).
        let max_lsb = 1i64 << pic.sps.log2_max_poc_lsb;
        let lsb = pic.poc_lsb as i64;
        if self.prev_poc_lsb < 0 {
            self.prev_poc_lsb = lsb;
        }
        let msb = if lsb < self.prev_poc_lsb && self.prev_poc_lsb - lsb >= max_lsb / 2 {
            self.prev_poc_msb + max_lsb
        } else if lsb > self.prev_poc_lsb && lsb - self.prev_poc_lsb > max_lsb / 2 {
            self.prev_poc_msb - max_lsb
        } else {
            self.prev_poc_msb
        };
        let poc = msb + lsb + pic.bottom_offset;
        let mut lists = Vec::with_capacity(pic.slices.len());
        let mut stand_ins = false;
        let mut aliased = false;
        let mut colocated_stand_in = false;
        // B lists are ordered by order count: not known while a reference's count is not.
        let unknown = self.short.iter().any(|e| e.poc_unknown)
            && pic.slices.iter().any(|s| s.kind == SliceKind::B);
        for slice in pic.slices.iter().filter(|_| !unknown) {
            let mut pair = [Vec::new(), Vec::new()];
            let mut used: Vec<usize> = Vec::new();
            for (l, out) in pair.iter_mut().enumerate() {
                let n = slice.active[l] as usize;
                if n == 0 {
                    continue;
                }
                let list = self.list(pic, slice, l, poc)?;
                colocated_stand_in |= l == 1
                    && list
                        .first()
                        .is_some_and(|e| e.is_some_and(|i| self.short[i].gap));
                used.extend(list.iter().flatten());
                stand_ins |= list
                    .iter()
                    .flatten()
                    .any(|&i| self.short[i].gap || self.short[i].tainted);
                *out = list
                    .iter()
                    .map(|e| e.map(|i| self.short[i].pixels))
                    .collect();
            }
            lists.push(pair);
            used.sort_unstable();
            used.dedup();
            let mut pixels: Vec<u64> = used.iter().map(|&i| self.short[i].pixels).collect();
            pixels.sort_unstable();
            pixels.dedup();
            aliased |= pixels.len() != used.len();
        }
        let mut missed_unmark = false;
        if pic.reference {
            self.prev_poc_msb = msb;
            self.prev_poc_lsb = lsb;
            let cur = Entry {
                frame_num: pic.frame_num,
                poc,
                pixels: id,
                gap: false,
                invalid_gap: false,
                tainted: stand_ins,
                poc_unknown: false,
            };
            missed_unmark = self.mark(cur, pic, &pic.unmark)?;
        }
        self.prev_frame_num = frame_num;
        Some(Some(Uses {
            poc,
            lists,
            stand_ins,
            aliased,
            colocated_stand_in,
            unknown,
            missed_unmark,
        }))
    }

    /// List `l` of a slice as indices into `short`, `active` long (h264_refs.c: the default list,
    /// then the modifications).
    fn list(
        &self,
        pic: &Picture,
        slice: &h264::SliceRefs,
        l: usize,
        poc: i64,
    ) -> Option<Vec<Option<usize>>> {
        let n = slice.active[l] as usize;
        let mut list: Vec<Option<usize>> = match slice.kind {
            SliceKind::I => return Some(Vec::new()),
            SliceKind::P => (0..self.short.len()).map(Some).collect(),
            SliceKind::B => {
                let mut lists = [0, 1].map(|l| {
                    let mut v = self.add_sorted(poc, 1 ^ l);
                    v.extend(self.add_sorted(poc, l));
                    v
                });
                let [l0, l1] = &mut lists;
                if l0.len() == l1.len()
                    && l1.len() > 1
                    && l0
                        .iter()
                        .zip(l1.iter())
                        .all(|(&a, &b)| self.short[a].pixels == self.short[b].pixels)
                {
                    l1.swap(0, 1);
                }
                lists[l].iter().map(|&i| Some(i)).collect()
            }
        };
        list.resize(n, None);
        let max_fn = 1i64 << pic.sps.log2_max_frame_num;
        let mut pred = pic.frame_num as i64;
        for (index, &(idc, diff)) in slice.modifications[l].iter().enumerate() {
            if index >= n {
                return None;
            }
            let abs = diff as i64 + 1;
            if abs > max_fn {
                return None;
            }
            pred = if idc == 0 { pred - abs } else { pred + abs }.rem_euclid(max_fn);
            // FFmpeg looks from the oldest reference for the frame_num.
            let found = (0..self.short.len())
                .rev()
                .find(|&i| self.short[i].frame_num as i64 == pred)?;
            let fnum = self.short[found].frame_num;
            let mut i = index;
            while i + 1 < n && list[i].map(|j| self.short[j].frame_num) != Some(fnum) {
                i += 1;
            }
            for k in (index + 1..=i).rev() {
                list[k] = list[k - 1];
            }
            list[index] = Some(found);
        }
        Some(list)
    }

    /// FFmpeg's `add_sorted`: short-term references by order count from `limit`, descending at
    /// or below it (`dir` 1) or ascending above it (`dir` 0); of equal counts only one is taken.
    fn add_sorted(&self, mut limit: i64, dir: usize) -> Vec<usize> {
        let mut out = Vec::new();
        loop {
            let mut best: Option<usize> = None;
            for (i, e) in self.short.iter().enumerate() {
                let beyond = if dir == 1 {
                    e.poc <= limit
                } else {
                    e.poc > limit
                };
                let better = best.is_none_or(|b| {
                    if dir == 1 {
                        e.poc > self.short[b].poc
                    } else {
                        e.poc < self.short[b].poc
                    }
                });
                if beyond && better {
                    best = Some(i);
                }
            }
            let Some(b) = best else { return out };
            out.push(b);
            limit = self.short[b].poc - dir as i64;
        }
    }
}
