//! The render plan an engine executes, the probe's facts and the render's result, declared once.
//!
//! TypeScript owns the contract (src/core/render-plan.ts, src/engine/types.ts); these structs are
//! its Rust side. With the `napi` feature the same structs are the binding's JS types: napi-rs
//! derives their conversion and the binding's declarations (npm/linux-x64-gnu/index.d.ts) from
//! them, and src/engine/native.ts checks at compile time that the TypeScript plan fits them. A plan
//! coming from JS is read by [`RenderPlan::read`] (plan/read.rs), which rejects a bad value with
//! the path of its field instead of clamping it.

mod read;

#[cfg(feature = "napi")]
mod js;

use serde::Deserialize;

use crate::media::{Bounds, Container, Opening};

/// A pixel rectangle on a sheet.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub struct Rect {
    /// Left edge in pixels (may lie outside the sheet: drawing is clipped).
    #[serde(deserialize_with = "read::coordinate")]
    pub x: i32,
    /// Top edge in pixels (may lie outside the sheet: drawing is clipped).
    #[serde(deserialize_with = "read::coordinate")]
    pub y: i32,
    /// Width in pixels, 0..65535.
    #[serde(deserialize_with = "read::side")]
    pub w: u32,
    /// Height in pixels, 0..65535.
    #[serde(deserialize_with = "read::side")]
    pub h: u32,
}

/// One video stream as the file holds it (facts only: src/core/probe.ts picks the stream).
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(
        object,
        object_from_js = false,
        object_to_js = false,
        use_nullable = true
    )
)]
#[derive(Debug, Clone, PartialEq)]
pub struct VideoStreamFacts {
    /// Stream index in the container.
    pub index: u32,
    /// Display width in pixels after sample aspect ratio and rotation (0 when the stream has none).
    pub width: u32,
    /// Display height in pixels after sample aspect ratio and rotation (0 when the stream has none).
    pub height: u32,
    /// The container marks the stream as default.
    pub is_default: bool,
    /// Cover art or another attached picture.
    pub attached_pic: bool,
    /// Frames the stream holds (the container's count, else an estimate); null when unknown.
    // A JS number, not napi's bigint for u64 (plan/js.rs converts it); `use_nullable` adds null.
    #[cfg_attr(feature = "napi", napi(ts_type = "number"))]
    pub frames: Option<u64>,
    /// A frame of the stream decoded during the probe.
    pub decodes: bool,
    /// Where the stream's data ends, seconds from the container start; null when not found.
    pub readable_end: Option<f64>,
    /// Ids of the programs (MPEG-TS services) that carry the stream; empty in a file without any.
    pub programs: Vec<u32>,
}

/// What src/core/probe.ts needs of an audio stream to pick the one the chosen video plays with.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, PartialEq)]
pub struct AudioStreamFacts {
    /// Stream index in the container.
    pub index: u32,
    /// Ids of the programs (MPEG-TS services) that carry the stream; empty in a file without any.
    pub programs: Vec<u32>,
}

/// What the engine learns from opening the file.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, use_nullable = true)
)]
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeInfo {
    /// The demuxer FFmpeg opened the file with, as FFmpeg names it (`mov,mp4,m4a,3gp,3g2,mj2`);
    /// a restricted job opens every later step with exactly this one.
    pub format: String,
    /// Duration the container declares, seconds; 0 when it declares none.
    pub duration: f64,
    /// Container start time in seconds (format start_time); 0 when unknown.
    pub start_time: f64,
    /// Every video stream, in stream order (attached pictures included, flagged).
    pub video_streams: Vec<VideoStreamFacts>,
    /// True when the file has at least one audio stream.
    pub has_audio: bool,
    /// Every audio stream, in stream order.
    pub audio_streams: Vec<AudioStreamFacts>,
    /// The latest readable end of any audio stream; null without audio or when not found.
    pub audio_end: Option<f64>,
}

