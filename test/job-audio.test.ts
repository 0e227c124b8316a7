/**
 * The job runner measures audio alongside the render and hands the bands' levels over while it
 * runs: both settle before the job does. Oracles: the engine's own calls (recorded), the work
 * directory's listing, and /proc for the audio measurement's ffmpeg child.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bandLevels } from '../src/core/audio.js';
import type { BandPlan } from '../src/core/render-plan.js';
import { ffmpegEngine } from '../src/engine/ffmpeg.js';
import type { BandLevels, Engine } from '../src/engine/types.js';
import { runJob } from '../src/job.js';
import { audioClip } from './helpers/fixtures.js';

const roots: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'vidsheet-jobaudio-'));
  roots.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of roots) rmSync(dir, { recursive: true, force: true });
});

/** Live ffmpeg processes whose parent is this process. */
function ownFfmpegChildren(): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .filter((e) => {
      try {
        const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
        const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return Number(ppid) === process.pid && state !== 'Z' && comm === 'ffmpeg';
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('runJob with audio', () => {
  it('renders while the peaks are measured; the bands get the levels core computes from them', async () => {
    const clip = await audioClip();
    const root = scratch();
    const seen: { levels?: BandLevels; band?: BandPlan | null; peaksStartedBeforeRender?: boolean } = {};
    let peaksCalled = false;
    const engine: Engine = {
      ...ffmpegEngine,
      audioPeaks: (path, range, signal) => {
        peaksCalled = true;
        return ffmpegEngine.audioPeaks(path, range, signal);
      },
      render: async (plan, onProgress, signal, levels) => {
        seen.peaksStartedBeforeRender = peaksCalled;
        seen.band = plan.sheets[0]?.band;
        seen.levels = await levels;
        return ffmpegEngine.render(plan, onProgress, signal, levels);
      },
    };
    const outcome = await runJob(
      { input: clip, density: '4x4', outDir: join(root, 'out') },
      { engine, audio: true, workDir: join(root, 'work') },
    );
    expect(outcome.audio?.present).toBe(true);
    expect(seen.peaksStartedBeforeRender).toBe(true);
    // The plan went out without levels; they came through `bandLevels`, as core computes them from
    // the clip's peaks.
    const band = seen.band as BandPlan;
    expect(band.levels).toBeUndefined();
    const peaks = await ffmpegEngine.audioPeaks(clip, { startMs: 0, endMs: 20_000 });
    const expected = bandLevels(band, peaks);
    expect(expected).toHaveLength(band.rect.w);
    expect(Math.max(...expected)).toBe(1);
    expect(seen.levels?.[0]).toEqual(expected);
    expect(readdirSync(join(root, 'work'))).toEqual([]);
  });

  it('a failing measurement fails the job; a failing render stops the measurement', async () => {
    const clip = await audioClip();
    const root = scratch();
    const failingPeaks: Engine = {
      ...ffmpegEngine,
      audioPeaks: async () => {
        throw new Error('no decoder for you');
      },
    };
    await expect(
      runJob(
        { input: clip, density: '3x3', outDir: join(root, 'a') },
        { engine: failingPeaks, audio: true, workDir: join(root, 'work') },
      ),
    ).rejects.toMatchObject({ code: 'processing_failed', cause: { message: 'no decoder for you' } });
    expect(readdirSync(join(root, 'work'))).toEqual([]);

    let measuring: Promise<unknown> | undefined;
    const failingRender: Engine = {
      ...ffmpegEngine,
      audioPeaks: (path, range, signal) => {
        const p = ffmpegEngine.audioPeaks(path, range, signal);
        measuring = p.catch(() => 'stopped');
        return p;
      },
      render: async () => {
        throw new Error('render broke');
      },
    };
    await expect(
      runJob(
        { input: clip, density: '3x3', outDir: join(root, 'b') },
        { engine: failingRender, audio: true, workDir: join(root, 'work') },
      ),
    ).rejects.toMatchObject({ code: 'processing_failed', cause: { message: 'render broke' } });
    // The job settled only after its measurement did: its ffmpeg child is gone.
    expect(await Promise.race([measuring, 'pending'])).not.toBe('pending');
    expect(ownFfmpegChildren()).toEqual([]);
    expect(readdirSync(join(root, 'work'))).toEqual([]);
  });
});
