//! The worker threads: each decodes a contiguous, time-sorted slice of the cells with its own
//! video source and hands every cell's picture (scaled to the cell, upright) to the main thread.
//! Cells decoded after an open-GOP entry trusted provisionally, while another worker proves the
//! stream's entries, are held back until the verdict: sent once proven, else dropped and decoded
//! again by a fresh decoder that waits for verdicts (see [`crate::video::VideoSource::provisional`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use crate::convert::{Image, ScaleCache};
use crate::error::{Error, ErrorCode, Result};
use crate::plan::{PacketLog, RenderPlan, RenderStats};
use crate::video::{Decoded, Verdict, VideoSource};

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
    /// The job cannot go on: memory ran out (DESIGN §5a), never a cell's failure.
    Failed(Error),
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
    /// Record a thumbnail of every picture decoded (the zoom hints' `picture`), this many at most.
    pub pictures: Option<usize>,
    /// The window's end (absolute µs), decoded after this worker's cells and not drawn: the last
    /// part's, for the last gap's pictures ([`RenderPlan::closing_ms`]).
    pub closing: Option<i64>,
    /// Shared by the job's decoders: see [`VideoSource::share_proofs`].
    pub proofs: std::sync::Arc<crate::video::OpenGops>,
    /// This worker's part of the job, and the last target of the part before (µs): see
    /// [`VideoSource::set_part`].
    pub part: usize,
    pub before: Option<i64>,
}

impl Worker<'_> {
    pub(super) fn run(mut self) {
        let tx = self.tx.clone();
        let msg = match catch_unwind(AssertUnwindSafe(|| self.decode())) {
            Ok(Ok((stats, packets))) => Msg::Done(stats, packets),
            Ok(Err(e)) => Msg::Failed(e),
            Err(_) => Msg::Crashed,
        };
        // Whatever ended the work, a proof asked of this part is not given by it.
        self.proofs.part_done(self.part);
        let _ = tx.send(msg);
    }

    fn decode(&mut self) -> Result<(RenderStats, PacketLog)> {
        let plan = self.plan;
        let mut stats = RenderStats {
            workers: 1,
            ..RenderStats::default()
        };
        let mut packets = PacketLog::default();
        let mut given = self.source.take();
        let mut from = 0;
        // The first decoder trusts an open-GOP entry provisionally while another decoder proves
        // one; one that decodes held-back cells again waits for verdicts, so this ends.
        let mut trusting = true;
        while from < self.cells.len() {
            let opened = match given.take() {
                Some(s) => Ok(s),
                None => VideoSource::open(
                    &plan.input,
                    &plan.opening(),
                    plan.video_stream,
                    self.threads,
                ),
            };
            let mut source = match opened {
                Ok(s) => s,
                // Out of memory opening it again (media.rs `open_failure`): the job's failure.
                Err(e) if e.code == ErrorCode::RenderFailed => return Err(e),
                Err(_) => {
                    // Opened once already, failing now: these cells have no frame.
                    for &(_, si, ci) in &self.cells[from..] {
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
                    break;
                }
            };
            source.share_proofs(std::sync::Arc::clone(&self.proofs));
            if trusting {
                source.trust_pending_proofs();
                source.set_part(self.part, self.before);
            }
            let again = self.decode_from(&mut source, from, &mut stats)?;
            stats.decoded_frames += source.decoded_frames();
            stats.seeks += source.seeks();
            stats.skippable_packets += source.skippable_sent();
            packets.extend(source.take_packets());
            // The decoder goes (with any claim on a proof it holds) before another one starts.
            drop(source);
            match again {
                Some(at) => {
                    from = at;
                    trusting = false;
                }
                None => break,
            }
        }
        Ok((stats, packets))
    }

    /// Decodes the cells from `from` on with `source` and sends them, holding back those decoded
    /// after an open-GOP entry trusted provisionally until the stream's verdict (see
    /// [`VideoSource::provisional`]). Some(the first held-back cell) when the verdict did not
    /// prove the entry: those cells and the rest are to be decoded again. An error when memory ran
    /// out decoding or scaling: the cell it left without a picture is not sent as unreadable.
    fn decode_from(
        &self,
        source: &mut VideoSource,
        from: usize,
        stats: &mut RenderStats,
    ) -> Result<Option<usize>> {
        let plan = self.plan;
        let cells = &self.cells[from..];
        let mut targets: Vec<i64> = cells.iter().map(|c| c.0).collect();
        targets.extend(self.closing);
        source.set_targets(&targets);
        if self.record {
            source.record_packets();
        }
        if let Some(limit) = self.pictures {
            source.record_pictures(limit);
        }
        let mut scaled = ScaleCache::new(source.facts().orientation());
        // A frame's pixels may go as soon as it is scaled only when no later cell can need it at
        // another size.
        let mut sizes = cells
            .iter()
            .map(|&(_, si, ci)| plan.sheets[si].cells[ci].rect)
            .filter(|r| r.w > 0 && r.h > 0)
            .map(|r| (r.w, r.h));
        let uniform = sizes.next().is_none_or(|first| sizes.all(|s| s == first));
        // Cells decoded since an entry was trusted provisionally, the verdict not in yet.
        let mut held: Vec<Held> = Vec::new();
        for (i, &(target, si, ci)) in cells.iter().enumerate() {
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
            if source.out_of_memory() || scaled.out_of_memory() {
                return Err(Error::failed("out of memory while decoding the video"));
            }
            let time = pts.map(|(p, d)| (source.label_seconds(p), d));
            if i == 0 {
                source.first_target_settled();
            }
            if !source.provisional() {
                if !self.send(si, ci, out, time) {
                    return Ok(None);
                }
                continue;
            }
            held.push(Held {
                at: from + i,
                sheet: si,
                cell: ci,
                out,
                time,
            });
            match source.provisional_verdict(false) {
                Verdict::Pending => {}
                Verdict::Proven => {
                    if !self.release(&mut held, stats) {
                        return Ok(None);
                    }
                }
                Verdict::NotProven => return Ok(Some(discard(held, stats))),
            }
        }
        // The window's end: only its pictures are wanted (a failure there is no cell's).
        if let Some(closing) = self.closing {
            source.frame_at(closing, &mut |_| false);
        }
        // A proof asked of this decoder comes before waiting for one (it may be that one).
        source.serve_witness();
        if held.is_empty() {
            return Ok(None);
        }
        Ok(match source.provisional_verdict(true) {
            Verdict::Proven => {
                self.release(&mut held, stats);
                None
            }
            Verdict::Pending | Verdict::NotProven => Some(discard(held, stats)),
        })
    }

    /// Sends the cells held back, their entry proven. False when the render is being abandoned.
    fn release(&self, held: &mut Vec<Held>, stats: &mut RenderStats) -> bool {
        stats.provisional_cells += held.len() as u64;
        held.drain(..)
            .all(|h| self.send(h.sheet, h.cell, h.out, h.time))
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

/// A cell decoded after an open-GOP entry trusted provisionally, held back until the verdict.
struct Held {
    /// Its index in the worker's cells.
    at: usize,
    sheet: usize,
    cell: usize,
    out: CellOut,
    time: Option<(f64, f64)>,
}

/// Drops the cells held back, their entry not proven, and returns the first one's index: from
/// there the cells are decoded again.
fn discard(held: Vec<Held>, stats: &mut RenderStats) -> usize {
    stats.provisional_cells += held.len() as u64;
    stats.redone_cells += held.len() as u64;
    held.first().map_or(usize::MAX, |h| h.at)
}
