#!/usr/bin/env node
/**
 * The picture signal proven offline (issue 41), no engine change: `node bench/hunt/picture-oracle.mjs
 * [--only B,C,N,A] [--encode scenecut,fixedgop,nobf] [--engines native,ffmpeg] [--densities 3x3,4x4,6x6]`.
 *
 * Per real haystack (bench/hunt/real-haystack.mjs), engine and overview density: the tool's own
 * overview (runJob: its cells' `frame_times` and today's `zoom_hints`), then, from ffmpeg alone:
 * every frame's 32x18 luma thumbnail, picture type and H.264 nal_ref_idc, and every packet's size,
 * keyframe flag and decode order. What the engines decode anyway is modelled as: for each cell,
 * the packets from the keyframe at or before its packet up to it in decode order, non-reference
 * pictures skipped (both engines skip them where no cell shows them); the union over the cells.
 * Models compared:
 *   today     the packet score of src/core/zoom.ts (keyframe + bitrate), per gap, recomputed here
 *             from the packets (every packet listed: MP4);
 *   engine    today's combined with the picture score (bench/hunt/picture-math.mjs) on the frames
 *             the engines decode anyway;
 *   +nonref   the same, also decoding the skipped non-reference pictures in those ranges;
 *   all       the same on every frame (an upper bound).
 * Reported: the needle's gap's rank among all gaps (1 = first; ties count against it), whether a
 * cell shows the needle outright, the needle frame's picture type and reference flag, the share of
 * frames each model decodes; on the no-needle haystack (N) how many gaps count as departures.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unexplainedKeyframes } from '../../dist/core/zoom.js';
import { ffmpegEngine } from '../../dist/engine/ffmpeg.js';
import { loadNative } from '../../dist/engine/native-loader.js';
import { runJob } from '../../dist/job.js';
import { combinedScore, gapMeasures, median, pictureScores, THUMB } from './picture-math.mjs';
import { REAL_ENCODES, REAL_FPS, realHaystack, realRecipe } from './real-haystack.mjs';

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const list = (name, fallback) => flag(name, fallback.join(',')).split(',').filter(Boolean);
const classes = list('only', ['B', 'C', 'N']);
const encodes = list('encode', Object.keys(REAL_ENCODES));
const engines = list('engines', ['native', 'ffmpeg']);
const densities = list('densities', ['3x3', '4x4', '6x6']);
const depth = Number(flag('depth', '0.38'));
/** `--chroma`: thumbnails with their two 16x9 chroma planes (a red square can match its footage's luma). */
const chroma = argv.includes('--chroma');
/** `--brief K`: also score a frame against the frames K before and after it (a brief event). */
const brief = Number(flag('brief', '0'));
const models = list('models', ['engine', '+nonref', 'all']);

function engineNamed(name) {
  if (name === 'ffmpeg') return ffmpegEngine;
  const native = loadNative();
  if (!('engine' in native)) throw new Error(`the native binding did not load: ${native.error}`);
  return native.engine;
}

