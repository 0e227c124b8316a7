/**
 * The local tool's `inline_sheets` (DESIGN §10): the first N sheets as image blocks for a client
 * that cannot open files, each at most 1568 px on its long side and all together at most 900 KB of
 * JPEG, shrunk down the shared quality/size ladder when needed.
 */
import { readFile } from 'node:fs/promises';
import { debuglog } from 'node:util';
import { fitJpeg } from '../engine/index.js';

const debug = debuglog('vidsheet');

/** DESIGN §10: the most a call may ask for, the long side, the total. */
export const MAX_INLINE_SHEETS = 20;
export const INLINE_MAX_SIDE = 1568;
export const INLINE_TOTAL_BYTES = 900 * 1024;

export interface InlineSheets {
  /** JPEG bytes, in sheet order (sheet 1 first). */
  images: Buffer[];
  /** What the report's `warnings` gains: sheets reduced, sheets left out. */
  warnings: string[];
}

const list = (sheets: number[]) => sheets.join(', ');

export function reducedWarning(sheets: number[]): string {
  const which =
    sheets.length === 1 ? `image of sheet ${sheets[0]} was` : `images of sheets ${list(sheets)} were`;
  return `the attached ${which} reduced to fit 900 KB in all and 1568 px per side; read exact labels from timecodes, and open files[] for full-size sheets where you can`;
}

export function leftOutWarning(attached: number, asked: number, missing: number[]): string {
  const which = missing.length === 1 ? `sheet ${missing[0]} is` : `sheets ${list(missing)} are`;
  return `only ${attached} of the ${asked} sheets asked for with inline_sheets are attached (900 KB in all); ${which} not attached: ask for fewer sheets or a narrower start/end`;
}

/**
 * Sheets 1..N of `files` (fewer when the run has fewer) fitted into the budget. Each sheet gets a
 * fair share of what the sheets before it left, smallest first, so a small sheet never costs a
 * large one its quality; a sheet that cannot fit its share even at the ladder's last step (or
 * cannot be re-encoded at all, e.g. no ffmpeg beside the native engine) is left out.
 */
export async function inlineSheets(
  files: string[],
  asked: number,
  signal?: AbortSignal,
): Promise<InlineSheets> {
  const sheets = await Promise.all(files.slice(0, asked).map((file) => readFile(file)));
  const fitted: Array<Buffer | undefined> = sheets.map(() => undefined);
  const reduced: number[] = [];
  let left = INLINE_TOTAL_BYTES;
  const order = sheets.map((_, i) => i).sort((a, b) => (sheets[a]?.length ?? 0) - (sheets[b]?.length ?? 0));
  for (const [k, i] of order.entries()) {
    const share = Math.floor(left / (order.length - k));
    const sheet = sheets[i] as Buffer;
    try {
      const fit = await fitJpeg(sheet, { budgetBytes: share, maxSide: INLINE_MAX_SIDE, signal });
      if (!fit.fits) continue;
      fitted[i] = fit.jpeg;
      left -= fit.jpeg.length;
      if (fit.reduced) reduced.push(i + 1);
    } catch (error) {
      if (signal?.aborted) throw error;
      debug('inline sheet %d left out: %O', i + 1, error);
    }
  }
  const missing = fitted.flatMap((jpeg, i) => (jpeg ? [] : [i + 1]));
  const images = fitted.filter((jpeg): jpeg is Buffer => jpeg !== undefined);
  const warnings = [
    ...(reduced.length ? [reducedWarning(reduced.sort((a, b) => a - b))] : []),
    ...(missing.length ? [leftOutWarning(images.length, asked, missing)] : []),
  ];
  return { images, warnings };
}
