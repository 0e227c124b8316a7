//! napi-rs binding over vidsheet-core: `probe(path, options?)`,
//! `audioPeaks(path, startMs, endMs, inputFormat?)` and `render(plan, onProgress?)`, all async tasks
//! on the libuv pool so the event loop keeps ticking. Failures reject with an Error whose `code` is
//! one of vidsheet-core's `ErrorCode`s (exported as the string enum `ErrorCode`); a panic in native
//! code is caught here and becomes `render_failed`.
//!
//! The JS types are vidsheet-core's own structs (its `napi` feature): the plan is read and checked
//! there (`RenderPlan::from_js`, which rejects a bad value naming its field), and the binding's
//! .d.ts is generated from them.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
// The engine's own Error and Result keep their crate name: napi's prelude has its own.
use vidsheet_core::{AudioPeaks, ProbeInfo, RenderPlan, RenderResult};

/// Runs `f`, turning a panic into a `render_failed` error.
fn guarded<T>(f: impl FnOnce() -> vidsheet_core::Result<T>) -> vidsheet_core::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(vidsheet_core::Error::failed(format!(
                "internal error in the native engine ({what})"
            )))
        }
    }
}

/// Rejects with a JS Error whose `code` is the engine's code.
fn reject<T>(env: &Env, e: vidsheet_core::Error) -> Result<T> {
    let err = Error::new(e.code.as_str().to_string(), e.message);
    // SAFETY: called on the JS thread with its env; the value is a freshly created Error object.
    let value = unsafe { JsError::from(err).into_value(env.raw()) };
    let unknown = unsafe { Unknown::from_raw_unchecked(env.raw(), value) };
    Err(Error::from(unknown))
}

pub struct ProbeTask {
    path: String,
    opening: vidsheet_core::Opening,
    stream: Option<u32>,
}

impl Task for ProbeTask {
    type Output = vidsheet_core::Result<ProbeInfo>;
    type JsValue = ProbeInfo;

    fn compute(&mut self) -> Result<Self::Output> {
        let (path, opening, stream) = (self.path.clone(), self.opening.clone(), self.stream);
        Ok(guarded(move || {
            vidsheet_core::probe_as(&path, &opening, stream)
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        output.or_else(|e| reject(&env, e))
    }
}

/// How `probe` opens the file. All omitted: whatever FFmpeg detects, within FFmpeg's own limits
/// (the local surfaces).
#[napi(object)]
pub struct ProbeOptions {
    /// A server's job: the demuxer FFmpeg's detection picks must be one of these, or the call
    /// rejects `unreadable_video` having opened nothing.
    pub allowed_formats: Option<Vec<String>>,
    /// This demuxer, without detection (a bounded job's later probes: the one its survey found).
    pub input_format: Option<String>,
    /// FFmpeg's `max_pixels` for every decoder, with `max_streams` 32 (DESIGN §5a): decoders are
    /// then opened for one video stream and the first audio stream only.
    pub max_pixels: Option<i64>,
    /// Bounded: the video stream whose frame is tried (omitted: none, a survey of the streams).
    pub stream: Option<u32>,
}

/// Opens a video and reports its facts: the demuxer that opened it, declared duration, start
/// time, every video stream (size, disposition, frame count, whether it decodes, where its data
/// ends) and where the audio ends. See `ProbeOptions` for a server's restricted, bounded opens.
#[napi(ts_return_type = "Promise<ProbeInfo>")]
pub fn probe(path: String, options: Option<ProbeOptions>) -> AsyncTask<ProbeTask> {
    let options = options.unwrap_or(ProbeOptions {
        allowed_formats: None,
        input_format: None,
        max_pixels: None,
        stream: None,
    });
    let container = match (options.input_format, options.allowed_formats) {
        (Some(name), _) => vidsheet_core::Container::Fixed(name),
        (None, Some(names)) => vidsheet_core::Container::Allowed(names),
        (None, None) => vidsheet_core::Container::Any,
    };
    let bounds = options
        .max_pixels
        .map(|max_pixels| vidsheet_core::Bounds { max_pixels });
    AsyncTask::new(ProbeTask {
        path,
        opening: vidsheet_core::Opening { container, bounds },
        stream: options.stream,
    })
}

pub struct AudioPeaksTask {
    path: String,
    container: vidsheet_core::Container,
    start_ms: f64,
    end_ms: f64,
    stream: Option<u32>,
}

impl Task for AudioPeaksTask {
    type Output = vidsheet_core::Result<AudioPeaks>;
    type JsValue = AudioPeaks;

    fn compute(&mut self) -> Result<Self::Output> {
        let (path, start, end, stream) =
            (self.path.clone(), self.start_ms, self.end_ms, self.stream);
        let container = self.container.clone();
        Ok(guarded(move || {
            vidsheet_core::audio_peaks_as(&path, &container, start, end, stream)
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        output.or_else(|e| reject(&env, e))
    }
}

/// Decodes the whole audio stream `stream` (src/core/probe.ts `chooseAudioStream`; omitted, or not
/// an audio stream of the file: the first) and measures it: raw peak absolute amplitude of the
/// mono downmix per ms over [startMs, endMs) (container-relative, samples placed by their
/// timestamps) and the whole clip's peak. Normalising is src/core/audio.ts's. No decodable audio
/// resolves with `present: false`. `inputFormat`, when given, is the demuxer the file is opened
/// with (no detection), as the render plan's.
#[napi(ts_return_type = "Promise<AudioPeaks>")]
pub fn audio_peaks(
    path: String,
    start_ms: f64,
    end_ms: f64,
    input_format: Option<String>,
    stream: Option<u32>,
) -> AsyncTask<AudioPeaksTask> {
    AsyncTask::new(AudioPeaksTask {
        path,
        container: match input_format {
            Some(name) => vidsheet_core::Container::Fixed(name),
            None => vidsheet_core::Container::Any,
        },
        start_ms,
        end_ms,
        stream,
    })
}

type Progress = ThreadsafeFunction<FnArgs<(u32, u32)>, (), FnArgs<(u32, u32)>, Status, false>;

pub struct RenderTask {
    /// The plan as read from JS, or why it was rejected (reported as the promise's rejection).
    plan: Option<vidsheet_core::Result<RenderPlan>>,
    progress: Option<Progress>,
}

impl Task for RenderTask {
    type Output = vidsheet_core::Result<RenderResult>;
    type JsValue = RenderResult;

    fn compute(&mut self) -> Result<Self::Output> {
        let plan = match self.plan.take() {
            Some(Ok(plan)) => plan,
            Some(Err(e)) => return Ok(Err(e)),
            None => return Ok(Err(vidsheet_core::Error::failed("render task ran twice"))),
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
        Ok(guarded(move || vidsheet_core::render(&plan, &mut report)))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        output.or_else(|e| reject(&env, e))
    }
}

/// Renders every sheet of a finished plan in one call (off the JS thread). `onProgress(done,
/// total)` counts cells and is throttled; it never blocks the decoder. A plan with a bad value
/// rejects with `render_failed` naming the field, and nothing is written.
#[napi(
    ts_args_type = "plan: RenderPlan, onProgress?: (done: number, total: number) => void",
    ts_return_type = "Promise<RenderResult>"
)]
pub fn render(plan: Unknown<'_>, on_progress: Option<Progress>) -> AsyncTask<RenderTask> {
    // Read here, on the JS thread (the value lives only during this call); a rejection goes
    // through the task so that a bad plan rejects the promise like any other render failure.
    AsyncTask::new(RenderTask {
        plan: Some(RenderPlan::from_js(plan)),
        progress: on_progress,
    })
}
