//! One render call per job: the cells of every sheet in time order, through one decoder using
//! every core when they are dense, or split into contiguous parts decoded in parallel by workers
//! with their own demuxer and single-threaded decoder when they are spread over many GOPs; sheets
//! (cells, labels, and the audio band from the levels the plan carries) encoded as soon as their
//! last cell is in. Audio is measured by its own call ([`crate::audio_peaks`]), before the render.
//!
//! This file is the orchestration; [`partition`] holds the cost model (one decoder or parallel
//! parts), [`worker`] the decoding threads, [`crate::jpeg`] the sheet files.

mod partition;
#[cfg(test)]
mod tests;
mod worker;

use std::sync::atomic::AtomicBool;
use std::sync::mpsc;

use crate::canvas::{Canvas, Font};
use crate::error::{Error, Result};
use crate::jpeg::write_jpeg;
use crate::media;
use crate::memory::release_free_memory;
use crate::plan::{CellRef, HintPackets, RenderPlan, RenderResult, RenderStats, SheetPlan};
use crate::video::{OpenGops, VideoSource};
use partition::{decoder_threads, max_workers, partition};
use worker::{CellOut, Msg, StopOnDrop, Worker, CHANNEL_DEPTH};

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
    render_with(plan, cores, None, progress)
}

/// [`render_on`], the stream's open-GOP proofs shared with `proofs` when given (tests: a proof
/// another decoder is making).
fn render_with(
    plan: &RenderPlan,
    cores: usize,
    proofs: Option<std::sync::Arc<OpenGops>>,
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
    let mut source = VideoSource::open(&plan.input, &plan.opening(), plan.video_stream, cores)?;
    if let Some(proofs) = proofs {
        source.share_proofs(proofs);
    }
    let start_us = source.facts().start_us();

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
    // The zoom hints' packets: the index's, when it lists the whole stream (nothing more to
    // read); else each decoder records the packets it reads anyway.
    // VIDSHEET_BENCH_NO_HINTS=1 turns the collection off, for bench/run.mjs --hints alone.
    let hinting = std::env::var_os("VIDSHEET_BENCH_NO_HINTS").is_none_or(|v| v != "1");
    let indexed = hinting
        .then(|| source.index_packets(HintPackets::seconds(plan.hint_packets)))
        .flatten();
    let record = hinting && indexed.is_none();
    // VIDSHEET_BENCH_NO_PICTURES=1 leaves the thumbnails out (the packet signals alone), for
    // the tests that compare the engines' packet evidence.
    let pictures =
        hinting && std::env::var_os("VIDSHEET_BENCH_NO_PICTURES").is_none_or(|v| v != "1");
    // The window's end, when after the last cell and pictures are wanted: decoded last, for the
    // last gap's pictures, and costed with the cells so the parts stay balanced.
    let closing = plan
        .closing_ms
        .filter(|_| pictures)
        .map(|ms| (ms * 1000.0).round())
        .filter(|us| us.is_finite())
        .map(|us| start_us.saturating_add(us.clamp(-9e15, 9e15) as i64))
        .filter(|&us| cells.last().is_some_and(|c| us > c.0));
    let mut targets: Vec<i64> = cells.iter().map(|c| c.0).collect();
    targets.extend(closing);
    let runs = source.decode_runs(&targets);
    let per_decoder = decoder_threads(cores, source.facts().pixels());
    let mut parts = partition(
        &runs,
        cores,
        per_decoder,
        max_workers(source.facts().picture_bytes()),
    );
    // A part of the window's end alone joins the part before it (a part decodes cells).
    if parts.len() > 1 && parts.last().is_some_and(|p| p.cells.start >= cells.len()) {
        if let Some(end) = parts.pop().map(|p| p.cells.end) {
            if let Some(last) = parts.last_mut() {
                last.cells.end = end;
            }
        }
    }
    // What one decoder proves about the stream's open GOPs holds for all of them.
    let proofs = source.proofs();
    // The planning source decodes alone when one worker does everything (with a decoder of the
    // threads it is given); partition workers open their own single-purpose decoders.
    let mut first_source = (parts.len() == 1)
        .then_some(source)
        .and_then(|mut s| s.use_threads(parts[0].threads).then_some(s));
    // The stream probing of every open decodes a picture on this thread: give that memory back
    // before the decoders start (it would stay resident in this thread's arena).
    release_free_memory();

    let cancel = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // Stops the workers early when the main thread leaves with an error.
        let _stop = StopOnDrop(&cancel);
        let (tx, rx) = mpsc::sync_channel::<Msg>(CHANNEL_DEPTH * parts.len().max(1));
        proofs.start_parts(parts.len());
        for (k, part) in parts.iter().enumerate() {
            let job = Worker {
                plan,
                cells: &cells[part.cells.start..part.cells.end.min(cells.len())],
                threads: part.threads,
                source: first_source.take(),
                tx: tx.clone(),
                cancel: &cancel,
                record,
                // The render's share of the pictures' limit, split evenly between the parts.
                pictures: pictures.then(|| crate::video::MAX_PICTURES / parts.len().max(1)),
                closing: closing.filter(|_| part.cells.end > cells.len()),
                proofs: std::sync::Arc::clone(&proofs),
                part: k,
                before: part
                    .cells
                    .start
                    .checked_sub(1)
                    .and_then(|i| cells.get(i))
                    .map(|c| c.0),
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
        // Cell (sheet, cell) is frame_times[first[sheet] + cell].
        let first: Vec<usize> = plan
            .sheets
            .iter()
            .scan(0, |n, s| {
                let at = *n;
                *n += s.cells.len();
                Some(at)
            })
            .collect();
        let mut frame_times: Vec<Option<f64>> = vec![None; cells.len()];
        let mut packets = indexed.unwrap_or_default();
        let mut packets_cells: Vec<f64> = vec![f64::NAN; cells.len()];
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
                Msg::Cell {
                    sheet,
                    cell,
                    out,
                    time,
                } => {
                    if let Some(k) = first.get(sheet).map(|f| f + cell) {
                        if let (Some(slot), Some(dts)) =
                            (frame_times.get_mut(k), packets_cells.get_mut(k))
                        {
                            *slot = time.map(|t| t.0);
                            *dts = time.map_or(f64::NAN, |t| t.1);
                        }
                    }
                    (sheet, cell, out)
                }
                Msg::Done(s, recorded) => {
                    packets.extend(recorded);
                    stats.decoded_frames += s.decoded_frames;
                    stats.seeks += s.seeks;
                    stats.skippable_packets += s.skippable_packets;
                    stats.provisional_cells += s.provisional_cells;
                    stats.redone_cells += s.redone_cells;
                    continue;
                }
                Msg::Crashed => return Err(Error::failed("the video decoder crashed")),
                Msg::Failed(e) => return Err(e),
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
        stats.proof_waits = proofs.waits();

        unreadable.sort_by_key(|c| (c.sheet, c.cell));
        packets.cells = packets_cells;
        Ok(RenderResult {
            unreadable,
            stats,
            frame_times,
            packets,
        })
    })
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
