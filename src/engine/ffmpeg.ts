/**
 * The fallback engine: executes a RenderPlan by spawning ffprobe/ffmpeg, each job in its own
 * module under ffmpeg/ (named after its native twin in crates/vidsheet-core/src where it has one):
 *
 * - probe.ts, extent.ts, media.ts: the probe (facts for core/probe.ts, details for the render);
 * - render.ts: the render, its target times in parts; part-plan.ts plans a part: its packets
 *   (listing.ts, packets.ts), its groups of targets that share a GOP (groups.ts, decoded by one
 *   process, no re-seek), the hints read from the packets' bytes (nal.ts) and whether decoding
 *   enters open GOPs (cost.ts);
 * - extract.ts: one group's frames, exactly (recovering from seeks that lie), one ffmpeg run at a
 *   time (decode.ts), an open-GOP entry proven once per stream (entry-proof.ts);
 * - sheets.ts, compose.ts, encode.ts: each sheet composed as soon as its cells are in, while later
 *   groups still decode, then labelled and encoded to JPEG;
 * - packet-log.ts, thumbs.ts: the zoom hints' packets (an MP4/MOV sample table read without
 *   FFmpeg: sample-table.ts) and thumbnails;
 * - audio.ts: the audio peaks (`audioPeaks`, its own call: core/audio.ts turns them into levels).
 *
 * Where every target of a group is a reference picture, the decoder skips the non-reference
 * pictures before them (`-skip_frame noref`), as the native engine does.
 */
import { audioPeaks } from './ffmpeg/audio.js';
import { probeFile } from './ffmpeg/probe.js';
import { render } from './ffmpeg/render.js';
import type { Engine } from './types.js';

export const ffmpegEngine: Engine = {
  name: 'ffmpeg',

  async probe(path, allowed, bounds) {
    return (await probeFile(path, bounds ? { allowed, bounds } : { allowed })).info;
  },

  async audioPeaks(path, range, signal, format, stream) {
    const probed = await probeFile(path, format === undefined ? {} : { format });
    // The stream the audio rule chose (core/probe.ts chooseAudioStream), else the first.
    const audio =
      (stream === undefined ? undefined : probed.audio.get(stream)) ?? [...probed.audio.values()][0];
    return audioPeaks(path, audio ?? null, probed.info.startTime, range, signal);
  },

  render,
};
