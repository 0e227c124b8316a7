/**
 * The native engine's Node side: renders run off the JS thread, and a binding that cannot load
 * falls back to the ffmpeg engine with a debug log that says why and how to fix it.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as Binding from '../../npm/linux-x64-gnu/index.js';
import { JPEG_QUALITY, THEME } from '../../src/core/layout.js';
import { labelFontPath } from '../../src/engine/font.js';
import type { RenderPlan } from '../../src/engine/types.js';
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
    const { loadNative } = await import('../../dist/engine/native-loader.js');
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
    const { loadNative } = await import('../../dist/engine/native-loader.js');
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
  /**
   * A copy of the built package without the npm/ directory that holds the .node file: as npm
   * installs it with optional dependencies omitted, or (with `checkout`) a checkout not built yet.
   */
  function packageWithoutBinding(checkout = false): string {
    const dir = mkdtempSync(join(work, 'pkg-'));
    for (const entry of ['dist', 'bin', 'package.json'])
      cpSync(join(ROOT, entry), join(dir, entry), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    if (checkout) mkdirSync(join(dir, 'crates', 'vidsheet-node'), { recursive: true });
    return dir;
  }

  function run(dir: string, clip: string, env: NodeJS.ProcessEnv) {
    return spawnSync(
      process.execPath,
      [join(dir, 'bin/vidsheet.js'), clip, '--json', '--out', join(work, 'out')],
      {
        encoding: 'utf8',
        env: { ...process.env, NODE_DEBUG: 'vidsheet', VIDSHEET_ENGINE: '', ...env },
      },
    );
  }

  it('installed without it: falls back to the ffmpeg engine; NODE_DEBUG=vidsheet says why and the fix', async () => {
    const dir = packageWithoutBinding();
    const r = run(dir, await plainClip(20), {});
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout).contract).toBe('vidsheet-cli-v0');
    expect(r.stderr).toContain('native binding unavailable, using the ffmpeg fallback engine');
    expect(r.stderr).toContain('  - @vidsheet/binding-linux-x64-gnu: package not installed\n');
    expect(r.stderr).not.toContain('npm/linux-x64-gnu');
    expect(r.stderr).toContain('Fix: where it is available (Linux x64, glibc 2.28 or newer), install');
    expect(r.stderr).toMatch(/engine: ffmpeg/);
  });

  it('a checkout not built yet: lists the build output it looked for and says how to build it', async () => {
    const dir = packageWithoutBinding(true);
    const r = run(dir, await plainClip(20), {});
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('@vidsheet/binding-linux-x64-gnu: package not installed');
    expect(r.stderr).toContain(
      `${join(dir, 'npm/linux-x64-gnu/vidsheet.linux-x64-gnu.node')}: file not found`,
    );
    expect(r.stderr).toContain('Fix: run `npm run build:native`');
    expect(r.stderr).toMatch(/engine: ffmpeg/);
  });

  it('VIDSHEET_NATIVE_BINDING names the only .node tried, and the debug log names the file loaded', async () => {
    const dir = packageWithoutBinding();
    const clip = await plainClip(20);
    const built = join(ROOT, 'npm', 'linux-x64-gnu', 'vidsheet.linux-x64-gnu.node');
    const loaded = run(dir, clip, { VIDSHEET_NATIVE_BINDING: built });
    expect(loaded.status).toBe(0);
    expect(loaded.stderr).toContain(`native binding: ${built}\n`);
    expect(loaded.stderr).toMatch(/engine: native/);

    const missing = join(work, 'no-such.node');
    const r = run(dir, clip, { VIDSHEET_NATIVE_BINDING: missing });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain(`tried:\n  - ${missing}: file not found\n`);
    expect(r.stderr).not.toContain('@vidsheet/binding-linux-x64-gnu: package not installed');
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

const DECLARATIONS = 'npm/linux-x64-gnu/index.d.ts';

describe('the binding declarations', () => {
  // `npm test` builds the binding first, and the build rewrites this file from vidsheet-core's
  // structs: a difference from the committed file means the Rust types changed and the regenerated
  // declarations (which type src/engine/native.ts) were not committed with them.
  it.runIf(existsSync(join(ROOT, '.git')))(`${DECLARATIONS} is committed as the build generates it`, () => {
    const r = spawnSync('git', ['status', '--porcelain', '--untracked-files=all', '--', DECLARATIONS], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    // Porcelain: the second column is the work tree against the index (staged counts as committed).
    const dirty = r.stdout.split('\n').filter((line) => line.length > 0 && line[1] !== ' ');
    expect(dirty, `run \`npm run build:native\` and commit ${DECLARATIONS}`).toEqual([]);
  });
});

describe.runIf(ENGINES.includes('native'))('native render: a bad plan is rejected at the boundary', () => {
  function binding(): typeof Binding {
    return createRequire(import.meta.url)(join(ROOT, 'npm/linux-x64-gnu/vidsheet.linux-x64-gnu.node'));
  }

  /** One sheet, one cell, no band: the smallest plan that writes a JPEG. */
  function plan(clip: string, sheet: string): RenderPlan {
    return {
      input: clip,
      videoStream: 0,
      fontPath: labelFontPath(),
      quality: JPEG_QUALITY,
      theme: THEME,
      sheets: [
        {
          path: sheet,
          width: 160,
          height: 120,
          cells: [
            {
              timeMs: 500,
              rect: { x: 0, y: 0, w: 160, h: 90 },
              label: {
                text: '00:00.500',
                box: { x: 0, y: 92, w: 90, h: 20 },
                textX: 4,
                baselineY: 108,
                fontSize: 12,
              },
            },
          ],
          band: null,
        },
      ],
      tempDir: work,
    };
  }

  const cell = (p: RenderPlan) => p.sheets[0]?.cells[0] as RenderPlan['sheets'][number]['cells'][number];
  const cases: Array<[string, (p: RenderPlan) => void, string]> = [
    ['quality 0', (p) => (p.quality = 0), 'plan.quality must be an integer 1..100, got 0'],
    ['quality 101', (p) => (p.quality = 101), 'plan.quality must be an integer 1..100, got 101'],
    ['quality 2.5', (p) => (p.quality = 2.5), 'plan.quality must be an integer 1..100, got 2.5'],
    [
      'a negative rect width',
      (p) => (cell(p).rect.w = -4),
      'plan.sheets[0].cells[0].rect.w must be an integer 0..65535, got -4',
    ],
    [
      'a colour channel of 256',
      (p) => (p.theme = { ...p.theme, background: [256, 0, 0] }),
      'plan.theme.background[0] must be an integer 0..255, got 256',
    ],
    [
      'a NaN time',
      (p) => (cell(p).timeMs = Number.NaN),
      'plan.sheets[0].cells[0].timeMs must be a finite time in ms within ±1e12, got NaN',
    ],
    [
      'a missing label',
      (p) => delete (cell(p) as Partial<ReturnType<typeof cell>>).label,
      'plan.sheets[0].cells[0]: missing field `label`',
    ],
  ];

  it('a valid plan renders (so the rejections below are the bad value alone)', async () => {
    const sheet = join(work, 'boundary-valid.jpg');
    const result = await binding().render(plan(await plainClip(2), sheet));
    expect(result.unreadable).toEqual([]);
    expect(existsSync(sheet)).toBe(true);
  });

  it.each(cases)(
    '%s: rejects with render_failed naming the field, writes nothing',
    async (_, spoil, message) => {
      const sheet = join(work, `boundary-${Math.random().toString(36).slice(2)}.jpg`);
      const bad = plan(await plainClip(2), sheet);
      spoil(bad);
      await expect(binding().render(bad)).rejects.toMatchObject({ code: 'render_failed', message });
      expect(existsSync(sheet)).toBe(false);
    },
  );

  it('a plan that is not an object is rejected the same way', async () => {
    const render = binding().render as (plan: unknown) => Promise<unknown>;
    await expect(render(null)).rejects.toMatchObject({
      code: 'render_failed',
      message: 'plan must be an object, got null',
    });
  });
});
