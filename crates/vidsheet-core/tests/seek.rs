//! The frame rule: the cell for time t shows the last frame whose pts <= start_time + t, whatever
//! the codec structure (B-frames, long GOPs, start offsets), never a keyframe snap.

mod common;

use common::*;
use vidsheet_core::{render, render_on};

/// Renders `times_ms` from `clip` and checks each cell against the frame ffprobe decodes there.
fn check_clip(dir: &TempDir, clip: &str, times_ms: &[i64]) -> vidsheet_core::RenderStats {
    check_clip_on(dir, clip, times_ms, None, 1)
}

/// `check_clip` as if the machine had `cores` cores (None: this machine), the cells spread over
/// `sheets` sheets.
fn check_clip_on(
    dir: &TempDir,
    clip: &str,
    times_ms: &[i64],
    cores: Option<usize>,
    sheets: usize,
) -> vidsheet_core::RenderStats {
    let ft = frame_times(clip);
    assert!(ft.pts.len() > 10, "clip has frames");
    let times_f: Vec<f64> = times_ms.iter().map(|&t| t as f64).collect();
    let (w, h) = (STRIPE * BITS, 32);
    let per = times_f.len().div_ceil(sheets.max(1)).max(1);
    let outs: Vec<String> = (0..times_f.chunks(per).len())
        .map(|i| dir.path(&format!("sheet-{i}.jpg")))
        .collect();
    let sheet_plans = times_f
        .chunks(per)
        .zip(&outs)
        .map(|(t, out)| sheet(out, t, w, h))
        .collect();
    let plan = plan(clip, sheet_plans, dir);
    let mut calls = 0;
    let mut last = 0;
    let mut report = |done: u32, total: u32| {
        assert_eq!(done, last + 1, "progress counts every cell once, in order");
        assert_eq!(total as usize, times_ms.len());
        last = done;
        calls += 1;
    };
    let result = match cores {
        Some(n) => render_on(&plan, n, &mut report),
        None => render(&plan, &mut report),
    }
    .expect("render");
    assert!(
        result.unreadable.is_empty(),
        "unreadable: {:?}",
        result.unreadable
    );
    assert_eq!(calls, times_ms.len());
    let mut got: Vec<usize> = Vec::new();
    for (sheet_plan, out) in plan.sheets.iter().zip(&outs) {
        let sheet = Sheet::open(out);
        got.extend(sheet_plan.cells.iter().map(|c| sheet.index_at(c.rect)));
    }
    let want: Vec<usize> = times_ms.iter().map(|&t| expected_index(&ft, t)).collect();
    assert_eq!(got, want, "frames shown for {times_ms:?} in {clip}");
    eprintln!("{clip} ({cores:?} cores): {:?}", result.stats);
    result.stats
}

/// Deterministic pseudo-random times in [0, max_ms), sorted.
fn random_times(n: usize, max_ms: i64, mut seed: u64) -> Vec<i64> {
    let mut v: Vec<i64> = (0..n)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % max_ms as u64) as i64
        })
        .collect();
    v.sort();
    v
}

/// Boundaries (t = exact pts and 1 ms before), duplicates, jumps forward within and across GOPs,
/// before the first and after the last frame.
fn times_for(fps: i64, seconds: i64) -> Vec<i64> {
    // First ms at or after frame k's pts, and the ms before it.
    let at = |k: i64| (k * 1000 + fps - 1) / fps;
    let last = seconds * 1000;
    let mut t = vec![
        0,
        at(1) - 1,
        at(1),
        at(1),
        at(3) + 1,
        at(7),
        at(7) - 1,
        at(30) - 1,
        last * 31 / 100,
        last / 2,
        last / 2 + 1,
        last * 77 / 100,
        at(seconds * fps - 1) - 1,
        at(seconds * fps - 1),
        last - 1,
        last + 5000,
    ];
    t.sort();
    t
}