/// A timecode label: a filled box and text drawn on top of it.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelPlan {
    pub text: String,
    #[cfg_attr(feature = "napi", napi(js_name = "box"))]
    pub r#box: Rect,
    /// Left edge of the first glyph's advance box, pixels.
    #[serde(deserialize_with = "read::position")]
    pub text_x: f32,
    /// Baseline of the text, pixels.
    #[serde(deserialize_with = "read::position")]
    pub baseline_y: f32,
    /// Font size in pixels (the em size handed to the rasteriser), above 0 and at most 4096.
    #[serde(deserialize_with = "read::font_size")]
    pub font_size: f32,
}

/// One cell: the frame displayed at `timeMs`, scaled to exactly `rect`, and its label.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CellPlan {
    /// Sample time in ms, relative to the container start time (frame rule in
    /// src/core/render-plan.ts).
    #[serde(deserialize_with = "read::time")]
    pub time_ms: f64,
    pub rect: Rect,
    pub label: LabelPlan,
}

/// The audio-activity band above the grid (painting rule in src/core/render-plan.ts).
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BandPlan {
    pub rect: Rect,
    /// Start of the band's window, ms (container-relative).
    #[serde(deserialize_with = "read::time")]
    pub start_ms: f64,
    /// End of the band's window, ms; not before `startMs`.
    #[serde(deserialize_with = "read::time")]
    pub end_ms: f64,
    /// Cell sample times on this sheet (ms, container-relative), marked as ticks.
    #[serde(deserialize_with = "read::times")]
    pub ticks_ms: Vec<f64>,
    /// When set, the clip has no audio: draw this label instead of levels.
    #[cfg_attr(feature = "napi", napi(ts_type = "LabelPlan | null"))]
    pub message: Option<LabelPlan>,
    /// One level 0..1 per pixel column of `rect.w`, decided by src/core/audio.ts from the raw
    /// peaks (`audioPeaks`); absent or short: the missing columns have no bar.
    #[serde(default, deserialize_with = "read::levels")]
    pub levels: Option<Vec<f64>>,
}

/// One JPEG sheet.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(
        object,
        object_from_js = false,
        object_to_js = false,
        use_nullable = true
    )
)]
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SheetPlan {
    /// Absolute output path of the JPEG.
    pub path: String,
    /// Sheet width in pixels.
    #[serde(deserialize_with = "read::side")]
    pub width: u32,
    /// Sheet height in pixels.
    #[serde(deserialize_with = "read::side")]
    pub height: u32,
    /// Cells in time order (left to right, top to bottom).
    pub cells: Vec<CellPlan>,
    pub band: Option<BandPlan>,
}

/// Colours are sRGB `[r, g, b]` (or `[r, g, b, a]`, alpha 255 = opaque), integers 0..255.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Theme {
    #[cfg_attr(feature = "napi", napi(ts_type = "[number, number, number]"))]
    #[serde(deserialize_with = "read::colour")]
    pub background: [u8; 3],
    #[cfg_attr(feature = "napi", napi(ts_type = "[number, number, number, number]"))]
    #[serde(deserialize_with = "read::colour")]
    pub label_box: [u8; 4],
    #[cfg_attr(feature = "napi", napi(ts_type = "[number, number, number]"))]
    #[serde(deserialize_with = "read::colour")]
    pub label_text: [u8; 3],
    #[cfg_attr(feature = "napi", napi(ts_type = "[number, number, number]"))]
    #[serde(deserialize_with = "read::colour")]
    pub band_background: [u8; 3],
    #[cfg_attr(feature = "napi", napi(ts_type = "[number, number, number]"))]
    #[serde(deserialize_with = "read::colour")]
    pub band_level: [u8; 3],
    #[cfg_attr(feature = "napi", napi(ts_type = "[number, number, number]"))]
    #[serde(deserialize_with = "read::colour")]
    pub band_peak: [u8; 3],
    #[cfg_attr(feature = "napi", napi(ts_type = "[number, number, number]"))]
    #[serde(deserialize_with = "read::colour")]
    pub band_tick: [u8; 3],
    /// Normalised level (0..1) at or above which a band column counts as a peak.
    #[serde(deserialize_with = "read::unit")]
    pub peak_threshold: f64,
}

