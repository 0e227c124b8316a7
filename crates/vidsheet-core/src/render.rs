//! One render call per job: the cells of every sheet in time order, through one decoder using
//! every core when they are dense, or split into contiguous parts decoded in parallel by workers
//! with their own demuxer and single-threaded decoder when they are spread over many GOPs; sheets
//! (cells, labels, and the audio band from the levels the plan carries) encoded as soon as their
//! last cell is in. Audio is measured by its own call ([`crate::audio_peaks`]), before the render.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;

use image::codecs::jpeg::JpegEncoder;
use image::ExtendedColorType;

use crate::canvas::{Canvas, Font};
use crate::convert::{self, Image, Scaler};
use crate::error::{Error, Result};
use crate::media;
use crate::orientation::Orientation;
use crate::plan::{CellRef, Rect, RenderPlan, RenderResult, RenderStats, SheetPlan};
use crate::video::{DecodeRun, Decoded, VideoSource};

/// Renders every sheet of `plan`. `progress(done, total)` is called after each cell (cells of all
/// sheets counted together).
pub fn render(plan: &RenderPlan, progress: &mut dyn FnMut(u32, u32)) -> Result<RenderResult> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    render_on(plan, cores, progress)
}

/// [`render`] as if the machine had `cores` cores (at least 1, at most 16 are used); lets tests
/// exercise parallel decoding anywhere.
#[doc(hidden)]
pub fn render_on(
    plan: &RenderPlan,
    cores: usize,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<RenderResult> {
    media::init();
    for (i, sheet) in plan.sheets.iter().enumerate() {
        let (w, h) = (sheet.width as u64, sheet.height as u64);
        if w == 0 || h == 0 || w > 65_535 || h > 65_535 || w * h > MAX_SHEET_PIXELS {
            return Err(Error::failed(format!(
                "sheet {} has an invalid size {w}x{h}",
                i + 1
            )));
        }
    }
    let font = Font::load(&plan.font_path)?;
    let cores = cores.clamp(1, 16);
    // Opened with every core for the decoder's own threads: right when the cells are dense.
    let source = VideoSource::open(&plan.input, plan.video_stream, cores)?;
    let start_us = source.start_us;

    let mut cells: Vec<(i64, usize, usize)> = Vec::new();
    for (si, sheet) in plan.sheets.iter().enumerate() {
        for (ci, cell) in sheet.cells.iter().enumerate() {
            let us = (cell.time_ms * 1000.0).round();
            let us = if us.is_finite() {
                us.clamp(-9e15, 9e15) as i64
            } else {
                0
            };
            cells.push((start_us.saturating_add(us), si, ci));
        }
    }
    cells.sort_by_key(|c| c.0);
    let total = cells.len() as u32;
    let targets: Vec<i64> = cells.iter().map(|c| c.0).collect();
    let runs = source.decode_runs(&targets);
    let per_decoder = source
        .picture_bytes
        .saturating_mul(PICTURES_PER_DECODER)
        .max(1);
    let max_workers = (DECODERS_MEMORY / per_decoder).max(1) as usize;
    let parts = partition(&runs, cores, max_workers);
    // The planning source decodes alone when one worker has every core; partition workers open
    // their own single-purpose decoders.
    let mut first_source = (parts.len() == 1 && parts[0].threads == cores).then_some(source);
    // The stream probing of every open decodes a picture on this thread: give that memory back
    // before the decoders start (it would stay resident in this thread's arena).
    release_free_memory();

    let cancel = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // Stops the workers early when the main thread leaves with an error.
        let _stop = StopOnDrop(&cancel);
        let (tx, rx) = mpsc::sync_channel::<Msg>(CHANNEL_DEPTH * parts.len().max(1));
        for (k, part) in parts.iter().enumerate() {
            let job = Worker {
                plan,
                cells: &cells[part.cells.clone()],
                threads: part.threads,
                source: first_source.take(),
                tx: tx.clone(),
                cancel: &cancel,
            };
            std::thread::Builder::new()
                .name(format!("vidsheet-video-{k}"))
                .spawn_scoped(scope, move || job.run())
                .map_err(|e| Error::failed(format!("cannot start a video thread ({e})")))?;
        }
        drop(tx);

        let mut remaining: Vec<usize> = plan.sheets.iter().map(|s| s.cells.len()).collect();
        let mut canvases: Vec<Option<Canvas>> = plan.sheets.iter().map(|_| None).collect();
        let mut unreadable: Vec<CellRef> = Vec::new();
        let mut stats = RenderStats {
            workers: parts.len() as u64,
            ..RenderStats::default()
        };

        for sheet in &plan.sheets {
            if sheet.cells.is_empty() {
                let canvas = Canvas::new(sheet.width, sheet.height, plan.theme.background);
                finish_sheet(plan, sheet, canvas, &font)?;
            }
        }

        let mut done = 0u32;
        // Ends when every worker has dropped its sender.
        for msg in rx.iter() {
            let (si, ci, out) = match msg {
                Msg::Cell { sheet, cell, out } => (sheet, cell, out),
                Msg::Done(s) => {
                    stats.decoded_frames += s.decoded_frames;
                    stats.seeks += s.seeks;
                    stats.skippable_packets += s.skippable_packets;
                    continue;
                }
                Msg::Crashed => return Err(Error::failed("the video decoder crashed")),
            };
            let sheet = &plan.sheets[si];
            let rect = sheet.cells[ci].rect;
            let canvas = canvases[si].get_or_insert_with(|| {
                Canvas::new(sheet.width, sheet.height, plan.theme.background)
            });
            match out {
                CellOut::Empty => {}
                CellOut::Frame(img) => canvas.blit(rect.x, rect.y, &img),
                CellOut::Unreadable => {
                    canvas.fill(rect, [0, 0, 0]);
                    unreadable.push(CellRef {
                        sheet: si as u32,
                        cell: ci as u32,
                    });
                }
            }
            remaining[si] -= 1;
            if remaining[si] == 0 {
                if let Some(canvas) = canvases[si].take() {
                    finish_sheet(plan, sheet, canvas, &font)?;
                }
            }
            done += 1;
            progress(done, total);
        }
        if done != total {
            return Err(Error::failed("the video decoder stopped early"));
        }

        unreadable.sort_by_key(|c| (c.sheet, c.cell));
        Ok(RenderResult { unreadable, stats })
    })
}