#[test]
fn h264_with_b_frames_and_long_gop() {
    let dir = TempDir::new("seek-longgop");
    let clip = dir.path("longgop.mp4");
    encode_index(&index_source(25, 24.0), 3, 300, &[], &clip);
    check_clip(&dir, &clip, &times_for(25, 24));
    check_clip(&dir, &clip, &random_times(40, 25_000, 7));
    // Every frame of a stretch: each B-frame is someone's target, none may be skipped.
    check_clip(
        &dir,
        &clip,
        &(0..48).map(|i| 4000 + i * 40).collect::<Vec<_>>(),
    );
}

#[test]
fn h264_short_gop_many_seeks() {
    let dir = TempDir::new("seek-shortgop");
    let clip = dir.path("shortgop.mp4");
    encode_index(&index_source(30, 30.0), 2, 15, &[], &clip);
    let times: Vec<i64> = (0..36).map(|i| i * 833 + 17).collect();
    let stats = check_clip(&dir, &clip, &times);
    assert!(
        stats.seeks > 0,
        "far targets are reached by seeking: {stats:?}"
    );
    check_clip(&dir, &clip, &times_for(30, 30));
    check_clip(&dir, &clip, &random_times(30, 31_000, 99));
}

#[test]
fn mpegts_with_start_offset() {
    let dir = TempDir::new("seek-ts");
    let clip = dir.path("offset.ts");
    encode_index(
        &index_source(25, 16.0),
        3,
        50,
        &["-output_ts_offset", "100"],
        &clip,
    );
    assert!(start_us(&clip) > 99_000_000);
    check_clip(&dir, &clip, &times_for(25, 16));
    check_clip(&dir, &clip, &random_times(25, 17_000, 3));
}

#[test]
fn matroska_variable_frame_rate() {
    let dir = TempDir::new("seek-vfr");
    let clip = dir.path("vfr.mkv");
    // Drop a run of frames so there is a gap: the frame before the gap stays on screen.
    encode_index(
        &index_source_with(25, 12.0, ",select='not(between(n\\,100\\,160))'"),
        3,
        60,
        &["-fps_mode", "vfr"],
        &clip,
    );
    check_clip(
        &dir,
        &clip,
        &[0, 3990, 4000, 5000, 6000, 6439, 6440, 6441, 11000],
    );
}

#[test]
fn many_cells_on_one_frame_decode_once() {
    let dir = TempDir::new("seek-dup");
    let clip = dir.path("short.mp4");
    encode_index(&index_source(10, 2.0), 3, 250, &[], &clip);
    check_clip(
        &dir,
        &clip,
        &[0, 10, 20, 99, 100, 101, 150, 199, 200, 1999, 2500],
    );
}

#[test]
fn other_codecs_with_b_frames() {
    let dir = TempDir::new("seek-codecs");
    let cases: &[(&str, &[&str])] = &[
        (
            "hevc.mp4",
            &[
                "-c:v",
                "libx265",
                "-preset",
                "ultrafast",
                "-x265-params",
                "bframes=4:b-adapt=0:keyint=60:log-level=error",
                "-crf",
                "16",
            ],
        ),
        (
            "mpeg2.ts",
            &["-c:v", "mpeg2video", "-bf", "2", "-g", "30", "-q:v", "2"],
        ),
        (
            "mpeg4.avi",
            &["-c:v", "mpeg4", "-bf", "2", "-g", "40", "-q:v", "2"],
        ),
        (
            "opengop.mkv",
            &[
                "-c:v",
                "libx264",
                "-preset",
                "veryfast",
                "-bf",
                "3",
                "-x264-params",
                "b-adapt=0:open-gop=1:keyint=48",
                "-crf",
                "16",
            ],
        ),
    ];
    for (name, args) in cases {
        let clip = dir.path(name);
        let src = index_source(25, 12.0);
        let mut a = vec!["-f", "lavfi", "-i", &src];
        a.extend_from_slice(args);
        a.push(&clip);
        ffmpeg(&a);
        check_clip(&dir, &clip, &times_for(25, 12));
        check_clip(&dir, &clip, &random_times(20, 12_500, name.len() as u64));
    }
}

