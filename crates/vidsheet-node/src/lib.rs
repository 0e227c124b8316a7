//! napi-rs binding over vidsheet-core: `probe(path)` and `render(plan, onProgress?)`, both async
//! tasks on the libuv pool so the event loop keeps ticking. Failures reject with an Error whose
//! `code` is `unreadable_video`, `input_not_found` or `render_failed`; a panic in native code is
//! caught here and becomes `render_failed`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use vidsheet_core as core;

/// One video stream as the file holds it (facts only; core/probe.ts picks the stream).
#[napi(object)]
pub struct VideoStreamFacts {
    /// Stream index in the container.
    pub index: u32,
    /// Display width in pixels after sample aspect ratio and rotation (0 when unknown).
    pub width: u32,
    /// Display height in pixels after sample aspect ratio and rotation (0 when unknown).
    pub height: u32,
    /// The container marks the stream as default.
    pub is_default: bool,
    /// Cover art or another attached picture.
    pub attached_pic: bool,
    /// Frames the stream holds (the container's count, else an estimate); absent when unknown.
    pub frames: Option<f64>,
    /// A frame of the stream decoded during the probe.
    pub decodes: bool,
    /// Where the stream's data ends, seconds from the container start; absent when not found.
    pub readable_end: Option<f64>,
}

/// What the engine learns from opening the file.
#[napi(object)]
pub struct ProbeInfo {
    /// Duration the container declares, seconds; 0 when it declares none.
    pub duration: f64,
    /// Container start time in seconds (format start_time); 0 when unknown.
    pub start_time: f64,
    /// Every video stream, in stream order (attached pictures included, flagged).
    pub video_streams: Vec<VideoStreamFacts>,
    /// True when the file has at least one audio stream.
    pub has_audio: bool,
    /// The latest readable end of any audio stream; absent without audio or when not found.
    pub audio_end: Option<f64>,
}

/// A pixel rectangle on a sheet.
#[napi(object)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub w: i32,
    pub h: i32,
}

/// A timecode label: a filled box and text drawn on top of it.
#[napi(object)]
pub struct LabelPlan {
    pub text: String,
    #[napi(js_name = "box")]
    pub box_: Rect,
    /// Left edge of the first glyph's advance box.
    pub text_x: f64,
    /// Baseline of the text.
    pub baseline_y: f64,
    /// Font size in pixels (the em size handed to the rasteriser).
    pub font_size: f64,
}

/// One cell: the frame displayed at `timeMs`, scaled to exactly `rect`, and its label.
#[napi(object)]
pub struct CellPlan {
    /// Sample time in ms, relative to the container start time.
    pub time_ms: f64,
    pub rect: Rect,
    pub label: LabelPlan,
}

/// The audio-activity band above the grid (painting rule in src/core/render-plan.ts).
#[napi(object)]
pub struct BandPlan {
    pub rect: Rect,
    pub start_ms: f64,
    pub end_ms: f64,
    /// Cell sample times on this sheet (ms, container-relative), marked as ticks.
    pub ticks_ms: Vec<f64>,
    /// When set, the clip has no audio: draw this label instead of levels.
    pub message: Option<LabelPlan>,
}

/// One JPEG sheet.
#[napi(object)]
pub struct SheetPlan {
    /// Absolute output path of the JPEG.
    pub path: String,
    pub width: u32,
    pub height: u32,
    /// Cells in time order (left to right, top to bottom).
    pub cells: Vec<CellPlan>,
    pub band: Option<BandPlan>,
}

/// Colours as [r, g, b] or [r, g, b, a], each 0..255.
#[napi(object)]
pub struct Theme {
    pub background: Vec<f64>,
    pub label_box: Vec<f64>,
    pub label_text: Vec<f64>,
    pub band_background: Vec<f64>,
    pub band_level: Vec<f64>,
    pub band_peak: Vec<f64>,
    pub band_tick: Vec<f64>,
    /// Normalised level at or above which a band column counts as a peak.
    pub peak_threshold: f64,
}

/// Audio work requested with the render: the window the returned envelope covers (ms,
/// container-relative).
#[napi(object)]
pub struct AudioPlan {
    pub start_ms: f64,
    pub end_ms: f64,
}

