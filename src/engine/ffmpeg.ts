/**
 * The fallback engine: executes a RenderPlan by spawning ffprobe/ffmpeg.
 *
 * - Frame exactness: `ffmpeg -ss T` returns the first frame at or after T, not the frame displayed
 *   at T. So the packet timestamps are listed first (ffprobe, demux only; in MP4/MOV only the
 *   packets near each target, the first targets apart so decoding starts early), the frame rule of
 *   core/render-plan.ts picks each target's frame by its exact pts, and ffmpeg is asked for exactly
 *   those frames (select by time), seeking to the keyframe before them.
 * - Targets that share a GOP are decoded by one process (no re-seek), other groups run in parallel,
 *   one single-threaded process per core. Where every target of a group is a reference frame, the
 *   decoder skips the non-reference frames before it (`-skip_frame noref`), as the native engine does.
 * - Extracted cells are PPM files in plan.tempDir named by their pts. A sheet is composed as soon as
 *   its cells are in, while later groups still decode: raw canvas, labels by ffmpeg's drawtext with
 *   the bundled font, JPEG by ffmpeg with the IJG tables of the plan's quality.
 * - Audio: ffmpeg decodes the whole first audio track to raw PCM through a pipe; the 1 ms envelope
 *   is built while streaming (memory is one float per ms of clip, no temporary WAV).
 */
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { debuglog } from 'node:util';
import {
  type Details,
  frameAt,
  lastAtOrBefore,
  listAllPackets,
  listPacketsInWindow,
  listPacketsNear,
  type Packets,
  probeDetails,
  referenceHints,
  seconds,
} from './ffprobe.js';
import { limiter, run, settleAll } from './process.js';
import { blit, type Canvas, createCanvas, paintBand, parsePpm } from './raster.js';
import {
  type AudioEnvelope,
  type Engine,
  EngineError,
  type LabelPlan,
  type RenderPlan,
  type RenderResult,
} from './types.js';

const debug = debuglog('vidsheet');

/** Frames to extract: one ffmpeg process per group of targets that share a GOP. */
function groupFrames(frames: number[], packets: Packets): number[][] {
  const groups: number[][] = [];
  for (const f of frames) {
    const current = groups[groups.length - 1];
    const last = current?.[current.length - 1];
    const p = packets.pts[f] as bigint;
    const key = lastAtOrBefore(packets.keyframes, (k) => k <= p);
    const keyPts = key < 0 ? undefined : packets.keyframes[key];
    if (current && last !== undefined && keyPts !== undefined && keyPts <= (packets.pts[last] as bigint)) {
      current.push(f);
    } else groups.push([f]);
  }
  return groups;
}

/**
 * Decodes one group of frames (indices into packets.pts) with one ffmpeg process and returns their
 * cell pixels by pts; a frame missing from the map could not be decoded.
 */
