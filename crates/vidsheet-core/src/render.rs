//! One render call per job: every cell of every sheet in time order through one decoder, the
//! audio envelope on a second demuxer in parallel, sheets encoded as soon as their last cell is in.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use image::codecs::jpeg::JpegEncoder;
use image::ExtendedColorType;

use crate::audio::{self, Envelope};
use crate::canvas::{Canvas, Font};
use crate::convert::{self, Image, Scaler};
use crate::error::{Error, Result};
use crate::media;
use crate::plan::{AudioEnvelope, CellRef, RenderPlan, RenderResult, RenderStats, SheetPlan};
use crate::video::VideoSource;

/// Renders every sheet of `plan`. `progress(done, total)` is called after each cell (cells of all
/// sheets counted together).
pub fn render(plan: &RenderPlan, progress: &mut dyn FnMut(u32, u32)) -> Result<RenderResult> {
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
    let mut source = VideoSource::open(&plan.input, plan.video_stream)?;
    let start_us = source.start_us;

    // The ms range whose bins the plan needs: the returned window plus every band.
    let audio_range = plan.audio.map(|a| {
        let mut lo = a.start_ms.floor() as i64;
        let mut hi = a.end_ms.ceil() as i64;
        for band in plan.sheets.iter().filter_map(|s| s.band.as_ref()) {
            lo = lo.min(band.start_ms.floor() as i64);
            hi = hi.max(band.end_ms.ceil() as i64 + 1);
        }
        (lo.max(0), hi.max(0))
    });

    std::thread::scope(|scope| {
        let mut audio = match audio_range {
            Some((lo, hi)) => {
                let path = plan.input.as_str();
                let handle = std::thread::Builder::new()
                    .name("vidsheet-audio".into())
                    .spawn_scoped(scope, move || audio::envelope(path, lo, hi))
                    .map_err(|e| Error::failed(format!("cannot start the audio thread ({e})")))?;
                AudioJob {
                    handle: Some(handle),
                    envelope: None,
                }
            }
            None => AudioJob {
                handle: None,
                envelope: None,
            },
        };

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
        let targets: Vec<i64> = cells.iter().map(|c| c.0).collect();
        source.set_targets(&targets);
        let total = cells.len() as u32;

        let mut remaining: Vec<usize> = plan.sheets.iter().map(|s| s.cells.len()).collect();
        let mut canvases: Vec<Option<Canvas>> = plan.sheets.iter().map(|_| None).collect();
        // Finished sheets whose band waits for the audio thread.
        let mut waiting: Vec<(usize, Canvas)> = Vec::new();
        let mut unreadable: Vec<CellRef> = Vec::new();
        let mut scaler = Scaler::new();
        let mut last: Option<((u64, u32, u32), Image)> = None;

        let complete = |si: usize,
                        canvas: Canvas,
                        audio: &mut AudioJob,
                        waiting: &mut Vec<(usize, Canvas)>| {
            let sheet = &plan.sheets[si];
            let needs_audio =
                plan.audio.is_some() && sheet.band.as_ref().is_some_and(|b| b.message.is_none());
            if needs_audio && !audio.ready() && waiting.len() < MAX_WAITING_SHEETS {
                waiting.push((si, canvas));
                return Ok(());
            }
            let envelope = if needs_audio { audio.wait()? } else { None };
            finish_sheet(plan, sheet, canvas, &font, envelope)
        };

        for (si, sheet) in plan.sheets.iter().enumerate() {
            if sheet.cells.is_empty() {
                let canvas = Canvas::new(sheet.width, sheet.height, plan.theme.background);
                complete(si, canvas, &mut audio, &mut waiting)?;
            }
        }

        for (done, &(target, si, ci)) in cells.iter().enumerate() {
            let sheet = &plan.sheets[si];
            let cell = &sheet.cells[ci];
            let canvas = canvases[si].get_or_insert_with(|| {
                Canvas::new(sheet.width, sheet.height, plan.theme.background)
            });
            let rect = cell.rect;
            let mut ok = rect.w == 0 || rect.h == 0;
            if !ok {
                let orientation = source.orientation;
                if let Some(decoded) = source.frame_at(target) {
                    let key = (decoded.serial, rect.w, rect.h);
                    if last.as_ref().map(|l| l.0) != Some(key) {
                        let (sw, sh) = if orientation.transpose {
                            (rect.h, rect.w)
                        } else {
                            (rect.w, rect.h)
                        };
                        last = scaler
                            .convert(unsafe { decoded.frame.as_ptr() }, sw, sh)
                            .map(|img| (key, convert::orient(img, orientation)));
                    }
                    if let Some((k, img)) = &last {
                        if *k == key {
                            canvas.blit(rect.x, rect.y, img);
                            ok = true;
                        }
                    }
                }
            }
            if !ok {
                canvas.fill(rect, [0, 0, 0]);
                unreadable.push(CellRef {
                    sheet: si as u32,
                    cell: ci as u32,
                });
            }
            remaining[si] -= 1;
            if remaining[si] == 0 {
                if let Some(canvas) = canvases[si].take() {
                    complete(si, canvas, &mut audio, &mut waiting)?;
                }
            }
            if !waiting.is_empty() && audio.ready() {
                for (wi, canvas) in std::mem::take(&mut waiting) {
                    complete(wi, canvas, &mut audio, &mut waiting)?;
                }
            }
            progress(done as u32 + 1, total);
        }

        let envelope = audio.wait()?;
        for (wi, canvas) in std::mem::take(&mut waiting) {
            finish_sheet(plan, &plan.sheets[wi], canvas, &font, envelope)?;
        }
        let audio = plan.audio.map(|a| {
            let start = a.start_ms.floor() as i64;
            let len = (a.end_ms - a.start_ms).round().max(0.0) as usize;
            match envelope {
                Some(env) if env.present => AudioEnvelope {
                    present: true,
                    envelope: env.window(start, len),
                },
                _ => AudioEnvelope {
                    present: false,
                    envelope: Vec::new(),
                },
            }
        });
        unreadable.sort_by_key(|c| (c.sheet, c.cell));
        let stats = RenderStats {
            decoded_frames: source.decoded_frames(),
            seeks: source.seeks,
            skippable_packets: source.skippable_sent,
        };
        Ok(RenderResult {
            unreadable,
            audio,
            stats,
        })
    })
}

