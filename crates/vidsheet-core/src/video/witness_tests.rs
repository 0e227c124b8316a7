//! The proof of an open-GOP entry given by the decoder of the part before (witness.rs
//! `ask_witness` / `serve_witness`), driven step by step in one thread, so that the part before
//! is still decoding when the part after asks (in a render, which decoder gets there first is
//! timing). Oracle: a decode of every frame from the start.

use std::sync::Arc;

use super::{fingerprint, OpenGops, Verdict, VideoSource};
use crate::common;
use crate::media::Opening;

/// 16 s of testsrc2 at 25 fps, x264 as the bench's clips (ultrafast, 3 B-frames that always
/// happen, b-pyramid) with open GOPs: a keyframe every 100 frames, those after the first
/// recovery points whose leading B-frames reference the GOP before.
fn open_gop_clip() -> String {
    common::cached_clip(
        "open.mp4",
        &[
            "-f",
            "lavfi",
            "-i",
            "testsrc2=s=320x180:r=25:d=16",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-bf",
            "3",
            "-x264-params",
            "b-adapt=0:bframes=3:rc-lookahead=0:open-gop=1",
            "-g",
            "100",
            "-keyint_min",
            "100",
            "-sc_threshold",
            "0",
        ],
    )
}

/// The decoder of `part` of a job sharing `gops`, trusting pending proofs as a render's decoders
/// do, the part before ending at frame `before`; targets at `frames` (25 fps).
fn decoder(
    path: &str,
    gops: &Arc<OpenGops>,
    part: usize,
    before: Option<i64>,
    frames: &[i64],
) -> (VideoSource, Vec<i64>) {
    let mut src = VideoSource::open(path, &Opening::any(), 0, 1).expect("open");
    src.share_proofs(Arc::clone(gops));
    src.trust_pending_proofs();
    let start = src.facts.start_us();
    let us = |frame: i64| start + frame * 40_000;
    src.set_part(part, before.map(us));
    let targets: Vec<i64> = frames.iter().map(|&f| us(f)).collect();
    src.set_targets(&targets);
    (src, targets)
}

/// The digest of the picture each target shows.
fn shown(src: &mut VideoSource, targets: &[i64]) -> Vec<Option<u64>> {
    targets
        .iter()
        .map(|&t| {
            let f = src.frame_at(t, &mut |_| false)?;
            fingerprint::fingerprint(&f.frame)
        })
        .collect()
}

/// The oracle: the digest of every frame of the clip, one decoder showing each in turn.
fn sequential_truth(path: &str) -> Vec<Option<u64>> {
    let (mut every, all) = decoder(
        path,
        &Arc::default(),
        0,
        None,
        &(0..400).collect::<Vec<_>>(),
    );
    let truth = shown(&mut every, &all);
    assert!(truth.iter().all(Option::is_some));
    truth
}

#[test]
fn the_part_before_serves_the_proof_also_when_its_last_picture_out_leads_the_keyframe() {
    let path = open_gop_clip();
    let truth = sequential_truth(&path);
    let want = |frames: &[i64]| -> Vec<Option<u64>> {
        frames.iter().map(|&f| truth[f as usize]).collect()
    };
    // The part after enters at the recovery point at frame 200 with a target just past it (within
    // the references' reach: its entry needs a proof) and later ones past the reach; the part
    // before ends a few frames short of that keyframe, in the GOP before it. Where the part before
    // skips everything from its last target to the keyframe, the last picture it decodes is a
    // leading picture of the keyframe's own GOP (decoded after the keyframe, shown before it;
    // here for its last target at 192 and 194).
    let after = [202, 230, 260, 290];
    for last in 180..=194 {
        let before = [150, 165, last];
        let gops = Arc::new(OpenGops::default());
        gops.start_parts(2);
        // The part after asks the part before (still decoding) for the decode from the keyframe
        // before, and goes on trusting its entry provisionally.
        let (mut b, targets) = decoder(&path, &gops, 1, Some(last), &after);
        let b_shows = shown(&mut b, &targets);
        assert!(
            b.provisional(),
            "last target {last}: the part after asked the part before"
        );
        b.serve_witness();
        assert_eq!(b.provisional_verdict(false), Verdict::Pending);
        // The part before decodes its cells, then decodes on through the keyframe and compares.
        let (mut a, targets) = decoder(&path, &gops, 0, None, &before);
        let a_shows = shown(&mut a, &targets);
        a.serve_witness();
        assert_eq!(
            b.provisional_verdict(false),
            Verdict::Proven,
            "last target {last}: the part before gave the proof"
        );
        assert_eq!(a_shows, want(&before), "part before, last target {last}");
        assert_eq!(b_shows, want(&after), "part after, last target {last}");
        // It never decoded the GOP before its entry itself.
        assert!(b.decoded_frames() < 50, "{} pictures", b.decoded_frames());
    }
}

/// The part before meets its own entry (a target far past its keyframe, which it could prove by
/// decoding the GOP before) while the part after has not settled its first target: it trusts the
/// entry provisionally, and the witness it then serves the part after proves the stream; neither
/// decodes a GOP before its entry. (In a render, which decoder meets its entry first is timing:
/// the 10 s open-GOP window of `npm run bench` took either order.)
#[test]
fn the_part_before_trusts_its_entry_while_the_part_after_may_still_ask() {
    let path = open_gop_clip();
    let truth = sequential_truth(&path);
    let want = |frames: &[i64]| -> Vec<Option<u64>> {
        frames.iter().map(|&f| truth[f as usize]).collect()
    };
    let (before, after) = ([110, 165, 185], [202, 230, 260, 290]);
    // The same part before proving its entry itself: the part after settled already.
    let alone = Arc::new(OpenGops::default());
    alone.start_parts(2);
    alone.first_target_settled(1);
    let (mut proving, targets) = decoder(&path, &alone, 0, None, &before);
    assert_eq!(shown(&mut proving, &targets), want(&before));
    assert!(!proving.provisional() && alone.proven());
    // Its proof decoded from the keyframe before (here the start).
    let own_entry = proving.place.entry();

    let gops = Arc::new(OpenGops::default());
    gops.start_parts(2);
    let (mut a, targets) = decoder(&path, &gops, 0, None, &before);
    let a_shows = shown(&mut a, &targets);
    assert!(a.provisional(), "the part before waits for the part after");
    assert_eq!(a.provisional_verdict(false), Verdict::Pending);
    let (mut b, targets) = decoder(&path, &gops, 1, Some(185), &after);
    let b_shows = shown(&mut b, &targets);
    b.first_target_settled();
    assert!(b.provisional(), "the part after asked the part before");
    a.serve_witness();
    assert_eq!(a.provisional_verdict(false), Verdict::Proven);
    assert_eq!(b.provisional_verdict(false), Verdict::Proven);
    assert_eq!(a_shows, want(&before));
    assert_eq!(b_shows, want(&after));
    // It entered once, at its keyframe, never at the one before.
    assert_eq!(a.seeks(), 1);
    assert!(
        a.place.entry() > own_entry,
        "entered at {:?}; proving alone at {own_entry:?}",
        a.place.entry()
    );
    assert!(b.decoded_frames() < 50, "{} pictures", b.decoded_frames());
}
