/**
 * The fallback engine: executes a RenderPlan by spawning ffprobe/ffmpeg.
 *
 * - Frame exactness: `ffmpeg -ss T` returns the first frame at or after T, not the frame displayed
 *   at T. So the packet timestamps are listed first (ffprobe, demux only), the frame rule of
 *   engine/types.ts picks each target's frame by its exact pts, and ffmpeg is asked for exactly
 *   those frames (select by time), seeking to just before them.
 * - Targets that share a GOP are decoded by one process (no re-seek), other groups run in parallel.
 * - Extracted cells are PPM files in plan.tempDir; the sheet is composed on a raw canvas, labels are
 *   drawn by ffmpeg's drawtext with the bundled font, and the JPEG is encoded at the plan's quality.
 * - Audio: ffmpeg decodes the whole first audio track to raw PCM through a pipe; the 1 ms envelope
 *   is built while streaming (memory is one float per ms of clip, no temporary WAV).
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { debuglog } from 'node:util';
import jpeg from 'jpeg-js';
import { pool, run } from './process.js';
import { blit, type Canvas, createCanvas, paintBand, parsePpm } from './raster.js';
import {
  type AudioEnvelope,
  type Engine,
  EngineError,
  type LabelPlan,
  type ProbeInfo,
  type RenderPlan,
  type RenderResult,
} from './types.js';

const debug = debuglog('vidsheet');

interface StreamJson {
  index: number;
  codec_type?: string;
  width?: number;
  height?: number;
  sample_aspect_ratio?: string;
  time_base?: string;
  start_time?: string;
  duration?: string;
  field_order?: string;
  channels?: number;
  sample_rate?: string;
  disposition?: { attached_pic?: number };
  tags?: { rotate?: string };
  side_data_list?: Array<{ rotation?: number }>;
}

interface Details extends ProbeInfo {
  timeBase: [bigint, bigint];
  startUs: bigint;
  interlaced: boolean;
  /** Containers with a seek index land exactly on a keyframe; others (MPEG-TS, PS) bisect. */
  indexed: boolean;
  audio: { index: number; channels: number; sampleRate: number; startTime: number } | null;
}

const num = (value: string | undefined): number | undefined => {
  const n = value === undefined ? Number.NaN : Number(value);
  return Number.isFinite(n) ? n : undefined;
};

function ratio(value: string | undefined): [number, number] | undefined {
  const m = value ? /^(\d+)[:/](\d+)$/.exec(value) : null;
  return m && Number(m[1]) > 0 && Number(m[2]) > 0 ? [Number(m[1]), Number(m[2])] : undefined;
}

async function probeDetails(path: string): Promise<Details> {
  const { code, stdout } = await run(
    'ffprobe',
    ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', path],
    { timeoutMs: 60_000 },
  );
  let parsed: {
    streams?: StreamJson[];
    format?: { duration?: string; start_time?: string; format_name?: string };
  };
  try {
    parsed = JSON.parse(stdout.toString() || '{}');
  } catch {
    parsed = {};
  }
  const streams = parsed.streams ?? [];
  // Same choice as the native engine's "best stream": the largest real picture, not cover art.
  const video = streams
    .filter((s) => s.codec_type === 'video' && !s.disposition?.attached_pic && (s.width ?? 0) > 0)
    .sort((a, b) => (b.width ?? 0) * (b.height ?? 0) - (a.width ?? 0) * (a.height ?? 0))[0];
  const duration = num(parsed.format?.duration) ?? Math.max(0, ...streams.map((s) => num(s.duration) ?? 0));
  if (code !== 0 || !video || !(duration > 0)) {
    throw new EngineError('unreadable_video', `ffprobe found no decodable video stream in ${path}`);
  }
  const tb = ratio(video.time_base) ?? [1, 1_000_000];
  const sar = ratio(video.sample_aspect_ratio) ?? [1, 1];
  const rotation =
    video.side_data_list?.find((d) => d.rotation !== undefined)?.rotation ?? num(video.tags?.rotate) ?? 0;
  const quarterTurn = Math.abs(Math.round(rotation / 90)) % 2 === 1;
  const w = Math.round(((video.width ?? 0) * sar[0]) / sar[1]);
  const h = video.height ?? 0;
  const startTime = num(parsed.format?.start_time) ?? 0;
  const audio = streams.find((s) => s.codec_type === 'audio');
  return {
    duration,
    startTime,
    videoStream: video.index,
    width: quarterTurn ? h : w,
    height: quarterTurn ? w : h,
    hasAudio: audio !== undefined,
    timeBase: [BigInt(tb[0]), BigInt(tb[1])],
    startUs: BigInt(Math.round(startTime * 1e6)),
    interlaced: ['tt', 'bb', 'tb', 'bt'].includes(video.field_order ?? ''),
    indexed: /\b(mov|mp4|matroska|webm|avi|flv)\b/.test(parsed.format?.format_name ?? ''),
    audio: audio
      ? {
          index: audio.index,
          channels: audio.channels ?? 1,
          sampleRate: num(audio.sample_rate) ?? 48000,
          startTime: num(audio.start_time) ?? startTime,
        }
      : null,
  };
}

