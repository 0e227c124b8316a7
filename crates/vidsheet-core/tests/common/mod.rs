//! Test helpers: clips made with the ffmpeg CLI at test time, plans built by hand, sheets read
//! back by what they show.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use vidsheet_core::{CellPlan, LabelPlan, Rect, RenderPlan, SheetPlan, Theme};

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "vidsheet-core-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn ffmpeg(args: &[&str]) {
    let out = Command::new("ffmpeg")
        .args(["-y", "-v", "error", "-nostdin"])
        .args(args)
        .output()
        .expect("ffmpeg CLI available");
    assert!(
        out.status.success(),
        "ffmpeg {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ffmpeg <args> <clip>` once per argument list: the clip is kept in fixtures/.cache/rust-clips/
/// (beside the TypeScript tests' clips) under a hash of `args`, so a run encodes only what is new
/// and leaves nothing in the temp dir. Encoded under a temporary name and renamed into place, so a
/// test in another thread never reads half a clip.
pub fn cached_clip(name: &str, args: &[&str]) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/.cache/rust-clips");
    std::fs::create_dir_all(&dir).expect("clip cache dir");
    let hash = args
        .join("\0")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    let path = dir.join(format!("{hash:016x}-{name}"));
    if !path.exists() {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{}-{n}-{name}", std::process::id()));
        let tmp_arg = tmp.to_string_lossy().into_owned();
        ffmpeg(&[args, &[tmp_arg.as_str()]].concat());
        std::fs::rename(&tmp, &path).expect("clip into the cache");
    }
    path.to_string_lossy().into_owned()
}

