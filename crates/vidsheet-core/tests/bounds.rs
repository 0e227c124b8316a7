//! A bounded open (DESIGN §5a "Decode cost is bounded before and during a job"): `max_pixels` on
//! every decoder, `max_streams` 32, and decoders for one video stream and the first audio only.
//! A file over either limit is an unreadable video, never a crash or a decode of the picture.

mod common;

use common::*;
use vidsheet_core::{probe_as, render, Bounds, Container, ErrorCode, Opening};

const MP4: &str = "mov,mp4,m4a,3gp,3g2,mj2";

fn bounded(max_pixels: i64) -> Opening {
    Opening {
        container: Container::Allowed(vec![MP4.into(), "avi".into()]),
        bounds: Some(Bounds { max_pixels }),
    }
}

/// One PNG picture of `w`x`h` used by `tracks` tracks of a MOV (each a still of 1 s).
fn png_tracks(dir: &TempDir, name: &str, w: u32, h: u32, tracks: usize) -> String {
    let png = dir.path(&format!("{name}.png"));
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        &format!("color=c=red:s={w}x{h}:d=1"),
        "-frames:v",
        "1",
        &png,
    ]);
    let out = dir.path(&format!("{name}.mov"));
    let mut args: Vec<String> = ["-r", "1", "-i", &png].map(String::from).to_vec();
    for _ in 0..tracks {
        args.extend(["-map".into(), "0".into()]);
    }
    args.extend(["-c".into(), "copy".into(), out.clone()]);
    ffmpeg(&args.iter().map(String::as_str).collect::<Vec<_>>());
    out
}

#[test]
fn a_picture_over_max_pixels_is_unreadable_and_never_decoded() {
    let dir = TempDir::new("bounds-pixels");
    let mov = png_tracks(&dir, "big", 640, 480, 1);
    // Under the bound it is a video; over it the decoder refuses the picture, so no stream decodes.
    let opening = bounded(640 * 480);
    let survey = probe_as(&mov, &opening, None).unwrap();
    assert_eq!(survey.video_streams.len(), 1);
    assert!(!survey.video_streams[0].decodes, "a survey tries no frame");
    let info = probe_as(&mov, &opening, Some(0)).unwrap();
    assert!(info.video_streams[0].decodes);
    let info = probe_as(&mov, &bounded(640 * 480 - 1), Some(0)).unwrap();
    assert!(!info.video_streams[0].decodes);

    // The render of a plan whose bound the picture exceeds has no frame to show.
    let mut plan = plan(
        &mov,
        vec![sheet(&dir.path("out.jpg"), &[0.0], 64, 48)],
        &dir,
    );
    plan.input_format = Some(MP4.into());
    plan.max_pixels = Some(640 * 480 - 1);
    let result = render(&plan, &mut |_, _| {}).unwrap();
    assert_eq!(result.unreadable.len(), 1);
}

#[test]
fn more_streams_than_max_streams_is_unreadable() {
    let dir = TempDir::new("bounds-streams");
    let over = png_tracks(&dir, "many", 16, 16, 33);
    let err = probe_as(&over, &bounded(1 << 20), None).unwrap_err();
    assert_eq!(err.code, ErrorCode::UnreadableVideo, "{}", err.message);
    assert!(
        err.message.contains("more than 32 streams"),
        "{}",
        err.message
    );
    // Unbounded (the local surfaces), FFmpeg's own limit of 1000 holds.
    let any = Opening::any();
    assert_eq!(probe_as(&over, &any, None).unwrap().video_streams.len(), 33);

    let at = png_tracks(&dir, "at", 16, 16, 32);
    assert_eq!(
        probe_as(&at, &bounded(1 << 20), None)
            .unwrap()
            .video_streams
            .len(),
        32
    );
}

#[test]
fn a_bounded_probe_tries_only_the_stream_it_is_given() {
    let dir = TempDir::new("bounds-focus");
    let mov = png_tracks(&dir, "two", 64, 48, 3);
    let info = probe_as(&mov, &bounded(1 << 20), Some(1)).unwrap();
    let decodes: Vec<bool> = info.video_streams.iter().map(|s| s.decodes).collect();
    assert_eq!(decodes, [false, true, false]);
    // Every stream's size is known from the header all the same.
    assert!(info
        .video_streams
        .iter()
        .all(|s| (s.width, s.height) == (64, 48)));
}
