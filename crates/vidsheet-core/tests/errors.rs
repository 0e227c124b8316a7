//! Bad inputs give a code, never a panic or a hang; failed runs leave no half-written sheet.

mod common;

use std::time::{Duration, Instant};

use common::*;
use vidsheet_core::{probe, render, ErrorCode};

fn noise(path: &str, len: usize) {
    let mut seed = 0x2545F4914F6CDD1Du64;
    let bytes: Vec<u8> = (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect();
    std::fs::write(path, bytes).unwrap();
}

fn one_cell_plan(dir: &TempDir, input: &str) -> vidsheet_core::RenderPlan {
    plan(
        input,
        vec![sheet(&dir.path("out.jpg"), &[500.0], 64, 36)],
        dir,
    )
}

#[test]
fn missing_file_is_input_not_found() {
    let dir = TempDir::new("missing");
    let path = dir.path("nope.mp4");
    assert_eq!(probe(&path).unwrap_err().code, ErrorCode::InputNotFound);
    let err = render(&one_cell_plan(&dir, &path), &mut |_, _| {}).unwrap_err();
    assert_eq!(err.code, ErrorCode::InputNotFound);
    assert!(!err.message.is_empty());
}

#[test]
fn random_bytes_are_unreadable_video() {
    let dir = TempDir::new("noise");
    let path = dir.path("noise.mp4");
    noise(&path, 200_000);
    assert_eq!(probe(&path).unwrap_err().code, ErrorCode::UnreadableVideo);
    let err = render(&one_cell_plan(&dir, &path), &mut |_, _| {}).unwrap_err();
    assert_eq!(err.code, ErrorCode::UnreadableVideo);
    let empty = dir.path("empty.mp4");
    std::fs::write(&empty, b"").unwrap();
    assert_eq!(probe(&empty).unwrap_err().code, ErrorCode::UnreadableVideo);
    assert_eq!(
        probe(&dir.0.to_string_lossy()).unwrap_err().code,
        ErrorCode::UnreadableVideo
    );
}

/// An audio file is not an error for the probe: it reports no video stream (or only an attached
/// picture), and src/core/probe.ts's stream rule turns that into `unreadable video`.
#[test]
fn audio_only_files_report_no_video_stream() {
    let dir = TempDir::new("audioonly");
    let wav = dir.path("tone.wav");
    ffmpeg(&["-f", "lavfi", "-i", "sine=d=2", &wav]);
    let info = probe(&wav).expect("probe");
    assert!(info.video_streams.is_empty());
    assert!(info.has_audio);
    assert!(
        info.audio_end.is_some_and(|e| (e - 2.0).abs() < 0.05),
        "{:?}",
        info.audio_end
    );
    // An MP3 with cover art has a (single-picture) video stream: flagged, so never the video.
    let cover = dir.path("cover.png");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "color=red:s=64x64",
        "-frames:v",
        "1",
        &cover,
    ]);
    let mp3 = dir.path("song.mp3");
    ffmpeg(&[
        "-i",
        &wav,
        "-i",
        &cover,
        "-map",
        "0",
        "-map",
        "1",
        "-c:a",
        "libmp3lame",
        "-c:v",
        "png",
        "-disposition:v",
        "attached_pic",
        &mp3,
    ]);
    let info = probe(&mp3).expect("probe");
    assert_eq!(info.video_streams.len(), 1);
    let pic = &info.video_streams[0];
    assert!(pic.attached_pic);
    assert_eq!(
        pic.readable_end, None,
        "a picture stored once has no extent"
    );
}

#[test]
fn a_non_video_stream_index_is_unreadable_video() {
    let dir = TempDir::new("wrongstream");
    let clip = dir.path("av.mkv");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=64x36:d=1",
        "-f",
        "lavfi",
        "-i",
        "sine=d=1",
        "-c:v",
        "libx264",
        &clip,
    ]);
    let mut p = one_cell_plan(&dir, &clip);
    p.video_stream = 1;
    assert_eq!(
        render(&p, &mut |_, _| {}).unwrap_err().code,
        ErrorCode::UnreadableVideo
    );
    p.video_stream = 7;
    assert_eq!(
        render(&p, &mut |_, _| {}).unwrap_err().code,
        ErrorCode::UnreadableVideo
    );
}