/// Encodes the 16-s index clip at `clip` as x264 open GOPs on one core (keyframes every 100
/// frames, 4 s; one B-frame, no pyramid) and returns ffprobe's picture type of each of its 400
/// frames, the oracle of the decode bounds below.
fn open_gop_index_clip(clip: &str) -> Vec<String> {
    let open_gop = ["-x264-params", "b-adapt=0:b-pyramid=none:open-gop=1"];
    encode_index(&index_source(25, 16.0), 1, 100, &open_gop, clip);
    let types = ffprobe(&[
        "-select_streams",
        "v:0",
        "-show_entries",
        "frame=pict_type",
        "-of",
        "csv=p=0",
        clip,
    ]);
    let types: Vec<String> = types
        .lines()
        .map(|l| l.trim().trim_end_matches(',').to_string())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(types.len(), 400);
    assert!([0, 100, 200, 300].iter().all(|&k| types[k] == "I"));
    types
}

/// Entering an open GOP's keyframe (not an IDR) in an MP4, the first entry of the stream is
/// verified by decoding again from one keyframe earlier. MP4's index holds decode times while a
/// seek takes a presentation time (the demuxer subtracts the reordering shift), so seeking to the
/// index time of that keyframe landed one more GOP back: the restart decoded a whole GOP for
/// nothing. Oracle: ffprobe's picture types. With one B-frame and no pyramid every B-frame is a
/// non-reference picture the engine skips, so both decodes cost the I- and P-frames from their
/// keyframe to the target, plus a few (the target, the frame after it, a leading picture); the
/// extra GOP would add its 50 I- and P-frames. A later entry is trusted once the first is proven
/// (not verified again), so its decode costs its own I- and P-frames only.
#[test]
fn an_open_gop_entry_is_verified_from_one_keyframe_earlier_not_two() {
    let dir = TempDir::new("seek-opengop-restart");
    let clip = dir.path("opengop.mp4");
    let types = open_gop_index_clip(&clip);
    let references = |from: usize, to: usize| types[from..=to].iter().filter(|t| *t != "B").count();
    // 8.8 s: frame 220, 20 frames past its keyframe (200), further than any reference reaches: the
    // first entry, verified. 12.8 s: frame 320, an entry like it, trusted once that one is proven.
    let stats = check_clip_on(&dir, &clip, &[220 * 40, 320 * 40], Some(1), 1);
    let few = 3;
    let bound =
        (references(200, 220) + references(100, 220) + references(300, 320) + 3 * few) as u64;
    assert!(
        stats.decoded_frames <= bound,
        "decoded {} frames; the first entry verified from one keyframe earlier and the second \
         trusted cost at most {bound} (from two keyframes earlier: {} more; the second verified \
         too: {} more): {stats:?}",
        stats.decoded_frames,
        references(0, 99),
        references(200, 320),
    );
    assert!(stats.seeks >= 2, "the entry was verified: {stats:?}");
}

/// The first open-GOP entry met at a target just past its keyframe (closer than any reference
/// reaches, so the target alone cannot tell whether the entry is clean): the restart from the
/// keyframe before, which that target needs anyway, decodes on for the later targets of the GOP,
/// and its pictures from the keyframe on prove the entry as they come out; the first attempt only
/// decodes on to keyframe + reach. So the next entry (frame 320) is trusted without a second
/// decode. Without that proof, frame 320's entry is verified from frame 200: one GOP more.
#[test]
fn an_open_gop_entry_just_past_its_keyframe_is_proven_by_the_restart_it_needs_anyway() {
    let dir = TempDir::new("seek-opengop-near");
    let clip = dir.path("opengop.mp4");
    let types = open_gop_index_clip(&clip);
    let references = |from: usize, to: usize| types[from..=to].iter().filter(|t| *t != "B").count();
    // Frame 202, two past keyframe 200; frame 260, past the reach in the same GOP; frame 320, the
    // next entry, 20 past its keyframe.
    let stats = check_clip_on(&dir, &clip, &[202 * 40, 260 * 40, 320 * 40], Some(1), 1);
    // The reach here is well under 30 frames (3 references, B-frames in threes).
    let (few, reach) = (3, 30);
    let bound =
        (references(200, 200 + reach) + references(100, 260) + references(300, 320) + 3 * few)
            as u64;
    assert!(
        stats.decoded_frames <= bound,
        "decoded {} frames; proving the first entry by its own restart and trusting the second \
         cost at most {bound} (the second verified too: {} more): {stats:?}",
        stats.decoded_frames,
        references(200, 320),
    );
}

