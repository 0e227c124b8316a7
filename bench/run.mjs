#!/usr/bin/env node
/**
 * Engine benchmark: one table, measured side by side in one run (machines are noisy; ratios are
 * what count). Usage: `npm run bench [-- --runs 3 --only 4K --methods native,peer]`, and
 * `npm run bench -- --audio` for the cost of the audio band and report (the peaks measurement) on a 60-minute clip,
 * `npm run bench -- --hints [--only 60]` for the cost of the zoom hints' packet collection and pictures
 * (each engine with and without them, through the bench-only VIDSHEET_BENCH_NO_HINTS=1),
 * `npm run bench -- --bindings static=a.node,system=b.node` for two builds of the native binding
 * side by side (each loaded through VIDSHEET_NATIVE_BINDING; the second column is the baseline), and
 * one of the separate benchmarks below (each its own script in bench/, given the other arguments):
 *   --hosted [--runs 3]                the hosted server's added latency and upload memory (hosted.mjs)
 *   --soak [minutes]                   the hosted server under stalled and honest clients (soak.mjs)
 *   --session [--size WxH --minutes N --no-s3]  kept videos: upload once and zoom (session.mjs)
 *   --hunt [--only A,B,C,D,T] [--encode scenecut,fixedgop] [--fps 30,60] [--densities 4x4,6x6]
 *                                      calls a scripted model needs to name a needle's exact
 *                                      frame in a 30-minute haystack (hunt.mjs)
 *   --events [--only clip,...] [--engines native,ffmpeg] [--densities 3x3,4x4,6x6] [--no-corpus]
 *                                      the zoom hints' recall and false hints on clips with known
 *                                      events and on corpus cuts, each engine (events.mjs); with
 *                                      `--hay real [--only B,C] [--encode ...] [--depths ...]`,
 *                                      the needle's rank on the real-footage haystacks
 *   --fields [--runs 3]                what finding H.264 field pairs costs the fallback's listing
 *                                      on 10 minutes of interlaced broadcast (fields.mjs)
 *   --scale                            the fallback on 3000 targets in one run and a 2016-cell plan,
 *                                      every frame asserted, each case timed (scale.mjs)
 *   --open-gop [--seconds 600] [--runs 3]  what the fallback's open-GOP entry saves: with and
 *                                      without entering, 1080p open GOPs (open-gop.mjs)
 *
 * Methods, alternated run by run:
 *   (a) native   the addon, one render(plan) call
 *   (b) ffmpeg   the fallback engine, same plan
 *   (c) peer     the fastest per-frame method we measured: one `ffmpeg -threads 1 -ss T -i clip
 *                -frames:v 1` process per cell, two at a time, then one ffmpeg tiling pass per sheet
 * Each measurement runs in a fresh child process (bench/measure.mjs) so peak RSS is its own.
 * The open-GOP rows use the same clip encoded with x264's open GOPs (bench/clip.mjs), so the
 * cost of entering an open GOP reads against the closed-GOP rows above them.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { clip, ROOT } from './clip.mjs';

const argv = process.argv.slice(2);
// The separate benchmarks: each runs in its own script with the remaining arguments.
const SEPARATE = {
  '--hosted': 'hosted.mjs',
  '--soak': 'soak.mjs',
  '--session': 'session.mjs',
  '--hunt': 'hunt.mjs',
  '--events': 'events.mjs',
  '--fields': 'fields.mjs',
  '--scale': 'scale.mjs',
  '--open-gop': 'open-gop.mjs',
};
for (const [name, script] of Object.entries(SEPARATE)) {
  if (!argv.includes(name)) continue;
  const args = argv.filter((a) => a !== name);
  const r = spawnSync(process.execPath, [join(ROOT, 'bench', script), ...args], { stdio: 'inherit' });
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
      argv.includes('--audio')
        ? 'native,native+audio,ffmpeg,ffmpeg+audio'
        : argv.includes('--hints')
          ? 'native,native-nohints,ffmpeg,ffmpeg-nohints'
          : 'native,ffmpeg,peer',
    ).split(',');
// `--hints`: the zoom hints' cost, each engine with and without collecting their packets.
const HINTS = argv.includes('--hints');

const clips = {
  '1080p': () => clip('1080p-10min', { seconds: 600, size: '1920x1080' }),
  '1080p-open': () => clip('1080p-10min-opengop', { seconds: 600, size: '1920x1080', openGop: true }),
  '4k': () => clip('2160p-3min', { seconds: 180, size: '3840x2160' }),
  '60min': () => clip('360p-60min', { seconds: 3600, size: '640x360' }),
};

// `--audio`: the cost of audio (the engine measures the whole track's peaks) on a 60-minute clip.
const AUDIO = argv.includes('--audio');
const CASES = AUDIO
  ? [{ name: '60 min 3x3 overview', clip: '60min', density: '3x3' }]
  : HINTS
    ? [
        { name: '1080p 10 min 3x3 overview', clip: '1080p', density: '3x3' },
        { name: '360p 60 min 3x3 overview', clip: '60min', density: '3x3' },
        // A zoom: the window's end is decoded after the last cell for the pictures (closingMs).
        { name: '1080p 3x3 10 s window', clip: '1080p', density: '3x3', start: 200.5, end: 210.5 },
      ].filter((c) => !ONLY || c.name.includes(ONLY))
    : [
        { name: '1080p 3x3 overview', clip: '1080p', density: '3x3' },
        { name: '4K 3x3 overview', clip: '4k', density: '3x3' },
        { name: '1080p 6x6 overview', clip: '1080p', density: '6x6' },
        { name: '1080p 6x6 10 s window', clip: '1080p', density: '6x6', start: 200.5, end: 210.5 },
        { name: '1080p open-GOP 3x3 overview', clip: '1080p-open', density: '3x3' },
        { name: '1080p open-GOP 6x6 overview', clip: '1080p-open', density: '6x6' },
        {
          name: '1080p open-GOP 6x6 10 s window',
          clip: '1080p-open',
          density: '6x6',
          start: 200.5,
          end: 210.5,
        },
      ].filter((c) => !ONLY || c.name.includes(ONLY));

function measure(method, c, path) {
  const binding = BINDINGS[method];
  const noHints = method.endsWith('-nohints');
  const args = [
    join(ROOT, 'bench', 'measure.mjs'),
    binding ? 'native' : method.replace(/-nohints$/, ''),
    path,
    c.density,
    String(c.start ?? ''),
    String(c.end ?? ''),
  ];
  const env = binding
    ? { ...process.env, VIDSHEET_NATIVE_BINDING: binding }
    : noHints
      ? { ...process.env, VIDSHEET_BENCH_NO_HINTS: '1' }
      : process.env;
  const cpu0 = childrenCpuMs();
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', env, maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${method} ${c.name} failed:\n${r.stderr}`);
  return { ...JSON.parse(r.stdout.trim().split('\n').pop()), cpuMs: childrenCpuMs() - cpu0 };
}

/**
 * CPU (user + system) of every finished child and their waited-for descendants (the fallback's
 * ffmpeg processes included), from /proc/self/stat's cutime and cstime, in ms. Steadier than wall
 * time on a shared machine: a cost that adds work shows here even when a spare core hides it.
 */
