/**
 * The remote tool's inline image (spec: "re-encoded down a quality/size ladder until it fits a
 * budget of about 90 KB"; DESIGN §6: at most 90 KB). Models in official apps often cannot fetch the
 * capability URLs, so this image is their only view: quality is given up first (the grid keeps its
 * full size, labels stay sharp longest), then size.
 */
import { run } from '#vidsheet/engine/index.js';

export const INLINE_BUDGET_BYTES = 90 * 1024;

/** ffmpeg MJPEG quantiser (2 best .. 31 worst) and target width; later steps are smaller. */
const LADDER: Array<{ q: number; width?: number }> = [
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

export interface InlineImage {
  jpeg: Buffer;
  /** True when the sheet had to be re-encoded to fit. */
  reduced: boolean;
}

/** The sheet as it is when it fits, else the first ladder step that fits (the last step otherwise). */
export async function inlineImage(sheet: Buffer, budget = INLINE_BUDGET_BYTES): Promise<InlineImage> {
  if (sheet.length <= budget) return { jpeg: sheet, reduced: false };
  let smallest = sheet;
  for (const step of LADDER) {
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
        ...(step.width ? ['-vf', `scale=${step.width}:-2:flags=area`] : []),
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
      { stdin: sheet, timeoutMs: 30_000 },
    );
    if (code !== 0 || stdout.length === 0)
      throw new Error(`re-encoding the inline image failed: ${stderr.trim()}`);
    if (stdout.length < smallest.length) smallest = stdout;
    if (stdout.length <= budget) return { jpeg: stdout, reduced: true };
  }
  return { jpeg: smallest, reduced: true };
}
