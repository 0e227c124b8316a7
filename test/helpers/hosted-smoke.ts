/**
 * One hosted job end to end, for a server started from an install (the vidsheet-server package, the
 * container image's staged filesystem): an account made with the operator's commands, a real
 * multipart upload on loopback, every cell of every sheet read back against an independent oracle
 * (the index clip's frames carry their own number; ffprobe says which frame is displayed when), and
 * the balance debited by exactly the price the result states.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'vitest';
import { cellRect, computeGrid } from '../../src/core/layout.js';
import { parseTimeMs } from '../../src/core/time.js';
import { indexClip } from './fixtures.js';
import { decodeIndex, decodeJpeg } from './frames.js';
import { expectedIndex, frameTimes } from './oracle.js';
import { postJob, type TestServer, videoForm } from './server.js';

/** The clip: 100 s at 320x240, so 3x3 makes two sheets (2 credits). */
const SECONDS = 100;
const GRANT = 20;
const PRICE_3X3 = 1;

export interface SmokeResult {
  jobId: string;
  credits: number;
}

export async function hostedSmokeJob(server: TestServer, email = 'smoke@example.com'): Promise<SmokeResult> {
  const clip = await indexClip({ seconds: SECONDS });
  const oracle = await frameTimes(clip);

  const created = await server.admin('create-key', '--email', email);
  expect(created.code, created.stderr).toBe(0);
  const key = created.stdout.trim();
  const granted = await server.admin('add-credits', '--email', email, '--credits', String(GRANT));
  expect(granted.code, granted.stderr).toBe(0);

  const res = await postJob(
    server,
    key,
    videoForm({ bytes: readFileSync(clip), filename: 'index.mp4' }, { density: '3x3' }),
  );
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const result = JSON.parse(text) as {
    job_id: string;
    sheets: number;
    credits_charged: number;
    credits_remaining: number;
    files: string[];
    timecodes: string[][];
  };
  expect(result.sheets).toBe(2);
  expect(result.credits_charged).toBe(2 * PRICE_3X3);
  expect(result.credits_remaining).toBe(GRANT - result.credits_charged);

  const grid = computeGrid(320, 240, '3x3', false);
  for (const [s, labels] of result.timecodes.entries()) {
    const sheet = await fetch(result.files[s] as string);
    expect(sheet.status).toBe(200);
    const image = decodeJpeg(new Uint8Array(await sheet.arrayBuffer()));
    expect([image.width, image.height]).toEqual([grid.width, grid.height]);
    expect(labels).toHaveLength(9);
    for (const [c, label] of labels.entries()) {
      const where = `sheet ${s + 1} cell ${c + 1} (${label})`;
      const read = decodeIndex(image, cellRect(grid, c));
      expect(read.confidence, `${where} is not a clean index frame`).toBeGreaterThan(40);
      expect(read.index, where).toBe(expectedIndex(oracle, (parseTimeMs(label) as number) / 1000));
    }
  }

  const shown = await server.admin('show', '--email', email);
  expect(shown.code, shown.stderr).toBe(0);
  const account = JSON.parse(shown.stdout) as { balance: number; usage: Array<Record<string, unknown>> };
  expect(account.balance).toBe(GRANT - 2 * PRICE_3X3);
  expect(account.usage).toEqual([
    expect.objectContaining({
      job_id: result.job_id,
      surface: 'http',
      sheets: 2,
      credits: 2,
      refunded: false,
    }),
  ]);
  return { jobId: result.job_id, credits: result.credits_charged };
}