function childrenCpuMs() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 16 and 17 of proc(5) (cutime, cstime), counted after the command name's field 2.
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / 100;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const rows = [];
for (const c of CASES) {
  const path = clips[c.clip]();
  const times = Object.fromEntries(METHODS.map((m) => [m, []]));
  const cpu = Object.fromEntries(METHODS.map((m) => [m, []]));
  // Pictures each native run decoded: a count the machine's load cannot blur.
  const decoded = Object.fromEntries(METHODS.map((m) => [m, []]));
  let nativeRss = 0;
  let decode = null;
  for (let run = 0; run < RUNS; run++) {
    for (const method of METHODS) {
      const m = measure(method, c, path);
      times[method].push(m.ms);
      cpu[method].push(m.cpuMs);
      if (m.decode) decoded[method].push(m.decode.decoded);
      if (method === 'native') {
        nativeRss = Math.max(nativeRss, m.maxRssMb);
        decode = m.decode ?? decode;
      }
    }
  }
  const med = Object.fromEntries(METHODS.map((m) => [m, median(times[m])]));
  const medCpu = Object.fromEntries(METHODS.map((m) => [m, median(cpu[m])]));
  rows.push({ c, med, medCpu, nativeRss, decode, decoded, times, cpu });
  console.error(`bench: ${c.name} done`);
}

