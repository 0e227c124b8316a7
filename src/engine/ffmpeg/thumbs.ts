/**
 * The `picture` signal's material (src/core/pictures.ts): a thumbnail of every picture a run
 * decodes, made on a branch of the run's own filter graph (from point samples of a frame already
 * decoded, about 1 % of its decode) and written to a file of raw bytes beside the run's frames; each
 * picture's timestamp logged by a showinfo of its own. The native engine's twin is
 * crates/vidsheet-core/src/video/thumbs.rs.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MAX_PICTURES, THUMB, THUMB_BYTES } from '../../core/pictures.js';
import { labelSeconds } from '../timestamps.js';
import type { VideoDetails } from './media.js';

/**
 * Pictures larger than 4K UHD get no thumbnails on this engine: the branch's scaler holds a
 * picture of its own beside the cells', and at 35 Mpx of RGBA (139 MB each) that took a hosted
 * worker past a 300 MB limit (test/server/decode-cost.test.ts). The native engine reads its
 * samples in place, whatever the size.
 */
const MAX_SOURCE_PIXELS = 3840 * 2160;

/** The name of the filter that logs every thumbnail's timestamp. */
const THUMBS = 'thumbs';
/** The file a run writes its thumbnails to, in its directory. */
const FILE = 'thumbs.gray';

/** The pictures a render's runs decoded: their times (labels' clock) and thumbnails. */
export class Thumbnails {
  private readonly times: number[] = [];
  private readonly parts: Buffer[] = [];
  /**
   * Off for bench/run.mjs without hints, or without pictures (crates/vidsheet-core/src/render.rs),
   * and for pictures over MAX_SOURCE_PIXELS.
   */
  readonly enabled: boolean;

  /** For a stream of pictures of `pixels` (0: unknown). */
  constructor(pixels: number) {
    this.enabled =
      process.env.VIDSHEET_BENCH_NO_HINTS !== '1' &&
      process.env.VIDSHEET_BENCH_NO_PICTURES !== '1' &&
      pixels <= MAX_SOURCE_PIXELS;
  }

  /** Whether a run should make them: on, and the render not yet at MAX_PICTURES. */
  wanted(): boolean {
    return this.enabled && this.times.length < MAX_PICTURES;
  }

  /**
   * The graph branch (after the split that feeds it, labelled `from`) that makes them: means of
   * the luma plane's samples (gray stretches a limited-range plane to full range, as the native
   * engine does), into the output label `to`; no more than the render may still take
   * (MAX_PICTURES).
   */
  branch(from: string, to: string): string {
    const room = MAX_PICTURES - this.times.length;
    // Point samples first (8 across and 4 down a thumbnail pixel, as the native engine reads
    // them), then their means: an area scale of the whole picture costs a tenth of its decode.
    const [w, h] = [THUMB.w * 8, THUMB.h * 4];
    return `[${from}]trim=end_frame=${room},scale=${w}:${h}:flags=neighbor,scale=${THUMB.w}:${THUMB.h}:flags=area,format=gray,showinfo@${THUMBS}[${to}]`;
  }

  /** The output arguments that write the branch `label` to the run directory `dir`. */
  output(label: string, dir: string): string[] {
    return ['-map', `[${label}]`, '-fps_mode', 'passthrough', '-f', 'rawvideo', '-y', join(dir, FILE)];
  }

  /** Reads what a run in `dir` wrote, given the timestamps its log named (`stamps`, in order). */
  async take(d: VideoDetails, dir: string, stamps: Array<bigint | null>): Promise<void> {
    const bytes = await readFile(join(dir, FILE)).catch(() => Buffer.alloc(0));
    // A run cut short may have logged a picture it did not write, never the reverse.
    const n = Math.min(
      stamps.length,
      Math.floor(bytes.length / THUMB_BYTES),
      MAX_PICTURES - this.times.length,
    );
    for (let i = 0; i < n; i++) {
      const pts = stamps[i];
      this.times.push(
        pts === null || pts === undefined ? Number.NaN : labelSeconds(pts, d.timeBase, d.startUs),
      );
    }
    this.parts.push(bytes.subarray(0, n * THUMB_BYTES));
  }

  /** Everything taken, as the packet log carries it. */
  log(): { pictures: Float64Array; thumbs: Uint8Array } {
    return { pictures: Float64Array.from(this.times), thumbs: new Uint8Array(Buffer.concat(this.parts)) };
  }
}

/**
 * Whether a run's log line is the thumbnails' (their showinfo, or -debug_ts on the frames and
 * packets of the run's outputs, which the cells' output writes a handful of and theirs one of a
 * picture): nothing else in the log reads those.
 */
export function thumbLine(text: string): boolean {
  return text.startsWith(`[showinfo@${THUMBS} `) || OUTPUT_LINE.test(text);
}

const OUTPUT_LINE = /^\[info\] (?:encoder [<-]|muxer <-|filter ->)/;

/** A showinfo line of the thumbnail branch: the picture's pts (stream time base), null without one. */
export function thumbStamp(text: string): bigint | null | undefined {
  const m = THUMB_LINE.exec(text);
  if (!m) return undefined;
  return m[1] === 'NOPTS' ? null : BigInt(m[1] as string);
}

const THUMB_LINE = new RegExp(
  `^\\[showinfo@${THUMBS} @ [^\\]]*\\] \\[\\w+\\] n:\\s*\\d+ pts:\\s*(-?\\d+|NOPTS) `,
);