interface Packets {
  /** Presentation timestamps, ascending, stream time base. */
  pts: bigint[];
  keyframes: bigint[];
}

async function listPackets(
  path: string,
  d: Details,
  range?: { fromMs: number; toMs: number },
): Promise<Packets> {
  // A window reads only its neighbourhood (30 s of lead-in for the frame displayed at its start);
  // the caller falls back to the whole file when that misses the GOP start.
  const interval =
    range && range.fromMs > 30_000
      ? [
          '-read_intervals',
          `${range.fromMs / 1000 - 30 + d.startTime}%${range.toMs / 1000 + 1 + d.startTime}`,
        ]
      : range
        ? ['-read_intervals', `%${range.toMs / 1000 + 1 + d.startTime}`]
        : [];
  const { stdout } = await run(
    'ffprobe',
    [
      '-v',
      'error',
      '-select_streams',
      String(d.videoStream),
      ...interval,
      '-show_entries',
      'packet=pts,flags',
      '-of',
      'csv=p=0',
      path,
    ],
    { timeoutMs: 120_000 },
  );
  const pts: bigint[] = [];
  const keyframes: bigint[] = [];
  for (const line of stdout.toString().split('\n')) {
    const [p, flags] = line.split(',');
    if (!p || !/^-?\d+$/.test(p)) continue;
    const value = BigInt(p);
    pts.push(value);
    if (flags?.startsWith('K')) keyframes.push(value);
  }
  const asc = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);
  pts.sort(asc);
  keyframes.sort(asc);
  return { pts: [...new Set(pts)], keyframes };
}

