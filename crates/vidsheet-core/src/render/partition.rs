//! The cost model: whether the cells are decoded by one decoder using every core (frame
//! threading), or split into contiguous parts decoded in parallel by single-purpose decoders, and
//! where to split. Costs are in decoded pictures ([`DecodeRun`], from the video source).

use std::ops::Range;

use crate::video::DecodeRun;

/// Estimated cost of a seek and decoder restart, in decoded pictures.
const RUN_COST: u64 = 4;
/// Estimated cost of scaling one cell, in decoded pictures.
const CELL_COST: u64 = 1;
/// Speed gained by each decoder thread beyond the first of one frame-threaded decoder, relative
/// to a single-threaded one (measured on 2 cores, H.264 with a seek per GOP: ~0.4 at 1080p,
/// ~0.6 at 4K).
const FRAME_THREAD_GAIN: f64 = 0.5;
/// Memory the parallel decoders may take together: bounds the number of workers by the
/// picture size (two at 4K, nine at 1080p).
const DECODERS_MEMORY: u64 = 256 << 20;
/// Pictures' worth of memory one single-threaded decoder takes: reference and reordered
/// pictures, the one being decoded, the current one, and per-picture tables (motion vectors).
/// Measured: ~98 MB for 4K H.264 with 4 reference frames, i.e. ~8 pictures of 12.4 MB.
const PICTURES_PER_DECODER: u64 = 9;
/// Pictures smaller than this (320x240) are decoded single-threaded: frame threading hands every
/// picture from one thread to another (futex wake-ups, buffer pool churn: some 20-70 µs of CPU per
/// picture, measured with `ffmpeg -threads 1` vs `-threads 2`), about what decoding a picture
/// this small costs (27 µs at 160x90, 130 µs at 320x180), so it burns a second core for little
/// or nothing; parallel decoders, one per run of cells, then share the cores out instead.
const FRAME_THREAD_MIN_PIXELS: u64 = 320 * 240;

/// Cells `cells` (indices into the time-sorted cells) decoded by one worker with its own decoder
/// of `threads` threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Part {
    pub cells: Range<usize>,
    pub threads: usize,
}

/// The most threads one decoder is given on `cores` cores for pictures of `pixels` (0: unknown).
pub(super) fn decoder_threads(cores: usize, pixels: u64) -> usize {
    if pixels > 0 && pixels < FRAME_THREAD_MIN_PIXELS {
        1
    } else {
        cores.max(1)
    }
}

fn speedup(threads: usize) -> f64 {
    1.0 + FRAME_THREAD_GAIN * threads.saturating_sub(1) as f64
}

