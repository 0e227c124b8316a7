//! What FFmpeg's decoders log, kept per video decoder: the packets during whose decoding an error
//! was logged, or the decoder invented reference pictures.
//!
//! A decoder that meets a missing reference picture (a seek to a sync sample that is not a true
//! random-access point) conceals it and says so only in its log ("Missing reference picture",
//! "reference picture missing during reorder"); the frame itself comes out unflagged. H.264 started
//! on a picture that is not an IDR fills the frame_num gap before it with grey pictures any later
//! frame may then predict from, and says so only at debug level ("Frame num gap"). So the
//! process-wide log callback is replaced: for an `AVCodecContext` tagged by [`DecodeLog::tag`]
//! (through `opaque`, which frame threading copies into every thread's context), such a line
//! records the context's `reordered_opaque`, which the source sets to the serial of each packet
//! before sending it (frame threading copies it too, per packet). Everything is then passed to
//! FFmpeg's default callback, which keeps the level set in [`crate::media::init`] (quiet unless
//! `VIDSHEET_FFMPEG_LOG` is set).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};

use ff::ffi;
use ffmpeg_next as ff;

/// Serials kept per decoder between two reads (an error flood on damaged data needs no more).
const MAX_ERRORS: usize = 4096;
/// H.264's debug line when it fills a frame_num gap with invented reference pictures.
const FRAME_NUM_GAP: &[u8] = b"Frame num gap";
/// H.264's error line when told to forget a short-term picture it does not have: what an open
/// GOP entered at its keyframe logs when the encoder drops the pictures before it (see
/// [`crate::video`]'s recovery). Kept apart from the other errors so recovery can tell the two.
const MMCO_UNREF: &[u8] = b"mmco: unref short failure";

/// What a log line says about the decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Error,
    Gap,
}

#[derive(Default)]
struct Lines {
    errors: Vec<i64>,
    gaps: Vec<i64>,
    /// Errors that were [`MMCO_UNREF`] lines (not in `errors`).
    unrefs: Vec<i64>,
}

/// Serials of the packets during whose decoding the log said something, by what it said.
#[derive(Default)]
pub(crate) struct Logged {
    /// An error other than [`MMCO_UNREF`].
    pub errors: Vec<i64>,
    /// The decoder invented reference pictures before this packet.
    pub gaps: Vec<i64>,
    /// [`MMCO_UNREF`] (an error too).
    pub unrefs: Vec<i64>,
}

struct Shared {
    id: usize,
    /// Record only while the source watches (after a seek, until a target is answered).
    watching: AtomicBool,
    /// Something was recorded since the last [`DecodeLog::watch`].
    any: AtomicBool,
    lines: Mutex<Lines>,
}

/// Registered decoders; looked up only on error-level lines, which are rare.
static REGISTRY: Mutex<Vec<Arc<Shared>>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);
/// `avcodec_get_class()`, as an address (set once by [`install`]).
static CODEC_CLASS: AtomicUsize = AtomicUsize::new(0);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not stop the logging of every later decoder.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Installs the callback (once per process; called from [`crate::media::init`]).
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| unsafe {
        CODEC_CLASS.store(ffi::avcodec_get_class() as usize, Ordering::Relaxed);
        ffi::av_log_set_callback(Some(callback));
    });
}

/// The line a demuxer logs when a file declares more streams than `max_streams` lets it open; the
/// open then fails "out of memory" (FFmpeg's stream allocation refuses), which is the file's fault.
const MAX_STREAMS_EXCEEDED: &[u8] = b"Number of streams exceeds max_streams";

std::thread_local! {
    /// This thread's last open met [`MAX_STREAMS_EXCEEDED`] (demuxers log on the opening thread).
    static STREAMS_EXCEEDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a demuxer on this thread refused a stream over `max_streams` since the last call.
pub(crate) fn streams_exceeded() -> bool {
    STREAMS_EXCEEDED.with(|flag| flag.replace(false))
}

unsafe extern "C" fn callback(
    avcl: *mut c_void,
    level: c_int,
    fmt: *const c_char,
    vl: *mut ffi::__va_list_tag,
) {
    // Only error and debug lines can say anything (see `classify`): the rest pass at once.
    if level <= ffi::AV_LOG_ERROR
        && !fmt.is_null()
        && CStr::from_ptr(fmt)
            .to_bytes()
            .starts_with(MAX_STREAMS_EXCEEDED)
    {
        STREAMS_EXCEEDED.with(|flag| flag.set(true));
    }
    if level <= ffi::AV_LOG_ERROR || level == ffi::AV_LOG_DEBUG {
        if let source @ Source::Decoder { id, serial } = source_of(avcl) {
            let message = if fmt.is_null() {
                &[][..]
            } else {
                CStr::from_ptr(fmt).to_bytes()
            };
            if let Some(kind) = classify(source, level, message) {
                record(id, kind, serial, message.starts_with(MMCO_UNREF));
            }
        }
    }
    ffi::av_log_default_callback(avcl, level, fmt, vl);
}

/// Who logged a message: a decoder tagged by [`DecodeLog::tag`] (its log's id, and the serial of
/// the packet it is decoding), or anyone else (demuxer, parser, an untagged decoder, muxer...).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Decoder { id: usize, serial: i64 },
    Other,
}

