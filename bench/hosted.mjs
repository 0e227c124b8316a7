#!/usr/bin/env node
/**
 * Hosted-server benchmark (`npm run bench -- --hosted [--runs 3]`): what the server adds on top of
 * the job itself, and what an upload costs it in memory. Everything goes to 127.0.0.1 only.
 *
 * 1. Added latency: the same 3x3 job on a 60 s 1080p clip, alternated run by run (the order
 *    rotates), after one unmeasured warm-up of each, median of --runs:
 *      cli     `node bin/vidsheet.js clip --json --out <tmp>`, spawn to exit
 *      engine  the job alone in a fresh process, as the server's worker runs it (bench/measure.mjs
 *              native: same engine, no audio envelope, no Node start-up or imports in the clock)
 *      server  POST /v1/vidsheet to a running server, request start to the full response read; the
 *              file is streamed from disk in a hand-built multipart body (never held in memory)
 *    The server's log lines ("upload received", "job charged", "job done", pino `time` in ms) split
 *    its time into upload, probe + charge, render + store, and answer.
 * 2. Upload memory: a fresh server with its default caps; a 299 MiB file of random bytes (just under
 *    the 300 MiB default cap) streamed in; the server's and its worker's VmRSS sampled every 20 ms,
 *    and the kernel's peak (VmHWM, reset just before the upload) read after it. The file is not a
 *    video, so the answer is 422 unreadable_video once it has all arrived.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, existsSync, mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CACHE, clip, ROOT } from './clip.mjs';
import { cleanUp, median, procStatus, sleep, startServer, tempDir, upload } from './server.mjs';

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const RUNS = Number(flag('runs', '3'));
const CLI_BIN = join(ROOT, 'bin', 'vidsheet.js');
const LATENCY_TARGET_MS = 150;
const RSS_TARGET_MB = 150;
const UPLOAD_BYTES = 299 * 1024 * 1024;
const EMAIL = 'bench@example.com';

/** A server with a funded key (`server.key`). */
async function start() {
  const server = await startServer({ prefix: 'vidsheet-bench-hosted-' });
  server.key = (await server.account(1000, EMAIL)).key;
  return server;
}