async function extractGroup(
  path: string,
  d: Details,
  packets: Packets,
  group: number[],
  size: { w: number; h: number },
  dir: string,
  options: { threads: number; skipNonReference: boolean; signal: AbortSignal },
): Promise<Map<bigint, Buffer>> {
  const pts = group.map((f) => packets.pts[f] as bigint);
  const times = pts.map((p) => seconds(p, d));
  // Half the smallest gap to a neighbouring frame bounds both the seek lead-in and the match tolerance.
  const gaps = group.flatMap((f, k) =>
    [packets.pts[f - 1], packets.pts[f + 1]]
      .filter((q) => q !== undefined)
      .map((q) => Math.abs(seconds(q as bigint, d) - (times[k] as number))),
  );
  const eps = Math.min(0.0005, ...gaps.map((g) => g / 3));
  // Start decoding at the keyframe that opens the first target's GOP. Indexed containers seek
  // backward to a keyframe, so aim just past it (aiming before it would decode the previous GOP);
  // bisecting demuxers (MPEG-TS) may land on any packet, so aim 0.1 s before it. Nothing is
  // trimmed (-noaccurate_seek): the select filter alone picks the frames, by exact time, and trim
  // ends the decode right after the last one (even when a frame never comes out).
  const key = lastAtOrBefore(packets.keyframes, (k) => k <= (pts[0] as bigint));
  const from = seconds(key < 0 ? (pts[0] as bigint) : (packets.keyframes[key] as bigint), d) - d.startTime;
  const seek = Math.max(0, d.indexed && key >= 0 ? from + eps : from - 0.1);
  const select = times.map((t) => `lt(abs(t-${t.toPrecision(17)})\\,${eps.toPrecision(6)})`).join('+');
  const filters = [
    ...(d.interlaced ? ['bwdif=mode=send_frame:parity=auto:deint=interlaced'] : []),
    // The last target (the group ascends), in the stream time base the filter graph runs in:
    // seconds would round to its ticks.
    `trim=end_pts=${(pts[pts.length - 1] as bigint) + 1n}`,
    `select='${select}'`,
    `scale=${size.w}:${size.h}:flags=bicubic`,
    'setsar=1',
    'format=rgb24',
  ];
  await run(
    'ffmpeg',
    [
      '-v',
      'error',
      '-nostdin',
      '-threads',
      String(options.threads),
      ...(options.skipNonReference ? ['-skip_frame', 'noref'] : []),
      '-copyts',
      '-noaccurate_seek',
      '-ss',
      seek.toFixed(6),
      '-protocol_whitelist',
      'file',
      '-i',
      path,
      '-map',
      `0:${d.videoStream}`,
      '-vf',
      filters.join(','),
      '-fps_mode',
      'passthrough',
      // Files are named by the frame's own pts (input time base), so a frame that never comes out
      // cannot shift the others.
      '-enc_time_base',
      '-1',
      '-frame_pts',
      '1',
      '-frames:v',
      String(group.length),
      '-f',
      'image2',
      '-c:v',
      'ppm',
      '-y',
      join(dir, 'cell-%d.ppm'),
    ],
    { timeoutMs: 30_000 + group.length * 5_000, signal: options.signal },
  );
  const out = new Map<bigint, Buffer>();
  for (const [k, p] of pts.entries()) {
    const file = await readFile(join(dir, `cell-${p}.ppm`)).catch(() => null);
    const image = file ? parsePpm(file) : null;
    if (image && image.width === size.w && image.height === size.h) out.set(p, image.rgb);
    else debug('frame at %ss not extracted (%s)', times[k], file ? `${file.length} bytes` : 'no file');
  }
  return out;
}

/** Streams the first audio track as raw float PCM and builds the per-ms peak envelope. */
async function audioEnvelope(path: string, d: Details, signal: AbortSignal): Promise<Float32Array | null> {
  if (!d.audio) return null;
  const { channels, sampleRate } = d.audio;
  const bins = new Float32Array(Math.ceil(d.duration * 1000) + 1);
  const offsetMs = (d.audio.startTime - d.startTime) * 1000;
  const frameBytes = 4 * channels;
  let carry = Buffer.alloc(0);
  let index = 0;
  const { code } = await run(
    'ffmpeg',
    [
      '-v',
      'error',
      '-nostdin',
      '-protocol_whitelist',
      'file',
      '-i',
      path,
      '-map',
      `0:${d.audio.index}`,
      '-vn',
      '-f',
      'f32le',
      '-c:a',
      'pcm_f32le',
      'pipe:1',
    ],
    {
      timeoutMs: 30 * 60_000,
      signal,
      onStdout: (chunk) => {
        const data = carry.length ? Buffer.concat([carry, chunk]) : chunk;
        const whole = data.length - (data.length % frameBytes);
        // An aligned float view (pipe chunks start at any byte offset); little-endian like f32le.
        const samples = new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + whole));
        for (let o = 0; o < samples.length; o += channels, index++) {
          let sum = 0;
          for (let c = 0; c < channels; c++) sum += samples[o + c] as number;
          const amplitude = Math.abs(sum / channels);
          const bin = Math.floor(offsetMs + (index * 1000) / sampleRate);
          if (bin >= 0 && bin < bins.length && amplitude > (bins[bin] as number)) bins[bin] = amplitude;
        }
        carry = Buffer.from(data.subarray(whole));
      },
    },
  );
  if (code !== 0 && index === 0) return null;
  let peak = 0;
  for (const v of bins) if (v > peak) peak = v;
  if (peak > 0) for (let i = 0; i < bins.length; i++) bins[i] = (bins[i] as number) / peak;
  return bins;
}

