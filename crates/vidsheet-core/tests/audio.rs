//! `audio_peaks`: raw 1 ms peaks of the mono average, container-relative bins, the whole clip's
//! peak on any range; and the band painted from the levels the plan carries (normalising and
//! bucketing are src/core/audio.ts's, tested there).

mod common;

use common::*;
use vidsheet_core::{audio_peaks, render, BandPlan, Rect, RenderPlan};

/// A 1 kHz burst of `ms` milliseconds at `at` seconds with amplitude `amp`.
fn burst(at: f64, ms: f64, amp: f64) -> String {
    format!(
        "{amp}*between(t\\,{at}\\,{end})*sin(2*PI*1000*t)",
        end = at + ms / 1000.0 - 0.00001
    )
}

fn clip_with_audio(
    dir: &TempDir,
    name: &str,
    audio_expr: &str,
    audio_args: &[&str],
    extra: &[&str],
) -> String {
    let clip = dir.path(name);
    let src = format!("aevalsrc={audio_expr}:s=48000:d=3");
    let mut a = vec![
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=64x36:r=25:d=3",
        "-f",
        "lavfi",
        "-i",
        &src,
    ];
    a.extend_from_slice(&["-c:v", "libx264"]);
    a.extend_from_slice(audio_args);
    a.extend_from_slice(extra);
    a.push(&clip);
    ffmpeg(&a);
    clip
}

/// A one-sheet plan over `clip` whose band (300 columns over `start_ms..end_ms`) shows `levels`.
fn band_plan(
    dir: &TempDir,
    clip: &str,
    start_ms: f64,
    end_ms: f64,
    levels: Vec<f64>,
) -> RenderPlan {
    let out = dir.path("audio.jpg");
    let mut s = sheet(&out, &[100.0, 1500.0], 64, 36);
    s.height += 44;
    for c in &mut s.cells {
        c.rect.y += 44;
        c.label.r#box.y += 44;
        c.label.baseline_y += 44.0;
    }
    s.band = Some(BandPlan {
        rect: Rect {
            x: 0,
            y: 2,
            w: 300,
            h: 40,
        },
        start_ms,
        end_ms,
        ticks_ms: vec![100.0, 1500.0],
        message: None,
        levels: Some(levels),
    });
    s.width = s.width.max(300);
    plan(clip, vec![s], dir)
}

/// Raw peaks over 0..3000 ms, normalised by the clip peak the way src/core/audio.ts does.
fn normalised(clip: &str) -> (bool, Vec<f32>) {
    let a = audio_peaks(clip, 0.0, 3000.0).expect("range");
    let peak = a.clip_peak as f32;
    let levels = a
        .peaks
        .iter()
        .map(|v| if peak > 0.0 { (v / peak).min(1.0) } else { 0.0 })
        .collect();
    (a.present, levels)
}

