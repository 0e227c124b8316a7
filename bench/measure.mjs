#!/usr/bin/env node
/**
 * One benchmark measurement in a fresh process (so peak RSS is its own). Prints one JSON line:
 * { ms, maxRssMb, decode? }. Usage: measure.mjs <method> <clip> <density> [start] [end]
 * methods: native | ffmpeg | native+audio | ffmpeg+audio | peer
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { cellsPerSheet, gridSide } from '../dist/core/density.js';
import { computeGrid } from '../dist/core/layout.js';
import { makePlan } from '../dist/core/plan.js';
import { chooseVideoStream } from '../dist/core/probe.js';
import { durationToMs, resolveWindow } from '../dist/core/window.js';
import { ffmpegEngine } from '../dist/engine/ffmpeg.js';
import { loadNative } from '../dist/engine/native-loader.js';
import { pool, run } from '../dist/engine/process.js';
import { runJob } from '../dist/job.js';

const [method, clip, density, start, end] = process.argv.slice(2);
const request = {
  input: clip,
  density,
  startMs: start ? Math.round(Number(start) * 1000) : undefined,
  endMs: end ? Math.round(Number(end) * 1000) : undefined,
};
const out = mkdtempSync(join(tmpdir(), 'vidsheet-bench-'));

/** (c): one ffmpeg process per cell (-threads 1 -ss T, first frame at/after T), 2 at a time, then tiling. */
async function peer() {
  const info = await ffmpegEngine.probe(clip);
  const video = chooseVideoStream(info.videoStreams);
  const window = resolveWindow(request, durationToMs(info.duration), density);
  const plan = makePlan(window, density);
  const grid = computeGrid(video.width, video.height, density, false);
  const side = gridSide(density);
  const cells = plan.sheets.flat();
  await pool(
    cells.map(
      (cell, i) => () =>
        run('ffmpeg', [
          '-v',
          'error',
          '-nostdin',
          '-threads',
          '1',
          '-ss',
          String(cell.timeMs / 1000),
          '-i',
          clip,
          '-frames:v',
          '1',
          '-vf',
          `scale=${grid.cellWidth}:${grid.cellHeight}`,
          '-y',
          join(out, `cell-${String(i).padStart(5, '0')}.ppm`),
        ]),
    ),
    2,
  );
  await pool(
    plan.sheets.map(
      (_, s) => () =>
        run('ffmpeg', [
          '-v',
          'error',
          '-nostdin',
          '-start_number',
          String(s * cellsPerSheet(density)),
          '-i',
          join(out, 'cell-%05d.ppm'),
          '-frames:v',
          '1',
          '-vf',
          `tile=${side}x${side}:padding=4:margin=4`,
          '-q:v',
          '4',
          '-y',
          join(out, `sheet-${s + 1}.jpg`),
        ]),
    ),
    availableParallelism(),
  );
}

/** Frames an exact frame cannot avoid decoding: union over targets of [GOP keyframe, target]. */
async function unavoidableFrames(outcome, info, video) {
  const { stdout } = await run('ffprobe', [
    '-v',
    'error',
    '-select_streams',
    String(video.index),
    '-show_entries',
    'packet=pts,flags',
    '-of',
    'csv=p=0',
    clip,
  ]);
  const packets = stdout
    .toString()
    .split('\n')
    .map((l) => l.split(','))
    .filter(([p]) => /^-?\d+$/.test(p ?? ''))
    .map(([p, f]) => ({ pts: Number(p), key: (f ?? '').startsWith('K') }))
    .sort((a, b) => a.pts - b.pts);
  const tb = await run('ffprobe', [
    '-v',
    'error',
    '-select_streams',
    String(video.index),
    '-show_entries',
    'stream=time_base',
    '-of',
    'csv=p=0',
    clip,
  ]);
  const [num, den] = tb.stdout.toString().trim().split('/').map(Number);
  const startPts = (info.startTime * den) / num;
  const needed = new Set();
  for (const label of outcome.timecodes.flat()) {
    const [m, s] = label.split(':');
    const t = Number(m) * 60 + Number(s);
    const target = startPts + (t * den) / num;
    let i = packets.findLastIndex((p) => p.pts <= target + 1e-6);
    if (i < 0) i = 0;
    for (let k = i; k >= 0; k--) {
      needed.add(k);
      if (packets[k].key) break;
    }
  }
  return needed.size;
}

const t0 = performance.now();
let decode;
let ms;
if (method === 'peer') {
  await peer();
  ms = performance.now() - t0;
} else {
  const [name, withAudio] = method.split('+');
  let engine = ffmpegEngine;
  if (name === 'native') {
    const loaded = loadNative();
    if (!('engine' in loaded)) throw new Error(loaded.error);
    engine = loaded.engine;
  }
  let stats = {};
  const outcome = await runJob(
    { ...request, outDir: out },
    { engine, audio: withAudio === 'audio', onStats: (s) => (stats = s) },
  );
  ms = performance.now() - t0;
  // Counted after the clock stops: the packet scan is the benchmark's, not the engine's.
  if (name === 'native' && stats.decodedFrames !== undefined) {
    const info = await engine.probe(clip);
    const video = chooseVideoStream(info.videoStreams);
    decode = { decoded: stats.decodedFrames, unavoidable: await unavoidableFrames(outcome, info, video) };
  }
}
rmSync(out, { recursive: true, force: true });
console.log(JSON.stringify({ ms, maxRssMb: process.resourceUsage().maxRSS / 1024, decode }));
