//! Writing a finished sheet as a JPEG file, never half a file.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use image::codecs::jpeg::JpegEncoder;
use image::ExtendedColorType;

use crate::canvas::Canvas;
use crate::error::{Error, Result};

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Encodes to a temporary name beside `path`, then renames: a failed run leaves no half file.
pub(crate) fn write_jpeg(path: &str, canvas: &Canvas, quality: u8) -> Result<()> {
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
