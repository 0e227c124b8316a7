//! The probe's facts, each against an independent oracle (ffprobe's stream fields and packet
//! list, the encoder's own settings): every video stream with its size, disposition, frame count
//! and whether it decodes, and where the file's data really ends, whatever the header declares.

mod common;

use common::*;
use vidsheet_core::probe;

/// A clip of `seconds` at 25 fps with a 1 kHz tone, H.264 + AAC.
fn av_clip(out: &str, seconds: u32, extra: &[&str]) {
    let d = seconds.to_string();
    ffmpeg(
        &[
            &[
                "-f",
                "lavfi",
                "-i",
                &format!("testsrc2=s=160x90:r=25:d={d}"),
                "-f",
                "lavfi",
                "-i",
                &format!("sine=f=1000:d={d}"),
                "-c:v",
                "libx264",
                "-g",
                "25",
                "-c:a",
                "aac",
            ][..],
            extra,
            &[out],
        ]
        .concat(),
    );
}

fn truncate(src: &str, dst: &str, fraction: f64) {
    let bytes = std::fs::read(src).expect("read clip");
    let keep = (bytes.len() as f64 * fraction) as usize;
    std::fs::write(dst, &bytes[..keep]).expect("write truncated copy");
}

fn near(got: Option<f64>, want: Option<f64>, tolerance: f64) -> bool {
    matches!((got, want), (Some(g), Some(w)) if (g - w).abs() <= tolerance)
}

#[test]
fn every_video_stream_is_reported_with_its_facts() {
    let dir = TempDir::new("probe-streams");
    // Stream 0: a 2-frame 320x180 "top shot"; stream 1: the real 160x90 video, not default.
    let clip = dir.path("two.mp4");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "color=red:s=320x180:r=1:d=2",
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=160x90:r=25:d=2",
        "-map",
        "0",
        "-map",
        "1",
        "-c:v",
        "libx264",
        "-disposition:v:0",
        "default",
        "-disposition:v:1",
        "0",
        &clip,
    ]);
    let info = probe(&clip).expect("probe");
    assert_eq!(info.video_streams.len(), 2);
    let (top, video) = (&info.video_streams[0], &info.video_streams[1]);
    assert_eq!((top.index, top.width, top.height), (0, 320, 180));
    assert_eq!((video.index, video.width, video.height), (1, 160, 90));
    assert!(top.is_default && !video.is_default);
    assert!(!top.attached_pic && !video.attached_pic);
    for (s, facts) in [top, video].into_iter().enumerate() {
        let want: u64 = stream_field(&clip, s, "nb_frames")
            .parse()
            .expect("nb_frames");
        assert_eq!(facts.frames, Some(want), "stream {s}");
        assert!(facts.decodes, "stream {s}");
    }
    assert!(!info.has_audio);
    assert_eq!(info.audio_end, None);
}

#[test]
fn a_stream_without_a_decoder_does_not_decode() {
    let dir = TempDir::new("probe-nodecoder");
    let clip = dir.path("ok.mkv");
    av_clip(&clip, 2, &[]);
    // Same file, but the Matroska codec id names a codec no decoder knows (same length, so no
    // element size changes).
    let mut bytes = std::fs::read(&clip).expect("read");
    let id = b"V_MPEG4/ISO/AVC";
    let at = bytes
        .windows(id.len())
        .position(|w| w == id)
        .expect("codec id");
    bytes[at..at + id.len()].copy_from_slice(b"V_XXXXX/ISO/XYZ");
    let odd = dir.path("odd.mkv");
    std::fs::write(&odd, bytes).expect("write");
    let info = probe(&odd).expect("probe");
    assert_eq!(info.video_streams.len(), 1);
    assert!(!info.video_streams[0].decodes);
    assert!(probe(&clip).expect("probe").video_streams[0].decodes);
    // Its audio still counts.
    assert!(info.has_audio && info.audio_end.is_some());
}

