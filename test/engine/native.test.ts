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
import { plainClip } from '../helpers/fixtures.js';

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