/// Largest sheet accepted (a JPEG is at most 65535 px a side; this bounds memory too).
const MAX_SHEET_PIXELS: u64 = 100_000_000;

/// Sheets kept in memory while the audio thread finishes, before the video side waits for it.
const MAX_WAITING_SHEETS: usize = 6;

/// The envelope being built on the audio thread.
struct AudioJob<'scope> {
    handle: Option<std::thread::ScopedJoinHandle<'scope, Envelope>>,
    envelope: Option<Envelope>,
}

impl AudioJob<'_> {
    fn ready(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_finished())
    }

    fn wait(&mut self) -> Result<Option<&Envelope>> {
        if let Some(handle) = self.handle.take() {
            let env = handle
                .join()
                .map_err(|_| Error::failed("the audio decoder crashed"))?;
            self.envelope = Some(env);
        }
        Ok(self.envelope.as_ref())
    }
}

/// Labels, band, JPEG.
fn finish_sheet(
    plan: &RenderPlan,
    sheet: &SheetPlan,
    mut canvas: Canvas,
    font: &Font,
    envelope: Option<&Envelope>,
) -> Result<()> {
    for cell in &sheet.cells {
        canvas.label(font, &cell.label, &plan.theme);
    }
    if let Some(band) = &sheet.band {
        let level = |k: i64| envelope.map_or(0.0, |e| e.level(k));
        canvas.band(band, &plan.theme, font, &level);
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
