//! The reference reach: how far back a picture may reference, what seek recovery compares two
//! decodes by. The rule: fixtures/vectors/reference-reach.json.

/// Reference pictures a picture may predict from, at most (H.264, HEVC).
const MAX_REFERENCES: u32 = 16;

/// Pictures a decoder holds back for reordering, at most.
const MAX_DELAY: i64 = 16;

/// The reference reach in frame durations of a `codec` stream (FFmpeg's codec name) whose H.264
/// sequence parameter set says `sps_refs` (`max_num_ref_frames`; None when not read), its decoder
/// holding back `delay` pictures (`has_b_frames`).
pub(super) fn reference_reach(codec: &str, sps_refs: Option<u32>, delay: i64) -> i64 {
    let refs = match sps_refs {
        Some(refs) if codec == "h264" && refs <= MAX_REFERENCES => refs.max(1),
        _ => MAX_REFERENCES,
    } as i64;
    let delay = delay.clamp(0, MAX_DELAY);
    (refs + 1) * (delay + 1) + delay
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::Opening;
    use crate::video::VideoSource;

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Case {
        name: String,
        codec: String,
        sps_refs: Option<u32>,
        delay: i64,
        expect: i64,
    }

    #[test]
    fn the_reference_reach_follows_the_shared_vectors() {
        for case in crate::vectors::cases::<Case>("reference-reach.json") {
            let got = reference_reach(&case.codec, case.sps_refs, case.delay);
            assert_eq!(got, case.expect, "{}", case.name);
        }
    }

    /// 2 s of testsrc2 at 25 fps, x264 with one reference frame and no B-frames, in `dir` as `ext`.
    fn one_reference_clip(dir: &std::path::Path, ext: &str) -> String {
        let out = dir
            .join(format!("ref1.{ext}"))
            .to_string_lossy()
            .into_owned();
        let status = std::process::Command::new("ffmpeg")
            .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
            .arg("testsrc2=s=160x120:r=25:d=2")
            .args(["-c:v", "libx264", "-preset", "veryfast", "-bf", "0"])
            .args(["-x264-params", "ref=1", "-pix_fmt", "yuv420p", &out])
            .status()
            .expect("ffmpeg runs");
        assert!(status.success(), "ffmpeg made {out}");
        out
    }

    /// The SPS's one reference frame is read from avcC (MP4) and from the Annex B parameter sets
    /// probing extracts (MPEG-TS): the reach is the rule's for H.264, 1 reference, no delay, in
    /// ticks of 1/25 s (the test in test/engine/ffprobe.test.ts checks the fallback's probe).
    #[test]
    fn the_reach_of_a_one_reference_stream_is_read_from_its_sps() {
        let dir = std::env::temp_dir().join(format!("vidsheet-reach-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for ext in ["mp4", "ts"] {
            let path = one_reference_clip(&dir, ext);
            let src = VideoSource::open(&path, &Opening::any(), 0, 1).expect("open");
            let frame = src.facts.seconds_in_ts(1) / 25;
            assert_eq!(src.facts.sps_refs(), Some(1), "{ext}");
            assert_eq!(src.reference_reach(), 2 * frame, "{ext}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
