//! The worker threads: each decodes a contiguous, time-sorted slice of the cells with its own
//! video source and hands every cell's picture (scaled to the cell, upright) to the main thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use crate::convert::{Image, ScaleCache};
use crate::plan::{PacketLog, RenderPlan, RenderStats};
use crate::video::{Decoded, VideoSource};

/// Results queued per worker before it waits for the main thread.
pub(super) const CHANNEL_DEPTH: usize = 8;

/// What a worker hands the main thread.
pub(super) enum Msg {
    Cell {
        sheet: usize,
        cell: usize,
        out: CellOut,
        /// The shown frame's presentation and decode times (seconds, labels' clock); None
        /// without a frame.
        time: Option<(f64, f64)>,
    },
    /// The worker finished its cells; its decoder's counters and the packets it recorded.
    Done(RenderStats, PacketLog),
    /// The worker panicked.
    Crashed,
}

pub(super) enum CellOut {
    /// A cell of zero size: nothing to draw.
    Empty,
    /// The frame, scaled to the cell and upright.
    Frame(Arc<Image>),
    /// No frame could be decoded for the cell.
    Unreadable,
}

/// Sets the flag when dropped.
pub(super) struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One decoder working through a contiguous, time-sorted slice of the cells.
pub(super) struct Worker<'a> {
    pub plan: &'a RenderPlan,
    /// (absolute target in µs, sheet, cell), ascending.
    pub cells: &'a [(i64, usize, usize)],
    pub threads: usize,
    /// Already open (else opened by the worker).
    pub source: Option<VideoSource>,
    pub tx: SyncSender<Msg>,
    pub cancel: &'a AtomicBool,
    /// Record the packets read (the zoom hints' material, when the index does not list them).
    pub record: bool,
    /// Shared by the job's decoders: see [`VideoSource::share_proofs`].
    pub proofs: std::sync::Arc<crate::video::OpenGops>,
}

impl Worker<'_> {
    pub(super) fn run(mut self) {
        let tx = self.tx.clone();
        let msg = match catch_unwind(AssertUnwindSafe(|| self.decode())) {
            Ok((stats, packets)) => Msg::Done(stats, packets),
            Err(_) => Msg::Crashed,
        };
        let _ = tx.send(msg);
    }

    fn decode(&mut self) -> (RenderStats, PacketLog) {
        let plan = self.plan;
        let source = match self.source.take() {
            Some(s) => Ok(s),
            None => VideoSource::open(
                &plan.input,
                &plan.container(),
                plan.video_stream,
                self.threads,
            ),
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
                    if !self.send(si, ci, out, None) {
                        break;
                    }
                }
                return (RenderStats::default(), PacketLog::default());
            }
        };
        source.share_proofs(std::sync::Arc::clone(&self.proofs));
        let targets: Vec<i64> = self.cells.iter().map(|c| c.0).collect();
        source.set_targets(&targets);
        if self.record {
            source.record_packets();
        }
        let mut scaled = ScaleCache::new(source.orientation);
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
            let (out, pts) = if rect.w == 0 || rect.h == 0 {
                (CellOut::Empty, None)
            } else {
                let mut scale =
                    |d: &Decoded| scaled.get(d.serial, unsafe { d.frame.as_ptr() }, rect.w, rect.h);
                let mut early = |d: &Decoded| uniform && scale(d).is_some();
                match source.frame_at(target, &mut early) {
                    Some(decoded) => {
                        let pts = (decoded.pts, decoded.decode_time);
                        match scale(decoded) {
                            Some(img) => (CellOut::Frame(img), Some(pts)),
                            None => (CellOut::Unreadable, None),
                        }
                    }
                    None => (CellOut::Unreadable, None),
                }
            };
            let time = pts.map(|(p, d)| (source.label_seconds(p), d));
            if !self.send(si, ci, out, time) {
                break;
            }
        }
        let stats = RenderStats {
            decoded_frames: source.decoded_frames(),
            seeks: source.seeks,
            skippable_packets: source.skippable_sent,
            workers: 1,
        };
        (stats, source.take_packets())
    }

    /// False when the render is being abandoned.
    fn send(&self, sheet: usize, cell: usize, out: CellOut, time: Option<(f64, f64)>) -> bool {
        !self.cancel.load(Ordering::Relaxed)
            && self
                .tx
                .send(Msg::Cell {
                    sheet,
                    cell,
                    out,
                    time,
                })
                .is_ok()
    }
}
