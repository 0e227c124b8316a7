/**
 * `inline_sheets` on the local tool server (DESIGN §10), spawned as a client runs it and driven with
 * the SDK's own client: image blocks after a text block that is the same JSON as without them,
 * each image a real JPEG of at most 1568 px per side, all of them together at most 900 KB, shrunk
 * down the ladder (and said so in `warnings`) when the sheets are too big, left out (and said so)
 * when they cannot be fitted at all; bad values refused by the schema before any work.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leftOutWarning, reducedWarning } from '../../src/mcp/inline.js';
import { noiseClip, plainClip } from '../helpers/fixtures.js';
import { decodeJpeg } from '../helpers/frames.js';
import { connectMcp } from '../helpers/mcp.js';

const TOOL = 'vidsheet_video';
const MAX_SIDE = 1568;
const TOTAL = 900 * 1024;

type Block = { type: string; text?: string; data?: string; mimeType?: string };
interface Report {
  files: string[];
  sheets: number;
  warnings: string[];
}

let work: string;
/** 100 s, 16:9: two sheets of a few dozen KB each. */
let plain: string;
/** 100 s of noise: two 6x6 sheets, each over half of 900 KB. */
let noise: string;
/** 20 s portrait (9:16): a 6x6 sheet is far taller than 1568 px. */
let portrait: string;
let client: Client;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'vs-inline-'));
  const [p, n, t] = await Promise.all([
    plainClip(100),
    noiseClip(100),
    plainClip(20, { width: 36, height: 64 }),
  ]);
  plain = join(work, 'plain.mp4');
  noise = join(work, 'noise.mp4');
  portrait = join(work, 'portrait.mp4');
  copyFileSync(p, plain);
  copyFileSync(n, noise);
  copyFileSync(t, portrait);
  ({ client } = await connectMcp('ffmpeg'));
});

afterAll(async () => {
  await client?.close();
  rmSync(work, { recursive: true, force: true });
});

async function call(args: Record<string, unknown>, c: Client = client) {
  const result = await c.callTool({ name: TOOL, arguments: args });
  const content = result.content as Block[];
  expect(content[0]?.type).toBe('text');
  const text = content[0]?.text ?? '';
  expect(result.isError, text).toBeFalsy();
  const images = content.slice(1).map((block) => {
    expect(block.type).toBe('image');
    expect(block.mimeType).toBe('image/jpeg');
    return Buffer.from(block.data ?? '', 'base64');
  });
  return { text, report: JSON.parse(text) as Report, images };
}

/** Every image decodes as a JPEG within the long side; all of them within the total. */
function expectWithinLimits(images: Buffer[]) {
  let total = 0;
  for (const jpeg of images) {
    const decoded = decodeJpeg(jpeg); // throws unless it is a real JPEG
    expect(Math.max(decoded.width, decoded.height)).toBeLessThanOrEqual(MAX_SIDE);
    total += jpeg.length;
  }
  expect(total).toBeLessThanOrEqual(TOTAL);
}