/** Every frame's thumbnail and picture type (presentation order); every packet (decode order). */
function frameData(file) {
  const px = THUMB.w * THUMB.h * (chroma ? 1.5 : 1);
  const r = spawnSync(
    'ffmpeg',
    [
      ...['-hide_banner', '-nostdin', '-i', file, '-an'],
      ...[
        '-vf',
        `scale=${THUMB.w}:${THUMB.h}:flags=area,format=${chroma ? 'yuv420p' : 'gray'},showinfo`,
        '-f',
        'rawvideo',
        'pipe:1',
      ],
    ],
    { maxBuffer: 1 << 30 },
  );
  const thumbs = r.stdout;
  const n = thumbs.length / px;
  const types = [...r.stderr.toString().matchAll(/ type:([IPB])/g)].map((m) => m[1]);
  const packets = execFileSync(
    'ffprobe',
    [
      '-v',
      'error',
      '-select_streams',
      'v:0',
      '-show_entries',
      'packet=pts_time,dts_time,size,flags',
      '-of',
      'csv=p=0',
      file,
    ],
    { encoding: 'utf8', maxBuffer: 1 << 28 },
  )
    .trim()
    .split('\n')
    .map((line) => {
      const [pts, dts, size, flags] = line.split(',');
      return {
        frame: Math.round(Number(pts) * REAL_FPS),
        time: Number(dts),
        size: Number(size),
        key: flags.startsWith('K'),
      };
    });
  // nal_ref_idc of each picture, in decode order, from the Annex B stream (one slice per picture).
  const annexb = execFileSync(
    'ffmpeg',
    [
      '-v',
      'error',
      '-i',
      file,
      '-map',
      '0:v:0',
      '-c',
      'copy',
      '-bsf:v',
      'h264_mp4toannexb',
      '-f',
      'h264',
      'pipe:1',
    ],
    { maxBuffer: 1 << 30 },
  );
  const refs = [];
  for (let i = 0; i + 3 < annexb.length; i++) {
    if (annexb[i] === 0 && annexb[i + 1] === 0 && annexb[i + 2] === 1) {
      const type = annexb[i + 3] & 0x1f;
      if (type === 1 || type === 5) refs.push((annexb[i + 3] >> 5) & 3);
      i += 3;
    }
  }
  if (refs.length !== packets.length)
    throw new Error(`${file}: ${refs.length} slices for ${packets.length} packets`);
  const decodeIndex = new Int32Array(n).fill(-1);
  packets.forEach((p, i) => {
    p.ref = refs[i] > 0;
    if (p.frame >= 0 && p.frame < n) decodeIndex[p.frame] = i;
  });
  return { n, thumb: (i) => thumbs.subarray(i * px, (i + 1) * px), types, packets, decodeIndex };
}

/** The frames decoded to reach the cells: keyframe to cell in decode order, non-refs skipped unless `nonref`. */
function decodedFrames(data, cells, { nonref = false } = {}) {
  const set = new Set();
  for (const c of cells) {
    const di = data.decodeIndex[c];
    let k = di;
    while (k > 0 && !data.packets[k].key) k--;
    for (let i = k; i <= di; i++)
      if (i === di || nonref || data.packets[i].ref) set.add(data.packets[i].frame);
  }
  return [...set].sort((a, b) => a - b);
}

/**
 * Today's packet score per gap (src/core/zoom.ts's keyframe, departure and bitrate parts, every
 * packet listed).
 */
function todayScores(data, cells) {
  const spans = [[-1, 1e9]];
  const found = unexplainedKeyframes(data.packets, spans);
  const unexplained = new Set(found?.times ?? []);
  const departures = new Set(found?.departures ?? []);
  const pos = cells.map((c) => data.decodeIndex[c]);
  const gaps = [];
  for (let k = 1; k < cells.length; k++) {
    let peak = 0;
    let total = 0;
    let keyframe = false;
    let departure = false;
    for (let i = pos[k - 1] + 1; i <= pos[k]; i++) {
      const p = data.packets[i];
      if (p.key && unexplained.has(p.time)) keyframe = true;
      if (p.key && departures.has(p.time)) departure = true;
      if (p.key && !unexplained.has(p.time)) continue;
      peak = Math.max(peak, p.size);
      total += p.size;
    }
    const seconds = Math.max(1e-3, (cells[k] - cells[k - 1]) / REAL_FPS);
    gaps.push({ peak, rate: total / seconds, keyframe, departure });
  }
  const bp = median(gaps.map((g) => g.peak));
  const br = median(gaps.map((g) => g.rate));
  return gaps.map((g) => {
    let quiet = g.departure ? 0.1 : g.keyframe ? 0.5 : 1;
    const ratio = Math.max(g.peak / bp, g.rate / br);
    if (ratio >= 2.5) quiet *= 1 - Math.min(1, Math.log(ratio) / Math.log(16));
    return 1 - quiet;
  });
}

/** Rank of gap `g` among `scores` (1 = first; gaps with an equal score count as ahead). */
const rankOf = (scores, g) => scores.filter((s, i) => i !== g && s >= scores[g]).length + 1;

