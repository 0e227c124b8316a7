#!/usr/bin/env node
/**
 * What the fallback's open-GOP entry saves (`npm run bench -- --open-gop [--seconds 600] [--runs 3]`):
 * the fallback engine on a 1080p clip of x264 open GOPs (no IDR after the first frame, so without
 * entries every group decodes from the stream's start), with and without entering, through the
 * bench-only VIDSHEET_BENCH_NO_OPEN_GOP=1; a 3x3 overview and a 10 s window in the middle, runs
 * alternated, wall and CPU medians. Each measurement is a fresh process (measure.mjs).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { clip, ROOT } from './clip.mjs';

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const SECONDS = Number(flag('seconds', '120'));
const RUNS = Number(flag('runs', '3'));
const path =
  SECONDS === 600
    ? clip('1080p-10min-opengop', { seconds: 600, size: '1920x1080', openGop: true })
    : clip(`1080p-${SECONDS}s-opengop`, { seconds: SECONDS, size: '1920x1080', openGop: true });
const middle = Math.floor(SECONDS / 2) + 0.5;
const CASES = [
  { name: '3x3 overview', density: '3x3' },
  { name: '6x6 10 s window', density: '6x6', start: middle, end: middle + 10 },
];
const SIDES = { entering: {}, 'from the start': { VIDSHEET_BENCH_NO_OPEN_GOP: '1' } };

/** CPU (user + system) of every finished child and its waited-for descendants, ms (proc(5)). */
function childrenCpuMs() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / 100;
}

function measure(c, env) {
  const args = [
    join(ROOT, 'bench', 'measure.mjs'),
    'ffmpeg',
    path,
    c.density,
    String(c.start ?? ''),
    String(c.end ?? ''),
  ];
  const cpu0 = childrenCpuMs();
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', env: { ...process.env, ...env } });
  if (r.status !== 0) throw new Error(`${c.name} failed:\n${r.stderr}`);
  return { ms: JSON.parse(r.stdout.trim().split('\n').pop()).ms, cpuMs: childrenCpuMs() - cpu0 };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const s = (ms) => `${(ms / 1000).toFixed(2)} s`;

console.log(
  `\nvidsheet fallback on ${SECONDS} s of 1080p open GOPs: median of ${RUNS} runs each, alternated\n`,
);
console.log('| case | measure | entering | from the start | from the start / entering |');
console.log('|---|---|---|---|---|');
for (const c of CASES) {
  const got = Object.fromEntries(Object.keys(SIDES).map((k) => [k, { wall: [], cpu: [] }]));
  for (let run = 0; run < RUNS; run++)
    for (const [side, env] of Object.entries(SIDES)) {
      const m = measure(c, env);
      got[side].wall.push(m.ms);
      got[side].cpu.push(m.cpuMs);
    }
  for (const measureName of ['wall', 'cpu']) {
    const [a, b] = Object.keys(SIDES).map((side) => median(got[side][measureName]));
    console.log(`| ${c.name} | ${measureName} | ${s(a)} | ${s(b)} | ${(b / a).toFixed(2)}x |`);
  }
}
