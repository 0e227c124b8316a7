/**
 * Damaged and hostile inputs on every engine: a clean spec error or a report with per-cell
 * warnings, never a crash (signal, stack trace), never a hang, never a temporary file left behind.
 * One test per file and engine, so one file's failure neither hides nor stops the others.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINES, runCli } from '../helpers/cli.js';
import { DAMAGED } from '../helpers/fixtures.js';

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-damaged-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

it('covers a dozen kinds of damage', () => {
  expect(DAMAGED.length).toBeGreaterThanOrEqual(12);
});

describe.each(ENGINES)('engine %s', (engine) => {
  it.each(DAMAGED)('$name ($description): a clean error or warnings', async (file) => {
    const path = await file.make();
    const tmp = mkdtempSync(join(work, 'tmp-'));
    const started = Date.now();
    const r = await runCli([path, '--json', '--density', '4x4', '--out', join(work, engine)], {
      engine,
      env: { TMPDIR: tmp },
    });
    const context = r.stderr;
    expect(Date.now() - started, context).toBeLessThan(60_000);
    expect(readdirSync(tmp), context).toEqual([]);
    expect([0, 1], context).toContain(r.code); // null would mean killed by a signal
    expect(r.stderr, context).not.toMatch(/panicked|Error: |at .*\.js:\d+/);
    if (file.expect === 'unreadable') {
      expect(r.code, context).toBe(1);
      expect(r.stdout, context).toBe('');
      expect(r.stderr, context).toBe(
        `unreadable video: ${path} — no decodable video stream (send a real video in a common container)\n`,
      );
    } else if (r.code === 0) {
      const report = JSON.parse(r.stdout);
      expect(report.frames, context).toBe(16 * report.sheets);
      // Unreadable cells, and a damaged file whose data ends before its header says (DESIGN §2).
      for (const w of report.warnings) {
        expect(w, context).toMatch(
          /^(sheet \d+ frame \d+ unreadable|the container declares \d+(\.\d{1,3})? s but the file's audio and video end at \d+(\.\d{1,3})? s; sheets cover the readable part)$/,
        );
      }
    } else {
      expect(r.stderr, context).toMatch(/^unreadable video: /);
    }
  });
});