/// The source behind av_log's context pointer.
///
/// # Safety
/// `avcl` is null or an av_log context: a struct that starts with a pointer to its AVClass.
unsafe fn source_of(avcl: *mut c_void) -> Source {
    if avcl.is_null() {
        return Source::Other;
    }
    let class = *(avcl as *const *const ffi::AVClass);
    let codec_class = CODEC_CLASS.load(Ordering::Relaxed);
    if codec_class == 0 || class as usize != codec_class {
        return Source::Other;
    }
    let ctx = avcl as *const ffi::AVCodecContext;
    match (*ctx).opaque as usize {
        0 => Source::Other,
        id => Source::Decoder {
            id,
            serial: (*ctx).reordered_opaque,
        },
    }
}

/// What one log message says about the decode (the rule and its vectors:
/// fixtures/vectors/decoder-log.json; the fallback's is src/engine/ffmpeg/decode-log.ts `logLine`):
/// an error when the decoder logs at error level or worse, invented references when it logs
/// "Frame num gap" at debug level, nothing otherwise. `message` is the format string (it starts
/// with the text the vectors match).
fn classify(source: Source, level: c_int, message: &[u8]) -> Option<Kind> {
    if source == Source::Other {
        None
    } else if level <= ffi::AV_LOG_ERROR {
        Some(Kind::Error)
    } else if level == ffi::AV_LOG_DEBUG && message.starts_with(FRAME_NUM_GAP) {
        Some(Kind::Gap)
    } else {
        None
    }
}

fn record(id: usize, kind: Kind, serial: i64, unref: bool) {
    let registry = lock(&REGISTRY);
    let Some(shared) = registry.iter().find(|s| s.id == id) else {
        return;
    };
    if !shared.watching.load(Ordering::Relaxed) {
        return;
    }
    shared.any.store(true, Ordering::Relaxed);
    let mut lines = lock(&shared.lines);
    let list = match kind {
        Kind::Error if unref => &mut lines.unrefs,
        Kind::Error => &mut lines.errors,
        Kind::Gap => &mut lines.gaps,
    };
    if list.last() != Some(&serial) && list.len() < MAX_ERRORS {
        list.push(serial);
    }
}

/// One decoder's log; unregistered when dropped. Drop it only after the decoder is freed (frame
/// threads may log until then; a line for an unregistered decoder is simply not recorded).
pub(crate) struct DecodeLog {
    shared: Arc<Shared>,
}

impl DecodeLog {
    pub(crate) fn new() -> Self {
        install();
        let shared = Arc::new(Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            watching: AtomicBool::new(false),
            any: AtomicBool::new(false),
            lines: Mutex::new(Lines::default()),
        });
        lock(&REGISTRY).push(Arc::clone(&shared));
        DecodeLog { shared }
    }

    /// Marks `ctx` (before `avcodec_open2`, so frame threads inherit it) as this log's decoder.
    ///
    /// # Safety
    /// `ctx` must be a valid, not yet opened decoder context whose `opaque` nothing else uses.
    pub(crate) unsafe fn tag(&self, ctx: *mut ffi::AVCodecContext) {
        (*ctx).opaque = self.shared.id as *mut c_void;
    }

    /// Starts (or stops) recording, forgetting what was recorded so far.
    pub(crate) fn watch(&self, on: bool) {
        self.shared.watching.store(on, Ordering::Relaxed);
        *lock(&self.shared.lines) = Lines::default();
        self.shared.any.store(false, Ordering::Relaxed);
    }

    /// Whether anything was recorded since the last [`Self::watch`] (cheap).
    pub(crate) fn any(&self) -> bool {
        self.shared.any.load(Ordering::Relaxed)
    }

    /// What was recorded since the last [`Self::watch`].
    pub(crate) fn read(&self) -> Logged {
        let lines = lock(&self.shared.lines);
        Logged {
            errors: lines.errors.clone(),
            gaps: lines.gaps.clone(),
            unrefs: lines.unrefs.clone(),
        }
    }
}

impl Drop for DecodeLog {
    fn drop(&mut self) {
        lock(&REGISTRY).retain(|s| s.id != self.shared.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Case {
        source: String,
        level: String,
        message: String,
        expect: Option<String>,
    }

    #[test]
    fn messages_are_read_as_the_shared_vectors_say() {
        for case in crate::vectors::cases::<Case>("decoder-log.json") {
            let level = match case.level.as_str() {
                "panic" => ffi::AV_LOG_PANIC,
                "fatal" => ffi::AV_LOG_FATAL,
                "error" => ffi::AV_LOG_ERROR,
                "warning" => ffi::AV_LOG_WARNING,
                "info" => ffi::AV_LOG_INFO,
                "verbose" => ffi::AV_LOG_VERBOSE,
                "debug" => ffi::AV_LOG_DEBUG,
                other => panic!("unknown level {other}"),
            };
            let source = if case.source == "decoder" {
                Source::Decoder { id: 1, serial: 0 }
            } else {
                Source::Other
            };
            let got = classify(source, level as c_int, case.message.as_bytes()).map(|k| match k {
                Kind::Error => "error",
                Kind::Gap => "gap",
            });
            assert_eq!(got, case.expect.as_deref(), "{case:?}", case = case.message);
        }
    }
}