/// A finished plan: every sheet of one job.
#[napi(object)]
pub struct RenderPlan {
    /// Absolute input path.
    pub input: String,
    /// Index of the video stream to decode (core/probe.ts chose it from the probe's facts).
    pub video_stream: u32,
    /// TTF file used for every label.
    pub font_path: String,
    /// JPEG quality, 1..100.
    pub quality: u32,
    pub theme: Theme,
    pub sheets: Vec<SheetPlan>,
    /// Null on visual-only surfaces: no audio is decoded and no band drawn.
    pub audio: Option<AudioPlan>,
    /// Directory the engine may use for intermediate files.
    pub temp_dir: String,
}

/// A cell whose frame could not be decoded (0-based).
#[napi(object)]
pub struct CellRef {
    pub sheet: u32,
    pub cell: u32,
}

/// The clip-peak-normalised 1 ms envelope over the plan's audio window.
#[napi(object)]
pub struct AudioEnvelope {
    /// False when the file has no decodable audio track.
    pub present: bool,
    /// One value per ms of the window, 0..1; empty when not present.
    pub envelope: Float32Array,
}

/// Work counters for benchmarks.
#[napi(object)]
pub struct RenderStats {
    /// Video frames that came out of the decoder.
    pub decoded_frames: f64,
    /// Seeks issued (including retries further back).
    pub seeks: f64,
}

/// What a render reports.
#[napi(object)]
pub struct RenderResult {
    /// Cells left black (still labelled) because their frame could not be decoded.
    pub unreadable: Vec<CellRef>,
    /// Present when the plan asked for audio.
    pub audio: Option<AudioEnvelope>,
    pub stats: RenderStats,
}

fn rect(r: &Rect) -> core::Rect {
    core::Rect {
        x: r.x,
        y: r.y,
        w: r.w.max(0) as u32,
        h: r.h.max(0) as u32,
    }
}

fn channel(v: Option<&f64>, default: u8) -> u8 {
    match v {
        Some(x) if x.is_finite() => x.round().clamp(0.0, 255.0) as u8,
        _ => default,
    }
}

fn rgb(v: &[f64]) -> [u8; 3] {
    [
        channel(v.first(), 0),
        channel(v.get(1), 0),
        channel(v.get(2), 0),
    ]
}

fn rgba(v: &[f64]) -> [u8; 4] {
    [
        channel(v.first(), 0),
        channel(v.get(1), 0),
        channel(v.get(2), 0),
        channel(v.get(3), 255),
    ]
}

fn label(l: &LabelPlan) -> core::LabelPlan {
    core::LabelPlan {
        text: l.text.clone(),
        r#box: rect(&l.box_),
        text_x: l.text_x as f32,
        baseline_y: l.baseline_y as f32,
        font_size: l.font_size as f32,
    }
}

fn to_core(plan: &RenderPlan) -> core::RenderPlan {
    let t = &plan.theme;
    core::RenderPlan {
        input: plan.input.clone(),
        video_stream: plan.video_stream,
        font_path: plan.font_path.clone(),
        quality: plan.quality.clamp(1, 100) as u8,
        theme: core::Theme {
            background: rgb(&t.background),
            label_box: rgba(&t.label_box),
            label_text: rgb(&t.label_text),
            band_background: rgb(&t.band_background),
            band_level: rgb(&t.band_level),
            band_peak: rgb(&t.band_peak),
            band_tick: rgb(&t.band_tick),
            peak_threshold: t.peak_threshold,
        },
        sheets: plan
            .sheets
            .iter()
            .map(|s| core::SheetPlan {
                path: s.path.clone(),
                width: s.width,
                height: s.height,
                cells: s
                    .cells
                    .iter()
                    .map(|c| core::CellPlan {
                        time_ms: c.time_ms,
                        rect: rect(&c.rect),
                        label: label(&c.label),
                    })
                    .collect(),
                band: s.band.as_ref().map(|b| core::BandPlan {
                    rect: rect(&b.rect),
                    start_ms: b.start_ms,
                    end_ms: b.end_ms,
                    ticks_ms: b.ticks_ms.clone(),
                    message: b.message.as_ref().map(label),
                }),
            })
            .collect(),
        audio: plan.audio.as_ref().map(|a| core::AudioPlan {
            start_ms: a.start_ms,
            end_ms: a.end_ms,
        }),
        temp_dir: plan.temp_dir.clone(),
    }
}