/** drawbox + drawtext for one label, for a filter script (values quoted for the filtergraph). */
function labelFilters(label: LabelPlan, plan: RenderPlan): string[] {
  const [br, bg, bb, ba] = plan.theme.labelBox;
  const hex = (r: number, g: number, b: number) =>
    `0x${[r, g, b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;
  const quote = (v: string) => `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/:/g, '\\:')}'`;
  const { box } = label;
  return [
    `drawbox=x=${box.x}:y=${box.y}:w=${box.w}:h=${box.h}:color=${hex(br, bg, bb)}@${(ba / 255).toFixed(3)}:t=fill`,
    `drawtext=fontfile=${quote(plan.fontPath)}:text=${quote(label.text)}:fontsize=${label.fontSize}` +
      `:fontcolor=${hex(...plan.theme.labelText)}:x=${label.textX}:y=${label.baselineY}-ascent`,
  ];
}

/** The JPEG Annex K base tables (natural order) that libjpeg's quality scale multiplies. */
const LUMA_BASE = [
  16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22,
  29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92, 49, 64, 78, 87, 103,
  121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
];
const CHROMA_BASE = [
  17,
  18,
  24,
  47,
  99,
  99,
  99,
  99,
  18,
  21,
  26,
  66,
  99,
  99,
  99,
  99,
  24,
  26,
  56,
  99,
  99,
  99,
  99,
  99,
  47,
  66,
  99,
  99,
  99,
  99,
  99,
  99,
  ...new Array<number>(32).fill(99),
];

/**
 * libjpeg's quantisation tables for `quality`, the scale the native encoder uses too. ffmpeg's
 * MJPEG encoder takes them as its intra matrices at qscale 8 (which it multiplies by 8/8); only its
 * DC step is its own (8, where libjpeg's quality 70 has 10).
 */
export function ijgTables(quality: number): { luma: number[]; chroma: number[] } {
  const q = Math.min(100, Math.max(1, quality));
  const scale = q < 50 ? 5000 / q : 200 - 2 * q;
  const table = (base: number[]) =>
    base.map((v) => Math.min(255, Math.max(1, Math.floor((v * scale + 50) / 100))));
  return { luma: table(LUMA_BASE), chroma: table(CHROMA_BASE) };
}

/** Labels (drawbox + drawtext) and JPEG encoding of a composed canvas, in one ffmpeg process. */
async function finishSheet(
  canvas: Canvas,
  labels: LabelPlan[],
  plan: RenderPlan,
  path: string,
  scriptPath: string,
  signal: AbortSignal,
) {
  signal.throwIfAborted();
  await writeFile(scriptPath, labels.flatMap((l) => labelFilters(l, plan)).join(',\n'));
  const tables = ijgTables(plan.quality);
  const partial = `${path}.partial`;
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
  );
  if (code !== 0) {
    await rm(partial, { force: true });
    throw new EngineError('render_failed', `drawing labels failed: ${stderr.trim().split('\n').pop() ?? ''}`);
  }
  await rename(partial, path);
}

/**
 * The packets the plan's frames are chosen from: in MP4/MOV only the neighbourhood of each
 * target, elsewhere a window's neighbourhood; `whole` (the whole file, listed once per render)
 * when that cannot be proved to cover every target.
 */
async function packetsFor(
  path: string,
  d: Details,
  times: number[],
  whole: () => Promise<Packets>,
  signal: AbortSignal,
): Promise<Packets> {
  if (d.sampleTable) return (await listPacketsNear(path, d, times, signal)) ?? whole();
  const first = Math.min(...times);
  const near = await listPacketsInWindow(path, d, { fromMs: first, toMs: Math.max(...times) }, signal);
  const firstFrame = near.pts.length ? near.pts[frameAt(near.pts, d, first)] : undefined;
  const covered =
    firstFrame !== undefined && near.keyframes[0] !== undefined && near.keyframes[0] <= firstFrame;
  return covered ? near : whole();
}