/// Cells spread over many GOPs are split into contiguous parts decoded in parallel, each by its
/// own decoder: every cell still shows exactly the frame the rule picks, including cells on either
/// side of a keyframe (where parts meet), duplicates, and targets before the first and after the
/// last frame; with an index (MP4) and without one (MPEG-TS).
#[test]
fn parallel_parts_show_the_exact_frames() {
    let dir = TempDir::new("seek-parallel");
    let mp4 = dir.path("long.mp4");
    encode_index(&index_source(25, 40.0), 3, 100, &[], &mp4);
    let ts = dir.path("long.ts");
    ffmpeg(&["-i", &mp4, "-c", "copy", "-output_ts_offset", "10", &ts]);

    // Keyframes every 4 s (frame 100k at 4000k ms): the last ms before one and the first on it.
    // Clusters a few seconds apart (so that even without an index they form separate runs).
    let mut times: Vec<i64> = random_times(24, 600, 21)
        .iter()
        .enumerate()
        .map(|(i, &jitter)| (i as i64 / 2) * 3100 + jitter)
        .collect();
    for k in [1, 3, 4, 7, 9] {
        times.extend([k * 4000 - 1, k * 4000, k * 4000]);
    }
    times.extend([0, 0, 39_999, 45_000]);
    times.sort();
    for clip in [&mp4, &ts] {
        for cores in [2, 3, 4] {
            let stats = check_clip_on(&dir, clip, &times, Some(cores), 5);
            assert!(stats.workers >= 2, "{clip}: decoded in parallel: {stats:?}");
        }
        // One core: one decoder, same frames.
        let stats = check_clip_on(&dir, clip, &times, Some(1), 5);
        assert_eq!(stats.workers, 1);
    }
    // The same times on two sheets with different cell sizes: each picture is scaled to both.
    for cores in [1, 2] {
        check_two_sizes(&dir, &mp4, &times, cores);
    }
}

/// Two sheets with the same times, one with cells twice the size of the other's.
fn check_two_sizes(dir: &TempDir, clip: &str, times_ms: &[i64], cores: usize) {
    let ft = frame_times(clip);
    let times_f: Vec<f64> = times_ms.iter().map(|&t| t as f64).collect();
    let (w, h) = (STRIPE * BITS, 32);
    let outs = [dir.path("small.jpg"), dir.path("large.jpg")];
    let plan = plan(
        clip,
        vec![
            sheet(&outs[0], &times_f, w, h),
            sheet(&outs[1], &times_f, 2 * w, 2 * h),
        ],
        dir,
    );
    let result = render_on(&plan, cores, &mut |_, _| {}).expect("render");
    assert!(result.unreadable.is_empty(), "{:?}", result.unreadable);
    let want: Vec<usize> = times_ms.iter().map(|&t| expected_index(&ft, t)).collect();
    for (sheet_plan, out) in plan.sheets.iter().zip(&outs) {
        let sheet = Sheet::open(out);
        let got: Vec<usize> = sheet_plan
            .cells
            .iter()
            .map(|c| sheet.index_at(c.rect))
            .collect();
        assert_eq!(got, want, "{out} ({cores} cores)");
    }
}
