/**
 * The command line's contract, spawned as a user runs it, on every engine: messages verbatim from
 * the spec, exit codes, stdout discipline, report key order, window echo, output placement and
 * temporary-file hygiene.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { USAGE } from '../../src/cli/usage.js';
import type { Density } from '../../src/core/density.js';
import { computeGrid } from '../../src/core/layout.js';
import { makePlan } from '../../src/core/plan.js';
import { BIN, ENGINES, runCli, USAGE_CASES, WINDOW_CASES } from '../helpers/cli.js';
import { plainClip } from '../helpers/fixtures.js';
import { readJpeg } from '../helpers/frames.js';
import { expectModelAids } from '../helpers/model-aids.js';

// The v0 keys, then the additive ones in their order: `audio`, then DESIGN §10's.
const V0_KEYS = [
  'input',
  'duration',
  'frames',
  'sheets',
  'files',
  'warnings',
  'contract',
  'audio',
  'frame_times',
  'zoom_hints',
];
const V0_WINDOW_KEYS = ['input', 'duration', 'window', ...V0_KEYS.slice(2)];

let work: string;
let clip200: string;
let clip20: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'vs-contract-'));
  [clip200, clip20] = await Promise.all([plainClip(200), plainClip(20)]);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A fresh TMPDIR per run, so "nothing left behind" is checked for this run alone. */
function isolatedTmp(): string {
  const dir = mkdtempSync(join(work, 'tmp-'));
  return dir;
}

describe('usage and argument errors (engine-independent)', () => {
  it('no arguments: usage on stdout, exit 1', async () => {
    const r = await runCli([]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe(USAGE);
    expect(r.stderr).toBe('');
  });

  it.each([['--help'], ['-h'], ['clip.mp4', '--help']])('%s: usage on stdout, exit 0', async (...args) => {
    const r = await runCli(args);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(USAGE);
    expect(r.stderr).toBe('');
  });

  it.each(USAGE_CASES)('%j -> %s (message + usage on stderr, exit 1)', async (args, message) => {
    const r = await runCli(args);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`${message}\n\n${USAGE}`);
  });
});