export const ffmpegEngine: Engine = {
  name: 'ffmpeg',

  async probe(path) {
    const { duration, startTime, videoStream, width, height, hasAudio } = await probeDetails(path);
    return { duration, startTime, videoStream, width, height, hasAudio };
  },

  async render(plan, onProgress, signal) {
    const d = await probeDetails(plan.input);
    // The render's own controller: the caller's abort, or this render's first failure, stops every
    // child; the render settles only once none of them runs, so the caller may remove tempDir.
    const stop = new AbortController();
    const abort = () => stop.abort(signal?.reason ?? new Error('render stopped'));
    if (signal?.aborted) abort();
    signal?.addEventListener('abort', abort, { once: true });
    const audioTask = plan.audio ? audioEnvelope(plan.input, d, stop.signal) : Promise.resolve(null);
    audioTask.catch(() => {}); // awaited by the sheets that carry a band, and below
    const composing: Promise<void>[] = [];
    try {
      return await renderSheets(plan, d, audioTask, composing, stop, onProgress);
    } catch (error) {
      abort();
      await Promise.allSettled([audioTask, ...composing]);
      throw error;
    } finally {
      signal?.removeEventListener('abort', abort);
    }
  },
};

/**
 * The body of `render`. Every task it starts is awaited before it returns, or is in `composing`
 * (which `render` waits for when this throws); `stop` ends them all at the first failure.
 */