/// A finished plan: every sheet of one job.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderPlan {
    /// Absolute input path.
    pub input: String,
    /// The demuxer to open the input with, without detecting it again (a restricted job: the one
    /// its probe detected and allowed, src/core/containers.ts); omitted: FFmpeg detects it.
    #[serde(default)]
    pub input_format: Option<String>,
    /// FFmpeg's `max_pixels` for every decoder of the job, with `max_streams` 32 for every open
    /// (DESIGN §5a, a server's job); omitted: FFmpeg's own limits (the local surfaces).
    #[serde(default, deserialize_with = "read::max_pixels")]
    pub max_pixels: Option<i64>,
    /// Index of the video stream to decode (core/probe.ts chose it from the probe's facts).
    #[serde(deserialize_with = "read::stream_index")]
    pub video_stream: u32,
    /// TTF file used for every label.
    pub font_path: String,
    /// JPEG quality, an integer 1..100.
    #[serde(deserialize_with = "read::quality")]
    pub quality: u8,
    pub theme: Theme,
    /// The sheets to write (none is a valid, empty job).
    pub sheets: Vec<SheetPlan>,
    /// Directory the engine may use for intermediate files (the native engine writes none).
    pub temp_dir: String,
    /// The window's end (ms, the cells' clock): decoded after the last cell and not drawn, so the
    /// frames of the gap after it are decoded for the zoom hints' pictures; omitted: none.
    #[serde(default)]
    pub closing_ms: Option<f64>,
    /// The part of the clip whose packets the zoom hints read; omitted: the whole clip.
    #[serde(default)]
    pub hint_packets: Option<HintPackets>,
}

/// The part of the clip whose packets the zoom hints read (ms, the cells' clock;
/// src/core/zoom.ts hintPacketSpan): an engine need hand over no packet outside it.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HintPackets {
    /// Its start; omitted: the clip's.
    #[serde(default)]
    pub from_ms: Option<f64>,
    /// Its end; omitted: the clip's.
    #[serde(default)]
    pub to_ms: Option<f64>,
}

impl HintPackets {
    /// The span in seconds on the labels' clock, open where an end is omitted.
    pub(crate) fn seconds(span: Option<HintPackets>) -> (f64, f64) {
        let span = span.unwrap_or_default();
        (
            span.from_ms.map_or(f64::NEG_INFINITY, |ms| ms / 1000.0),
            span.to_ms.map_or(f64::INFINITY, |ms| ms / 1000.0),
        )
    }
}

impl RenderPlan {
    /// How every open of the plan's input chooses its demuxer, within the plan's bounds.
    pub(crate) fn opening(&self) -> Opening {
        Opening {
            container: match &self.input_format {
                Some(name) => Container::Fixed(name.clone()),
                None => Container::Any,
            },
            bounds: self.max_pixels.map(|max_pixels| Bounds { max_pixels }),
        }
    }
}

/// A cell whose frame could not be decoded (0-based indices).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellRef {
    pub sheet: u32,
    pub cell: u32,
}

/// What `audioPeaks` measured (src/core/audio.ts `AudioPeaks`): raw, not normalised.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, PartialEq)]
pub struct AudioPeaks {
    /// False when the file has no decodable audio track.
    pub present: bool,
    /// Peak absolute amplitude of the mono downmix over the whole clip (every sample at or after
    /// the container start), whatever range was asked for; 0 for silence or when not present.
    pub clip_peak: f64,
    /// Container-relative ms of `peaks[0]`.
    pub start_ms: f64,
    /// Peak absolute amplitude of the mono downmix per ms: `peaks[i]` covers
    /// [startMs + i, startMs + i + 1), samples placed by their timestamps. Empty when not present.
    #[cfg_attr(feature = "napi", napi(ts_type = "Float32Array"))]
    pub peaks: Vec<f32>,
}