async function overview(file, engine, density) {
  const outDir = mkdtempSync(join(tmpdir(), 'vidsheet-oracle-'));
  try {
    const o = await runJob({ input: file, density, outDir }, { engine: engineNamed(engine), audio: false });
    return { times: o.frameTimes.flat(), labels: o.timecodes.flat(), hints: o.zoomHints };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}

const rows = [];
for (const encode of encodes) {
  for (const c of classes) {
    const r = realRecipe(c, depth, encode);
    const file = realHaystack(r);
    const data = frameData(file);
    const needle = r.frame;
    const pkt = data.packets[data.decodeIndex[needle]];
    const at = {
      type: data.types[needle],
      ref: pkt?.ref,
      bytes: pkt?.size,
      before: data.packets[data.decodeIndex[needle - 1]]?.size,
    };
    for (const engine of engines) {
      for (const density of densities) {
        const run = await overview(file, engine, density);
        const cells = run.times.map((t) => Math.round(t * REAL_FPS));
        // Needle moments: on (and off, for C) as the gap k with cells[k-1] < f <= cells[k].
        const moments =
          c === 'C'
            ? [needle, needle + r.brief]
            : c === 'B'
              ? [needle, needle + 1]
              : c === 'A'
                ? [needle]
                : [];
        const gapsOfNeedle = [
          ...new Set(moments.map((f) => cells.findIndex((x) => x >= f)).filter((k) => k > 0)),
        ];
        const shown =
          c === 'B'
            ? cells.includes(needle)
            : c === 'C'
              ? cells.some((x) => x >= needle && x < needle + r.brief)
              : false;
        const today = todayScores(data, cells);
        const decodedBy = {
          engine: () => decodedFrames(data, cells),
          '+nonref': () => decodedFrames(data, cells, { nonref: true }),
          all: () => Array.from({ length: data.n }, (_, i) => i),
        };
        const row = {
          encode,
          c,
          engine,
          density,
          gaps: cells.length - 1,
          shown,
          at,
          ranks: {},
          share: {},
          departs: {},
        };
        const best = (scores) => Math.min(...gapsOfNeedle.map((k) => rankOf(scores, k - 1)));
        row.ranks.today = gapsOfNeedle.length ? best(today) : null;
        for (const name of models) {
          const decoded = decodedBy[name]();
          const measures = gapMeasures(data.thumb, decoded, cells, { brief });
          const pictures = pictureScores(measures);
          const deps = measures.map((m) => m.departure).sort((x, y) => y - x);
          row.dep ??= {};
          row.dep[name] = {
            needle: gapsOfNeedle.map((k) => Number(measures[k - 1].departure.toFixed(1))),
            fifth: Number((deps[4] ?? 0).toFixed(1)),
            median: Number(median(deps).toFixed(2)),
          };
          const combined = today.map((t, i) => combinedScore(t, pictures[i]));
          row.ranks[name] = gapsOfNeedle.length ? best(combined) : null;
          row.share[name] = decoded.length / data.n;
          row.departs[name] =
            `${pictures.filter((p) => p.flashes).length}+${pictures.filter((p) => p.departs && !p.flashes).length}`;
          row.needleDecoded ??= {};
          row.needleDecoded[name] = c === 'B' ? decoded.includes(needle) : null;
        }
        rows.push(row);
        console.error(`oracle: ${JSON.stringify(row)}`);
      }
    }
  }
}

const pct = (x) => `${Math.round(100 * x)} %`;
const rk = (x) => (x === null || x === undefined ? '-' : x <= 5 ? `**${x}**` : String(x));
console.log('\nPicture signal offline: rank of the needle gap among all overview gaps (top five in bold)\n');
console.log(
  '| class | encode | engine | density | gaps | cell shows it | needle frame | today | engine frames | +nonref | all frames | decoded: engine / +nonref | flashes+departures per model |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const w of rows) {
  console.log(
    `| ${w.c} | ${w.encode} | ${w.engine} | ${w.density} | ${w.gaps} | ${w.shown ? 'yes' : 'no'} | ${w.at.type}${w.at.ref ? ' ref' : ' nonref'} ${w.at.bytes} B${w.needleDecoded?.engine === false ? ' (not decoded)' : ''} | ` +
      `${rk(w.ranks.today)} | ${rk(w.ranks.engine)} | ${rk(w.ranks['+nonref'])} | ${rk(w.ranks.all)} | ${w.share.engine === undefined ? '-' : pct(w.share.engine)} / ${w.share['+nonref'] === undefined ? '-' : pct(w.share['+nonref'])} | ${models.map((m) => w.departs[m]).join(' / ')} |`,
  );
}