/// Truncated and corrupted files: the render finishes quickly, with every cell either showing a
/// frame or listed as unreadable, or fails with a code.
#[test]
fn damaged_files_complete_without_panic_or_hang() {
    let dir = TempDir::new("damaged");
    let full = dir.path("full.mp4");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=320x180:r=25:d=20",
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-g",
        "50",
        "-movflags",
        "+faststart",
        &full,
    ]);
    let ts = dir.path("full.ts");
    ffmpeg(&["-i", &full, "-c", "copy", &ts]);
    let bytes = std::fs::read(&full).unwrap();
    let ts_bytes = std::fs::read(&ts).unwrap();

    let mut damaged = Vec::new();
    for (name, src) in [("mp4", &bytes), ("ts", &ts_bytes)] {
        // Cut in the middle: the index still promises the second half.
        let cut = dir.path(&format!("cut.{name}"));
        std::fs::write(&cut, &src[..src.len() / 2]).unwrap();
        damaged.push(cut);
        // Garbage over the middle third.
        let mut b = src.clone();
        let (s, e) = (b.len() / 3, 2 * b.len() / 3);
        let mut seed = 12345u32;
        for v in &mut b[s..e] {
            seed = seed.wrapping_mul(1103515245).wrapping_add(12345);
            *v = (seed >> 16) as u8;
        }
        let garbled = dir.path(&format!("garbled.{name}"));
        std::fs::write(&garbled, &b).unwrap();
        damaged.push(garbled);
    }
    let times: Vec<f64> = (0..16).map(|i| 500.0 + i as f64 * 1250.0).collect();
    for clip in &damaged {
        let started = Instant::now();
        let out = dir.path("damaged.jpg");
        let p = plan(clip, vec![sheet(&out, &times, 64, 36)], &dir);
        match render(&p, &mut |_, _| {}) {
            Ok(r) => {
                eprintln!("{clip}: {} unreadable, {:?}", r.unreadable.len(), r.stats);
                assert!(r.unreadable.len() <= times.len());
                if clip.ends_with("cut.mp4") {
                    // The header promises 20 s; the data stops near 10 s: cells well past the
                    // data are unreadable (not the last frame held for seconds), cells before
                    // it are fine.
                    let bad: Vec<usize> = r.unreadable.iter().map(|c| c.cell as usize).collect();
                    let t = |i: &usize| times[*i];
                    assert!(bad.iter().all(|i| t(i) > 7000.0), "{bad:?}");
                    assert!(
                        (0..times.len())
                            .filter(|i| times[*i] >= 13000.0)
                            .all(|i| bad.contains(&i)),
                        "{bad:?}"
                    );
                }
                assert!(std::path::Path::new(&out).exists(), "{clip}: sheet written");
            }
            Err(e) => assert!(
                !e.message.is_empty()
                    && matches!(e.code, ErrorCode::UnreadableVideo | ErrorCode::RenderFailed),
                "{clip}: {e}"
            ),
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{clip} took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn unwritable_output_fails_and_leaves_no_temp_file() {
    let dir = TempDir::new("unwritable");
    let clip = dir.path("ok.mp4");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=64x36:d=1",
        "-c:v",
        "libx264",
        &clip,
    ]);
    let missing_dir = dir.path("no/such/dir/out.jpg");
    let p = plan(&clip, vec![sheet(&missing_dir, &[100.0], 32, 18)], &dir);
    assert_eq!(
        render(&p, &mut |_, _| {}).unwrap_err().code,
        ErrorCode::RenderFailed
    );

    // A directory where the sheet should go: the rename fails; the temp file is removed.
    let target = dir.path("taken.jpg");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(dir.0.join("taken.jpg/keep"), b"x").unwrap();
    let p = plan(&clip, vec![sheet(&target, &[100.0], 32, 18)], &dir);
    assert_eq!(
        render(&p, &mut |_, _| {}).unwrap_err().code,
        ErrorCode::RenderFailed
    );
    let leftovers: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");

    let mut p = plan(
        &clip,
        vec![sheet(&dir.path("fine.jpg"), &[100.0], 32, 18)],
        &dir,
    );
    p.font_path = dir.path("missing.ttf");
    assert_eq!(
        render(&p, &mut |_, _| {}).unwrap_err().code,
        ErrorCode::RenderFailed
    );
}