if (Object.keys(BINDINGS).length) {
  const [a, b] = METHODS;
  console.log(`\nvidsheet native binding builds: median of ${RUNS} runs each, alternated (2 cores)\n`);
  console.log(
    `| case | measure | ${METHODS.join(' | ')} | ${a} / ${b} |\n|---|---|${METHODS.map(() => '---|').join('')}---|`,
  );
  const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
  // Decoded pictures per run as "least-most (runs at the most)": a race shows as a spread.
  const spread = (xs) => {
    const most = Math.max(...xs);
    const least = Math.min(...xs);
    return least === most ? `${most}` : `${least}-${most} (${xs.filter((x) => x === most).length}x)`;
  };
  for (const { c, med, medCpu, decoded } of rows) {
    console.log(
      `| ${c.name} | wall | ${METHODS.map((m) => s(med[m])).join(' | ')} | ${(med[a] / med[b]).toFixed(3)} |`,
    );
    console.log(
      `| | CPU | ${METHODS.map((m) => s(medCpu[m])).join(' | ')} | ${(medCpu[a] / medCpu[b]).toFixed(3)} |`,
    );
    console.log(`| | pictures | ${METHODS.map((m) => spread(decoded[m])).join(' | ')} | |`);
  }
  process.exit(0);
}

if (HINTS) {
  // `--methods ffmpeg,ffmpeg-nohints` measures one engine (more runs in the same time).
  const engines = ['native', 'ffmpeg'].filter((e) => METHODS.includes(e) && METHODS.includes(`${e}-nohints`));
  console.log(`\nvidsheet zoom hints' cost: median of ${RUNS} runs each, alternated (2 cores)\n`);
  console.log(`| case | measure | ${engines.map((e) => `${e} | ${e}, no hints | ratio`).join(' | ')} |`);
  console.log(`|---|---|${engines.map(() => '---|---|---|').join('')}`);
  for (const { c, med, medCpu } of rows) {
    const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
    for (const [measure, m] of [
      ['wall', med],
      ['CPU', medCpu],
    ]) {
      const cells = engines.map(
        (e) => `${s(m[e])} | ${s(m[`${e}-nohints`])} | ${(m[e] / m[`${e}-nohints`]).toFixed(3)}x`,
      );
      console.log(`| ${c.name} | ${measure} | ${cells.join(' | ')} |`);
    }
  }
  // The same runs paired: run r with hints over run r without, measured back to back, so a slow
  // stretch of the machine falls on both sides of one ratio instead of on one side of the medians.
  console.log('\nPaired by run (with hints / without, back to back): median, quartiles, range\n');
  console.log('| case | measure | engine | median | quartiles | range |');
  console.log('|---|---|---|---|---|---|');
  for (const { c, times, cpu } of rows)
    for (const [measure, m] of [
      ['wall', times],
      ['CPU', cpu],
    ])
      for (const e of engines) {
        const r = m[e].map((v, i) => v / m[`${e}-nohints`][i]).sort((a, b) => a - b);
        const q = (f) => r[Math.round(f * (r.length - 1))].toFixed(3);
        console.log(
          `| ${c.name} | ${measure} | ${e} | ${median(r).toFixed(3)}x | ${q(0.25)}-${q(0.75)}x | ${q(0)}-${q(1)}x |`,
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
  '| case | (a) native | (b) ffmpeg | (c) peer | c/a | b/a | c/b | CPU: c/a, b/a | native peak RSS | native decoded / unavoidable frames |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const { c, med, medCpu, nativeRss, decode } of rows) {
  const work = decode
    ? `${decode.decoded} / ${decode.unavoidable} (${(decode.decoded / decode.unavoidable).toFixed(2)}x)`
    : '-';
  console.log(
    `| ${c.name} | ${fmt(med.native)} | ${fmt(med.ffmpeg)} | ${fmt(med.peer)} | ${ratio(med.peer, med.native)} | ${ratio(med.ffmpeg, med.native)} | ${ratio(med.peer, med.ffmpeg)} | ${ratio(medCpu.peer, medCpu.native)}, ${ratio(medCpu.ffmpeg, medCpu.native)} | ${nativeRss ? `${nativeRss.toFixed(0)} MB` : '-'} | ${work} |`,
  );
}