#[test]
fn video_that_starts_late_in_the_file_still_decodes() {
    let dir = TempDir::new("probe-late");
    // 40 s of audio from the start; the video's first packet comes 30 s in, after far more
    // audio packets than the first read takes.
    let clip = dir.path("late.mkv");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "sine=f=1000:d=40",
        "-itsoffset",
        "30",
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=160x90:r=25:d=10",
        "-map",
        "0",
        "-map",
        "1",
        "-c:a",
        "aac",
        "-c:v",
        "libx264",
        &clip,
    ]);
    let info = probe(&clip).expect("probe");
    let video = &info.video_streams[0];
    assert!(video.decodes);
    assert!(near(video.readable_end, packet_end(&clip, 1, 0.04), 0.05));
}

#[test]
fn the_readable_end_of_a_truncated_mp4_comes_from_its_index_and_the_file_size() {
    let dir = TempDir::new("probe-truncmp4");
    let full = dir.path("full.mp4");
    av_clip(&full, 8, &["-movflags", "+faststart"]);
    let cut = dir.path("cut.mp4");
    truncate(&full, &cut, 0.5);
    let info = probe(&cut).expect("probe");
    // The header still declares the whole clip.
    assert!(
        (info.duration - 8.0).abs() < 0.1,
        "declared {}",
        info.duration
    );
    let video = &info.video_streams[0];
    let want_video = packet_end(&cut, 0, 0.04);
    let want_audio = packet_end(&cut, 1, 0.0);
    assert!(want_video.is_some_and(|e| e < 6.0), "oracle {want_video:?}");
    // Index timestamps are decode times shifted by the stream's initial reordering delay: a
    // P-frame shown after its B-frames ends up to `bframes` (3) frames later, and the packet list
    // also counts the sample the cut leaves partial: within 5 frames.
    assert!(
        near(video.readable_end, want_video, 0.2),
        "video {:?} vs packets {want_video:?}",
        video.readable_end
    );
    assert!(
        near(info.audio_end, want_audio, 0.05),
        "audio {:?} vs packets {want_audio:?}",
        info.audio_end
    );
    // The whole file: the readable end is the declared one.
    let whole = probe(&full).expect("probe");
    assert!(near(whole.video_streams[0].readable_end, Some(8.0), 0.1));
}

#[test]
fn elsewhere_the_readable_end_is_read_near_the_end_or_from_the_start() {
    let dir = TempDir::new("probe-tail");
    // MPEG-TS, 24 s, start offset: the end is found by a read from ~10 s before the declared end.
    let ts = dir.path("clip.ts");
    av_clip(&ts, 24, &[]);
    let info = probe(&ts).expect("probe");
    let want = packet_end(&ts, 0, 0.04);
    assert!(
        near(info.video_streams[0].readable_end, want, 0.05),
        "ts {:?} vs packets {want:?}",
        info.video_streams[0].readable_end
    );
    assert!(near(info.audio_end, packet_end(&ts, 1, 0.0), 0.05));
    // A Matroska file cut in half keeps its header (8 s) and loses its cues: the read near the
    // declared end finds nothing, so the packets are read from the start.
    let mkv = dir.path("full.mkv");
    av_clip(&mkv, 8, &[]);
    let cut = dir.path("cut.mkv");
    truncate(&mkv, &cut, 0.5);
    let info = probe(&cut).expect("probe");
    assert!(
        (info.duration - 8.0).abs() < 0.1,
        "declared {}",
        info.duration
    );
    let want = packet_end(&cut, 0, 0.04);
    assert!(want.is_some_and(|e| e < 6.0), "oracle {want:?}");
    assert!(
        near(info.video_streams[0].readable_end, want, 0.05),
        "mkv {:?} vs packets {want:?}",
        info.video_streams[0].readable_end
    );
    // Frames: Matroska has no frame count; the estimate is duration x frame rate.
    let full = probe(&mkv).expect("probe");
    let counted: u64 = ffprobe_count(&mkv);
    let frames = full.video_streams[0].frames.expect("estimate");
    assert!(frames.abs_diff(counted) <= 2, "{frames} vs {counted}");
}

fn ffprobe_count(path: &str) -> u64 {
    let out = std::process::Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-count_packets",
            "-show_entries",
            "stream=nb_read_packets",
            "-of",
            "csv=p=0",
            path,
        ])
        .output()
        .expect("ffprobe");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_end_matches(',')
        .parse()
        .expect("packet count")
}