/// Splits the decode runs over `cores`, in at most `max_workers` parts. Contiguous parts (whole
/// runs, so no picture is decoded twice), each with its own decoder (the cores shared out, so
/// single-threaded when there are as many parts as cores), as balanced as the runs allow, when
/// that is estimated faster than one decoder using every core with frame threading; else one part.
/// No decoder gets more than `per_decoder` threads ([`decoder_threads`]).
pub(super) fn partition(
    runs: &[DecodeRun],
    cores: usize,
    per_decoder: usize,
    max_workers: usize,
) -> Vec<Part> {
    let cores = cores.max(1);
    let per_decoder = per_decoder.clamp(1, cores);
    let total_cells = runs.last().map_or(0, |r| r.end);
    let single = vec![Part {
        cells: 0..total_cells,
        threads: per_decoder,
    }];
    let max_parts = cores.min(runs.len()).min(max_workers);
    if max_parts < 2 {
        return single;
    }
    let mut costs = Vec::with_capacity(runs.len());
    let mut begin = 0;
    for r in runs {
        let cells = (r.end - begin) as u64;
        costs.push(r.pictures.saturating_add(RUN_COST + CELL_COST * cells));
        begin = r.end;
    }
    let sum: u64 = costs.iter().fold(0u64, |a, &c| a.saturating_add(c));
    let groups = |limit: u64| -> Vec<usize> {
        // Greedy: ends of consecutive groups of runs costing at most `limit` each.
        let mut ends = Vec::new();
        let mut acc = 0u64;
        for (i, &c) in costs.iter().enumerate() {
            if acc > 0 && acc.saturating_add(c) > limit {
                ends.push(i);
                acc = 0;
            }
            acc = acc.saturating_add(c);
        }
        ends.push(costs.len());
        ends
    };
    // Smallest limit splitting into at most max_parts groups.
    let (mut lo, mut hi) = (costs.iter().copied().max().unwrap_or(0), sum);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if groups(mid).len() <= max_parts {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let ends = groups(lo);
    if ends.len() < 2 {
        return single;
    }
    let threads = (cores / ends.len()).min(per_decoder);
    let mut parts = Vec::with_capacity(ends.len());
    let mut largest = 0u64;
    let mut start_run = 0;
    for &end_run in &ends {
        let cost = costs[start_run..end_run]
            .iter()
            .fold(0u64, |a, &c| a.saturating_add(c));
        largest = largest.max(cost);
        let from = if start_run == 0 {
            0
        } else {
            runs[start_run - 1].end
        };
        parts.push(Part {
            cells: from..runs[end_run - 1].end,
            threads,
        });
        start_run = end_run;
    }
    if largest as f64 / speedup(threads) < sum as f64 / speedup(per_decoder) {
        parts
    } else {
        single
    }
}

/// How many decoders fit in memory together, for pictures of `picture_bytes`.
pub(super) fn max_workers(picture_bytes: u64) -> usize {
    let per_decoder = picture_bytes.saturating_mul(PICTURES_PER_DECODER).max(1);
    (DECODERS_MEMORY / per_decoder).max(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs from (cells, pictures) pairs.
    fn runs(spec: &[(usize, u64)]) -> Vec<DecodeRun> {
        let mut end = 0;
        spec.iter()
            .map(|&(cells, pictures)| {
                end += cells;
                DecodeRun { end, pictures }
            })
            .collect()
    }

    fn covers(parts: &[Part], cells: usize) {
        assert_eq!(parts.first().map(|p| p.cells.start), Some(0));
        assert_eq!(parts.last().map(|p| p.cells.end), Some(cells));
        for w in parts.windows(2) {
            assert_eq!(w[0].cells.end, w[1].cells.start, "{parts:?}");
        }
        assert!(parts.iter().all(|p| !p.cells.is_empty()), "{parts:?}");
    }

    #[test]
    fn cells_in_one_gop_share_one_decoder_with_every_core() {
        let parts = partition(&runs(&[(36, 300)]), 4, 4, 16);
        assert_eq!(
            parts,
            vec![Part {
                cells: 0..36,
                threads: 4
            }]
        );
        assert!(partition(&[], 2, 2, 16).len() <= 1);
    }

    #[test]
    fn cells_spread_over_gops_are_split_evenly_one_decoder_per_core() {
        let r = runs(&vec![(1, 120); 63]);
        let parts = partition(&r, 2, 2, 16);
        assert_eq!(parts.len(), 2);
        covers(&parts, 63);
        assert!(parts.iter().all(|p| p.threads == 1));
        assert!(
            parts[0].cells.len().abs_diff(parts[1].cells.len()) <= 1,
            "{parts:?}"
        );

        let parts = partition(&r, 4, 4, 16);
        assert_eq!(parts.len(), 4);
        covers(&parts, 63);
        // Fewer runs than cores: the cores are shared out.
        let parts = partition(&runs(&[(3, 200), (4, 210)]), 4, 4, 16);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.threads == 2));
        covers(&parts, 7);
    }

    #[test]
    fn no_split_when_one_run_dominates_or_memory_allows_one_decoder() {
        // One part would still do nearly all the work: frame threading does better.
        let parts = partition(&runs(&[(30, 1000), (2, 10), (2, 10)]), 2, 2, 16);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].threads, 2);
        let r = runs(&vec![(1, 120); 63]);
        assert_eq!(partition(&r, 2, 2, 1).len(), 1);
        assert_eq!(partition(&r, 4, 4, 2).len(), 2);
        assert_eq!(
            partition(&r, 1, 1, 16),
            vec![Part {
                cells: 0..63,
                threads: 1
            }]
        );
    }

    #[test]
    fn small_pictures_get_one_thread_per_decoder() {
        assert_eq!(decoder_threads(2, 160 * 90), 1);
        assert_eq!(decoder_threads(4, 320 * 180), 1);
        assert_eq!(decoder_threads(2, 640 * 360), 2);
        // Unknown size: every core, as before.
        assert_eq!(decoder_threads(2, 0), 2);
        // The run that dominates no longer keeps both cores busy with frame threading: without
        // that gain, splitting it off still halves the rest.
        let parts = partition(&runs(&[(30, 1000), (2, 10), (2, 10)]), 2, 1, 16);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.threads == 1));
        covers(&parts, 34);
        // One run: one single-threaded decoder.
        assert_eq!(
            partition(&runs(&[(36, 300)]), 4, 1, 16),
            vec![Part {
                cells: 0..36,
                threads: 1
            }]
        );
    }
}
