//! Which demuxer an open may use (DESIGN §5a "Containers a server opens"): FFmpeg's detection
//! limited to an allow-list, refused before the demuxer reads; a fixed demuxer for later opens.

mod common;

use common::*;
use vidsheet_core::{audio_peaks_as, probe, render, Container, ErrorCode, Opening, ProbeInfo};

const MP4: &str = "mov,mp4,m4a,3gp,3g2,mj2";

/// An unbounded probe as `container` allows.
fn probe_as(path: &str, container: &Container) -> vidsheet_core::Result<ProbeInfo> {
    let opening = Opening {
        container: container.clone(),
        bounds: None,
    };
    vidsheet_core::probe_as(path, &opening, None)
}

fn allowed() -> Container {
    Container::Allowed(
        [MP4, "matroska,webm", "mpegts", "h264"]
            .map(String::from)
            .to_vec(),
    )
}

/// A 3 s clip with a tone (mp4), its MPEG-TS copy, and an HLS playlist naming the copy, with a
/// control byte in a comment line (the form a "looks like text" check let through).
fn clips(dir: &TempDir) -> (String, String) {
    let mp4 = dir.path("clip.mp4");
    let ts = dir.path("segment.ts");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=64x48:r=10:d=3",
        "-f",
        "lavfi",
        "-i",
        "sine=frequency=440:duration=3",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-c:a",
        "aac",
        &mp4,
    ]);
    ffmpeg(&["-i", &mp4, "-c", "copy", &ts]);
    let playlist = dir.path("holiday.mp4");
    std::fs::write(
        &playlist,
        format!("#EXTM3U\n#\x01 x\n#EXT-X-TARGETDURATION:3\n#EXTINF:3,\n{ts}\n#EXT-X-ENDLIST\n"),
    )
    .unwrap();
    (mp4, playlist)
}

#[test]
fn an_allow_list_refuses_a_playlist_that_any_container_follows() {
    let dir = TempDir::new("containers-playlist");
    let (_, playlist) = clips(&dir);
    let followed = probe(&playlist).unwrap();
    assert_eq!(followed.format, "hls");
    assert_eq!(followed.video_streams.len(), 1);
    let err = probe_as(&playlist, &allowed()).unwrap_err();
    assert_eq!(err.code, ErrorCode::UnreadableVideo);
    assert!(err.message.contains("(hls)"), "{}", err.message);
}

#[test]
fn a_listed_container_opens_and_later_opens_fix_its_demuxer() {
    let dir = TempDir::new("containers-fixed");
    let (mp4, _) = clips(&dir);
    let info = probe_as(&mp4, &allowed()).unwrap();
    assert_eq!(info.format, MP4);
    assert!(info.has_audio);

    let fixed = |name: &str| Container::Fixed(name.to_string());
    let peaks = audio_peaks_as(&mp4, &fixed(MP4), 0.0, 3000.0, None).unwrap();
    assert!(peaks.present);
    // Another demuxer, fixed: no detection rescues the open, so no audio is read.
    let peaks = audio_peaks_as(&mp4, &fixed("matroska,webm"), 0.0, 3000.0, None).unwrap();
    assert!(!peaks.present);

    let mut plan = plan(
        &mp4,
        vec![sheet(&dir.path("out.jpg"), &[500.0, 1500.0], 64, 48)],
        &dir,
    );
    plan.input_format = Some("matroska,webm".into());
    let err = render(&plan, &mut |_, _| {}).unwrap_err();
    assert_eq!(err.code, ErrorCode::UnreadableVideo);
    assert!(!std::path::Path::new(&dir.path("out.jpg")).exists());
    plan.input_format = Some(MP4.into());
    let result = render(&plan, &mut |_, _| {}).unwrap();
    assert!(result.unreadable.is_empty());
}

#[test]
fn unknown_or_malformed_names_are_errors_not_panics() {
    let dir = TempDir::new("containers-names");
    let (mp4, _) = clips(&dir);
    for name in ["no-such-demuxer", "mp4", "", "mov\0mp4"] {
        let err = probe_as(&mp4, &Container::Fixed(name.into())).unwrap_err();
        assert_eq!(err.code, ErrorCode::UnreadableVideo, "{name:?}");
    }
    let nul = Container::Allowed(vec![MP4.into(), "a\0b".into()]);
    assert_eq!(
        probe_as(&mp4, &nul).unwrap_err().code,
        ErrorCode::UnreadableVideo
    );
    // An empty list allows nothing.
    let none = Container::Allowed(Vec::new());
    assert_eq!(
        probe_as(&mp4, &none).unwrap_err().code,
        ErrorCode::UnreadableVideo
    );
}
