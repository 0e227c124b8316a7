#!/usr/bin/env node
/**
 * Soak bench (`npm run bench -- --soak [minutes]`, default 2; `--postgres <url>` for a PostgreSQL
 * ledger; `--stalled-uploads N`, `--paced-uploads N`, `--abandoned N`, `--stalled-fetches N` change the
 * attackers' mix, default 4, 2, 2, 4): one `vidsheet-server` on loopback with its default limits (real stall timings: cut after
 * 20 s idle, or 64 KiB short in 30 s after 10 s), under a mixed load for N minutes:
 *   - honest paying uploaders (each from its own 127.0.1.x address) posting the committed sample,
 *     retrying a `429 busy` after 0.5 s;
 *   - an honest keyed `/mcp` client (its own address) fetching a small clip from a local origin;
 *   - stalled uploaders (keys with credits, each from its own 127.0.0.x address): 64 KiB then
 *     silence, or a byte a second, reconnecting when cut;
 *   - paced uploaders (likewise): 3 KB/s, just above the stall pace (64 KiB per 30 s, ~2.2 KB/s), so
 *     never cut by the stall rule; only taking over their slots (stall.ts `BEHIND_RULE`) frees them;
 *   - abandoned uploads (half a body, then the socket dropped);
 *   - stalled anonymous `/mcp` fetches (the origin sends headers and then nothing, or a byte every
 *     0.5 s), each from its own address.
 * Printed every 30 s: the server's and its worker's RSS, the server's open descriptors, files under
 * `<data>/work`, honest jobs served and refused. At the end, one table: honest requests served, their
 * p50/p95 latency, the longest an honest client waited for a place (first attempt to the accepted
 * one), stalled senders cut, credits charged to stalled senders (must be 0), descriptors and RSS at
 * start and end. Everything goes to 127.0.0.0/8 only.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch } from 'undici';
import { ROOT } from './clip.mjs';
import { freePort } from './free-port.mjs';

const argv = process.argv.slice(2);
const minutesArg = argv[0] !== undefined && /^\d+(\.\d+)?$/.test(argv[0]) ? argv[0] : undefined;
const MINUTES = Number(minutesArg ?? '2');
const pgIndex = argv.indexOf('--postgres');
const DATABASE_URL = pgIndex >= 0 ? argv[pgIndex + 1] : undefined;
const SERVER_BIN = join(ROOT, 'bin', 'vidsheet-server.js');
const SAMPLE = readFileSync(join(ROOT, 'fixtures', 'sample.mp4'));
const count = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const HONEST_UPLOADERS = 2;
// The default mix holds more transfers (12) than an instance allows (VIDSHEET_MAX_TRANSFERS, 8).
const STALLED_UPLOADERS = count('stalled-uploads', 4);
const PACED_UPLOADERS = count('paced-uploads', 2);
const ABANDONERS = count('abandoned', 2);
const STALLED_FETCHERS = count('stalled-fetches', 4);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (xs, p) => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

// --- the origin the /mcp fetches go to --------------------------------------------------------
const origin = createHttpServer((req, res) => {
  if (req.url === '/sample.mp4') {
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': SAMPLE.length }).end(SAMPLE);
  } else if (req.url === '/silent.mp4') {
    res.writeHead(200, { 'content-type': 'video/mp4' });
    res.write(SAMPLE.subarray(0, 1024));
  } else if (req.url === '/trickle.mp4') {
    res.writeHead(200, { 'content-type': 'video/mp4' });
    const timer = setInterval(() => res.write('x'), 500);
    res.on('close', () => clearInterval(timer));
  } else res.writeHead(404).end();
});
await new Promise((resolve) => origin.listen(0, '127.0.0.1', resolve));
const originPort = origin.address().port;

// --- the server ---------------------------------------------------------------------------------
const root = mkdtempSync(join(tmpdir(), 'vidsheet-soak-'));
const port = await freePort();
const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VIDSHEET_')));
Object.assign(env, {
  HOST: '127.0.0.1',
  PORT: String(port),
  VIDSHEET_BASE_URL: `http://127.0.0.1:${port}`,
  VIDSHEET_DATA_DIR: join(root, 'data'),
  VIDSHEET_FETCH_ALLOW: `127.0.0.1:${originPort}`,
  // The load's own honest calls must not be flood-limited; the stalled ones come from many addresses.
  VIDSHEET_MCP_FLOOD_PER_MIN: '600',
  TMPDIR: join(root, 'tmp'),
  ...(DATABASE_URL ? { VIDSHEET_DATABASE_URL: DATABASE_URL } : {}),
});
mkdirSync(env.TMPDIR, { recursive: true });
const child = spawn(process.execPath, [SERVER_BIN], { env, stdio: ['ignore', 'pipe', 'inherit'] });
const logs = [];
let pending = '';
let listening;
const ready = new Promise((resolve) => {
  listening = resolve;
});
child.stdout.on('data', (chunk) => {
  pending += chunk;
  const lines = pending.split('\n');
  pending = lines.pop() ?? '';
  for (const text of lines) {
    try {
      const line = JSON.parse(text);
      logs.push(line);
      if (line.msg === 'vidsheet-server listening') listening(line.address);
    } catch {
      // not a log line
    }
  }
});
const url = await ready;
const admin = (...args) => {
  const r = spawnSync(process.execPath, [SERVER_BIN, 'admin', ...args], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`admin ${args[0]} failed:\n${r.stderr}`);
  return r.stdout.trim();
};
const newAccount = (credits) => {
  const email = `soak-${randomBytes(4).toString('hex')}@example.com`;
  const key = admin('create-key', '--email', email);
  admin('add-credits', '--email', email, '--credits', String(credits));
  return { email, key, credits };
};

// --- measuring the server -----------------------------------------------------------------------
const rssMb = (pid) => {
  try {
    const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
    return Math.round(kb / 1024);
  } catch {
    return Number.NaN;
  }
};
const fds = (pid) => {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
};
const workerPid = () => logs.findLast((l) => l.msg === 'job worker started')?.workerPid;
const workFiles = () => readdirSync(join(root, 'data', 'work')).length;
const sample = () => ({
  server: rssMb(child.pid),
  worker: rssMb(workerPid()),
  fds: fds(child.pid),
  work: workFiles(),
});

// --- the load -----------------------------------------------------------------------------------
const stats = {
  honestServed: 0,
  honestBusy: 0,
  honestMcpBusy: 0,
  honestMcpServed: 0,
  honestFailed: 0,
  latencies: [],
  maxWaitForPlace: 0,
  uploadsCut: 0,
  uploadsRefused: 0,
  pacedCut: 0,
  pacedRefused: 0,
  abandoned: 0,
  fetchesCut: 0,
  fetchesRefused: 0,
  statuses: {},
};
let running = true;
/** Set when the load starts (after the accounts are made). */
let until = Number.POSITIVE_INFINITY;

