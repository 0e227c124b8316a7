/**
 * From the plan's target times to extraction groups: which packets to list (the neighbourhood of
 * each target where that provably suffices, else the whole stream), and which target frames share
 * a GOP, so one ffmpeg run decodes them all without seeking again.
 */
import type { VideoDetails } from './media.js';
import { frameAt, lastAtOrBefore, listPacketsInWindow, listPacketsNear, type Packets } from './packets.js';

/**
 * The packets the targets' frames are chosen from: in MP4/MOV only the neighbourhood of each
 * target, elsewhere a window's neighbourhood; `whole` (the whole stream, listed once per render)
 * when that cannot be proved to cover every target.
 */
export async function packetsFor(
  path: string,
  d: VideoDetails,
  timesMs: number[],
  whole: () => Promise<Packets>,
  signal: AbortSignal,
): Promise<Packets> {
  if (d.sampleTable) return (await listPacketsNear(path, d, timesMs, signal)) ?? whole();
  const first = Math.min(...timesMs);
  const near = await listPacketsInWindow(path, d, { fromMs: first, toMs: Math.max(...timesMs) }, signal);
  const firstFrame = near.pts.length ? near.pts[frameAt(near.pts, d, first)] : undefined;
  const covered =
    firstFrame !== undefined && near.keyframes[0] !== undefined && near.keyframes[0] <= firstFrame;
  return covered ? near : whole();
}

/**
 * Target frames (ascending indices into packets.pts) grouped so each group is decoded from one
 * random-access point: a target joins the previous group when no keyframe of `keyframes` (the
 * usable ones, ascending) lies between them.
 */
export function groupFrames(frames: number[], packets: Packets, keyframes: bigint[]): number[][] {
  const groups: number[][] = [];
  for (const f of frames) {
    const current = groups[groups.length - 1];
    const last = current?.[current.length - 1];
    const p = packets.pts[f] as bigint;
    const key = lastAtOrBefore(keyframes, (k) => k <= p);
    const keyPts = key < 0 ? undefined : keyframes[key];
    if (current && last !== undefined && keyPts !== undefined && keyPts <= (packets.pts[last] as bigint)) {
      current.push(f);
    } else groups.push([f]);
  }
  return groups;
}
