//! What reaches the cell: display matrix rotation, any pixel format, interlaced pictures.

mod common;

use std::process::Command;

use common::*;
use vidsheet_core::{probe, render, Rect};

/// Gray pixels of the first frame as ffmpeg itself shows it (autorotate on).
fn ffmpeg_first_frame_gray(clip: &str) -> Vec<u8> {
    let out = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-i",
            clip,
            "-frames:v",
            "1",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "gray",
            "-",
        ])
        .output()
        .expect("ffmpeg");
    assert!(out.status.success());
    out.stdout
}

/// Brightness of the four quadrants (TL, TR, BL, BR) sampled at their centres.
fn quadrants(get: impl Fn(u32, u32) -> u32, w: u32, h: u32) -> [bool; 4] {
    let at = |x: u32, y: u32| get(x, y) > 128;
    [
        at(w / 4, h / 4),
        at(3 * w / 4, h / 4),
        at(w / 4, 3 * h / 4),
        at(3 * w / 4, 3 * h / 4),
    ]
}

#[test]
fn display_matrix_rotation_matches_ffmpeg() {
    let dir = TempDir::new("rotation");
    let src = dir.path("src.mp4");
    // 160x90, white top-left quadrant.
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "color=black:s=160x90:d=1,drawbox=x=0:y=0:w=80:h=45:color=white:t=fill",
        "-c:v",
        "libx264",
        &src,
    ]);
    for rotate in ["0", "90", "180", "270"] {
        let clip = dir.path(&format!("rot{rotate}.mp4"));
        ffmpeg(&[
            "-i",
            &src,
            "-c",
            "copy",
            "-metadata:s:v:0",
            &format!("rotate={rotate}"),
            &clip,
        ]);
        let info = probe(&clip).expect("probe");
        let video = &info.video_streams[0];
        let quarter = rotate == "90" || rotate == "270";
        assert_eq!(
            (video.width, video.height),
            if quarter { (90, 160) } else { (160, 90) },
            "rotate={rotate}"
        );

        let (w, h) = (video.width, video.height);
        let reference = ffmpeg_first_frame_gray(&clip);
        assert_eq!(reference.len() as u32, w * h);
        let want = quadrants(|x, y| reference[(y * w + x) as usize] as u32, w, h);
        assert_eq!(want.iter().filter(|q| **q).count(), 1);

        // The cell is half size: rotation and scaling both apply.
        let out = dir.path(&format!("rot{rotate}.jpg"));
        let mut sheet = sheet(&out, &[100.0], w / 2, h / 2);
        sheet.cells[0].rect = Rect {
            x: 2,
            y: 2,
            w: w / 2,
            h: h / 2,
        };
        render(&plan(&clip, vec![sheet], &dir), &mut |_, _| {}).expect("render");
        let img = Sheet::open(&out);
        let got = quadrants(|x, y| img.luma(2 + x, 2 + y), w / 2, h / 2);
        assert_eq!(got, want, "rotate={rotate}: quadrant shown white");
    }
}

#[test]
fn sample_aspect_ratio_widens_the_display_size() {
    let dir = TempDir::new("sar");
    let clip = dir.path("anamorphic.mp4");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=720x576:d=1",
        "-vf",
        "setsar=16/11",
        "-c:v",
        "libx264",
        &clip,
    ]);
    let info = probe(&clip).expect("probe");
    let video = &info.video_streams[0];
    assert_eq!((video.width, video.height), (1047, 576));
}

/// Index clips in several codecs / pixel formats: every cell must read back its frame index.
#[test]
fn pixel_formats_render_their_frames() {
    let dir = TempDir::new("pixfmt");
    let cases: &[(&str, &[&str])] = &[
        (
            "yuv420p10.mkv",
            &["-c:v", "libx264", "-pix_fmt", "yuv420p10le", "-crf", "10"],
        ),
        (
            "yuv420p10-ffv1.mkv",
            &["-c:v", "ffv1", "-pix_fmt", "yuv420p10le"],
        ),
        (
            "yuv422p10.mov",
            &["-c:v", "prores", "-pix_fmt", "yuv422p10le"],
        ),
        (
            "yuv444p.mp4",
            &["-c:v", "libx264", "-pix_fmt", "yuv444p", "-crf", "10"],
        ),
        ("rgb24.mkv", &["-c:v", "png", "-pix_fmt", "rgb24"]),
        ("gbrp.mkv", &["-c:v", "ffv1", "-pix_fmt", "gbrp"]),
        ("gray.mkv", &["-c:v", "ffv1", "-pix_fmt", "gray"]),
        (
            "yuvj420p.mkv",
            &["-c:v", "mjpeg", "-pix_fmt", "yuvj420p", "-q:v", "2"],
        ),
        (
            "vp9.webm",
            &[
                "-c:v",
                "libvpx-vp9",
                "-crf",
                "10",
                "-b:v",
                "0",
                "-deadline",
                "realtime",
            ],
        ),
    ];
    for (name, args) in cases {
        let clip = dir.path(name);
        let mut a = vec!["-f", "lavfi", "-i"];
        let src = index_source(25, 4.0);
        a.push(&src);
        a.extend_from_slice(args);
        a.push(&clip);
        ffmpeg(&a);
        let ft = frame_times(&clip);
        let times = [0i64, 1000, 1039, 1040, 2500, 3960];
        let out = dir.path(&format!("{name}.jpg"));
        let times_f: Vec<f64> = times.iter().map(|&t| t as f64).collect();
        let plan = plan(&clip, vec![sheet(&out, &times_f, STRIPE * BITS, 32)], &dir);
        let result = render(&plan, &mut |_, _| {}).expect("render");
        assert!(
            result.unreadable.is_empty(),
            "{name}: {:?}",
            result.unreadable
        );
        let img = Sheet::open(&out);
        let got: Vec<usize> = plan.sheets[0]
            .cells
            .iter()
            .map(|c| img.index_at(c.rect))
            .collect();
        let want: Vec<usize> = times.iter().map(|&t| expected_index(&ft, t)).collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn interlaced_frames_are_shown_without_combing() {
    let dir = TempDir::new("interlaced");
    let clip = dir.path("interlaced.mpg");
    // Each frame weaves a white field and a black field: combing would average to mid gray.
    ffmpeg(&[
        "-f", "lavfi", "-i", "nullsrc=s=320x192:r=50:d=2,geq=lum='255*mod(N\\,2)':cb=128:cr=128,tinterlace=interleave_top",
        "-c:v", "mpeg2video", "-flags", "+ildct+ilme", "-q:v", "2", "-field_order", "tt", &clip,
    ]);
    let out = dir.path("interlaced.jpg");
    let plan = plan(&clip, vec![sheet(&out, &[500.0, 1000.0], 80, 48)], &dir);
    let result = render(&plan, &mut |_, _| {}).expect("render");
    assert!(result.unreadable.is_empty());
    let img = Sheet::open(&out);
    for cell in &plan.sheets[0].cells {
        let r = cell.rect;
        let mut lumas = Vec::new();
        for y in (r.y as u32 + 4..r.y as u32 + r.h - 4).step_by(3) {
            for x in (r.x as u32 + 4..r.x as u32 + r.w - 4).step_by(7) {
                lumas.push(img.luma(x, y));
            }
        }
        let mid = lumas.iter().filter(|&&l| (60..196).contains(&l)).count();
        assert!(
            mid * 10 < lumas.len(),
            "cell at {r:?} is combed/blended: {lumas:?}"
        );
    }
}
