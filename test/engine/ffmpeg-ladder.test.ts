/**
 * The fallback's recovery ladder climbs only on real damage (issue 24): on intact files every
 * seek's decode is accepted as it is, so each group of targets costs one ffmpeg run. Two false
 * alarms made it climb to the stream start:
 * - field pictures each in a packet of their own (H.264 PAFF; MPEG-2 in MP4 samples): a second
 *   field's time was taken for a frame, whose picture never came out ("frames missing");
 * - every H.264 transport stream: the bisecting seek lands in the GOP before the IDR entry and the
 *   decoder logs "Frame num gap" there, which counted as invented reference pictures.
 * Counted by the extraction's debug counter (decode.ts `extractionStats`), over a whole job in
 * this process. That the frames shown stay exact is judged on the same fixtures against a
 * sequential decode (truth-two.test.ts: PAFF MP4 and TS; frame-exact.test.ts: the H.264 TS), and
 * here, for the transport streams, against the frame index the pixels carry.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extractionStats } from '../../src/engine/ffmpeg/decode.js';
import { listAllPackets } from '../../src/engine/ffmpeg/packets.js';
import { probeFile, videoDetails } from '../../src/engine/ffmpeg/probe.js';
import { ffmpegEngine } from '../../src/engine/ffmpeg.js';
import { runJob } from '../../src/job.js';
import {
  fieldPicturesMp4,
  indexClip,
  PAFF,
  paffMkv,
  paffMkvStripped,
  paffMp4,
  paffPs,
  paffTs,
} from '../helpers/fixtures.js';
import { decodedPts } from '../helpers/oracle.js';

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-ladder-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Runs the 3x3 overview of `path` on the fallback; returns the restarts and runs it took. */
async function overview(path: string, name: string): Promise<{ restarts: number; runs: number }> {
  const before = { ...extractionStats };
  const outcome = await runJob(
    { input: path, density: '3x3', outDir: join(work, name) },
    { engine: ffmpegEngine, audio: false },
  );
  expect(outcome).toBeDefined();
  return {
    restarts: extractionStats.restarts - before.restarts,
    runs: extractionStats.runs - before.runs,
  };
}

const SUBJECTS: Array<[string, () => Promise<string>]> = [
  ['PAFF H.264 MP4 (each field its own sample)', paffMp4],
  ['PAFF H.264 TS (each field its own PES packet)', paffTs],
  ['PAFF H.264 MKV (each field its own block)', paffMkv],
  ['PAFF H.264 PS (fields across 2 KiB packs)', paffPs],
  ['PAFF H.264 MKV with header stripping', paffMkvStripped],
  ['field-coded MPEG-2 MP4 (each field its own sample)', fieldPicturesMp4],
  ['progressive H.264 TS', () => indexClip({ seconds: 12, container: 'ts', startOffsetSeconds: 19207 })],
];

describe('ffmpeg engine: no restart on an intact file', () => {
  it.each(SUBJECTS)(
    '%s: the 3x3 overview restarts nothing',
    async (name, make) => {
      const { restarts, runs } = await overview(await make(), name);
      expect(restarts).toBe(0);
      // One run per group, and a 3x3 overview has at most 9 groups.
      expect(runs).toBeGreaterThan(0);
      expect(runs).toBeLessThanOrEqual(9);
    },
    120_000,
  );

  it.each([
    ['MP4', paffMp4],
    ['TS', paffTs],
    ['MKV', paffMkv],
    ['PS', paffPs],
    ['MKV with header stripping', paffMkvStripped],
  ])(
    'PAFF %s: only first fields are frames, one per frame of the stream',
    async (container, make) => {
      const path = await make();
      const d = videoDetails(await probeFile(path), 0);
      const packets = await listAllPackets(path, d);
      // 300 field packets, 150 frames 40 ms apart: each frame's time is its first field's.
      expect(packets.pts).toHaveLength(PAFF.seconds * PAFF.fps);
      // Each frame at the time a sequential decode shows it (ffprobe decodes every frame).
      expect(packets.pts).toEqual((await decodedPts(path, 0)).pts);
      const [num, den] = d.timeBase;
      const step = den / num / BigInt(PAFF.fps);
      const steps = packets.pts.slice(1).map((p, i) => p - (packets.pts[i] as bigint));
      // In the PS one field's packet carries no timestamp: its frame, shown at its second
      // field's time (truth-two.test.ts), is 20 ms late.
      const late = container === 'PS' ? [step / 2n, (step * 3n) / 2n] : [];
      expect(new Set(steps)).toEqual(new Set([step, ...late]));
    },
    60_000,
  );
});