/// Results queued per worker before it waits for the main thread.
const CHANNEL_DEPTH: usize = 8;

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

/// Cells `cells` (indices into the time-sorted cells) decoded by one worker with its own decoder
/// of `threads` threads.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    cells: Range<usize>,
    threads: usize,
}

fn speedup(threads: usize) -> f64 {
    1.0 + FRAME_THREAD_GAIN * threads.saturating_sub(1) as f64
}

/// Splits the decode runs over `cores`, in at most `max_workers` parts. Contiguous parts (whole
/// runs, so no picture is decoded twice), each with its own decoder (the cores shared out, so
/// single-threaded when there are as many parts as cores), as balanced as the runs allow, when
/// that is estimated faster than one decoder using every core with frame threading; else one part.
fn partition(runs: &[DecodeRun], cores: usize, max_workers: usize) -> Vec<Part> {
    let cores = cores.max(1);
    let total_cells = runs.last().map_or(0, |r| r.end);
    let single = vec![Part {
        cells: 0..total_cells,
        threads: cores,
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
    let threads = cores / ends.len();
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
    if largest as f64 / speedup(threads) < sum as f64 / speedup(cores) {
        parts
    } else {
        single
    }
}

/// A worker's scaled cell images: the last one is kept, so cells showing the same picture at the
/// same size are scaled once.
struct Scaled {
    scaler: Scaler,
    last: Option<((u64, u32, u32), Arc<Image>)>,
    orientation: Orientation,
}

impl Scaled {
    /// `decoded` scaled to `rect`'s size and made upright. None when it cannot be converted (or
    /// its picture is gone and it is not the last one scaled).
    fn get(&mut self, decoded: &Decoded, rect: Rect) -> Option<Arc<Image>> {
        let key = (decoded.serial, rect.w, rect.h);
        if let Some((k, img)) = &self.last {
            if *k == key {
                return Some(Arc::clone(img));
            }
        }
        let (w, h) = if self.orientation.transpose {
            (rect.h, rect.w)
        } else {
            (rect.w, rect.h)
        };
        let img = self
            .scaler
            .convert(unsafe { decoded.frame.as_ptr() }, w, h)
            .map(|img| Arc::new(convert::orient(img, self.orientation)))?;
        self.last = Some((key, Arc::clone(&img)));
        Some(img)
    }
}

/// What a worker hands the main thread.
enum Msg {
    Cell {
        sheet: usize,
        cell: usize,
        out: CellOut,
    },
    /// The worker finished its cells; its decoder's counters.
    Done(RenderStats),
    /// The worker panicked.
    Crashed,
}

enum CellOut {
    /// A cell of zero size: nothing to draw.
    Empty,
    /// The frame, scaled to the cell and upright.
    Frame(Arc<Image>),
    /// No frame could be decoded for the cell.
    Unreadable,
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One decoder working through a contiguous, time-sorted slice of the cells.
struct Worker<'a> {
    plan: &'a RenderPlan,
    /// (absolute target in µs, sheet, cell), ascending.
    cells: &'a [(i64, usize, usize)],
    threads: usize,
    /// Already open (else opened by the worker).
    source: Option<VideoSource>,
    tx: SyncSender<Msg>,
    cancel: &'a AtomicBool,
}

impl Worker<'_> {
    fn run(mut self) {
        let tx = self.tx.clone();
        let msg = match catch_unwind(AssertUnwindSafe(|| self.decode())) {
            Ok(stats) => Msg::Done(stats),
            Err(_) => Msg::Crashed,
        };
        let _ = tx.send(msg);
    }

    fn decode(&mut self) -> RenderStats {
        let plan = self.plan;
        let source = match self.source.take() {
            Some(s) => Ok(s),
            None => VideoSource::open(&plan.input, plan.video_stream, self.threads),
        };
        let mut source = match source {
            Ok(s) => s,
            Err(_) => {
                // Opened once already, failing now: these cells have no frame.
                for &(_, si, ci) in self.cells {
                    let rect = plan.sheets[si].cells[ci].rect;
                    let out = if rect.w == 0 || rect.h == 0 {
                        CellOut::Empty
                    } else {
                        CellOut::Unreadable
                    };
                    if !self.send(si, ci, out) {
                        break;
                    }
                }
                return RenderStats::default();
            }
        };
        let targets: Vec<i64> = self.cells.iter().map(|c| c.0).collect();
        source.set_targets(&targets);
        let mut scaled = Scaled {
            scaler: Scaler::new(),
            last: None,
            orientation: source.orientation,
        };
        // A frame's pixels may go as soon as it is scaled only when no later cell can need it at
        // another size.
        let mut sizes = self
            .cells
            .iter()
            .map(|&(_, si, ci)| plan.sheets[si].cells[ci].rect)
            .filter(|r| r.w > 0 && r.h > 0)
            .map(|r| (r.w, r.h));
        let uniform = sizes.next().is_none_or(|first| sizes.all(|s| s == first));
        for &(target, si, ci) in self.cells {
            let rect = plan.sheets[si].cells[ci].rect;
            let out = if rect.w == 0 || rect.h == 0 {
                CellOut::Empty
            } else {
                let mut early = |d: &Decoded| uniform && scaled.get(d, rect).is_some();
                match source.frame_at(target, &mut early) {
                    Some(decoded) => match scaled.get(decoded, rect) {
                        Some(img) => CellOut::Frame(img),
                        None => CellOut::Unreadable,
                    },
                    None => CellOut::Unreadable,
                }
            };
            if !self.send(si, ci, out) {
                break;
            }
        }
        RenderStats {
            decoded_frames: source.decoded_frames(),
            seeks: source.seeks,
            skippable_packets: source.skippable_sent,
            workers: 1,
        }
    }

    /// False when the render is being abandoned.
    fn send(&self, sheet: usize, cell: usize, out: CellOut) -> bool {
        !self.cancel.load(Ordering::Relaxed) && self.tx.send(Msg::Cell { sheet, cell, out }).is_ok()
    }
}

/// Largest sheet accepted (a JPEG is at most 65535 px a side; this bounds memory too).
const MAX_SHEET_PIXELS: u64 = 100_000_000;

/// Labels, band, JPEG.
fn finish_sheet(
    plan: &RenderPlan,
    sheet: &SheetPlan,
    mut canvas: Canvas,
    font: &Font,
) -> Result<()> {
    for cell in &sheet.cells {
        canvas.label(font, &cell.label, &plan.theme);
    }
    if let Some(band) = &sheet.band {
        canvas.band(band, &plan.theme, band.levels.as_deref().unwrap_or(&[]));
        if let Some(message) = &band.message {
            canvas.label(font, message, &plan.theme);
        }
    }
    write_jpeg(&sheet.path, &canvas, plan.quality)
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Encodes to a temporary name beside `path`, then renames: a failed run leaves no half file.
fn write_jpeg(path: &str, canvas: &Canvas, quality: u8) -> Result<()> {
    let target = Path::new(path);
    let name = target
        .file_name()
        .ok_or_else(|| Error::failed(format!("invalid sheet path {path}")))?
        .to_string_lossy()
        .into_owned();
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp: PathBuf = dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()));
    let result = (|| -> std::result::Result<(), String> {
        let file = File::create(&tmp).map_err(|e| e.to_string())?;
        let mut out = BufWriter::new(file);
        JpegEncoder::new_with_quality(&mut out, quality.clamp(1, 100))
            .encode(&canvas.data, canvas.w, canvas.h, ExtendedColorType::Rgb8)
            .map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
        drop(out);
        fs::rename(&tmp, target).map_err(|e| e.to_string())
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::failed(format!("cannot write sheet {path} ({e})"))
    })
}