/** Resets the kernel's peak-RSS mark (VmHWM) of a process we started; false where unsupported. */
function resetPeak(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** 299 MiB of random bytes, once, in bench/.cache (written in 1 MiB chunks, never held whole). */
async function randomFile() {
  const out = join(CACHE, 'upload-299mib.bin');
  if (existsSync(out) && statSync(out).size === UPLOAD_BYTES) return out;
  mkdirSync(CACHE, { recursive: true });
  console.error('bench: writing 299 MiB of random bytes; once, cached in bench/.cache');
  const partial = `${out}.partial`;
  const sink = createWriteStream(partial);
  for (let left = UPLOAD_BYTES; left > 0; left -= 1024 * 1024) {
    if (!sink.write(randomBytes(Math.min(left, 1024 * 1024)))) await once(sink, 'drain');
  }
  sink.end();
  await once(sink, 'finish');
  renameSync(partial, out);
  return out;
}

/** The CLI, spawn to exit. */
async function runCli(path, outDir) {
  const start = performance.now();
  const child = spawn(process.execPath, [CLI_BIN, path, '--json', '--out', outDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const [code] = await once(child, 'exit');
  const ms = performance.now() - start;
  if (child.stdout.readable) await once(child.stdout, 'end');
  if (code !== 0) throw new Error(`cli failed (${code}):\n${stderr}`);
  const report = JSON.parse(stdout);
  if (report.sheets !== 1) throw new Error(`cli made ${report.sheets} sheets, expected 1`);
  return ms;
}

/** The job alone in a fresh process, as the worker runs it (bench/measure.mjs native, no audio). */
function runEngine(path) {
  const r = spawnSync(process.execPath, [join(ROOT, 'bench', 'measure.mjs'), 'native', path, '3x3', '', ''], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`engine measurement failed:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()).ms;
}

/** One hosted job; its phases from the server's own log lines. */
async function runServer(server, path) {
  const from = server.logs.length;
  const r = await upload(server, server.key, { file: path, fields: { density: '3x3' } });
  if (r.status !== 200) throw new Error(`server answered ${r.status}: ${JSON.stringify(r.body)}`);
  if (r.body.sheets !== 1) throw new Error(`server made ${r.body.sheets} sheets, expected 1`);
  const after = (msg) => server.waitFor((l) => l.msg === msg && server.logs.indexOf(l) >= from);
  const [received, charged, done] = await Promise.all(
    ['upload received', 'job charged', 'job done'].map((m) => after(m)),
  );
  return {
    ms: r.ms,
    megabytes: statSync(path).size / 1e6,
    upload: received.time - r.start,
    prepare: charged.time - received.time,
    render: done.time - charged.time,
    answer: r.end - done.time,
  };
}

const fmtS = (ms) => `${(ms / 1000).toFixed(2)} s`;
const fmtMs = (ms) => `${ms >= 0 ? '' : '−'}${Math.abs(Math.round(ms))} ms`;
const fmtMb = (mb) => (mb === undefined ? '-' : `${mb.toFixed(0)} MB`);
const verdict = (ok) => (ok ? 'PASS' : 'FAIL');

async function latency() {
  const path = clip('1080p-60s', { seconds: 60, size: '1920x1080' });
  const megabytes = statSync(path).size / 1e6;
  const server = await start();
  const outRoot = tempDir('vidsheet-bench-cli-');
  const methods = {
    cli: (run) => runCli(path, join(outRoot, `run-${run}`)),
    engine: async () => runEngine(path),
    server: () => runServer(server, path),
  };
  const names = Object.keys(methods);
  for (const name of names) await methods[name]('warmup'); // unmeasured
  const results = Object.fromEntries(names.map((n) => [n, []]));
  for (let run = 0; run < RUNS; run++) {
    const order = names.map((_, i) => names[(i + run) % names.length]);
    for (const name of order) results[name].push(await methods[name](run));
  }
  console.error('bench: added latency done');
  const hosted = results.server;
  return {
    megabytes,
    cli: median(results.cli),
    engine: median(results.engine),
    server: median(hosted.map((r) => r.ms)),
    upload: median(hosted.map((r) => r.upload)),
    prepare: median(hosted.map((r) => r.prepare)),
    render: median(hosted.map((r) => r.render)),
    answer: median(hosted.map((r) => r.answer)),
    rate: median(hosted.map((r) => r.megabytes / (r.upload / 1000))),
    // Everything but the upload and the render window: probe, ledger charge, IPC, the answer.
    rest: median(hosted.map((r) => r.ms - r.upload - r.render)),
    // Per run, then the median: request to response minus that run's own render window.
    minusRender: median(hosted.map((r) => r.ms - r.render)),
  };
}

async function uploadMemory() {
  const big = await randomFile();
  const server = await start();
  // Warm-up, unmeasured: one small upload, so the first multipart request's code is loaded.
  const small = join(tempDir('vidsheet-bench-small-'), 'small.bin');
  writeFileSync(small, randomBytes(1024 * 1024));
  await upload(server, server.key, { file: small, fields: { density: '3x3' } });
  await sleep(500);
  const workerPid = server.workerPid();
  const baseline = { server: procStatus(server.pid, 'VmRSS'), worker: procStatus(workerPid, 'VmRSS') };
  const clientBaseline = process.memoryUsage.rss() / 1024 / 1024;
  const peak = { server: 0, worker: 0, client: 0 };
  let samples = 0;
  let uploadMs = 0;
  const hwm = { server: 0, worker: 0 };
  const reset = resetPeak(server.pid) && resetPeak(workerPid);
  const answers = [];
  const mbPerS = [];
  for (let run = 0; run < RUNS; run++) {
    const sample = () => {
      samples++;
      peak.server = Math.max(peak.server, procStatus(server.pid, 'VmRSS') ?? 0);
      peak.worker = Math.max(peak.worker, procStatus(server.workerPid(), 'VmRSS') ?? 0);
      peak.client = Math.max(peak.client, process.memoryUsage.rss() / 1024 / 1024);
    };
    const timer = setInterval(sample, 20);
    sample();
    const r = await upload(server, server.key, { file: big, fields: { density: '3x3' } });
    sample();
    clearInterval(timer);
    uploadMs += r.ms;
    answers.push(`${r.status} ${r.body?.error ?? ''}`.trim());
    mbPerS.push(UPLOAD_BYTES / 1e6 / (r.ms / 1000));
  }
  if (reset) {
    hwm.server = procStatus(server.pid, 'VmHWM');
    hwm.worker = procStatus(server.workerPid(), 'VmHWM');
  }
  console.error('bench: upload memory done');
  return {
    baseline,
    clientBaseline,
    peak,
    samples,
    uploadMs,
    hwm: reset ? hwm : undefined,
    answers,
    mbPerS: median(mbPerS),
  };
}

let lat;
let mem;
try {
  lat = await latency();
  mem = await uploadMemory();
} finally {
  await cleanUp();
}

console.log(
  `\nvidsheet hosted benchmark: median of ${RUNS} runs each, alternated (2 cores), 127.0.0.1 only\n`,
);
console.log(
  `Added latency: one 3x3 job on a 60 s 1080p clip (${lat.megabytes.toFixed(0)} MB upload), after one unmeasured warm-up of each\n`,
);
console.log(
  '| cli (spawn → exit) | engine alone (in-process, no audio) | server (request → response) | server − cli | server − engine | request→response − render (log) |',
);
console.log('|---|---|---|---|---|---|');
console.log(
  `| ${fmtS(lat.cli)} | ${fmtS(lat.engine)} | ${fmtS(lat.server)} | ${fmtMs(lat.server - lat.cli)} | ${fmtMs(lat.server - lat.engine)} | ${fmtMs(lat.minusRender)} |`,
);
console.log('\nServer time by phase (medians; from its log lines, pino `time`, 1 ms resolution)\n');
console.log(
  '| upload (start → "upload received") | upload rate | probe + charge (→ "job charged") | render + store (→ "job done") | answer (→ response read) | request→response − upload − render |',
);
console.log('|---|---|---|---|---|---|');
console.log(
  `| ${fmtMs(lat.upload)} | ${lat.rate.toFixed(0)} MB/s | ${fmtMs(lat.prepare)} | ${fmtMs(lat.render)} | ${fmtMs(lat.answer)} | ${fmtMs(lat.rest)} |`,
);
console.log(
  '\nNotes: the cli also pays Node start-up and module loading (~0.1-0.2 s) and draws the audio envelope, which the server does not, so server − cli flatters the server; engine alone is the job as the server’s worker runs it (bench/measure.mjs native, clock after imports); request→response − render still contains the upload and the probe.',
);

console.log(
  `\nUpload memory: ${(UPLOAD_BYTES / 1e6).toFixed(0)} MB (299 MiB) of random bytes streamed in, default caps, ${RUNS} uploads (answers: ${[...new Set(mem.answers)].join(', ')}; median ${mem.mbPerS.toFixed(0)} MB/s)\n`,
);
console.log(
  `| process | RSS before | peak RSS during uploads (${mem.samples} samples, one per ${(mem.uploadMs / mem.samples).toFixed(0)} ms on average) | peak RSS during uploads (VmHWM) |`,
);
console.log('|---|---|---|---|');
console.log(
  `| server | ${fmtMb(mem.baseline.server)} | ${fmtMb(mem.peak.server)} | ${fmtMb(mem.hwm?.server)} |`,
);
console.log(
  `| worker | ${fmtMb(mem.baseline.worker)} | ${fmtMb(mem.peak.worker)} | ${fmtMb(mem.hwm?.worker)} |`,
);
console.log(`| this client | ${fmtMb(mem.clientBaseline)} | ${fmtMb(mem.peak.client)} | - |`);

const serverPeak = Math.max(mem.peak.server, mem.hwm?.server ?? 0);
console.log('');
// The target is what the server itself adds (parsing, auth, probe, ledger, IPC, storage, answer):
// moving the bytes over the wire is the network's cost and is shown apart, not hidden.
console.log(
  `target: server added latency < ${LATENCY_TARGET_MS} ms at the median (request→response − upload − render): ${fmtMs(lat.rest)} ${verdict(lat.rest < LATENCY_TARGET_MS)}`,
);
console.log(
  `end to end, for the record: server − cli ${fmtMs(lat.server - lat.cli)}, server − engine alone ${fmtMs(lat.server - lat.engine)}; both include moving ${lat.megabytes.toFixed(0)} MB over loopback (${fmtMs(lat.upload)} at ${lat.rate.toFixed(0)} MB/s), which the CLI does not do`,
);
console.log(
  `target: server peak RSS < ${RSS_TARGET_MB} MB while a 299 MiB upload streams: ${fmtMb(serverPeak)} ${verdict(serverPeak < RSS_TARGET_MB)}`,
);
