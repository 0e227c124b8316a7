//! Plain Rust mirror of the plan types in src/core/render-plan.ts and the result types in src/engine/types.ts.

/// A pixel rectangle on a sheet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub w: u32,
    pub h: u32,
}

/// One video stream as the file holds it (facts only: src/core/probe.ts picks the stream).
#[derive(Debug, Clone, PartialEq)]
pub struct VideoStreamFacts {
    /// Stream index in the container.
    pub index: u32,
    /// Display size after sample aspect ratio and rotation (0 x 0 when the stream has none).
    pub width: u32,
    pub height: u32,
    /// Disposition `default`.
    pub is_default: bool,
    /// Disposition `attached_pic` (cover art).
    pub attached_pic: bool,
    /// Frames the stream holds (the container's count, else an estimate); None when unknown.
    pub frames: Option<u64>,
    /// A frame of the stream decoded during the probe.
    pub decodes: bool,
    /// Where the stream's data ends, seconds from the container start; None when not found.
    pub readable_end: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProbeInfo {
    /// Duration the container declares, seconds; 0 when it declares none.
    pub duration: f64,
    /// Container start time in seconds (0 when unknown).
    pub start_time: f64,
    /// Every video stream, in stream order (attached pictures included).
    pub video_streams: Vec<VideoStreamFacts>,
    pub has_audio: bool,
    /// The latest readable end of any audio stream; None without audio or when not found.
    pub audio_end: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LabelPlan {
    pub text: String,
    pub r#box: Rect,
    /// Left edge of the first glyph's advance box.
    pub text_x: f32,
    /// Baseline of the text.
    pub baseline_y: f32,
    /// Em size in pixels.
    pub font_size: f32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CellPlan {
    /// Sample time in ms relative to the container start time.
    pub time_ms: f64,
    pub rect: Rect,
    pub label: LabelPlan,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BandPlan {
    pub rect: Rect,
    pub start_ms: f64,
    pub end_ms: f64,
    pub ticks_ms: Vec<f64>,
    pub message: Option<LabelPlan>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SheetPlan {
    pub path: String,
    pub width: u32,
    pub height: u32,
    pub cells: Vec<CellPlan>,
    pub band: Option<BandPlan>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub background: [u8; 3],
    pub label_box: [u8; 4],
    pub label_text: [u8; 3],
    pub band_background: [u8; 3],
    pub band_level: [u8; 3],
    pub band_peak: [u8; 3],
    pub band_tick: [u8; 3],
    pub peak_threshold: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AudioPlan {
    pub start_ms: f64,
    pub end_ms: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RenderPlan {
    pub input: String,
    pub video_stream: u32,
    pub font_path: String,
    /// JPEG quality 1..=100.
    pub quality: u8,
    pub theme: Theme,
    pub sheets: Vec<SheetPlan>,
    pub audio: Option<AudioPlan>,
    pub temp_dir: String,
}

/// A cell whose frame could not be decoded (0-based indices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellRef {
    pub sheet: u32,
    pub cell: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AudioEnvelope {
    pub present: bool,
    /// Normalised 1 ms envelope over the plan's audio window (empty when not present).
    pub envelope: Vec<f32>,
}

/// Work counters (for benchmarks and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RenderStats {
    /// Video frames that came out of the decoder.
    pub decoded_frames: u64,
    /// Seeks issued (including retries further back and rewinds).
    pub seeks: u64,
    /// Packets sent with non-reference frames discarded (frames no cell can show).
    pub skippable_packets: u64,
    /// Video decoders that worked in parallel (each on a contiguous part of the cells).
    pub workers: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RenderResult {
    pub unreadable: Vec<CellRef>,
    pub audio: Option<AudioEnvelope>,
    pub stats: RenderStats,
}