/// Work counters (for benchmarks and tests).
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RenderStats {
    /// Video frames that came out of the decoder.
    #[cfg_attr(feature = "napi", napi(ts_type = "number"))]
    pub decoded_frames: u64,
    /// Seeks issued (including retries further back and rewinds).
    #[cfg_attr(feature = "napi", napi(ts_type = "number"))]
    pub seeks: u64,
    /// Packets sent with non-reference frames discarded (frames no cell can show).
    #[cfg_attr(feature = "napi", napi(ts_type = "number"))]
    pub skippable_packets: u64,
    /// Video decoders that worked in parallel (each on a contiguous part of the cells).
    #[cfg_attr(feature = "napi", napi(ts_type = "number"))]
    pub workers: u64,
    /// Times a decoder waited for another one to prove the stream's open-GOP entries.
    #[cfg_attr(feature = "napi", napi(ts_type = "number"))]
    pub proof_waits: u64,
    /// Cells decoded trusting an open-GOP entry while another decoder proved one, held back
    /// until its verdict.
    #[cfg_attr(feature = "napi", napi(ts_type = "number"))]
    pub provisional_cells: u64,
    /// Of those, cells decoded again because the verdict did not prove the entry.
    #[cfg_attr(feature = "napi", napi(ts_type = "number"))]
    pub redone_cells: u64,
}

/// The video packets a render read on the way to its cells (src/core/packet-log.ts `PacketLog`):
/// headers only, and a thumbnail of every picture decoded, for the zoom hints. Times are seconds on the labels' clock (timestamp minus the
/// container start), the decode timestamp where the packet has one, else its presentation time
/// (Matroska: always the presentation time).
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, object_to_js = false)
)]
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PacketLog {
    #[cfg_attr(feature = "napi", napi(ts_type = "Float64Array"))]
    pub times: Vec<f64>,
    /// Bytes of each packet.
    #[cfg_attr(feature = "napi", napi(ts_type = "Float64Array"))]
    pub sizes: Vec<f64>,
    /// 1 for a keyframe.
    #[cfg_attr(feature = "napi", napi(ts_type = "Uint8Array"))]
    pub keys: Vec<u8>,
    /// Pairs [start, end] (seconds; -Infinity: from the stream's start, Infinity: to its end)
    /// within which every packet of the stream is listed.
    #[cfg_attr(feature = "napi", napi(ts_type = "Float64Array"))]
    pub spans: Vec<f64>,
    /// Matroska/WebM: every keyframe of the stream as the Cues list it (presentation times, same
    /// clock), from which the keyframe rhythm is learnt (src/core/packet-log.ts); empty elsewhere.
    #[cfg_attr(feature = "napi", napi(ts_type = "Float64Array"))]
    pub index_keys: Vec<f64>,
    /// Per cell (sheets in order): the decode time of the shown frame's packet, NaN when unknown:
    /// where the cell stands among the packets, which are in decode order.
    #[cfg_attr(feature = "napi", napi(ts_type = "Float64Array"))]
    pub cells: Vec<f64>,
    /// Every picture decoded on the way (the cells' own among them): its presentation time
    /// (seconds, same clock), in decode output order, possibly repeated.
    #[cfg_attr(feature = "napi", napi(ts_type = "Float64Array"))]
    pub pictures: Vec<f64>,
    /// Per picture, in that order: its luma thumbnail (`video::thumbs`, 576 bytes each).
    #[cfg_attr(feature = "napi", napi(ts_type = "Uint8Array"))]
    pub thumbs: Vec<u8>,
}

/// What a render reports.
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, use_nullable = true)
)]
#[derive(Debug, Clone, PartialEq)]
pub struct RenderResult {
    /// Cells left black (still labelled) because their frame could not be decoded.
    pub unreadable: Vec<CellRef>,
    pub stats: RenderStats,
    /// Per cell, sheets in order: the presentation time of the frame it shows, in seconds on the
    /// labels' clock (pts minus the container start, unrounded); null for an unreadable cell.
    pub frame_times: Vec<Option<f64>>,
    /// The packets read on the way (the zoom hints' raw material).
    pub packets: PacketLog,
}