/// Runs `f`, turning a panic into a `render_failed` error.
fn guarded<T>(f: impl FnOnce() -> core::Result<T>) -> core::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(core::Error::failed(format!(
                "internal error in the native engine ({what})"
            )))
        }
    }
}

/// Rejects with a JS Error whose `code` is the engine's code.
fn reject<T>(env: &Env, e: core::Error) -> Result<T> {
    let err = Error::new(e.code.as_str().to_string(), e.message);
    // SAFETY: called on the JS thread with its env; the value is a freshly created Error object.
    let value = unsafe { JsError::from(err).into_value(env.raw()) };
    let unknown = unsafe { Unknown::from_raw_unchecked(env.raw(), value) };
    Err(Error::from(unknown))
}

pub struct ProbeTask {
    path: String,
}

impl Task for ProbeTask {
    type Output = core::Result<core::ProbeInfo>;
    type JsValue = ProbeInfo;

    fn compute(&mut self) -> Result<Self::Output> {
        let path = self.path.clone();
        Ok(guarded(move || core::probe(&path)))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        match output {
            Ok(p) => Ok(ProbeInfo {
                duration: p.duration,
                start_time: p.start_time,
                video_streams: p
                    .video_streams
                    .iter()
                    .map(|v| VideoStreamFacts {
                        index: v.index,
                        width: v.width,
                        height: v.height,
                        is_default: v.is_default,
                        attached_pic: v.attached_pic,
                        frames: v.frames.map(|f| f as f64),
                        decodes: v.decodes,
                        readable_end: v.readable_end,
                    })
                    .collect(),
                has_audio: p.has_audio,
                audio_end: p.audio_end,
            }),
            Err(e) => reject(&env, e),
        }
    }
}

/// Opens a video and reports its facts: declared duration, start time, every video stream (size,
/// disposition, frame count, whether it decodes, where its data ends) and where the audio ends.
#[napi(ts_return_type = "Promise<ProbeInfo>")]
pub fn probe(path: String) -> AsyncTask<ProbeTask> {
    AsyncTask::new(ProbeTask { path })
}

type Progress = ThreadsafeFunction<FnArgs<(u32, u32)>, (), FnArgs<(u32, u32)>, Status, false>;

pub struct RenderTask {
    plan: Option<core::RenderPlan>,
    progress: Option<Progress>,
}

impl Task for RenderTask {
    type Output = core::Result<core::RenderResult>;
    type JsValue = RenderResult;

    fn compute(&mut self) -> Result<Self::Output> {
        let Some(plan) = self.plan.take() else {
            return Ok(Err(core::Error::failed("render task ran twice")));
        };
        let progress = self.progress.as_ref();
        let mut last = Instant::now();
        let mut report = |done: u32, total: u32| {
            // At most ~20 updates a second, plus the final one.
            if let Some(cb) = progress {
                if done == total || last.elapsed() >= Duration::from_millis(50) {
                    last = Instant::now();
                    cb.call(
                        (done, total).into(),
                        ThreadsafeFunctionCallMode::NonBlocking,
                    );
                }
            }
        };
        Ok(guarded(move || core::render(&plan, &mut report)))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        match output {
            Ok(r) => Ok(RenderResult {
                unreadable: r
                    .unreadable
                    .iter()
                    .map(|c| CellRef {
                        sheet: c.sheet,
                        cell: c.cell,
                    })
                    .collect(),
                audio: r.audio.map(|a| AudioEnvelope {
                    present: a.present,
                    envelope: Float32Array::new(a.envelope),
                }),
                stats: RenderStats {
                    decoded_frames: r.stats.decoded_frames as f64,
                    seeks: r.stats.seeks as f64,
                },
            }),
            Err(e) => reject(&env, e),
        }
    }
}

/// Renders every sheet of a finished plan in one call (off the JS thread). `onProgress(done,
/// total)` counts cells and is throttled; it never blocks the decoder.
#[napi(
    ts_args_type = "plan: RenderPlan, onProgress?: (done: number, total: number) => void",
    ts_return_type = "Promise<RenderResult>"
)]
pub fn render(plan: RenderPlan, on_progress: Option<Progress>) -> AsyncTask<RenderTask> {
    AsyncTask::new(RenderTask {
        plan: Some(to_core(&plan)),
        progress: on_progress,
    })
}
