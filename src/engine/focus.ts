/**
 * A bounded probe (DESIGN §5a "Decode cost is bounded before and during a job"), the same walk for
 * both engines: a survey opens the file with no video decoder (but for streams whose header does
 * not give their size) and tries no frame; then the stream rule's candidates (core/probe.ts
 * `videoCandidates`), best first, are opened one at a time with a decoder for that stream (and the
 * first audio stream) only, until one gives a frame. A file whose tracks all share one large
 * picture is then decoded once, not once per track.
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
