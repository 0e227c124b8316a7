/**
 * The `picture` signal's material (src/core/pictures.ts): a thumbnail of every picture a run
 * decodes, made on a branch of the run's own filter graph (from point samples of a frame already
 * decoded, about 1 % of its decode) and written in tiles to a file of raw bytes beside the run's
 * frames. Their times are the decoder's (`branchStamps`): no filter logs them. The native engine's twin is
 * crates/vidsheet-core/src/video/thumbs.rs.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { debuglog } from 'node:util';
import { MAX_PICTURES, THUMB, THUMB_BYTES } from '../../core/pictures.js';
import { labelSeconds } from '../timestamps.js';
import type { VideoDetails } from './media.js';

const debug = debuglog('vidsheet');

/**
 * Pictures larger than 4K UHD get no thumbnails on this engine: the branch's scaler holds a
 * picture of its own beside the cells', and at 35 Mpx of RGBA (139 MB each) that took a hosted
 * worker past a 300 MB limit (test/server/decode-cost.test.ts). The native engine reads its
 * samples in place, whatever the size.
 */
const MAX_SOURCE_PIXELS = 3840 * 2160;

/** Debug counter of this process's runs whose thumbnails were dropped (tests read it). */
export const thumbStats = { dropped: 0 };

/** The file a run writes its thumbnails to, in its directory. */
const FILE = 'thumbs.gray';

/**
 * The thumbnails a frame of that file holds: a tile of 8 across and 8 down, in reading order (the
 * last one padded). Each frame an output writes costs more than its thumbnail (its encoder, its
 * muxer and -debug_ts's lines on both): one thumbnail a frame cost 128 µs of CPU a picture, tiles
 * of 64 cost 20 µs (3,185 pictures at 360p, ffmpeg alone).
 */
export const TILE = { across: 8, down: 8 } as const;
const PER_TILE = TILE.across * TILE.down;
const TILE_BYTES = PER_TILE * THUMB_BYTES;

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

  /** How many more a run should make: none when off, else what the render may still take. */
  room(): number {
    return this.enabled ? MAX_PICTURES - this.times.length : 0;
  }

  /**
   * The graph branch (after the split that feeds it, labelled `from`) that makes them: means of
   * the luma plane's samples (gray stretches a limited-range plane to full range, as the native
   * engine does), tiled, into the output label `to`; no more than `room`.
   */
  branch(from: string, to: string, room: number): string {
    // Point samples first (8 across and 4 down a thumbnail pixel, as the native engine reads
    // them), then their means: an area scale of the whole picture costs a tenth of its decode.
    const [w, h] = [THUMB.w * 8, THUMB.h * 4];
    return `[${from}]trim=end_frame=${room},scale=${w}:${h}:flags=neighbor,scale=${THUMB.w}:${THUMB.h}:flags=area,format=gray,tile=${TILE.across}x${TILE.down}[${to}]`;
  }

  /** The output arguments that write the branch `label` to the run directory `dir`. */
  output(label: string, dir: string): string[] {
    return ['-map', `[${label}]`, '-fps_mode', 'passthrough', '-f', 'rawvideo', '-y', join(dir, FILE)];
  }

  /**
   * Reads what a run in `dir` wrote, given its pictures' timestamps (`branchStamps`) and where its
   * graph was configured (runLog's `configured`). A graph configured anew (the pictures' size
   * changed) loses the tile it was filling, and the next picture starts a tile. A run that ended
   * normally wrote all the other tiles; one cut short, the first of them. Otherwise the stamps are not the
   * pictures': the run gives none (a picture at the wrong time would be worse than none).
   */
  async take(
    d: VideoDetails,
    dir: string,
    stamps: bigint[],
    run: { finished: boolean; configured: readonly number[] },
  ): Promise<void> {
    const bytes = await readFile(join(dir, FILE)).catch(() => Buffer.alloc(0));
    const tiles = Math.floor(bytes.length / TILE_BYTES);
    // Per graph: its first picture (an index into stamps), how many of its pictures were not lost
    // with it, and the tile the first is in.
    const starts = [...new Set([0, ...run.configured.filter((k) => k > 0 && k < stamps.length)])];
    let expected = 0;
    const graphs = starts.map((from, g) => {
      const last = g === starts.length - 1;
      const count = (starts[g + 1] ?? stamps.length) - from;
      const kept = last ? count : count - (count % PER_TILE);
      const graph = { from, kept, tile: expected };
      expected += Math.ceil(kept / PER_TILE);
      return graph;
    });
    if (run.finished ? tiles !== expected : tiles > expected) {
      thumbStats.dropped++;
      debug('%d tiles of thumbnails written, %d expected: none is taken', tiles, expected);
      return;
    }
    const rowBytes = TILE.across * THUMB.w;
    const taken: Buffer[] = [];
    for (const { from, kept, tile: first } of graphs) {
      for (let j = 0; j < kept && this.times.length < MAX_PICTURES; j++) {
        const tile = first + Math.floor(j / PER_TILE);
        if (tile >= tiles) break;
        const slot = j % PER_TILE;
        const corner =
          tile * TILE_BYTES +
          Math.floor(slot / TILE.across) * THUMB.h * rowBytes +
          (slot % TILE.across) * THUMB.w;
        const thumb = Buffer.alloc(THUMB_BYTES);
        for (let y = 0; y < THUMB.h; y++) {
          const at = corner + y * rowBytes;
          bytes.copy(thumb, y * THUMB.w, at, at + THUMB.w);
        }
        this.times.push(labelSeconds(stamps[from + j] as bigint, d.timeBase, d.startUs));
        taken.push(thumb);
      }
    }
    this.parts.push(Buffer.concat(taken));
  }

  /** Everything taken, as the packet log carries it. */
  log(): { pictures: Float64Array; thumbs: Uint8Array } {
    return { pictures: Float64Array.from(this.times), thumbs: new Uint8Array(Buffer.concat(this.parts)) };
  }
}

/**
 * The timestamps of the pictures the branch got, from every frame the decoder gave, in order
 * (runLog's `decoded`: the pts each frame enters the graph with, null without one): the graph's
 * first trim passes frames until one has no pts or one at `endPts` or later, and the branch's own
 * trim the first `room` of those. Nothing else on the branch drops or reorders a frame.
 */
export function branchStamps(decoded: ReadonlyArray<bigint | null>, endPts: bigint, room: number): bigint[] {
  const stamps: bigint[] = [];
  for (const ts of decoded) {
    if (ts === null || ts >= endPts || stamps.length >= room) break;
    stamps.push(ts);
  }
  return stamps;
}

/**
 * Whether a run's log line is -debug_ts on the frames and packets of the run's outputs (the
 * cells' output writes a handful, the thumbnails' one a tile): nothing else in the log reads those.
 */
export function thumbLine(text: string): boolean {
  return OUTPUT_LINE.test(text);
}

const OUTPUT_LINE = /^\[info\] (?:encoder [<-]|muxer <-|filter ->)/;
