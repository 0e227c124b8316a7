//! Renders with a proof of the stream's open GOPs under way in another decoder: the job's decoders
//! trust their entries provisionally and hold those cells back until the verdict, which decides
//! whether they are shown or decoded again. Oracle: the index each frame of the clip shows, and
//! ffprobe's frame times (the frame a sequential decode shows at each time).

use crate::common::*;

use super::render_with;
use crate::video::OpenGops;
use crate::RenderStats;

/// Renders `times_ms` of `clip` on two cores while a decoder outside the job proves the stream's
/// entries and gives `proven` once a worker waits for it; checks every cell shows the frame a
/// sequential decode shows at its time, each cell counted once.
fn render_while_proving(dir: &TempDir, clip: &str, times_ms: &[i64], proven: bool) -> RenderStats {
    let (gops, give) = OpenGops::proving_elsewhere();
    let prover = std::thread::spawn(move || give(proven));
    let stats = render_checked(dir, clip, times_ms, Some(gops));
    prover.join().expect("the verdict is given");
    stats
}

/// Renders `times_ms` of `clip` on two cores (the stream's proofs shared with `proofs` when
/// given) and checks every cell shows the frame a sequential decode shows at its time, each cell
/// counted once.
fn render_checked(
    dir: &TempDir,
    clip: &str,
    times_ms: &[i64],
    proofs: Option<std::sync::Arc<OpenGops>>,
) -> RenderStats {
    let ft = frame_times(clip);
    let times: Vec<f64> = times_ms.iter().map(|&t| t as f64).collect();
    let out = dir.path(&format!("sheet-{}.jpg", proofs.is_some()));
    let plan = plan(clip, vec![sheet(&out, &times, STRIPE * BITS, 32)], dir);
    let mut last = 0;
    let mut progress = |done: u32, _| {
        assert_eq!(done, last + 1, "every cell is sent once");
        last = done;
    };
    let result = render_with(&plan, 2, proofs, &mut progress).expect("render");
    assert!(result.unreadable.is_empty(), "{:?}", result.unreadable);
    let sheet = Sheet::open(&out);
    let got: Vec<usize> = plan.sheets[0]
        .cells
        .iter()
        .map(|c| sheet.index_at(c.rect))
        .collect();
    let want: Vec<usize> = times_ms.iter().map(|&t| expected_index(&ft, t)).collect();
    assert_eq!(got, want, "frames shown for {times_ms:?} in {clip}");
    eprintln!("{times_ms:?}: {:?}", result.stats);
    result.stats
}

/// A 16-s index clip of x264 open GOPs (a keyframe every 4 s that is not an IDR) and targets in
/// three of its GOPs, past each keyframe: two workers, each entering open GOPs.
fn open_gop_clip(dir: &TempDir) -> (String, Vec<i64>) {
    let clip = dir.path("opengop.mp4");
    let open_gop = ["-x264-params", "b-adapt=0:b-pyramid=none:open-gop=1"];
    encode_index(&index_source(25, 16.0), 1, 100, &open_gop, &clip);
    let frames = [120, 150, 180, 220, 250, 280, 320, 350, 380];
    (clip, frames.iter().map(|f| f * 40).collect())
}

#[test]
fn cells_decoded_trusting_an_entry_wait_for_the_verdict_not_the_decode() {
    let dir = TempDir::new("render-provisional-proven");
    let (clip, times) = open_gop_clip(&dir);
    let stats = render_while_proving(&dir, &clip, &times, true);
    assert_eq!(stats.workers, 2, "{stats:?}");
    // No decoder waited for the proof: each went on, holding back its cells, shown once proven.
    assert_eq!(stats.proof_waits, 0, "{stats:?}");
    assert!(stats.provisional_cells > 0, "{stats:?}");
    assert_eq!(stats.redone_cells, 0, "{stats:?}");
}

#[test]
fn cells_decoded_trusting_an_entry_not_proven_are_decoded_again() {
    let dir = TempDir::new("render-provisional-disproven");
    let (clip, times) = open_gop_clip(&dir);
    let stats = render_while_proving(&dir, &clip, &times, false);
    assert_eq!(stats.workers, 2, "{stats:?}");
    // Every cell held back was dropped and decoded again by the recovery ladder.
    assert!(stats.provisional_cells > 0, "{stats:?}");
    assert_eq!(stats.redone_cells, stats.provisional_cells, "{stats:?}");
}

/// The bench's open-GOP window: one part's targets late in a GOP, the next part's first target
/// just past the following keyframe (within the reach, so its entry is proven by a decode from
/// the keyframe before, which the part before decodes anyway and, asked in time, decodes on through
/// the keyframe to give the proof). Whichever decoder proves, and whether the ask comes in time or
/// not, every cell is exact and shown once, and no decoder waits for another's proof. (What the
/// proof given by the part before saves is measured by bench/run.mjs's open-GOP window row and
/// its decoded-frame counts: it depends on which decoder gets there first.)
#[test]
fn an_entry_just_past_the_keyframe_after_the_part_before_is_shown_exactly_without_waiting() {
    let dir = TempDir::new("render-witness");
    let (clip, _) = open_gop_clip(&dir);
    let frames = [150, 170, 190, 202, 230, 260, 290];
    let times: Vec<i64> = frames.iter().map(|f| f * 40).collect();
    for _ in 0..3 {
        let stats = render_checked(&dir, &clip, &times, None);
        assert_eq!(stats.workers, 2, "{stats:?}");
        assert_eq!(stats.proof_waits, 0, "{stats:?}");
    }
}