describe('ffmpeg engine without ffmpeg on PATH', () => {
  it('fails fast with an install hint for this OS', async () => {
    const clip = await plainClip(20);
    const started = Date.now();
    const r = await runCli([clip], {
      engine: 'ffmpeg',
      env: { PATH: mkdtempSync(join(work, 'empty-path-')) },
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'ffprobe not found on PATH — vidsheet needs ffmpeg and ffprobe. Install it with: sudo apt-get install ffmpeg (Debian/Ubuntu), sudo dnf install ffmpeg (Fedora) or sudo pacman -S ffmpeg (Arch)\n',
    );
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe.each(ENGINES)('engine %s', (engine) => {
  const run = (args: string[], cwd?: string) => {
    const tmp = isolatedTmp();
    return runCli(args, { engine, cwd, env: { TMPDIR: tmp } }).then((r) => ({
      ...r,
      leftovers: readdirSync(tmp),
    }));
  };
  const out = (name: string) => join(work, engine, name);

  it('input not found: absolute path in the message, exit 1, nothing on stdout', async () => {
    const r = await run(['no/such/clip.mp4'], work);
    expect(r).toMatchObject({
      code: 1,
      stdout: '',
      stderr: `input not found: ${join(work, 'no/such/clip.mp4')}\n`,
    });
  });

  it.each(WINDOW_CASES)('%j -> %s', async (args, message) => {
    const r = await run([clip20, '--out', out('errors'), ...args]);
    expect(r).toMatchObject({ code: 1, stdout: '', stderr: `${message}\n` });
    expect(r.leftovers).toEqual([]);
  });

  it('unreadable input: a clear error, exit 1, no temp files left', async () => {
    const bogus = join(work, `${engine}-not-a-video.mp4`);
    mkdirSync(dirname(bogus), { recursive: true });
    await import('node:fs/promises').then((fs) => fs.writeFile(bogus, 'this is not a video\n'.repeat(100)));
    const r = await run([bogus]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^unreadable video: .*not-a-video\.mp4/);
    expect(r.leftovers).toEqual([]);
  });

  it('a 200 s clip gives 3 sheets at 3x3; report keys in contract order; nothing else on stdout', async () => {
    const r = await run([clip200, '--json', '--out', out('overview')]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const report = JSON.parse(r.stdout);
    expect(Object.keys(report)).toEqual(V0_KEYS);
    expect(report).toMatchObject({
      input: clip200,
      duration: 200,
      frames: 27,
      sheets: 3,
      warnings: [],
      contract: 'vidsheet-cli-v0',
    });
    expect(report.files).toEqual(
      [1, 2, 3].map((n) => join(out('overview'), `${basename(clip200, '.mp4')}.sheet-${n}.jpg`)),
    );
    for (const file of report.files) expect(readJpeg(file).width).toBeGreaterThan(1500);
    // frame_times: one array per sheet (the CLI report has no timecodes: the plan's labels).
    const labels = makePlan({ startMs: 0, endMs: 200_000 }, '3x3').sheets.map((c) => c.map((x) => x.label));
    await expectModelAids({ ...report, timecodes: labels }, { clip: clip200, audio: true });
    expect(r.leftovers).toEqual([]);
  });

  it.each([
    ['3x3', 9],
    ['4x4', 16],
    ['5x5', 25],
    ['6x6', 36],
  ])('density %s samples %i frames per sheet in a square grid', async (density, cells) => {
    const r = await run([clip20, '--json', '--density', density, '--out', out(`d${density}`)]);
    const report = JSON.parse(r.stdout);
    expect(report.frames).toBe(cells);
    expect(report.sheets).toBe(1);
    // The sheet has the square grid's geometry for a 64x36 source (rows change the height).
    const sheet = readJpeg(report.files[0]);
    const grid = computeGrid(64, 36, density as Density, true);
    expect([sheet.width, sheet.height]).toEqual([grid.width, grid.height]);
    expect(grid.side ** 2).toBe(cells);
  });

  it('echoes the resolved window (end clamped, ms precision) between duration and frames; duration stays the clip', async () => {
    const r = await run([clip20, '--json', '--start', '0:05.25', '--end', '999', '--out', out('window')]);
    const report = JSON.parse(r.stdout);
    expect(Object.keys(report)).toEqual(V0_WINDOW_KEYS);
    expect(report.window).toEqual({ start: 5.25, end: 20 });
    expect(report.duration).toBe(20);
    expect(report.audio.window).toEqual({ start: 5.25, end: 20 });
    const labels = makePlan({ startMs: 5250, endMs: 20_000 }, '3x3').sheets.map((c) => c.map((x) => x.label));
    await expectModelAids(
      { ...report, timecodes: labels },
      { clip: clip20, audio: true, window: report.window },
    );
  });

  it('only --end given still echoes the window; start defaults to 0', async () => {
    const r = await run([clip20, '--json', '--end', '7', '--out', out('window-end')]);
    expect(JSON.parse(r.stdout).window).toEqual({ start: 0, end: 7 });
  });

  it('accepts a window exactly at the 2 ms per cell floor', async () => {
    const r = await run([clip20, '--json', '--start', '3', '--end', '3.018', '--out', out('floor')]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ window: { start: 3, end: 3.018 }, frames: 9 });
  });

  it('resolves a relative input against the working directory and writes beside it by default', async () => {
    const dir = join(work, engine, 'rel');
    mkdirSync(dir, { recursive: true });
    await import('node:fs/promises').then((fs) => fs.copyFile(clip20, join(dir, 'my clip.mp4')));
    const r = await run(['my clip.mp4', '--json'], dir);
    const report = JSON.parse(r.stdout);
    expect(report.input).toBe(join(dir, 'my clip.mp4'));
    expect(report.files).toEqual([join(dir, 'my clip.sheet-1.jpg')]);
    expect(statSync(report.files[0]).size).toBeGreaterThan(10_000);
  });

  it('creates --out recursively, relative to the working directory', async () => {
    const r = await run([clip20, '--json', '--out', 'a/b/c'], join(work));
    expect(JSON.parse(r.stdout).files).toEqual([
      join(work, 'a/b/c', `${basename(clip20, '.mp4')}.sheet-1.jpg`),
    ]);
    expect(relative(work, dirname(JSON.parse(r.stdout).files[0]))).toBe('a/b/c');
  });

  it('Ctrl-C mid-run: exit 1, children stopped, the per-run temporary directory removed', async () => {
    const long = await plainClip(1800);
    const tmp = isolatedTmp();
    const child = spawn(process.execPath, [BIN, long, '--density', '6x6', '--out', out('interrupted')], {
      env: { ...process.env, VIDSHEET_ENGINE: engine, TMPDIR: tmp },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
    // Interrupt once the run's temporary directory exists, i.e. mid-render.
    const deadline = Date.now() + 20_000;
    while (readdirSync(tmp).length === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(readdirSync(tmp)).toHaveLength(1);
    child.kill('SIGINT');
    expect(await exit).toBe(1);
    expect(stderr).toMatch(/interrupted/);
    expect(readdirSync(tmp)).toEqual([]);
  });

  it('human summary: paths, then the summary line; nothing else on stdout', async () => {
    const r = await run([clip200, '--out', out('human')]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines.slice(0, 3).every((l) => l.startsWith(out('human')) && l.endsWith('.jpg'))).toBe(true);
    expect(lines[3]).toBe('summary: duration=200s sheets=3 frames=27');
    expect(r.stderr).toBe('');
  });
});