/// Hands memory freed so far back to the system. glibc keeps freed memory in the arena of the
/// thread that freed it; the demuxer's stream probing (which decodes a picture) leaves a few
/// pictures' worth on this thread, resident while the workers decode on theirs.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        malloc_trim(0);
    }
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
        let parts = partition(&runs(&[(36, 300)]), 4, 16);
        assert_eq!(
            parts,
            vec![Part {
                cells: 0..36,
                threads: 4
            }]
        );
        assert!(partition(&[], 2, 16).len() <= 1);
    }

    #[test]
    fn cells_spread_over_gops_are_split_evenly_one_decoder_per_core() {
        let r = runs(&vec![(1, 120); 63]);
        let parts = partition(&r, 2, 16);
        assert_eq!(parts.len(), 2);
        covers(&parts, 63);
        assert!(parts.iter().all(|p| p.threads == 1));
        assert!(
            parts[0].cells.len().abs_diff(parts[1].cells.len()) <= 1,
            "{parts:?}"
        );

        let parts = partition(&r, 4, 16);
        assert_eq!(parts.len(), 4);
        covers(&parts, 63);
        // Fewer runs than cores: the cores are shared out.
        let parts = partition(&runs(&[(3, 200), (4, 210)]), 4, 16);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.threads == 2));
        covers(&parts, 7);
    }

    #[test]
    fn no_split_when_one_run_dominates_or_memory_allows_one_decoder() {
        // One part would still do nearly all the work: frame threading does better.
        let parts = partition(&runs(&[(30, 1000), (2, 10), (2, 10)]), 2, 16);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].threads, 2);
        let r = runs(&vec![(1, 120); 63]);
        assert_eq!(partition(&r, 2, 1).len(), 1);
        assert_eq!(partition(&r, 4, 2).len(), 2);
        assert_eq!(
            partition(&r, 1, 16),
            vec![Part {
                cells: 0..63,
                threads: 1
            }]
        );
    }
}