async function renderSheets(
  plan: RenderPlan,
  d: Details,
  audioTask: Promise<Float32Array | null>,
  composing: Promise<void>[],
  stop: AbortController,
  onProgress: ((done: number, total: number) => void) | undefined,
): Promise<RenderResult> {
  const abortAll = () => stop.abort(new Error('render stopped'));
  const cells = plan.sheets.flatMap((sheet, s) => sheet.cells.map((cell, c) => ({ s, c, cell })));
  const size = { w: cells[0]?.cell.rect.w ?? 0, h: cells[0]?.cell.rect.h ?? 0 };

  // Each sheet is composed as soon as its cells are in, while later groups still decode.
  const frameOf: Array<bigint | undefined> = cells.map(() => undefined);
  const pixels = new Map<bigint, Buffer>();
  // A frame's pixels are dropped once every cell showing it is on a canvas.
  const users = new Map<bigint, number>();
  const release = (pts: bigint) => {
    const left = (users.get(pts) ?? 1) - 1;
    users.set(pts, left);
    if (left === 0) pixels.delete(pts);
  };
  const waiting = plan.sheets.map((sheet) => sheet.cells.length);
  const unreadable: RenderResult['unreadable'][] = plan.sheets.map(() => []);
  const compose = async (s: number) => {
    const sheet = plan.sheets[s] as RenderPlan['sheets'][number];
    const canvas = createCanvas(sheet.width, sheet.height, plan.theme.background);
    const labels: LabelPlan[] = [];
    for (const [k, { s: cs, c, cell }] of cells.entries()) {
      if (cs !== s) continue;
      const pts = frameOf[k];
      const rgb = pts === undefined ? undefined : pixels.get(pts);
      if (rgb) blit(canvas, cell.rect, rgb);
      else unreadable[s]?.push({ sheet: s, cell: c });
      labels.push(cell.label);
      if (pts !== undefined) release(pts);
    }
    if (sheet.band) {
      paintBand(canvas, sheet.band, plan.theme, await audioTask, 0);
      if (sheet.band.message) labels.push(sheet.band.message);
    }
    const script = join(plan.tempDir, `sheet-${s + 1}.filter`);
    await finishSheet(canvas, labels, plan, sheet.path, script, stop.signal);
  };
  let settled = 0;
  const settle = (ks: number[]) => {
    for (const k of ks) {
      onProgress?.(++settled, cells.length);
      const s = cells[k]?.s as number;
      waiting[s] = (waiting[s] as number) - 1;
      if (waiting[s] !== 0) continue;
      const task = compose(s);
      task.catch(() => {}); // awaited below; an error must not go unhandled meanwhile
      composing.push(task);
    }
  };

  // Targets in time order. MP4/MOV lists the first ones on their own, so decoding starts while
  // the rest are still being listed.
  const byTime = new Map<number, number[]>();
  for (const [k, { cell }] of cells.entries())
    byTime.set(cell.timeMs, [...(byTime.get(cell.timeMs) ?? []), k]);
  const times = [...byTime.keys()].sort((a, b) => a - b);
  const parallel = Math.max(1, availableParallelism());
  const parts =
    d.sampleTable && times.length > parallel ? [times.slice(0, parallel), times.slice(parallel)] : [times];
  let wholeFile: Promise<Packets> | undefined;
  const whole = () => (wholeFile ??= listAllPackets(plan.input, d, stop.signal));
  const gate = limiter(parallel);
  const extractPart = async (partTimes: number[], p: number) => {
    const packets = await packetsFor(plan.input, d, partTimes, whole, stop.signal);
    const frameIndex = new Map(
      partTimes.map((t) => [t, packets.pts.length ? frameAt(packets.pts, d, t) : -1]),
    );
    const wanted = [...new Set(frameIndex.values())].filter((f) => f >= 0).sort((a, b) => a - b);
    const cellsOfFrame = new Map<number, number[]>();
    for (const [t, f] of frameIndex) {
      const ks = byTime.get(t) ?? [];
      if (f < 0) {
        settle(ks);
        continue;
      }
      const pts = packets.pts[f] as bigint;
      for (const k of ks) frameOf[k] = pts;
      users.set(pts, (users.get(pts) ?? 0) + ks.length);
      cellsOfFrame.set(f, [...(cellsOfFrame.get(f) ?? []), ...ks]);
    }
    const hints = await referenceHints(
      plan.input,
      d,
      packets,
      wanted.map((f) => packets.pts[f] as bigint),
    );
    const isReference = new Map(wanted.map((f, i) => [f, hints[i]]));
    const groups = groupFrames(wanted, packets);
    // Several groups run one per core, each single-threaded; a lone group gets every thread.
    const threads = groups.length > 1 || parts.length > 1 ? 1 : 0;
    await settleAll(
      groups.map((group, g) =>
        gate(async () => {
          // Queued tasks start after a failure too: they must not recreate tempDir.
          stop.signal.throwIfAborted();
          const dir = join(plan.tempDir, `p${p}g${g}`);
          await mkdir(dir, { recursive: true });
          const skip = group.every((f) => isReference.get(f) === true);
          const got = await extractGroup(plan.input, d, packets, group, size, dir, {
            threads,
            skipNonReference: skip,
            signal: stop.signal,
          });
          const missing = group.filter((f) => !got.has(packets.pts[f] as bigint));
          if (skip && missing.length > 0) {
            debug('%d frame(s) skipped as non-reference; extracting them again', missing.length);
            const again = await extractGroup(plan.input, d, packets, missing, size, dir, {
              threads,
              skipNonReference: false,
              signal: stop.signal,
            });
            for (const [pts, rgb] of again) got.set(pts, rgb);
          }
          for (const [pts, rgb] of got) pixels.set(pts, rgb);
          settle(group.flatMap((f) => cellsOfFrame.get(f) ?? []));
        }),
      ),
      abortAll,
    );
  };
  await settleAll(parts.map(extractPart), abortAll);
  await settleAll(composing, abortAll);

  let audio: AudioEnvelope | null = null;
  if (plan.audio) {
    const fullEnvelope = await audioTask;
    audio = fullEnvelope
      ? { present: true, envelope: windowOf(fullEnvelope, plan.audio.startMs, plan.audio.endMs) }
      : { present: false, envelope: new Float32Array(0) };
  }
  return { unreadable: unreadable.flat(), audio };
}

function windowOf(envelope: Float32Array, startMs: number, endMs: number): Float32Array {
  const out = new Float32Array(Math.max(0, endMs - startMs));
  out.set(envelope.subarray(startMs, Math.min(endMs, envelope.length)));
  return out;
}