/** One multipart upload of `body` from `localAddress`: resolves with the status and the text. */
function post(key, body, localAddress) {
  const boundary = `soak-${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="video"; filename="sample.mp4"\r\nContent-Type: video/mp4\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return new Promise((resolve) => {
    const req = request(`${url}/v1/vidsheet`, {
      method: 'POST',
      agent: false,
      localAddress,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(head.length + body.length + tail.length),
      },
    });
    req.on('error', (error) => resolve({ status: 0, text: error.message }));
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, text }));
      res.on('error', (error) => resolve({ status: 0, text: error.message }));
    });
    req.end(Buffer.concat([head, body, tail]));
  });
}

async function honestUploader(i, account) {
  const from = `127.0.1.${10 + i}`;
  while (running && Date.now() < until) {
    const first = Date.now();
    for (;;) {
      const started = Date.now();
      const answer = await post(account.key, SAMPLE, from);
      stats.statuses[answer.status] = (stats.statuses[answer.status] ?? 0) + 1;
      if (answer.status === 429) {
        stats.honestBusy++;
        await sleep(500);
        continue;
      }
      stats.maxWaitForPlace = Math.max(stats.maxWaitForPlace, started - first);
      if (answer.status === 200) {
        stats.honestServed++;
        stats.latencies.push(Date.now() - first);
      } else stats.honestFailed++;
      break;
    }
  }
}

const agents = [];
/** An MCP client whose every request leaves from `localAddress`. */
async function mcpClient(localAddress, headers = {}) {
  // undici ignores a `localAddress` connect option: the socket is made here, bound to it.
  const dispatcher = new Agent({
    connect: (options, callback) => {
      const socket = connect({ host: options.hostname, port: Number(options.port), localAddress });
      socket.once('connect', () => callback(null, socket));
      socket.once('error', (error) => callback(error, null));
    },
  });
  agents.push(dispatcher);
  const client = new Client({ name: 'vidsheet-soak', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers },
      fetch: (input, init) => undiciFetch(input, { ...init, dispatcher }),
    }),
  );
  return client;
}

const callTool = (client, path) =>
  client.callTool(
    { name: 'vidsheet_video', arguments: { video_url: `http://127.0.0.1:${originPort}${path}` } },
    undefined,
    { timeout: 600_000 },
  );