/** Index of the last element <= limit (via `le`), or -1. */
function lastAtOrBefore<T>(items: T[], le: (item: T) => boolean): number {
  let lo = 0;
  let hi = items.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (le(items[mid] as T)) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/** The frame rule of engine/types.ts: index into `pts` of the frame displayed at `timeMs`. */
function frameAt(pts: bigint[], d: Details, timeMs: number): number {
  const [tbNum, tbDen] = d.timeBase;
  const target = (d.startUs + BigInt(timeMs) * 1000n) * tbDen;
  const i = lastAtOrBefore(pts, (p) => p * tbNum * 1_000_000n <= target);
  return Math.max(i, 0);
}

const seconds = (p: bigint, d: Details) => Number(p * d.timeBase[0]) / Number(d.timeBase[1]);

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

async function extractGroup(
  path: string,
  d: Details,
  packets: Packets,
  group: number[],
  size: { w: number; h: number },
  prefix: string,
  threads: number,
): Promise<Map<number, Buffer>> {
  const first = packets.pts[group[0] as number] as bigint;
  const times = group.map((f) => seconds(packets.pts[f] as bigint, d));
  // Half the smallest gap to a neighbouring frame bounds both the seek lead-in and the match tolerance.
  const gaps = group.flatMap((f) => {
    const p = seconds(packets.pts[f] as bigint, d);
    return [packets.pts[f - 1], packets.pts[f + 1]]
      .filter((q) => q !== undefined)
      .map((q) => Math.abs(seconds(q as bigint, d) - p));
  });
  const eps = Math.min(0.0005, ...gaps.map((g) => g / 3));
  // Start decoding at the keyframe that opens the first target's GOP. Indexed containers seek
  // backward to a keyframe, so aim just past it (aiming before it would decode the previous GOP);
  // bisecting demuxers (MPEG-TS) may land on any packet, so aim 0.1 s before it. Nothing is
  // trimmed (-noaccurate_seek): the select filter alone picks the frames, by exact time.
  const key = lastAtOrBefore(packets.keyframes, (k) => k <= first);
  const from = seconds(key < 0 ? first : (packets.keyframes[key] as bigint), d) - d.startTime;
  const seek = Math.max(0, d.indexed && key >= 0 ? from + eps : from - 0.1);
  const select = times.map((t) => `lt(abs(t-${t.toPrecision(17)})\\,${eps.toPrecision(6)})`).join('+');
  const filters = [
    ...(d.interlaced ? ['bwdif=mode=send_frame:parity=auto:deint=interlaced'] : []),
    `select='${select}'`,
    `scale=${size.w}:${size.h}:flags=bicubic`,
    'setsar=1',
    'format=rgb24',
  ];
  const pattern = join(prefix, 'cell-%05d.ppm');
  const framesTimeout = 30_000 + group.length * 5_000;
  await run(
    'ffmpeg',
    [
      '-v',
      'error',
      '-nostdin',
      '-threads',
      String(threads),
      '-copyts',
      '-noaccurate_seek',
      '-ss',
      seek.toFixed(6),
      '-i',
      path,
      '-map',
      `0:${d.videoStream}`,
      '-vf',
      filters.join(','),
      '-fps_mode',
      'passthrough',
      '-frames:v',
      String(group.length),
      '-f',
      'image2',
      '-c:v',
      'ppm',
      '-y',
      pattern,
    ],
    { timeoutMs: framesTimeout },
  );
  const out = new Map<number, Buffer>();
  for (const [k, f] of group.entries()) {
    const file = await readFile(join(prefix, `cell-${String(k + 1).padStart(5, '0')}.ppm`)).catch(() => null);
    const image = file ? parsePpm(file) : null;
    if (image && image.width === size.w && image.height === size.h) out.set(f, image.rgb);
    else debug('frame at %ss not extracted (%s)', times[k], file ? `${file.length} bytes` : 'no file');
  }
  return out;
}

/** Streams the first audio track as raw float PCM and builds the per-ms peak envelope. */
async function audioEnvelope(path: string, d: Details): Promise<Float32Array | null> {
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

async function finishSheet(
  canvas: Canvas,
  labels: LabelPlan[],
  plan: RenderPlan,
  path: string,
  scriptPath: string,
) {
  await writeFile(scriptPath, labels.flatMap((l) => labelFilters(l, plan)).join(',\n'));
  const { code, stdout, stderr } = await run(
    'ffmpeg',
    [
      '-v',
      'error',
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
      '-f',
      'rawvideo',
      '-pix_fmt',
      'rgba',
      'pipe:1',
    ],
    { stdin: canvas.data, timeoutMs: 120_000 },
  );
  if (code !== 0 || stdout.length !== canvas.width * canvas.height * 4) {
    throw new EngineError('render_failed', `drawing labels failed: ${stderr.trim().split('\n').pop() ?? ''}`);
  }
  const encoded = jpeg.encode({ data: stdout, width: canvas.width, height: canvas.height }, plan.quality);
  const partial = `${path}.partial`;
  await writeFile(partial, encoded.data);
  await rename(partial, path);
}

export const ffmpegEngine: Engine = {
  name: 'ffmpeg',

  async probe(path) {
    const { timeBase, startUs, interlaced, audio, ...info } = await probeDetails(path);
    return info;
  },

  async render(plan, onProgress) {
    const d = await probeDetails(plan.input);
    const cells = plan.sheets.flatMap((sheet, s) => sheet.cells.map((cell, c) => ({ s, c, cell })));
    const times = cells.map((x) => x.cell.timeMs);
    const audioTask = plan.audio ? audioEnvelope(plan.input, d) : Promise.resolve(null);
    const first = Math.min(...times);
    let packets = await listPackets(plan.input, d, { fromMs: first, toMs: Math.max(...times) });
    const firstFrame = packets.pts.length ? packets.pts[frameAt(packets.pts, d, first)] : undefined;
    if (
      firstFrame === undefined ||
      !(packets.keyframes[0] !== undefined && packets.keyframes[0] <= firstFrame)
    ) {
      packets = await listPackets(plan.input, d);
    }

    const size = { w: cells[0]?.cell.rect.w ?? 0, h: cells[0]?.cell.rect.h ?? 0 };
    const frameOf = cells.map((x) => (packets.pts.length ? frameAt(packets.pts, d, x.cell.timeMs) : -1));
    const wanted = [...new Set(frameOf.filter((f) => f >= 0))].sort((a, b) => a - b);
    const groups = groupFrames(wanted, packets);
    const parallel = Math.max(1, availableParallelism());
    const pixels = new Map<number, Buffer>();
    let done = 0;
    await pool(
      groups.map((group, g) => async () => {
        const dir = join(plan.tempDir, `g${g}`);
        await mkdir(dir, { recursive: true });
        // Several groups run one per core, each single-threaded; a lone group gets every thread.
        const got = await extractGroup(plan.input, d, packets, group, size, dir, groups.length > 1 ? 1 : 0);
        for (const [f, rgb] of got) pixels.set(f, rgb);
        done += group.length;
        onProgress?.(done, wanted.length);
      }),
      parallel,
    );

    const fullEnvelope = await audioTask;
    const unreadable: RenderResult['unreadable'] = [];
    let k = 0;
    for (const [s, sheet] of plan.sheets.entries()) {
      const canvas = createCanvas(sheet.width, sheet.height, plan.theme.background);
      const labels: LabelPlan[] = [];
      for (const [c, cell] of sheet.cells.entries()) {
        const rgb = pixels.get(frameOf[k++] ?? -1);
        if (rgb) blit(canvas, cell.rect, rgb);
        else unreadable.push({ sheet: s, cell: c });
        labels.push(cell.label);
      }
      if (sheet.band) {
        paintBand(canvas, sheet.band, plan.theme, fullEnvelope, 0);
        if (sheet.band.message) labels.push(sheet.band.message);
      }
      await finishSheet(canvas, labels, plan, sheet.path, join(plan.tempDir, `sheet-${s + 1}.filter`));
    }

    let audio: AudioEnvelope | null = null;
    if (plan.audio) {
      audio = fullEnvelope
        ? { present: true, envelope: windowOf(fullEnvelope, plan.audio.startMs, plan.audio.endMs) }
        : { present: false, envelope: new Float32Array(0) };
    }
    return { unreadable, audio };
  },
};

function windowOf(envelope: Float32Array, startMs: number, endMs: number): Float32Array {
  const out = new Float32Array(Math.max(0, endMs - startMs));
  out.set(envelope.subarray(startMs, Math.min(endMs, envelope.length)));
  return out;
}