describe('inline_sheets', () => {
  it('the schema offers it to the model, and the description says when to ask for it', async () => {
    const { tools } = await client.listTools();
    const tool = tools[0];
    if (!tool) throw new Error('no tool listed');
    const prop = (tool.inputSchema.properties as Record<string, Record<string, unknown>>).inline_sheets;
    expect(prop).toMatchObject({ type: 'integer', minimum: 0, maximum: 20 });
    expect(tool.inputSchema.required).toEqual(['video_path']);
    expect(tool.description).toContain('If you cannot open local files (no file tool), set inline_sheets');
  });

  it('0 (and absent) changes nothing: one text block, the same bytes', async () => {
    const out = join(work, 'zero');
    const plainCall = await call({ video_path: plain, out_dir: out });
    const zero = await call({ video_path: plain, out_dir: out, inline_sheets: 0 });
    expect(plainCall.images).toEqual([]);
    expect(zero.images).toEqual([]);
    expect(zero.text).toBe(plainCall.text);
  });

  it('sheets that fit are attached as they are, after a byte-identical text block', async () => {
    const out = join(work, 'fit');
    const without = await call({ video_path: plain, out_dir: out });
    const one = await call({ video_path: plain, out_dir: out, inline_sheets: 1 });
    expect(one.text).toBe(without.text);
    expect(one.images).toHaveLength(1);
    // The image is sheet 1 itself (no re-encode was needed): the file's own bytes.
    expect(one.images[0]?.equals(readFileSync(one.report.files[0] as string))).toBe(true);
    expectWithinLimits(one.images);
  });

  it('more than the run has: every sheet, in order, no warning', async () => {
    const out = join(work, 'more');
    const without = await call({ video_path: plain, out_dir: out });
    const many = await call({ video_path: plain, out_dir: out, inline_sheets: 20 });
    expect(many.report.sheets).toBe(2);
    expect(many.text).toBe(without.text);
    expect(many.images).toHaveLength(2);
    for (const [i, jpeg] of many.images.entries()) {
      expect(jpeg.equals(readFileSync(many.report.files[i] as string))).toBe(true);
    }
  });

  it('dense 6x6 sheets over the budget are shrunk down the ladder, and warnings say so', async () => {
    const out = join(work, 'noise');
    const without = await call({ video_path: noise, density: '6x6', out_dir: out });
    const sizes = without.report.files.map((f) => readFileSync(f).length);
    expect(sizes).toHaveLength(2);
    for (const size of sizes) expect(size).toBeGreaterThan(TOTAL / 2); // the premise: they cannot fit as they are
    const both = await call({ video_path: noise, density: '6x6', out_dir: out, inline_sheets: 2 });
    expect(both.images).toHaveLength(2);
    expectWithinLimits(both.images);
    // The same JSON, its warnings gaining exactly the one message.
    const expected = JSON.parse(without.text) as Report;
    expected.warnings = [...expected.warnings, reducedWarning([1, 2])];
    expect(both.text).toBe(JSON.stringify(expected));
    expect(reducedWarning([1, 2])).toBe(
      'the attached images of sheets 1, 2 were reduced to fit 900 KB in all and 1568 px per side; read exact labels from timecodes, and open files[] for full-size sheets where you can',
    );
    // Still the sheet: the same aspect as the full-size file.
    const full = decodeJpeg(readFileSync(without.report.files[0] as string));
    const small = decodeJpeg(both.images[0] as Buffer);
    expect(Math.abs(small.width / small.height - full.width / full.height)).toBeLessThan(0.02);
  });

  it('a sheet taller than 1568 px is scaled to fit its long side, even when its bytes fit', async () => {
    const out = join(work, 'portrait');
    const without = await call({ video_path: portrait, density: '6x6', out_dir: out });
    const full = decodeJpeg(readFileSync(without.report.files[0] as string));
    expect(full.height).toBeGreaterThan(MAX_SIDE); // the premise
    expect(readFileSync(without.report.files[0] as string).length).toBeLessThan(TOTAL);
    const one = await call({ video_path: portrait, density: '6x6', out_dir: out, inline_sheets: 1 });
    expect(one.images).toHaveLength(1);
    expectWithinLimits(one.images);
    const small = decodeJpeg(one.images[0] as Buffer);
    expect(small.height).toBeGreaterThan(MAX_SIDE - 4); // scaled to the cap, not further
    expect(Math.abs(small.width / small.height - full.width / full.height)).toBeLessThan(0.02);
    expect(JSON.parse(one.text).warnings).toEqual([reducedWarning([1])]);
  });

  it('sheets that cannot be fitted (no ffmpeg to re-encode them) are left out, and warnings say which', async () => {
    // The native engine needs no ffmpeg; the ladder does. A sheet that needs no re-encode still fits
    // once the one left out has given its share back; the other is left out.
    const { client: bare } = await connectMcp('native', { PATH: mkdtempSync(join(work, 'path-')) });
    try {
      const out = join(work, 'bare');
      const r = await call({ video_path: noise, density: '6x6', out_dir: out, inline_sheets: 3 }, bare);
      const files = r.report.files.map((f) => readFileSync(f));
      expect(files).toHaveLength(2);
      for (const file of files) expect(file.length).toBeGreaterThan(TOTAL / 2); // the premise
      expect(r.images).toHaveLength(1);
      const kept = files.findIndex((file) => file.equals(r.images[0] as Buffer));
      expect(kept).toBeGreaterThanOrEqual(0);
      expect(r.report.warnings).toEqual([leftOutWarning(1, 3, [2 - kept])]);
      expect(leftOutWarning(1, 3, [2])).toBe(
        'only 1 of the 3 sheets asked for with inline_sheets are attached (900 KB in all); sheet 2 is not attached: ask for fewer sheets or a narrower start/end',
      );
      const small = await call(
        { video_path: plain, out_dir: join(work, 'bare-plain'), inline_sheets: 2 },
        bare,
      );
      expect(small.images).toHaveLength(2);
      expect(small.report.warnings).toEqual([]);
    } finally {
      await bare.close();
    }
  });

  it('values outside 0..20 or not integers are refused before any work', async () => {
    for (const bad of [-1, 21, 2.5, '3', null, true]) {
      const result = await client.callTool({
        name: TOOL,
        arguments: { video_path: join(work, 'never-made.mp4'), inline_sheets: bad },
      });
      const content = result.content as Block[];
      expect(result.isError, String(bad)).toBe(true);
      expect(content).toHaveLength(1);
      expect(content[0]?.text).toContain('inline_sheets');
      expect(content[0]?.text).not.toContain('input not found'); // refused by the schema, not the job
    }
  });
});
