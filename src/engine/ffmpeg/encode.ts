/**
 * Encoding a composed sheet: one ffmpeg run draws the labels (the sheet's filter script) and
 * writes the JPEG with libjpeg's quantisation tables for the plan's quality, the scale the native
 * encoder uses too. The file appears under its final name only once complete.
 */
import { rename, rm, writeFile } from 'node:fs/promises';
import { run } from '../process.js';
import type { Canvas } from '../raster.js';
import { EngineError } from '../types.js';

/** The JPEG Annex K base tables (natural order) that libjpeg's quality scale multiplies. */
const LUMA_BASE = [
  16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22,
  29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92, 49, 64, 78, 87, 103,
  121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
];
const CHROMA_BASE = [
  ...[17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99],
  ...[24, 26, 56, 99, 99, 99, 99, 99, 47, 66, 99, 99, 99, 99, 99, 99],
  ...new Array<number>(32).fill(99),
];

/**
 * libjpeg's quantisation tables for `quality`. ffmpeg's MJPEG encoder takes them as its intra
 * matrices at qscale 8 (which it multiplies by 8/8); only its DC step is its own (8, where
 * libjpeg's quality 70 has 10).
 */
export function ijgTables(quality: number): { luma: number[]; chroma: number[] } {
  const q = Math.min(100, Math.max(1, quality));
  const scale = q < 50 ? 5000 / q : 200 - 2 * q;
  const table = (base: number[]) =>
    base.map((v) => Math.min(255, Math.max(1, Math.floor((v * scale + 50) / 100))));
  return { luma: table(LUMA_BASE), chroma: table(CHROMA_BASE) };
}

/** Draws `labels` (a filter script) on the canvas and writes it to `path` as a JPEG. */
export async function encodeSheet(
  canvas: Canvas,
  labels: string,
  quality: number,
  path: string,
  scriptPath: string,
  signal: AbortSignal,
): Promise<void> {
  signal.throwIfAborted();
  await writeFile(scriptPath, labels || 'null');
  const tables = ijgTables(quality);
  const partial = `${path}.partial`;
  // An aborted run leaves no partial file behind either.
  const { code, stderr } = await run(
    'ffmpeg',
    [
      '-v',
      'error',
      '-nostdin',
      '-f',
      'rawvideo',
      '-pix_fmt',
      'rgb24',
      '-s',
      `${canvas.width}x${canvas.height}`,
      '-i',
      'pipe:0',
      '-filter_script:v',
      scriptPath,
      '-frames:v',
      '1',
      '-sws_flags',
      'accurate_rnd+full_chroma_int',
      '-pix_fmt',
      'yuvj444p',
      '-c:v',
      'mjpeg',
      '-q:v',
      '8',
      '-intra_matrix',
      tables.luma.join(','),
      '-chroma_intra_matrix',
      tables.chroma.join(','),
      '-f',
      'mjpeg',
      '-y',
      partial,
    ],
    { stdin: canvas.data, timeoutMs: 120_000, signal },
  ).catch(async (error: unknown) => {
    await rm(partial, { force: true });
    throw error;
  });
  if (code !== 0) {
    await rm(partial, { force: true });
    throw new EngineError('render_failed', `drawing labels failed: ${stderr.trim().split('\n').pop() ?? ''}`);
  }
  await rename(partial, path);
}