fn peak_bins(env: &[f32], threshold: f32) -> Vec<usize> {
    env.iter()
        .enumerate()
        .filter(|(_, v)| **v >= threshold)
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn peaks_are_raw_per_millisecond_with_the_whole_clips_peak() {
    let dir = TempDir::new("envelope");
    let expr = format!("'{}+{}'", burst(1.0, 5.0, 0.8), burst(2.5, 3.0, 0.4));
    let clip = clip_with_audio(&dir, "bursts.mkv", &expr, &["-c:a", "pcm_s16le"], &[]);

    let a = audio_peaks(&clip, 0.0, 3000.0).expect("range");
    assert!(a.present);
    assert_eq!(a.start_ms, 0.0);
    assert_eq!(a.peaks.len(), 3000);
    // Raw amplitudes (s16 of a 1 kHz sine), not levels.
    assert!((a.clip_peak - 0.8).abs() < 0.01, "{}", a.clip_peak);
    assert_eq!(
        peak_bins(&a.peaks, 0.72),
        vec![1000, 1001, 1002, 1003, 1004]
    );
    let half = peak_bins(&a.peaks, 0.32);
    assert_eq!(&half[5..], &[2500, 2501, 2502]);
    assert!((a.peaks[2501] - 0.4).abs() < 0.02, "{}", a.peaks[2501]);
    assert!(a.peaks[..1000].iter().all(|v| *v < 0.01));

    // A range holding only the quiet burst still reports the whole clip's peak.
    let w = audio_peaks(&clip, 2000.0, 3000.0).expect("range");
    assert_eq!(w.start_ms, 2000.0);
    assert_eq!(w.peaks.len(), 1000);
    assert_eq!(w.clip_peak, a.clip_peak);
    assert_eq!(&w.peaks[..], &a.peaks[2000..]);
    assert_eq!(peak_bins(&w.peaks, 0.32), vec![500, 501, 502]);
}

#[test]
fn band_shows_the_peak_and_ticks() {
    let dir = TempDir::new("band");
    let expr = format!("'{}'", burst(1.0, 20.0, 0.9));
    let clip = clip_with_audio(&dir, "burst.mkv", &expr, &["-c:a", "pcm_s16le"], &[]);
    // 300 px over 3000 ms: the burst at 1000..1020 ms is columns 100..102 (levels as core gives).
    let mut levels = vec![0.0; 300];
    levels[100..102].fill(1.0);
    let p = band_plan(&dir, &clip, 0.0, 3000.0, levels);
    render(&p, &mut |_, _| {}).expect("render");
    let img = Sheet::open(&p.sheets[0].path);
    // A full-height peak bar with its marker.
    let theme = theme();
    let near = |a: [u8; 3], b: [u8; 3]| {
        a.iter()
            .zip(b)
            .all(|(x, y)| (*x as i32 - y as i32).abs() < 40)
    };
    assert!(
        near(img.px(100, 30), theme.band_peak),
        "{:?}",
        img.px(100, 30)
    );
    assert!(
        near(img.px(101, 4), theme.band_peak),
        "peak marker {:?}",
        img.px(101, 4)
    );
    assert!(
        near(img.px(200, 30), theme.band_background),
        "{:?}",
        img.px(200, 30)
    );
    // Tick at 1500 ms -> column 150, bottom quarter of the band.
    assert!(
        near(img.px(150, 40), theme.band_tick),
        "{:?}",
        img.px(150, 40)
    );
}

#[test]
fn mono_downmix_averages_channels_of_any_format() {
    let dir = TempDir::new("downmix");
    // Right = -left: the average is silence.
    let expr = format!("'{a}|-{a}'", a = burst(1.0, 10.0, 0.8));
    let clip = clip_with_audio(&dir, "cancel.mkv", &expr, &["-c:a", "pcm_f32le"], &[]);
    let a = audio_peaks(&clip, 0.0, 3000.0).expect("range");
    assert!(a.present);
    assert_eq!(a.clip_peak, 0.0);
    assert!(
        a.peaks.iter().all(|v| *v == 0.0),
        "cancelling channels give a silent track"
    );

    // Left only: the burst is there at half the amplitude of the channel, normalised to 1.
    let expr = format!("'{}|0'", burst(1.0, 10.0, 0.8));
    for (name, args) in [
        ("left.mkv", &["-c:a", "pcm_s16le"][..]),
        ("left-aac.mp4", &["-c:a", "aac", "-b:a", "192k"][..]),
        ("left-s32.mkv", &["-c:a", "pcm_s32le"][..]),
        ("left-u8.mkv", &["-c:a", "pcm_u8"][..]),
        ("left-flac.mkv", &["-c:a", "flac"][..]),
    ] {
        let clip = clip_with_audio(&dir, name, &expr, args, &[]);
        let (present, levels) = normalised(&clip);
        assert!(present, "{name}");
        let loud = peak_bins(&levels, 0.5);
        assert!(
            loud.first().is_some_and(|&b| (999..=1001).contains(&b)),
            "{name}: {loud:?}"
        );
        assert!(
            loud.last().is_some_and(|&b| (1008..=1011).contains(&b)),
            "{name}: {loud:?}"
        );
    }
}

#[test]
fn bins_count_from_the_container_start_time() {
    let dir = TempDir::new("offset");
    let expr = format!("'{}'", burst(1.0, 5.0, 0.8));
    let clip = clip_with_audio(
        &dir,
        "offset.ts",
        &expr,
        &["-c:a", "mp2", "-b:a", "256k"],
        &["-output_ts_offset", "50"],
    );
    let (_, levels) = normalised(&clip);
    let loud = peak_bins(&levels, 0.5);
    // MPEG audio adds a few ms of codec delay at most; the burst must sit near 1000 ms, not 51 s.
    assert!(
        loud.first().is_some_and(|&b| (995..=1040).contains(&b)),
        "{loud:?}"
    );
}

#[test]
fn silence_gives_zeros_and_no_track_gives_absent() {
    let dir = TempDir::new("silence");
    let clip = clip_with_audio(&dir, "silent.mkv", "0", &["-c:a", "pcm_s16le"], &[]);
    let a = audio_peaks(&clip, 0.0, 3000.0).expect("range");
    assert!(a.present);
    assert_eq!(a.clip_peak, 0.0);
    assert_eq!(a.peaks.len(), 3000);
    assert!(a.peaks.iter().all(|v| *v == 0.0));

    let mute = dir.path("mute.mp4");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=64x36:r=25:d=3",
        "-c:v",
        "libx264",
        &mute,
    ]);
    let a = audio_peaks(&mute, 0.0, 3000.0).expect("range");
    assert!(!a.present);
    assert!(a.peaks.is_empty());
    assert!(
        !audio_peaks("/nonexistent/clip.mp4", 0.0, 10.0)
            .expect("range")
            .present
    );
    assert!(audio_peaks(&clip, 10.0, 0.0).is_err());
    assert!(audio_peaks(&clip, 0.0, f64::INFINITY).is_err());

    // A band with a message draws the message and no levels, whatever levels it carries.
    let mut p = band_plan(&dir, &mute, 0.0, 3000.0, vec![1.0; 300]);
    if let Some(band) = &mut p.sheets[0].band {
        band.message = Some(label("no audio", 4, 10));
    }
    render(&p, &mut |_, _| {}).expect("render");
    let img = Sheet::open(&p.sheets[0].path);
    let bright = (4..44)
        .flat_map(|x| (10..22).map(move |y| (x, y)))
        .filter(|&(x, y)| img.luma(x, y) > 150)
        .count();
    assert!(bright > 10, "message text drawn");
    let theme = theme();
    let px = img.px(200, 30);
    assert!(
        px.iter()
            .zip(theme.band_peak)
            .any(|(a, b)| (*a as i32 - b as i32).abs() > 60),
        "no bars under a message: {px:?}"
    );
}
