/**
 * The command line in-process: `main(argv, io)` with captured streams, for fast feedback on exit
 * codes and messages (no process spawned; the engine is whichever the loader finds, as for a user).
 * The spawned contract tests (contract.test.ts) stay the proof that the installed bin behaves so.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Io, main } from '../../src/cli/main.js';
import { USAGE } from '../../src/cli/usage.js';
import { USAGE_CASES, WINDOW_CASES } from '../helpers/cli.js';
import { plainClip } from '../helpers/fixtures.js';

let work: string;
let clip20: string;
beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'vs-main-'));
  clip20 = await plainClip(20);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Runs `main` with streams captured; `tty` makes stderr interactive (progress is drawn). */
async function run(argv: string[], tty = false) {
  let stdout = '';
  let stderr = '';
  const io: Io = {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    stderrIsTty: tty,
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

describe('main(argv, io)', () => {
  it('no arguments: usage on stdout, exit 1', async () => {
    expect(await run([])).toEqual({ code: 1, stdout: USAGE, stderr: '' });
  });

  it.each([['--help'], ['-h'], ['clip.mp4', '--help']])('%s: usage on stdout, exit 0', async (...argv) => {
    expect(await run(argv)).toEqual({ code: 0, stdout: USAGE, stderr: '' });
  });

  it.each(USAGE_CASES)('%j -> %s (message + usage on stderr, exit 1)', async (argv, message) => {
    expect(await run(argv)).toEqual({ code: 1, stdout: '', stderr: `${message}\n\n${USAGE}` });
  });

  it.each(WINDOW_CASES)('%j -> %s', async (argv, message) => {
    expect(await run([clip20, '--out', join(work, 'errors'), ...argv])).toEqual({
      code: 1,
      stdout: '',
      stderr: `${message}\n`,
    });
  });

  it('input not found: the absolute path, exit 1', async () => {
    const missing = join(work, 'no', 'such.mp4');
    expect(await run([missing])).toEqual({ code: 1, stdout: '', stderr: `input not found: ${missing}\n` });
  });

  it('unreadable input: the spec message, exit 1', async () => {
    const bogus = join(work, 'not-a-video.mp4');
    writeFileSync(bogus, 'this is not a video\n'.repeat(100));
    expect(await run([bogus])).toEqual({
      code: 1,
      stdout: '',
      stderr: `unreadable video: ${bogus} — no decodable video stream (send a real video in a common container)\n`,
    });
  });

  it('--json: the report alone on stdout, exit 0', async () => {
    const out = join(work, 'json');
    const r = await run([clip20, '--json', '--out', out]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const report = JSON.parse(r.stdout);
    expect(report).toMatchObject({ input: clip20, duration: 20, frames: 9, sheets: 1 });
    expect(report.files).toEqual([join(out, `${basename(clip20, '.mp4')}.sheet-1.jpg`)]);
  });

  it('an interactive stderr gets a progress line, cleared before the summary', async () => {
    const r = await run([clip20, '--out', join(work, 'tty')], true);
    expect(r.code).toBe(0);
    const updates = r.stderr.split('\r\x1b[K').filter((s) => s !== '');
    expect(updates.length).toBeGreaterThan(0);
    for (const u of updates) expect(u).toMatch(/^extracting frames \d+\/9$/);
    expect(updates.at(-1)).toBe('extracting frames 9/9');
    expect(r.stderr.endsWith('\r\x1b[K')).toBe(true);
    expect(r.stdout).toMatch(/\nsummary: duration=20s sheets=1 frames=9\n$/);
  });
});
