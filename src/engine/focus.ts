/**
 * A bounded probe (DESIGN §5a "Decode cost is bounded before and during a job"), the same walk for
 * both engines: a survey opens the file with no video decoder (but for streams whose header does
 * not give their size) and tries no frame; then the stream rule's candidates (core/probe.ts
 * `videoCandidates`), best first, are opened one at a time with a decoder for that stream (and the
 * first audio stream) only, until one gives a frame. A file whose tracks all share one large
 * picture is then decoded once, not once per track.
 *
 * What the survey still decodes, and why: the stream rule ranks candidates by picture size, and a
 * transport stream (or MPEG-PS, FLV) states no size, so the survey lets those streams' decoders
 * run in FFmpeg's stream analysis, all of them in the one open. H.264, HEVC and MPEG-2 (and the
 * other decoders FFmpeg's analysis runs with `skip_frame`) read their parameter sets only; another
 * codec decodes pictures until the analysis has its parameters. Refusing those decoders would
 * leave the streams without a size, out of the candidates: a legitimate file would change its
 * stream or become unreadable. What bounds it: at most `max_streams` streams, each picture within
 * `max_pixels`, the whole under the worker's memory limit (past it a refunded 500). Surveying such
 * streams one open each (as the candidates are tried) would bound the peak to one stream's
 * decoder, at one open per stream: not done yet.
 */
import { videoCandidates } from '../core/probe.js';
import type { ProbeInfo } from './types.js';

/**
 * `survey()` opens the file as the job allows; `attempt(format, stream)` opens it again with the
 * survey's demuxer (`format`) and tries `stream`. The result is the first attempt whose stream
 * decodes, else the survey (no stream decodes: the job's `unreadable video`).
 */
export async function probeFocused(
  survey: () => Promise<ProbeInfo>,
  attempt: (format: string, stream: number) => Promise<ProbeInfo>,
): Promise<ProbeInfo> {
  const first = await survey();
  for (const candidate of videoCandidates(first.videoStreams)) {
    const info = await attempt(first.format, candidate.index);
    if (info.videoStreams.some((s) => s.index === candidate.index && s.decodes)) return info;
  }
  return first;
}
