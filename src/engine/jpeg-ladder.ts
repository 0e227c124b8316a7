/**
 * The quality/size ladder every inline sheet image goes down (spec: "re-encoded down a
 * quality/size ladder until it fits a budget"): the remote endpoint's first-sheet thumbnail
 * (DESIGN §6) and the local server's `inline_sheets` (DESIGN §10) share this one implementation.
 * Models often have no other view of a sheet than the attached image, so quality is given up first
 * (the grid keeps its full size, labels stay sharp longest), then size.
 */
import { jpegSize } from '../core/jpeg-size.js';
import { run } from './process.js';

/** ffmpeg MJPEG quantiser (2 best .. 31 worst) and target width; later steps are smaller. */
export const JPEG_LADDER: ReadonlyArray<{ q: number; width?: number }> = [
  { q: 10 },
  { q: 14 },
  { q: 20 },
  { q: 20, width: 1280 },
  { q: 20, width: 1024 },
  { q: 20, width: 800 },
  { q: 22, width: 640 },
  { q: 26, width: 480 },
  { q: 31, width: 320 },
];

export interface FitOptions {
  /** Largest acceptable JPEG, bytes. */
  budgetBytes: number;
  /** Largest acceptable long side, px (every step is scaled down to respect it); none when absent. */
  maxSide?: number;
  signal?: AbortSignal;
}

export interface FittedJpeg {
  jpeg: Buffer;
  /** True when the sheet had to be re-encoded (to fit the budget or the long side). */
  reduced: boolean;
  /** False when even the last step is over the budget (`jpeg` is then the smallest step made). */
  fits: boolean;
}

/** The sheet as it is when it fits, else the first ladder step that fits (the smallest otherwise). */
export async function fitJpeg(sheet: Buffer, options: FitOptions): Promise<FittedJpeg> {
  const { budgetBytes, maxSide } = options;
  const size = maxSide === undefined ? null : jpegSize(sheet);
  if (maxSide !== undefined && !size) throw new Error('the sheet is not a readable JPEG');
  const longSide = size ? Math.max(size.width, size.height) : 0;
  // The widest output the long-side cap allows (even, as the scaler's -2 height wants).
  const capWidth =
    size && maxSide !== undefined && longSide > maxSide
      ? 2 * Math.floor((size.width * maxSide) / longSide / 2)
      : undefined;
  if (sheet.length <= budgetBytes && capWidth === undefined)
    return { jpeg: sheet, reduced: false, fits: true };
  let smallest: Buffer | undefined;
  for (const step of JPEG_LADDER) {
    const width = Math.min(step.width ?? Number.POSITIVE_INFINITY, capWidth ?? Number.POSITIVE_INFINITY);
    const { code, stdout, stderr } = await run(
      'ffmpeg',
      [
        '-v',
        'error',
        '-nostdin',
        '-f',
        'jpeg_pipe',
        '-i',
        'pipe:0',
        ...(Number.isFinite(width) ? ['-vf', `scale=${width}:-2:flags=area`] : []),
        '-pix_fmt',
        'yuvj420p',
        '-q:v',
        String(step.q),
        '-frames:v',
        '1',
        '-f',
        'mjpeg',
        'pipe:1',
      ],
      { stdin: sheet, timeoutMs: 30_000, signal: options.signal },
    );
    if (code !== 0 || stdout.length === 0)
      throw new Error(`re-encoding the sheet image failed: ${stderr.trim()}`);
    if (!smallest || stdout.length < smallest.length) smallest = stdout;
    if (stdout.length <= budgetBytes) return { jpeg: stdout, reduced: true, fits: true };
  }
  // The ladder is not empty, so at least one step ran.
  return { jpeg: smallest as Buffer, reduced: true, fits: false };
}
