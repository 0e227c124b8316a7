/**
 * The reference reach: how far back a picture may reference, what seek recovery and the open-GOP
 * proof compare two decodes by (the native engine's is crates/vidsheet-core/src/video/reach.rs).
 * The rule: fixtures/vectors/reference-reach.json.
 */

/** Reference pictures a picture may predict from, at most (H.264, HEVC). */
const MAX_REFERENCES = 16;

/** Pictures a decoder holds back for reordering, at most. */
const MAX_DELAY = 16;

/**
 * The reference reach in frame durations of a `codec` stream (FFmpeg's codec name) whose H.264
 * sequence parameter set says `spsRefs` (`max_num_ref_frames`; null when not read), its decoder
 * holding back `delay` pictures (`has_b_frames`).
 */
export function referenceReach(codec: string, spsRefs: number | null, delay: number): number {
  const refs =
    codec === 'h264' && spsRefs !== null && spsRefs <= MAX_REFERENCES ? Math.max(spsRefs, 1) : MAX_REFERENCES;
  const d = Math.min(Math.max(delay, 0), MAX_DELAY);
  return (refs + 1) * (d + 1) + d;
}