async function honestFetcher(account) {
  const client = await mcpClient('127.0.1.50', { authorization: `Bearer ${account.key}` });
  while (running && Date.now() < until) {
    const first = Date.now();
    for (;;) {
      const started = Date.now();
      const result = await callTool(client, '/sample.mp4').catch((error) => ({
        isError: true,
        content: [{ text: String(error) }],
      }));
      const text = result.content?.[0]?.text ?? '';
      if (result.isError && text.includes('retry')) {
        stats.honestBusy++;
        stats.honestMcpBusy++;
        await sleep(500);
        continue;
      }
      stats.maxWaitForPlace = Math.max(stats.maxWaitForPlace, started - first);
      if (!result.isError) {
        stats.honestServed++;
        stats.honestMcpServed++;
        stats.latencies.push(Date.now() - first);
      } else stats.honestFailed++;
      break;
    }
  }
  await client.close();
}

/**
 * A raw upload that sends 64 KiB of an 8 MiB body, then nothing (`idle`), a byte a second (`trickle`),
 * or 3 KB/s (`paced`: just above the stall pace, topped up every 100 ms).
 */
function stalledUpload(key, from, mode) {
  return new Promise((resolve) => {
    const boundary = 'soak-stalled';
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="video"; filename="s.mp4"\r\n\r\n`;
    const socket = connect({ port, host: '127.0.0.1', localAddress: from });
    let received = '';
    let timer;
    socket.on('error', () => {});
    socket.on('data', (c) => (received += c));
    socket.on('connect', () => {
      socket.write(
        `POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\n` +
          `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${8 * 1024 * 1024}\r\n\r\n${head}`,
      );
      socket.write(Buffer.alloc(64 * 1024, 0x2a));
      if (mode === 'trickle') timer = setInterval(() => socket.destroyed || socket.write('x'), 1000);
      if (mode === 'paced') {
        // Topped up to 3 KB/s since the start at each tick, so a busy event loop does not slow it.
        const from = Date.now();
        let sent = 0;
        timer = setInterval(() => {
          const due = Math.floor((Date.now() - from) * 3);
          if (due > sent && !socket.destroyed) socket.write(Buffer.alloc(due - sent, 0x2a));
          sent = Math.max(sent, due);
        }, 100);
      }
    });
    // Stop at the end of the soak too: the attacker gives up with the bench (a paced upload that is
    // never cut would otherwise hold the bench open for the 46 min its body takes).
    const giveUp = setInterval(() => (!running || Date.now() >= until) && socket.destroy(), 200);
    socket.on('close', () => {
      clearInterval(timer);
      clearInterval(giveUp);
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0));
    });
  });
}

async function stalledUploader(i, account) {
  const from = `127.0.0.${10 + i}`;
  while (running && Date.now() < until) {
    const status = await stalledUpload(account.key, from, i % 2 ? 'trickle' : 'idle');
    if (status === 408) stats.uploadsCut++;
    else if (status === 429) stats.uploadsRefused++;
    if (status === 429) await sleep(1000);
  }
}

async function pacedUploader(i, account) {
  const from = `127.0.0.${70 + i}`;
  while (running && Date.now() < until) {
    const status = await stalledUpload(account.key, from, 'paced');
    if (status === 408) stats.pacedCut++;
    else if (status === 429) {
      stats.pacedRefused++;
      await sleep(1000);
    }
  }
}

async function abandoner(i, account) {
  const from = `127.0.0.${30 + i}`;
  while (running && Date.now() < until) {
    const socket = connect({ port, host: '127.0.0.1', localAddress: from });
    socket.on('error', () => {});
    await new Promise((resolve) => socket.on('connect', resolve));
    socket.write(
      `POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${account.key}\r\n` +
        `Content-Type: multipart/form-data; boundary=b\r\nContent-Length: ${SAMPLE.length + 200}\r\n\r\n` +
        '--b\r\nContent-Disposition: form-data; name="video"; filename="a.mp4"\r\n\r\n',
    );
    socket.write(SAMPLE.subarray(0, SAMPLE.length / 2));
    await sleep(2000);
    socket.destroy();
    stats.abandoned++;
    await sleep(1000);
  }
}

async function stalledFetcher(i) {
  const client = await mcpClient(`127.0.0.${50 + i}`);
  while (running && Date.now() < until) {
    const result = await callTool(client, i % 2 ? '/trickle.mp4' : '/silent.mp4').catch((error) => ({
      isError: true,
      content: [{ text: String(error) }],
    }));
    const text = result.content?.[0]?.text ?? '';
    if (text.startsWith('could not fetch the video')) stats.fetchesCut++;
    else if (text.includes('retry')) {
      stats.fetchesRefused++;
      await sleep(1000);
    }
  }
  await client.close();
}

const start = sample();
const honest = Array.from({ length: HONEST_UPLOADERS }, () => newAccount(1000));
const honestMcp = newAccount(1000);
// Above the allowance floor (7), so a balance moves only by charges.
const stalled = Array.from({ length: STALLED_UPLOADERS + ABANDONERS + PACED_UPLOADERS }, () =>
  newAccount(50),
);
const began = Date.now();
until = began + MINUTES * 60_000;
console.log(
  `soak: ${MINUTES} min against ${url} (${DATABASE_URL ? 'PostgreSQL' : 'SQLite'}); attackers: ${STALLED_UPLOADERS} stalled uploads, ${PACED_UPLOADERS} paced uploads, ${ABANDONERS} abandoned, ${STALLED_FETCHERS} stalled fetches`,
);
console.log('  t(s)  server RSS MB  worker RSS MB  server fds  work files  honest served  honest 429  cut');
const minute = setInterval(() => {
  const s = sample();
  const t = Math.round((Date.now() - began) / 1000);
  console.log(
    `  ${String(t).padStart(4)}  ${String(s.server).padStart(13)}  ${String(s.worker).padStart(13)}  ${String(s.fds).padStart(10)}  ${String(s.work).padStart(10)}  ${String(stats.honestServed).padStart(13)}  ${String(stats.honestBusy).padStart(10)}  ${String(stats.uploadsCut + stats.pacedCut + stats.fetchesCut).padStart(3)}`,
  );
}, 30_000);

await Promise.all([
  ...honest.map((account, i) => honestUploader(i, account)),
  honestFetcher(honestMcp),
  ...Array.from({ length: STALLED_UPLOADERS }, (_, i) => stalledUploader(i, stalled[i])),
  ...Array.from({ length: ABANDONERS }, (_, i) => abandoner(i, stalled[STALLED_UPLOADERS + i])),
  ...Array.from({ length: PACED_UPLOADERS }, (_, i) =>
    pacedUploader(i, stalled[STALLED_UPLOADERS + ABANDONERS + i]),
  ),
  ...Array.from({ length: STALLED_FETCHERS }, (_, i) => stalledFetcher(i)),
]);
running = false;
clearInterval(minute);
// The clients' kept-alive connections go too: the end measure is the server's own.
await Promise.all(agents.map((agent) => agent.destroy()));
// Idle: give the server a moment to finish its cleanups and close the dropped sockets, then measure.
await sleep(5000);
const end = sample();
const charged = stalled.reduce((sum, account) => {
  const shown = JSON.parse(admin('show', '--email', account.email));
  return sum + (account.credits - shown.balance) + shown.usage.length;
}, 0);

const rows = [
  ['honest requests served', stats.honestServed],
  ['honest requests failed (not 200, not 429)', stats.honestFailed],
  ['honest 429 busy (retried)', stats.honestBusy],
  ['of which honest /mcp: served / busy', `${stats.honestMcpServed} / ${stats.honestMcpBusy}`],
  ['honest latency p50 (ms, first attempt to answer)', percentile(stats.latencies, 50)],
  ['honest latency p95 (ms)', percentile(stats.latencies, 95)],
  ['max wait for a queue place (ms)', stats.maxWaitForPlace],
  ['stalled uploads cut (408)', stats.uploadsCut],
  ['stalled uploads refused (429)', stats.uploadsRefused],
  ['paced uploads taken over (408)', stats.pacedCut],
  ['paced uploads refused (429)', stats.pacedRefused],
  ['abandoned uploads', stats.abandoned],
  ['stalled fetches cut', stats.fetchesCut],
  ['stalled fetches refused (busy)', stats.fetchesRefused],
  ['credits charged to stalled senders (must be 0)', charged],
  ['server open fds start / end', `${start.fds} / ${end.fds}`],
  ['server RSS MB start / end', `${start.server} / ${end.server}`],
  ['worker RSS MB start / end', `${start.worker} / ${end.worker}`],
  ['files under <data>/work at the end', end.work],
  ['honest answers by status', JSON.stringify(stats.statuses)],
];
console.log('');
console.log('| measure | value |\n|---|---|');
for (const [name, value] of rows) console.log(`| ${name} | ${value} |`);

child.kill('SIGTERM');
await new Promise((resolve) => child.on('close', resolve));
origin.closeAllConnections();
origin.close();
rmSync(root, { recursive: true, force: true });
process.exit(charged === 0 && end.work === 0 ? 0 : 1);
