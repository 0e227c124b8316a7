/**
 * The fallback engine's renders at their edges: a render that fails settles only once its
 * children are gone; a clock that restarts without a keyframe. The scale cases (thousands of
 * targets in one run) are bench/scale.mjs; test/engine/selection-script.test.ts keeps their guard.
 */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cellRect, computeGrid } from '../../src/core/layout.js';
import { ffmpegEngine } from '../../src/engine/ffmpeg.js';
import { indexClip } from '../helpers/fixtures.js';
import { decodeIndex, readJpeg } from '../helpers/frames.js';
import { renderPlan } from '../helpers/plans.js';

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-ffmpeg-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('ffmpeg engine: a render that fails', () => {
  it('a render that fails stops and awaits its children before it settles', async () => {
    // Short GOPs: many groups still decode when the first sheet fails to be written.
    const clip = await indexClip({ seconds: 20, gop: 12, bframes: 3 });
    const sheets = [0, 1].map((s) =>
      Array.from({ length: 36 }, (_, c) => {
        const timeMs = s === 0 ? c * 50 : 4000 + c * 400;
        return { timeMs, label: String(timeMs) };
      }),
    );
    const grid = computeGrid(320, 240, '6x6', false);
    const tempDir = join(work, 'fail-tmp');
    mkdirSync(tempDir);
    const plan = renderPlan(clip, tempDir, {
      grid,
      sheets,
      window: { startMs: 0, endMs: 20_000 },
      // The first sheet's directory does not exist: its encoder fails.
      paths: [join(work, 'missing', 'sheet-1.jpg'), join(work, 'sheet-2.jpg')],
    });
    await expect(ffmpegEngine.render(plan)).rejects.toThrow(/drawing labels failed/);
    // Settled: no ffmpeg of this render is left running, and nothing writes into tempDir any more.
    const running = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
    expect(running.split('\n').filter((line) => line.includes(tempDir))).toEqual([]);
    rmSync(tempDir, { recursive: true, force: true });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(existsSync(tempDir)).toBe(false);
    // No half-written sheet: the other sheet is absent (its encoder was stopped, or never started)
    // or whole (finished before the failure: groups are not scheduled in time order, so which
    // sheet completes first is not fixed).
    expect(readdirSync(work).filter((name) => name.endsWith('.partial'))).toEqual([]);
    const other = join(work, 'sheet-2.jpg');
    if (existsSync(other)) expect(readJpeg(other).width).toBe(plan.sheets[1]?.width);
  }, 120_000);
});

/**
 * A clip of two recordings whose clocks overlap: the index clip (frame n shows n; one keyframe,
 * no B-frames, 25 fps, frame n at 40n ms) in Matroska clusters of about 1 s, the third cluster's
 * timecode moved back by one cluster (a patch of the file, like a concatenation that restarted
 * the clock), with no keyframe there. Frames 52..77 then play at 1.04..2.04 s again, beside frames
 * 26..51; frame 78 comes at 3.12 s.
 */
function restartedClock(src: string, out: string): void {
  const clustered = `${out}.clustered.mkv`;
  execFileSync('ffmpeg', [
    ...['-hide_banner', '-nostdin', '-loglevel', 'error', '-y', '-i', src, '-map', '0', '-c', 'copy'],
    // Clusters of about 1 s, without CRC-32 elements (the patch would break them).
    ...['-cluster_time_limit', '1000', '-write_crc32', '0', clustered],
  ]);
  const b = readFileSync(clustered);
  rmSync(clustered);
  // The Cluster (0x1F43B675) whose Timecode (0xE7, 2 bytes) is 2080 ms: set it to 1040 ms.
  const timecode = Buffer.from('e7820820', 'hex');
  let at = -1;
  for (
    let c = b.indexOf(Buffer.from('1f43b675', 'hex'));
    c >= 0;
    c = b.indexOf(Buffer.from('1f43b675', 'hex'), c + 1)
  ) {
    const t = b.indexOf(timecode, c);
    if (t > c && t < c + 16) at = t;
  }
  if (at < 0) throw new Error('restartedClock: no cluster at 2080 ms');
  b.writeUInt16BE(1040, at + 2);
  writeFileSync(out, b);
}

describe('ffmpeg engine: a clock that restarts without a keyframe', () => {
  it('shows, of frames sharing a time, the one on screen when the clock first reaches it', async () => {
    const clip = join(work, 'restarted.mkv');
    restartedClock(await indexClip({ seconds: 4, gop: 250, bframes: 0, container: 'mkv' }), clip);
    // The oracle: every frame's pts in decode output order, from ffprobe's sequential decode.
    const decoded = execFileSync(
      'ffprobe',
      ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'frame=pts', '-of', 'csv=p=0', clip],
      { encoding: 'utf8' },
    )
      .split('\n')
      .map((line) => line.replace(/,+$/, '').trim())
      .filter(Boolean)
      .map(Number);
    // The fixture lies as meant: 100 frames (frame n decoded n-th), the clock going back once
    // from 2.04 s to 1.04 s, so frames 26 and 52 share 1.04 s.
    expect(decoded).toHaveLength(100);
    expect(decoded.filter((pts, i) => i > 0 && pts < (decoded[i - 1] as number))).toEqual([1040]);
    expect([decoded[26], decoded[52]]).toEqual([1040, 1040]);
    // Played in decode order, a frame going back before the one on screen is not shown then; the
    // frame on screen when one past t comes is the one displayed at t. So a time both recordings
    // reach shows the first one's frame, a time only the second reaches the second's.
    const onScreen = (ms: number) => {
      let cur = -1;
      for (const [i, pts] of decoded.entries()) {
        if (cur >= 0 && pts < (decoded[cur] as number)) continue;
        if (pts > ms) break;
        cur = i;
      }
      return cur;
    };
    // Twins at 1.3, 1.5 and 2.02 s (first recording's); at 2.06, 2.5, 3.0, 3.1 s only frame 77 is
    // on screen (the first recording stopped at 2.04 s); 0.2 and 3.5 s are unique times.
    const timesMs = [200, 1300, 1500, 2020, 2060, 2500, 3000, 3100, 3500];
    expect(timesMs.map(onScreen)).toEqual([5, 32, 37, 50, 77, 77, 77, 77, 87]);
    const grid = computeGrid(320, 240, '3x3', false);
    const tempDir = join(work, 'restarted-tmp');
    mkdirSync(tempDir);
    const sheets = [timesMs.map((timeMs) => ({ timeMs, label: String(timeMs) }))];
    const plan = renderPlan(clip, tempDir, {
      grid,
      sheets,
      window: { startMs: 0, endMs: 4000 },
      paths: [join(work, 'restarted.jpg')],
    });
    const result = await ffmpegEngine.render(plan);
    expect(result.unreadable).toEqual([]);
    const image = readJpeg(join(work, 'restarted.jpg'));
    const shown = timesMs.map((_, c) => decodeIndex(image, cellRect(grid, c)).index);
    expect(shown).toEqual(timesMs.map(onScreen));
  }, 120_000);
});