pub fn ffprobe(args: &[&str]) -> String {
    let out = Command::new("ffprobe")
        .args(["-v", "error"])
        .args(args)
        .output()
        .expect("ffprobe");
    assert!(
        out.status.success(),
        "ffprobe {:?}: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Width of one bit stripe in the index clips.
pub const STRIPE: u32 = 16;
pub const BITS: u32 = 10;

/// A lavfi source whose frame N shows N in binary: BITS vertical stripes (LSB left), white = 1.
/// `pre` filters (e.g. a frame-dropping select) run before the index is drawn, so N is the index
/// of the frame in the output.
pub fn index_source_with(fps: u32, seconds: f64, pre: &str) -> String {
    format!(
        "nullsrc=s={}x32:r={fps}:d={seconds}{pre},geq=lum='255*mod(floor(N/pow(2\\,floor(X/{STRIPE})))\\,2)':cb=128:cr=128",
        STRIPE * BITS
    )
}

pub fn index_source(fps: u32, seconds: f64) -> String {
    index_source_with(fps, seconds, "")
}

/// Encodes a lavfi `source` (an index source) to `out` with x264: near-lossless, `bframes`
/// B-frames that really happen (b-adapt 0) and a keyframe exactly every `gop` frames (no scene
/// cuts). `extra` output options go before the file name.
pub fn encode_index(source: &str, bframes: u32, gop: u32, extra: &[&str], out: &str) {
    let (bframes, gop) = (bframes.to_string(), gop.to_string());
    let x264 = [
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-crf",
        "18",
        "-x264-params",
        "b-adapt=0",
        "-bf",
        &bframes,
        "-g",
        &gop,
        "-keyint_min",
        &gop,
        "-sc_threshold",
        "0",
    ];
    ffmpeg(&[&["-f", "lavfi", "-i", source], &x264[..], extra, &[out]].concat());
}

/// Video frame timestamps (stream units, display order) and the stream time base, as ffprobe
/// decodes them.
pub struct FrameTimes {
    pub pts: Vec<i64>,
    pub tb: (i64, i64),
    pub start_us: i64,
}

pub fn frame_times(path: &str) -> FrameTimes {
    let s = ffprobe(&[
        "-select_streams",
        "v:0",
        "-show_entries",
        "frame=best_effort_timestamp",
        "-of",
        "csv=p=0",
        path,
    ]);
    // Frames without a timestamp (e.g. the last frame of an AVI with B-frames, flushed at the
    // end) continue the cadence of the previous two, as the engine does.
    let mut pts: Vec<i64> = Vec::new();
    for line in s
        .lines()
        .map(|l| l.trim().trim_end_matches(','))
        .filter(|l| !l.is_empty())
    {
        match line.parse::<i64>() {
            Ok(v) => pts.push(v),
            Err(_) => {
                let n = pts.len();
                let step = if n >= 2 { pts[n - 1] - pts[n - 2] } else { 1 };
                pts.push(pts.last().map_or(0, |p| p + step));
            }
        }
    }
    pts.sort();
    FrameTimes {
        pts,
        tb: time_base(path, "v:0").expect("time base"),
        start_us: start_us(path),
    }
}

/// A stream's time base as ffprobe prints it, e.g. (1, 12800); `select` is an ffprobe stream
/// specifier (`v:0`, `1`).
fn time_base(path: &str, select: &str) -> Option<(i64, i64)> {
    let tb = ffprobe(&[
        "-select_streams",
        select,
        "-show_entries",
        "stream=time_base",
        "-of",
        "csv=p=0",
        path,
    ]);
    let (n, d) = tb
        .lines()
        .next()?
        .trim()
        .trim_end_matches(',')
        .split_once('/')?;
    Some((n.parse().ok()?, d.parse().ok()?))
}

pub fn start_us(path: &str) -> i64 {
    let s = ffprobe(&["-show_entries", "format=start_time", "-of", "csv=p=0", path]);
    let s = s.lines().next().unwrap_or("").trim().trim_end_matches(',');
    if s == "N/A" || s.is_empty() {
        return 0;
    }
    // Printed with exactly 6 decimals: parse as integer microseconds.
    let neg = s.starts_with('-');
    let (int, frac) = s
        .trim_start_matches('-')
        .split_once('.')
        .unwrap_or((s, "0"));
    let v = int.parse::<i64>().unwrap() * 1_000_000
        + format!("{frac:0<6}")[..6].parse::<i64>().unwrap();
    if neg {
        -v
    } else {
        v
    }
}

/// ffprobe's packet list of stream `stream`: the latest pts (else dts) + duration, in seconds from
/// the container start (the readable-end oracle: demux only, independent of the engine). A packet
/// without duration counts one frame of `fallback` seconds.
pub fn packet_end(path: &str, stream: usize, fallback: f64) -> Option<f64> {
    let (n, d) = time_base(path, &stream.to_string())?;
    let tb = n as f64 / d as f64;
    let packets = ffprobe(&[
        "-select_streams",
        &stream.to_string(),
        "-show_entries",
        "packet=pts,dts,duration",
        "-of",
        "csv=p=0",
        path,
    ]);
    let start = start_us(path) as f64 / 1e6;
    packets
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim().trim_end_matches(',').split(',').collect();
            let ts = f.first().and_then(|v| v.parse::<i64>().ok());
            let ts = ts.or_else(|| f.get(1).and_then(|v| v.parse::<i64>().ok()))?;
            let dur = f
                .get(2)
                .and_then(|v| v.parse::<i64>().ok())
                .map_or(fallback, |d| d as f64 * tb);
            Some(ts as f64 * tb + dur - start)
        })
        .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))))
}

/// A stream field as ffprobe prints it (`-show_entries stream=<field>`).
pub fn stream_field(path: &str, stream: usize, field: &str) -> String {
    ffprobe(&[
        "-select_streams",
        &stream.to_string(),
        "-show_entries",
        &format!("stream={field}"),
        "-of",
        "csv=p=0",
        path,
    ])
    .lines()
    .next()
    .unwrap_or("")
    .trim()
    .trim_end_matches(',')
    .to_string()
}

