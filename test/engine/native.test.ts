/**
 * The native engine's Node side: renders run off the JS thread, and a binding that cannot load
 * falls back to the ffmpeg engine with a debug log that says why and how to fix it.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../global-setup.js';
import { ENGINES } from '../helpers/cli.js';
import {
  COVER_ART,
  coverArtClip,
  noAudioClip,
  plainClip,
  probe,
  TWO_VIDEO_STREAMS,
  twoVideoStreamsClip,
} from '../helpers/fixtures.js';

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-native-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe.runIf(ENGINES.includes('native'))('native engine', () => {
  it('keeps the event loop ticking during a long render', async () => {
    const { runJob } = await import('../../dist/job.js');
    const { loadNative } = await import('../../dist/engine/native.js');
    const loaded = loadNative();
    if (!('engine' in loaded)) throw new Error(loaded.error);
    const clip = await plainClip(1800);
    let ticks = 0;
    let longestGap = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      longestGap = Math.max(longestGap, now - last);
      last = now;
      ticks++;
    }, 5);
    const started = performance.now();
    const outcome = await runJob(
      { input: clip, density: '6x6', outDir: join(work, 'loop') },
      { engine: loaded.engine, audio: true },
    );
    const elapsed = performance.now() - started;
    clearInterval(timer);
    expect(outcome.frames).toBe(20 * 36);
    expect(elapsed).toBeGreaterThan(200);
    // A render on the JS thread would freeze the timer for the whole render.
    expect(ticks).toBeGreaterThan(elapsed / 5 / 4);
    expect(longestGap).toBeLessThan(Math.max(100, elapsed / 4));
  });
});

/** ffprobe's view of a file (the independent oracle for the probe's facts). */
interface Probed {
  streams: Array<{
    index: number;
    codec_type: string;
    nb_frames?: string;
    disposition?: { default?: number; attached_pic?: number };
  }>;
  format: { duration?: string };
}

describe.runIf(ENGINES.includes('native'))('native probe', () => {
  async function nativeEngine() {
    const { loadNative } = await import('../../dist/engine/native.js');
    const loaded = loadNative();
    if (!('engine' in loaded)) throw new Error(loaded.error);
    return loaded.engine;
  }

  it('reports every video stream with the facts ffprobe gives, unknowns as null', async () => {
    const engine = await nativeEngine();
    const path = await twoVideoStreamsClip();
    const [info, probed] = await Promise.all([engine.probe(path), probe(path) as Promise<Probed>]);
    const video = probed.streams.filter((s) => s.codec_type === 'video');
    expect(info.videoStreams.map((s) => s.index)).toEqual(video.map((s) => s.index));
    for (const [i, facts] of info.videoStreams.entries()) {
      const oracle = video[i];
      expect(facts.isDefault, `stream ${facts.index}`).toBe(oracle?.disposition?.default === 1);
      expect(facts.attachedPic, `stream ${facts.index}`).toBe(false);
      expect(facts.frames, `stream ${facts.index}`).toBe(Number(oracle?.nb_frames));
      expect(facts.decodes, `stream ${facts.index}`).toBe(true);
      expect(facts.readableEnd, `stream ${facts.index}`).toBeCloseTo(TWO_VIDEO_STREAMS.seconds, 0);
    }
    const { topShot, video: real } = TWO_VIDEO_STREAMS;
    expect(info.videoStreams[topShot.stream]).toMatchObject({ width: topShot.width, height: topShot.height });
    expect(info.videoStreams[real.stream]).toMatchObject({ width: real.width, height: real.height });
    expect(info.duration).toBeCloseTo(Number(probed.format.duration), 3);
    expect(info.hasAudio).toBe(true);
    expect(info.audioEnd).toBeCloseTo(TWO_VIDEO_STREAMS.seconds, 0);

    // No audio: audioEnd is null (not undefined); cover art is flagged and has no extent.
    const silent = await engine.probe(await noAudioClip());
    expect(silent.hasAudio).toBe(false);
    expect(silent.audioEnd).toBeNull();
    const covered = await engine.probe(await coverArtClip());
    const cover = covered.videoStreams[COVER_ART.cover.stream];
    expect(cover).toMatchObject({ attachedPic: true, readableEnd: null });
    expect(covered.videoStreams[COVER_ART.video.stream]).toMatchObject({
      attachedPic: false,
      decodes: true,
      width: COVER_ART.video.width,
      height: COVER_ART.video.height,
    });
  });
});

describe('a binding that cannot load', () => {
  /** A copy of the built package without the npm/ directory that holds the .node file. */
  function packageWithoutBinding(): string {
    const dir = mkdtempSync(join(work, 'pkg-'));
    for (const entry of ['dist', 'bin', 'package.json'])
      cpSync(join(ROOT, entry), join(dir, entry), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    return dir;
  }

  it('falls back to the ffmpeg engine; NODE_DEBUG=vidsheet lists each attempt and the fix', async () => {
    const dir = packageWithoutBinding();
    const clip = await plainClip(20);
    const r = spawnSync(
      process.execPath,
      [join(dir, 'bin/vidsheet.js'), clip, '--json', '--out', join(work, 'fallback')],
      {
        encoding: 'utf8',
        env: { ...process.env, NODE_DEBUG: 'vidsheet', VIDSHEET_ENGINE: '' },
      },
    );
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout).contract).toBe('vidsheet-cli-v0');
    expect(r.stderr).toContain('native binding unavailable, using the ffmpeg fallback engine');
    expect(r.stderr).toContain('@vidsheet/binding-linux-x64-gnu: package not installed');
    expect(r.stderr).toContain(
      `${join(dir, 'npm/linux-x64-gnu/vidsheet.linux-x64-gnu.node')}: file not found (not built yet)`,
    );
    expect(r.stderr).toContain('Fix: run `npm run build:native`');
    expect(r.stderr).toMatch(/engine: ffmpeg/);
  });

  it('VIDSHEET_ENGINE=native fails with the same explanation instead of falling back', async () => {
    const dir = packageWithoutBinding();
    const r = spawnSync(process.execPath, [join(dir, 'bin/vidsheet.js'), await plainClip(20)], {
      encoding: 'utf8',
      env: { ...process.env, VIDSHEET_ENGINE: 'native' },
    });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      /^VIDSHEET_ENGINE=native, but the native binding did not load:\nvidsheet native engine not loaded; tried:/,
    );
  });
});
