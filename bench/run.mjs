#!/usr/bin/env node
/**
 * Engine benchmark: one table, measured side by side in one run (machines are noisy; ratios are
 * what count). Usage: `npm run bench [-- --runs 3 --only 4K --methods native,peer]`, and
 * `npm run bench -- --audio` for the cost of the audio band and report (the peaks measurement) on a 60-minute clip, and
 * `npm run bench -- --hosted [--runs 3]` for the hosted server (bench/hosted.mjs),
 * `npm run bench -- --session [--size 1920x1080 --minutes 30 --no-s3]` for kept videos (bench/session.mjs), and
 * `npm run bench -- --bindings static=a.node,system=b.node` for two builds of the native binding
 * side by side (each loaded through VIDSHEET_NATIVE_BINDING; the second column is the baseline).
 *
 * Methods, alternated run by run:
 *   (a) native   the addon, one render(plan) call
 *   (b) ffmpeg   the fallback engine, same plan
 *   (c) peer     the fastest per-frame method we measured: one `ffmpeg -threads 1 -ss T -i clip
 *                -frames:v 1` process per cell, two at a time, then one ffmpeg tiling pass per sheet
 * Each measurement runs in a fresh child process (bench/measure.mjs) so peak RSS is its own.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { clip, ROOT } from './clip.mjs';

const argv = process.argv.slice(2);
// `--hosted`: the hosted server's added latency and upload memory, in its own script.
if (argv.includes('--hosted')) {
  const hosted = join(ROOT, 'bench', 'hosted.mjs');
  const r = spawnSync(process.execPath, [hosted, ...argv.filter((a) => a !== '--hosted')], {
    stdio: 'inherit',
  });
  process.exit(r.status ?? 1);
}
// `--session`: kept videos, upload once and zoom (bench/session.mjs).
if (argv.includes('--session')) {
  const session = join(ROOT, 'bench', 'session.mjs');
  const r = spawnSync(process.execPath, [session, ...argv.filter((a) => a !== '--session')], {
    stdio: 'inherit',
  });
  process.exit(r.status ?? 1);
}
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const RUNS = Number(flag('runs', '3'));
const ONLY = flag('only', '');
// `--bindings name=path,...`: each named .node runs the `native` method.
const BINDINGS = Object.fromEntries(
  flag('bindings', '')
    .split(',')
    .filter(Boolean)
    .map((pair) => pair.split('=')),
);
const METHODS = Object.keys(BINDINGS).length
  ? Object.keys(BINDINGS)
  : flag(
      'methods',
      argv.includes('--audio') ? 'native,native+audio,ffmpeg,ffmpeg+audio' : 'native,ffmpeg,peer',
    ).split(',');

const clips = {
  '1080p': () => clip('1080p-10min', { seconds: 600, size: '1920x1080' }),
  '4k': () => clip('2160p-3min', { seconds: 180, size: '3840x2160' }),
  '60min': () => clip('360p-60min', { seconds: 3600, size: '640x360' }),
};

// `--audio`: the cost of audio (the engine measures the whole track's peaks) on a 60-minute clip.
const AUDIO = argv.includes('--audio');
const CASES = AUDIO
  ? [{ name: '60 min 3x3 overview', clip: '60min', density: '3x3' }]
  : [
      { name: '1080p 3x3 overview', clip: '1080p', density: '3x3' },
      { name: '4K 3x3 overview', clip: '4k', density: '3x3' },
      { name: '1080p 6x6 overview', clip: '1080p', density: '6x6' },
      { name: '1080p 6x6 10 s window', clip: '1080p', density: '6x6', start: 200.5, end: 210.5 },
    ].filter((c) => !ONLY || c.name.includes(ONLY));

function measure(method, c, path) {
  const binding = BINDINGS[method];
  const args = [
    join(ROOT, 'bench', 'measure.mjs'),
    binding ? 'native' : method,
    path,
    c.density,
    String(c.start ?? ''),
    String(c.end ?? ''),
  ];
  const env = binding ? { ...process.env, VIDSHEET_NATIVE_BINDING: binding } : process.env;
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', env, maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${method} ${c.name} failed:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const rows = [];
for (const c of CASES) {
  const path = clips[c.clip]();
  const times = Object.fromEntries(METHODS.map((m) => [m, []]));
  let nativeRss = 0;
  let decode = null;
  for (let run = 0; run < RUNS; run++) {
    for (const method of METHODS) {
      const m = measure(method, c, path);
      times[method].push(m.ms);
      if (method === 'native') {
        nativeRss = Math.max(nativeRss, m.maxRssMb);
        decode = m.decode ?? decode;
      }
    }
  }
  const med = Object.fromEntries(METHODS.map((m) => [m, median(times[m])]));
  rows.push({ c, med, nativeRss, decode });
  console.error(`bench: ${c.name} done`);
}

if (Object.keys(BINDINGS).length) {
  const [a, b] = METHODS;
  console.log(`\nvidsheet native binding builds: median of ${RUNS} runs each, alternated (2 cores)\n`);
  console.log(`| case | ${METHODS.join(' | ')} | ${a} / ${b} |`);
  console.log(`|---|${METHODS.map(() => '---|').join('')}---|`);
  for (const { c, med } of rows) {
    const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
    console.log(
      `| ${c.name} | ${METHODS.map((m) => s(med[m])).join(' | ')} | ${(med[a] / med[b]).toFixed(3)} |`,
    );
  }
  process.exit(0);
}

if (AUDIO) {
  console.log(
    `\nvidsheet audio cost (peaks measured alongside the render): median of ${RUNS} runs each, alternated (2 cores)\n`,
  );
  console.log('| case | native | native + audio | ratio | ffmpeg | ffmpeg + audio | ratio |');
  console.log('|---|---|---|---|---|---|---|');
  for (const { c, med } of rows) {
    const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
    console.log(
      `| ${c.name} | ${s(med.native)} | ${s(med['native+audio'])} | ${(med['native+audio'] / med.native).toFixed(2)}x | ${s(med.ffmpeg)} | ${s(med['ffmpeg+audio'])} | ${(med['ffmpeg+audio'] / med.ffmpeg).toFixed(2)}x |`,
    );
  }
  process.exit(0);
}

const fmt = (ms) => (ms === undefined ? '-' : `${(ms / 1000).toFixed(2)} s`);
const ratio = (x, y) => (x && y ? `${(x / y).toFixed(2)}x` : '-');
console.log(`\nvidsheet engine benchmark: median of ${RUNS} runs each, alternated (2 cores)\n`);
console.log(
  '| case | (a) native | (b) ffmpeg | (c) peer | c/a | b/a | c/b | native peak RSS | native decoded / unavoidable frames |',
);
console.log('|---|---|---|---|---|---|---|---|---|');
for (const { c, med, nativeRss, decode } of rows) {
  const work = decode
    ? `${decode.decoded} / ${decode.unavoidable} (${(decode.decoded / decode.unavoidable).toFixed(2)}x)`
    : '-';
  console.log(
    `| ${c.name} | ${fmt(med.native)} | ${fmt(med.ffmpeg)} | ${fmt(med.peer)} | ${ratio(med.peer, med.native)} | ${ratio(med.ffmpeg, med.native)} | ${ratio(med.peer, med.ffmpeg)} | ${nativeRss ? `${nativeRss.toFixed(0)} MB` : '-'} | ${work} |`,
  );
}