/// The frame index the frame rule picks for integer `ms` (container-relative).
pub fn expected_index(ft: &FrameTimes, ms: i64) -> usize {
    let target_us = ft.start_us as i128 + ms as i128 * 1000;
    let (num, den) = (ft.tb.0 as i128, ft.tb.1 as i128);
    ft.pts
        .iter()
        .rposition(|&p| p as i128 * num * 1_000_000 <= target_us * den)
        .unwrap_or(0)
}

pub fn font_path() -> String {
    let candidates = [
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../node_modules/dejavu-fonts-ttf/ttf/DejaVuSansMono.ttf"
        ),
        "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
    ];
    candidates
        .iter()
        .find(|p| Path::new(p).exists())
        .expect("DejaVuSansMono.ttf (npm install, or the fonts-dejavu-core package)")
        .to_string()
}

pub fn theme() -> Theme {
    Theme {
        background: [32, 32, 32],
        label_box: [0, 0, 0, 170],
        label_text: [255, 255, 255],
        band_background: [20, 20, 20],
        band_level: [80, 200, 120],
        band_peak: [240, 80, 60],
        band_tick: [255, 255, 255],
        peak_threshold: 0.8,
    }
}

pub fn label(text: &str, x: i32, y: i32) -> LabelPlan {
    LabelPlan {
        text: text.into(),
        r#box: Rect { x, y, w: 40, h: 12 },
        text_x: x as f32 + 2.0,
        baseline_y: y as f32 + 10.0,
        font_size: 10.0,
    }
}

/// One sheet, one row of cells of `w x h` (2 px gutters), labels drawn below the cells so the
/// frame content stays readable.
pub fn sheet(path: &str, times_ms: &[f64], w: u32, h: u32) -> SheetPlan {
    let cells = times_ms
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            let x = 2 + i as i32 * (w as i32 + 2);
            CellPlan {
                time_ms: t,
                rect: Rect { x, y: 2, w, h },
                label: label(&format!("{t}"), x, h as i32 + 4),
            }
        })
        .collect::<Vec<_>>();
    SheetPlan {
        path: path.into(),
        width: 4 + times_ms.len() as u32 * (w + 2),
        height: h + 20,
        cells,
        band: None,
    }
}

pub fn plan(input: &str, sheets: Vec<SheetPlan>, dir: &TempDir) -> RenderPlan {
    RenderPlan {
        input: input.into(),
        input_format: None,
        max_pixels: None,
        video_stream: 0,
        font_path: font_path(),
        quality: 90,
        theme: theme(),
        sheets,
        temp_dir: dir.0.to_string_lossy().into_owned(),
        closing_ms: None,
        hint_packets: None,
    }
}

pub struct Sheet {
    pub w: u32,
    pub h: u32,
    pub rgb: Vec<u8>,
}

impl Sheet {
    pub fn open(path: &str) -> Sheet {
        let img = image::open(path).expect("sheet decodes").to_rgb8();
        Sheet {
            w: img.width(),
            h: img.height(),
            rgb: img.into_raw(),
        }
    }
    pub fn px(&self, x: u32, y: u32) -> [u8; 3] {
        let o = ((y * self.w + x) * 3) as usize;
        [self.rgb[o], self.rgb[o + 1], self.rgb[o + 2]]
    }
    pub fn luma(&self, x: u32, y: u32) -> u32 {
        let p = self.px(x, y);
        (p[0] as u32 * 3 + p[1] as u32 * 6 + p[2] as u32) / 10
    }
    /// Reads the frame index from an index-clip cell drawn unscaled at `rect`.
    pub fn index_at(&self, rect: Rect) -> usize {
        let stripe = rect.w / BITS;
        (0..BITS)
            .map(|b| {
                let x = rect.x as u32 + b * stripe + stripe / 2;
                let y = rect.y as u32 + rect.h / 2;
                ((self.luma(x, y) > 128) as usize) << b
            })
            .sum()
    }
}
