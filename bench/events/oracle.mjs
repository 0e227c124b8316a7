/**
 * The corpus oracle of the events benchmark, independent of the tool: ffmpeg's scene filter. Every
 * frame whose `scene` score (how much it differs from the frame before, 0 to 1) exceeds the
 * threshold is a cut at its presentation time.
 */
import { execFileSync } from 'node:child_process';
import { parseSceneScores } from './match.mjs';

/** The cuts the scene filter finds in a file's first video stream: `{ kind: 'cut', seconds }`. */
export function sceneCuts(file, threshold) {
  const text = execFileSync(
    'ffmpeg',
    [
      ...['-hide_banner', '-nostdin', '-v', 'error', '-i', file, '-an'],
      ...['-vf', `select='gt(scene,${threshold})',metadata=print:file=-`, '-f', 'null', '-'],
    ],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  return parseSceneScores(text, threshold).map((c) => ({ kind: 'cut', seconds: c.seconds }));
}
