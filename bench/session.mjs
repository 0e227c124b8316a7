#!/usr/bin/env node
/**
 * Video sessions benchmark (`npm run bench -- --session [--size 1920x1080] [--minutes 30] [--no-s3]`),
 * DESIGN §9: a long clip uploaded once, then a 3-step zoom (overview 3x3, a 60 s range at 4x4, a 2 s
 * moment at 6x6), each step timed three ways on the same machine:
 *   session   POST /v1/videos/{id}/sheets on the instance that kept the video (sheets in the data dir:
 *             the video is read in place, no copy, no probe)
 *   vidsheet  POST /v1/vidsheet with the whole upload each time (windows are ignored there: the
 *             whole clip at that density, which is all it can do)
 *   cli       `node bin/vidsheet.js clip --start --end --density --json`, spawn to exit
 * With S3 (moto on loopback, `python3 -m moto.server`): the video kept in the bucket, the range zoomed
 * cold (one download into the instance's cache, what another instance's first zoom pays) and then warm
 * (from the copy). Everything goes to 127.0.0.1 only.
 */
import { execFileSync } from 'node:child_process';
import { openAsBlob, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { clip, ROOT } from './clip.mjs';
import { MOTO_ENV, startMoto } from './moto.mjs';
import { cleanUp, sleep, startServer, tempDir } from './server.mjs';

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const SIZE = flag('size', '1920x1080');
const MINUTES = Number(flag('minutes', '30'));
const CLI_BIN = join(ROOT, 'bin', 'vidsheet.js');
const EMAIL = 'bench@example.com';
const STEPS = [
  { name: 'overview 3x3', density: '3x3' },
  { name: '60 s range 4x4', density: '4x4', start: 600, end: 660 },
  { name: '2 s moment 6x6', density: '6x6', start: 630, end: 632 },
];

const children = [];
const ms = (t0) => Math.round(performance.now() - t0);

/** A server with a funded key (`server.key`); `env` adds to the defaults. */
async function start(env = {}) {
  const server = await startServer({
    prefix: 'vidsheet-bench-session-',
    // A long synthetic clip may pass the default 300 MB upload cap; the cap is not what is measured.
    env: { VIDSHEET_MAX_UPLOAD_MB: '4000', ...env },
  });
  server.key = (await server.account(100000, EMAIL)).key;
  return server;
}

async function post(server, path, body, headers = {}) {
  const t0 = performance.now();
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.key}`, ...headers },
    body,
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${path}: ${res.status} ${text}`);
  return { ms: ms(t0), body: JSON.parse(text) };
}
const form = async (file, fields = {}) => {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  f.append('video', await openAsBlob(file), basename(file));
  return f;
};
const keep = async (server, file) => post(server, '/v1/videos', await form(file));
const zoom = (server, id, step) =>
  post(
    server,
    `/v1/videos/${id}/sheets`,
    JSON.stringify({ density: step.density, start: step.start, end: step.end }),
    { 'content-type': 'application/json' },
  );

function cli(file, step) {
  const out = tempDir('vidsheet-bench-cli-');
  const args = [CLI_BIN, file, '--density', step.density, '--json', '--out', out];
  if (step.start !== undefined) args.push('--start', String(step.start), '--end', String(step.end));
  const t0 = performance.now();
  execFileSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  return ms(t0);
}

const file = clip(`${SIZE.split('x')[1]}p-${MINUTES}min`, { seconds: MINUTES * 60, size: SIZE });
const mb = (statSync(file).size / 1024 / 1024).toFixed(0);
try {
  const server = await start();
  const rows = [];
  const up = await keep(server, file);
  const videoId = up.body.video_id;
  rows.push(['upload once (POST /v1/videos)', up.ms, '', '', '']);
  for (const step of STEPS) {
    const session = await zoom(server, videoId, step);
    const whole = await post(server, '/v1/vidsheet', await form(file, { density: step.density }));
    const local = cli(file, step);
    rows.push([step.name, session.ms, whole.ms, local, session.ms - local]);
  }
  console.log(`\nclip: ${basename(file)} (${SIZE}, ${MINUTES} min, ${mb} MB); sheets in the data dir\n`);
  console.log('| step | session (ms) | /v1/vidsheet upload (ms) | CLI (ms) | session − CLI (ms) |');
  console.log('|---|---:|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);

  if (!argv.includes('--no-s3')) {
    const moto = await startMoto();
    children.push(moto.child);
    const env = { VIDSHEET_STORAGE_URL: moto.url, ...MOTO_ENV };
    // One instance over the bucket: its first zoom is what any other instance's cold zoom pays (one
    // download into its cache), its second a warm one. The sharing itself is tested with PostgreSQL
    // and two instances (test/server/sessions-scale-out.test.ts).
    const a = await start(env);
    const shared = await keep(a, file);
    console.log(`\nS3 (moto on loopback), kept through A in ${shared.ms} ms:`);
    console.log('| zoom on the kept video | ms | copy |');
    console.log('|---|---:|---|');
    for (const [server, label] of [
      [a, 'A cold (download)'],
      [a, 'A warm (cache hit)'],
    ]) {
      const r = await zoom(server, shared.body.video_id, STEPS[1]);
      const how = server.logs.findLast((l) => l.msg === 'zoom on a kept video')?.copy;
      console.log(`| ${label}: ${STEPS[1].name} | ${r.ms} | ${how} |`);
    }
  }
} finally {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  await sleep(500);
  await cleanUp();
}
