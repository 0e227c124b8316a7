#!/usr/bin/env node
/**
 * Soak bench (`npm run bench -- --soak [minutes]`, default 2; `--postgres <url>` for a PostgreSQL
 * ledger; `--s3` for sheets and kept videos in S3-compatible storage (moto on loopback); `--stalled-uploads N`, `--paced-uploads N`, `--abandoned N`, `--stalled-fetches N`,
 * `--slow-bodies N` change the attackers' mix, default 4, 2, 2, 4, 16): one `vidsheet-server` on loopback with its default limits (real
 * stall timings: cut after 20 s idle, or 64 KiB short in 30 s after 10 s), under a mixed load for N
 * minutes (issue #21 "Soak"):
 *   - honest paying uploaders (each from its own 127.0.1.x address) posting real files in turn: the
 *     committed sample and a handful of small corpus files (fixtures/corpus.json, checked against
 *     their sha256), retrying a `429 busy` after 0.5 s;
 *   - an honest keyed `/mcp` client (its own address) fetching the same files from a local origin;
 *   - keys-page sign-ins, one every 30 s (under the 30 codes per address per 10 min): the page, `Send
 *     code`, the code from the mail an SMTP server in this process receives, `Sign in`, `Create key`
 *     (the key shown once), `Sign out`, as form posts with a cookie jar;
 *   - bad inputs, one every 2 s, each answer checked: an HLS playlist and a text named .mp4 (422
 *     unreadable_video), a multipart body without its closing boundary and a bad density (422
 *     bad_request), a wrong key (401 invalid_key);
 *   - stalled uploaders (keys with credits, each from its own 127.0.0.x address): 64 KiB then
 *     silence, or a byte a second, reconnecting when cut;
 *   - paced uploaders (likewise): 3 KB/s, just above the stall pace (64 KiB per 30 s, ~2.2 KB/s), so
 *     never cut by the stall rule; only taking over their slots (stall.ts `BEHIND_RULE`) frees them;
 *   - abandoned uploads (half a body, then the socket dropped);
 *   - stalled anonymous `/mcp` fetches (the origin sends headers and then nothing, or a byte every
 *     0.5 s), each from its own address;
 *   - slow bodies on the routes that are not uploads (`/stripe/webhook`, `/keys/code`, `/mcp`, a
 *     zoom), a byte a second of a 4 KB body, each from its own address: every body has a 30 s
 *     deadline (DESIGN §5a), so each must be answered `408` or closed within 40 s.
 * Every 10 minutes (once, at half time, in a shorter run) and at the end the load pauses until no
 * client request is in flight, and `<data>/work` must then be empty (within 60 s: the server may still
 * be cutting a fetch its client gave up on).
 * Printed every minute: the server's and its worker's RSS, the server's open descriptors, files under
 * `<data>/work`, jobs done and refused, senders cut, sign-ins, bad inputs, 5xx. At the end: a table
 * (honest service, attackers, answers by status with 5xx split into provoked and unexpected), the
 * ledger check (each account's balance equals the sum of its entries, and each entry's balance_after
 * the running sum, read from the database), and the trend check (least-squares slope of RSS and
 * descriptors over the last 20 minutes, or the last two thirds of a shorter run), each with a verdict.
 * Exit status 0 only when every target holds. Everything goes to 127.0.0.0/8 only.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { connect } from 'node:net';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { Agent, fetch as undiciFetch } from 'undici';
import { openDatabase } from '../dist/server/db/open.js';
import { corpusDir, loadManifest } from '../fixtures/corpus.mjs';
import { ROOT } from './clip.mjs';
import { MOTO_ENV, startMoto } from './moto.mjs';
import { openFds, procStatus, sleep, startServer, upload } from './server.mjs';
import { ledgerBalances, slope } from './soak-checks.mjs';

const argv = process.argv.slice(2);
const minutesArg = argv[0] !== undefined && /^\d+(\.\d+)?$/.test(argv[0]) ? argv[0] : undefined;
const MINUTES = Number(minutesArg ?? '2');
const pgIndex = argv.indexOf('--postgres');
const DATABASE_URL = pgIndex >= 0 ? argv[pgIndex + 1] : undefined;
const moto = argv.includes('--s3') ? await startMoto('soak') : undefined;
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
const SLOW_BODIES = count('slow-bodies', 16);
/** DESIGN §5a: a body other than an upload arrives within 30 s; a slow one is cut by then (and a margin). */
const SLOW_BODY_CUT_MS = 40_000;
const SIGN_IN_EVERY_MS = 30_000;
const BAD_INPUT_EVERY_MS = 2_000;
/** Trend window: the last 20 minutes, or the last two thirds of a shorter run. */
const TREND_MINUTES = MINUTES >= 30 ? 20 : (MINUTES * 2) / 3;
/** Flat: the fitted line rises less than this across the window. */
const FLAT = { rssMb: 10, fds: 3 };
const IDLE_EMPTY_WITHIN_MS = 60_000;
/**
 * After an idle check the load comes back to a heap V8 shrank while idle (its memory reducer runs
 * after a few quiet seconds): the first 90 s are a new warm-up, left out of the trend like the
 * pause itself (the fit over every load sample is printed too).
 */
const REWARM_S = 90;
/** 5xx the load provokes on purpose: none (no input is meant to fail after its charge). */
const PROVOKED_5XX = new Set();

const percentile = (xs, p) => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};
const mb = (value) => (value === undefined ? Number.NaN : Math.round(value));

// --- the files honest clients send ---------------------------------------------------------------
/** Small real files of several containers and codecs, each a few hundred KB at most. */
const CORPUS_PICKS = [
  'imageio-realshort.mp4',
  'mimetype-webm.webm',
  'mimetype-mov.mov',
  'devede-base_ntsc.mpg',
  'gem-homer.avi',
  'mimetype-3gp.3gp',
];
async function realFiles() {
  const manifest = await loadManifest();
  const dir = corpusDir();
  const files = [{ name: 'sample.mp4', bytes: readFileSync(join(ROOT, 'fixtures', 'sample.mp4')) }];
  for (const name of CORPUS_PICKS) {
    const entry = manifest.files.find((f) => f.name === name);
    let bytes;
    try {
      bytes = readFileSync(join(dir, name));
    } catch {
      throw new Error(`corpus file ${name} is missing from ${dir}: run \`node fixtures/corpus.mjs\` first`);
    }
    if (createHash('sha256').update(bytes).digest('hex') !== entry?.sha256) {
      throw new Error(`corpus file ${name} does not match its sha256 in fixtures/corpus.json`);
    }
    files.push({ name, bytes });
  }
  return files;
}
const FILES = await realFiles();

// --- the origin the /mcp fetches go to --------------------------------------------------------
const SAMPLE = FILES[0].bytes;
const origin = createHttpServer((req, res) => {
  const file = FILES.find((f) => req.url === `/${f.name}`);
  if (file) {
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': file.bytes.length }).end(file.bytes);
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

// --- the mailbox the sign-in codes arrive in ------------------------------------------------------
const mails = [];
const smtp = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  logger: false,
  onData(stream, session, callback) {
    simpleParser(stream)
      .then((parsed) => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address).join(','), text: parsed.text ?? '' });
        callback();
      })
      .catch(callback);
  },
});
await new Promise((resolve) => smtp.listen(0, '127.0.0.1', resolve));

// --- the server ---------------------------------------------------------------------------------
const server = await startServer({
  prefix: 'vidsheet-soak-',
  env: {
    VIDSHEET_FETCH_ALLOW: `127.0.0.1:${originPort}`,
    // The load's own honest calls must not be flood-limited; the stalled ones come from many addresses.
    VIDSHEET_MCP_FLOOD_PER_MIN: '600',
    VIDSHEET_SMTP_URL: `smtp://127.0.0.1:${smtp.server.address().port}`,
    VIDSHEET_MAIL_FROM: 'vidsheet soak <noreply@vidsheet.test>',
    ...(DATABASE_URL ? { VIDSHEET_DATABASE_URL: DATABASE_URL } : {}),
    ...(moto ? { VIDSHEET_STORAGE_URL: moto.url, ...MOTO_ENV } : {}),
  },
});
const { url, port } = server;

// --- measuring the server -----------------------------------------------------------------------
const sample = () => ({
  server: mb(procStatus(server.pid, 'VmRSS')),
  worker: mb(procStatus(server.workerPid(), 'VmRSS')),
  fds: openFds(server.pid) ?? Number.NaN,
  work: server.workFiles(),
});

// --- the load's bookkeeping ---------------------------------------------------------------------
const stats = {
  honestServed: 0,
  honestBusy: 0,
  honestMcpBusy: 0,
  honestMcpServed: 0,
  honestFailed: 0,
  failures: [],
  latencies: [],
  maxWaitForPlace: 0,
  uploadsCut: 0,
  uploadsRefused: 0,
  pacedCut: 0,
  pacedRefused: 0,
  abandoned: 0,
  fetchesCut: 0,
  fetchesRefused: 0,
  slowBodiesCut: 0,
  slowBodiesHeld: 0,
  slowBodyLongestMs: 0,
  signIns: 0,
  signInsFailed: 0,
  badInputs: 0,
  badInputsBusy: 0,
  badInputsCut: 0,
  badInputsWrong: 0,
};
/** Answers by lane and status (HTTP status, or `tool error` / `no answer` where there is none). */
const statuses = {};
const note = (lane, status) => {
  statuses[lane] ??= {};
  statuses[lane][status] = (statuses[lane][status] ?? 0) + 1;
};
/** Per honest file: answers by status. */
const byFile = Object.fromEntries(FILES.map((f) => [f.name, {}]));
const wrong = (what) => {
  if (stats.failures.length < 20) stats.failures.push(what);
};

let running = true;
/** Set while an idle check waits for the clients to finish (no new request starts). */
let paused = false;
/** Client requests in flight, by lane (an idle check waits for none). */
const inFlight = {};
const busyLanes = () => Object.keys(inFlight).filter((lane) => inFlight[lane] > 0);
/** Set when the load starts (after the accounts are made). */
let until = Number.POSITIVE_INFINITY;
const active = () => running && !paused && Date.now() < until;
/** Waits out a pause; false once the soak is over. */
async function proceed() {
  while (paused) await sleep(200);
  return running && Date.now() < until;
}
async function tracked(lane, work) {
  inFlight[lane] = (inFlight[lane] ?? 0) + 1;
  try {
    return await work();
  } finally {
    inFlight[lane]--;
  }
}

// --- honest clients -------------------------------------------------------------------------------
async function honestUploader(i, account) {
  const from = `127.0.1.${10 + i}`;
  for (let n = i; await proceed(); n++) {
    const file = FILES[n % FILES.length];
    const first = Date.now();
    while (active()) {
      const started = Date.now();
      const answer = await tracked('upload', () =>
        upload(server, account.key, { bytes: file.bytes, filename: file.name, localAddress: from }),
      );
      note('upload', answer.status);
      byFile[file.name][answer.status] = (byFile[file.name][answer.status] ?? 0) + 1;
      if (answer.status === 429) {
        stats.honestBusy++;
        await sleep(500);
        continue;
      }
      stats.maxWaitForPlace = Math.max(stats.maxWaitForPlace, started - first);
      if (answer.status === 200) {
        stats.honestServed++;
        stats.latencies.push(Date.now() - first);
      } else {
        stats.honestFailed++;
        wrong(`upload ${file.name}: ${answer.status} ${answer.text.slice(0, 200)}`);
      }
      break;
    }
  }
}

const agents = [];
/** An undici dispatcher whose every connection leaves from `localAddress`. */
function boundDispatcher(localAddress) {
  // undici ignores a `localAddress` connect option: the socket is made here, bound to it.
  const dispatcher = new Agent({
    connect: (options, callback) => {
      const socket = connect({ host: options.hostname, port: Number(options.port), localAddress });
      socket.once('connect', () => callback(null, socket));
      socket.once('error', (error) => callback(error, null));
    },
  });
  agents.push(dispatcher);
  return dispatcher;
}

/** An MCP client whose every request leaves from `localAddress`. */
async function mcpClient(localAddress, headers = {}) {
  const dispatcher = boundDispatcher(localAddress);
  const client = new Client({ name: 'vidsheet-soak', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers },
      fetch: (input, init) => undiciFetch(input, { ...init, dispatcher }),
    }),
  );
  return client;
}

/** One `vidsheet_video` call; a thrown error becomes a result, its HTTP status noted when it has one. */
async function callTool(lane, client, path, signal) {
  try {
    const result = await client.callTool(
      { name: 'vidsheet_video', arguments: { video_url: `http://127.0.0.1:${originPort}${path}` } },
      undefined,
      { timeout: 600_000, signal },
    );
    note(lane, result.isError ? 'tool error' : 200);
    return { isError: Boolean(result.isError), text: result.content?.[0]?.text ?? '' };
  } catch (error) {
    const text = String(error);
    note(lane, /\bHTTP (\d{3})\b/.exec(text)?.[1] ?? (signal?.aborted ? 'gave up' : 'no answer'));
    return { isError: true, text };
  }
}

async function honestFetcher(account) {
  const client = await mcpClient('127.0.1.50', { authorization: `Bearer ${account.key}` });
  for (let n = 0; await proceed(); n++) {
    const file = FILES[n % FILES.length];
    const first = Date.now();
    while (active()) {
      const started = Date.now();
      const result = await tracked('mcp', () => callTool('mcp', client, `/${file.name}`));
      if (result.isError && result.text.includes('retry')) {
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
      } else {
        stats.honestFailed++;
        wrong(`/mcp ${file.name}: ${result.text.slice(0, 200)}`);
      }
      break;
    }
  }
  await client.close();
}

/** A browser-less keys-page visitor: a cookie jar, the CSRF token of each page, no redirects followed. */
let keysDispatcher;
function visitor() {
  const jar = new Map();
  keysDispatcher ??= boundDispatcher('127.0.1.60');
  const dispatcher = keysDispatcher;
  const send = async (path, init = {}) => {
    const cookie = [...jar].map(([n, v]) => `${n}=${v}`).join('; ');
    const res = await undiciFetch(`${url}${path}`, {
      ...init,
      dispatcher,
      redirect: 'manual',
      headers: { ...init.headers, cookie },
    });
    for (const line of res.headers.getSetCookie()) {
      const [name, value] = line.split(';')[0].split('=');
      if (value === '') jar.delete(name);
      else jar.set(name, value);
    }
    const html = await res.text();
    note('keys page', res.status);
    return { status: res.status, html, csrf: /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '' };
  };
  return {
    get: (path = '/keys') => send(path),
    post: async (path, fields) =>
      send(path, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: (await send('/keys')).csrf, ...fields }).toString(),
      }),
  };
}

async function mailTo(to, after) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const mail = mails.slice(after).find((m) => m.to === to);
    if (mail) return mail;
    await sleep(50);
  }
  return undefined;
}

/** One whole sign-in; resolves with what went wrong, or undefined. */
async function signInOnce(n) {
  const email = `signer-${n}-${randomBytes(3).toString('hex')}@example.com`;
  const v = visitor();
  const before = mails.length;
  const sent = await v.post('/keys/code', { email });
  if (sent.status !== 200) return `Send code: ${sent.status}`;
  const code = /\b(\d{6})\b/.exec((await mailTo(email, before))?.text ?? '')?.[1];
  if (!code) return 'no code mailed';
  const signedIn = await v.post('/keys/sign-in', { email, code });
  if (signedIn.status !== 303) return `Sign in: ${signedIn.status}`;
  if (!(await v.get()).html.includes(`Signed in as ${email}`)) return 'not signed in after Sign in';
  const created = await v.post('/keys/create-key', {});
  if (created.status !== 303) return `Create key: ${created.status}`;
  if (!/vs_live_[0-9a-f]{40}/.test((await v.get()).html)) return 'the new key was not shown';
  const out = await v.post('/keys/sign-out', {});
  if (out.status !== 303) return `Sign out: ${out.status}`;
  if ((await v.get()).html.includes('Signed in as')) return 'still signed in after Sign out';
  return undefined;
}

async function signer() {
  for (let n = 0; await proceed(); n++) {
    const started = Date.now();
    const failed = await tracked('sign-in', () => signInOnce(n).catch((error) => String(error)));
    if (failed) {
      stats.signInsFailed++;
      wrong(`sign-in: ${failed}`);
    } else stats.signIns++;
    while (active() && Date.now() - started < SIGN_IN_EVERY_MS) await sleep(200);
  }
}

// --- bad inputs -------------------------------------------------------------------------------------
const hls = Buffer.from(
  '#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///tmp/vidsheet-soak-canary.ts\n#EXT-X-ENDLIST\n',
);
/** Each bad input and the answer it must get (spec "Errors"). */
const BAD_INPUTS = [
  {
    kind: 'HLS playlist named .mp4',
    send: { bytes: hls, filename: 'holiday.mp4' },
    status: 422,
    error: 'unreadable_video',
  },
  {
    kind: 'text named .mp4',
    send: {
      bytes: Buffer.from('This is not a video, only some text named like one.\n'),
      filename: 'notes.mp4',
    },
    status: 422,
    error: 'unreadable_video',
  },
  {
    kind: 'multipart without its closing boundary',
    send: { bytes: SAMPLE.subarray(0, 64 * 1024), filename: 'cut.mp4', truncate: true },
    status: 422,
    error: 'bad_request',
  },
  {
    kind: 'bad density',
    send: { bytes: SAMPLE, filename: 'sample.mp4', fields: { density: '99x99' } },
    status: 422,
    error: 'bad_request',
  },
  {
    kind: 'wrong key',
    key: `vs_live_${'0'.repeat(40)}`,
    send: { bytes: SAMPLE, filename: 'sample.mp4' },
    status: 401,
    error: 'invalid_key',
  },
];

async function badInputs(account) {
  for (let n = 0; await proceed(); n++) {
    const bad = BAD_INPUTS[n % BAD_INPUTS.length];
    const answer = await tracked('bad input', () =>
      upload(server, bad.key ?? account.key, { ...bad.send, localAddress: '127.0.0.90' }),
    );
    note('bad input', answer.status);
    if (answer.status === 429) stats.badInputsBusy++;
    // Its slot taken by a newcomer while the server had not read it all yet (stall.ts BEHIND_RULE,
    // 2 s grace): counted apart, as a refusal, not as a wrong answer.
    else if (answer.status === 408 && answer.body?.message === 'the upload stalled') stats.badInputsCut++;
    else if (answer.status === bad.status && answer.body?.error === bad.error) stats.badInputs++;
    else {
      stats.badInputsWrong++;
      wrong(`bad input (${bad.kind}): ${answer.status} ${answer.text.slice(0, 200)}`);
    }
    await sleep(BAD_INPUT_EVERY_MS);
  }
}

// --- attackers ------------------------------------------------------------------------------------
/**
 * A raw POST from `from`: `head` (request line, headers and the body's first bytes) written on
 * connect, then `feed(socket)` (returning its timer) sends the rest. Resolves with the answer's
 * status (0: none) and the milliseconds until the socket closed. The sender gives up at a pause and
 * at the end of the soak (a paced upload that is never cut would otherwise hold the bench open for
 * the 46 min its body takes).
 */
function rawPost(from, head, feed) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const socket = connect({ port, host: '127.0.0.1', localAddress: from });
    let received = '';
    let timer;
    socket.on('error', () => {});
    socket.on('data', (c) => (received += c));
    socket.on('connect', () => {
      socket.write(head);
      timer = feed(socket);
    });
    const giveUp = setInterval(() => !active() && socket.destroy(), 200);
    socket.on('close', () => {
      clearInterval(timer);
      clearInterval(giveUp);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0), ms: Date.now() - t0 });
    });
  });
}

/**
 * A raw upload that sends 64 KiB of an 8 MiB body, then nothing (`idle`), a byte a second (`trickle`),
 * or 3 KB/s (`paced`: just above the stall pace, topped up every 100 ms).
 */
async function stalledUpload(key, from, mode) {
  const boundary = 'soak-stalled';
  const part = `--${boundary}\r\nContent-Disposition: form-data; name="video"; filename="s.mp4"\r\n\r\n`;
  const head =
    `POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\n` +
    `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${8 * 1024 * 1024}\r\n\r\n${part}`;
  const { status } = await rawPost(from, head, (socket) => {
    socket.write(Buffer.alloc(64 * 1024, 0x2a));
    if (mode === 'trickle') return setInterval(() => socket.destroyed || socket.write('x'), 1000);
    if (mode !== 'paced') return undefined;
    // Topped up to 3 KB/s since the start at each tick, so a busy event loop does not slow it.
    const start = Date.now();
    let sent = 0;
    return setInterval(() => {
      const due = Math.floor((Date.now() - start) * 3);
      if (due > sent && !socket.destroyed) socket.write(Buffer.alloc(due - sent, 0x2a));
      sent = Math.max(sent, due);
    }, 100);
  });
  return status;
}

async function stalledUploader(i, account) {
  const from = `127.0.0.${10 + i}`;
  while (await proceed()) {
    const status = await tracked('stalled upload', () =>
      stalledUpload(account.key, from, i % 2 ? 'trickle' : 'idle'),
    );
    note('stalled upload', status || 'gave up');
    if (status === 408) stats.uploadsCut++;
    else if (status === 429) stats.uploadsRefused++;
    if (status === 429) await sleep(1000);
  }
}

async function pacedUploader(i, account) {
  const from = `127.0.0.${70 + i}`;
  while (await proceed()) {
    const status = await tracked('paced upload', () => stalledUpload(account.key, from, 'paced'));
    note('paced upload', status || 'gave up');
    if (status === 408) stats.pacedCut++;
    else if (status === 429) {
      stats.pacedRefused++;
      await sleep(1000);
    }
  }
}

async function abandoner(i, account) {
  const from = `127.0.0.${30 + i}`;
  while (await proceed()) {
    await tracked('abandoned', async () => {
      const socket = connect({ port, host: '127.0.0.1', localAddress: from });
      socket.on('error', () => {});
      // A connection that fails closes without connecting: nothing to abandon then.
      await new Promise((resolve) => {
        socket.on('connect', resolve);
        socket.on('close', resolve);
      });
      socket.write(
        `POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${account.key}\r\n` +
          `Content-Type: multipart/form-data; boundary=b\r\nContent-Length: ${SAMPLE.length + 200}\r\n\r\n` +
          '--b\r\nContent-Disposition: form-data; name="video"; filename="a.mp4"\r\n\r\n',
      );
      socket.write(SAMPLE.subarray(0, SAMPLE.length / 2));
      await sleep(2000);
      socket.destroy();
    });
    stats.abandoned++;
    await sleep(1000);
  }
}

async function stalledFetcher(i) {
  const client = await mcpClient(`127.0.0.${50 + i}`);
  while (await proceed()) {
    // The client gives up at a pause or the end (the server's own cut comes later).
    const controller = new AbortController();
    const giveUp = setInterval(() => !active() && controller.abort(), 200);
    const result = await tracked('stalled fetch', () =>
      callTool('stalled fetch', client, i % 2 ? '/trickle.mp4' : '/silent.mp4', controller.signal),
    );
    clearInterval(giveUp);
    if (result.text.startsWith('could not fetch the video')) stats.fetchesCut++;
    else {
      // Refused (busy, the anonymous quota) or no answer at all: back off, as a client would,
      // rather than spin (a spinning attacker measures the bench, not the server).
      if (result.text.includes('retry')) stats.fetchesRefused++;
      await sleep(1000);
    }
  }
  await client.close().catch(() => {});
}

/** The routes a slow body is sent to, in turn: each reads a body that is not an upload. */
const SLOW_ROUTES = [
  ['/stripe/webhook', 'application/json'],
  ['/keys/code', 'application/x-www-form-urlencoded'],
  ['/mcp', 'application/json'],
  ['/v1/videos/00000000000000000000000000000000/zoom', 'application/json'],
];

/** One request whose body comes a byte a second: its status (0: closed) and its time. */
function slowBody(from, [path, type], key) {
  const head =
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\n` +
    `Content-Type: ${type}\r\nAccept: application/json, text/event-stream\r\nContent-Length: 4096\r\n\r\n{`;
  return rawPost(from, head, (socket) => setInterval(() => socket.destroyed || socket.write(' '), 1000));
}

async function slowBodySender(i, key) {
  const from = `127.0.2.${10 + i}`;
  const route = SLOW_ROUTES[i % SLOW_ROUTES.length];
  while (await proceed()) {
    const { status, ms } = await tracked('slow body', () => slowBody(from, route, key));
    if (!active()) break;
    note('slow body', status || 'closed');
    stats.slowBodyLongestMs = Math.max(stats.slowBodyLongestMs, ms);
    if (ms <= SLOW_BODY_CUT_MS) stats.slowBodiesCut++;
    else {
      stats.slowBodiesHeld++;
      wrong(`a slow body to ${route[0]} was held ${ms} ms (status ${status || 'none'})`);
    }
  }
}

// --- idle checks, the ledger, the trend -------------------------------------------------------------
const idleChecks = [];
/** Pauses the load until no client request is in flight; `<data>/work` must then empty. */
async function idleCheck(label) {
  paused = true;
  const t0 = Date.now();
  // A client that is not done in 2 minutes is named, and the check goes on without it.
  while (busyLanes().length > 0 && Date.now() - t0 < 120_000) await sleep(100);
  const stuck = busyLanes();
  const quiet = Date.now();
  const atQuiet = server.workFiles();
  let files = atQuiet;
  while (files > 0 && Date.now() - quiet < IDLE_EMPTY_WITHIN_MS) {
    await sleep(250);
    files = server.workFiles();
  }
  idleChecks.push({
    label,
    stuck,
    // The server's and the worker's RSS with nothing in flight: a leak raises them from one check
    // to the next. (A minute's sample of the worker mostly measures the job it is running.)
    idleRss: sample().server,
    idleWorkerRss: sample().worker,
    resumedAtS: (Date.now() - began) / 1000,
    drainS: (quiet - t0) / 1000,
    atQuiet,
    emptyAfterS: (Date.now() - quiet) / 1000,
    files,
  });
  paused = false;
}

/** The ledger as the database holds it at the end (soak-checks.mjs). */
async function ledgerCheck() {
  const db = await openDatabase({ dataDir: server.dataDir, databaseUrl: DATABASE_URL });
  try {
    return await ledgerBalances(db);
  } finally {
    await db.destroy();
  }
}

// --- the run ---------------------------------------------------------------------------------------
const start = sample();
// The attackers'
// accounts hold more than the allowance floor (7), so a balance moves only by charges.
const [honest, [honestMcp, bad, ...stalled]] = await Promise.all([
  Promise.all(Array.from({ length: HONEST_UPLOADERS }, () => server.account(100_000))),
  Promise.all([
    server.account(100_000),
    ...Array.from({ length: 1 + STALLED_UPLOADERS + ABANDONERS + PACED_UPLOADERS }, () => server.account(50)),
  ]),
]);
const began = Date.now();
until = began + MINUTES * 60_000;
console.log(
  `soak: ${MINUTES} min against ${url} (${DATABASE_URL ? 'PostgreSQL' : 'SQLite'}${moto ? ' + S3' : ''}); honest files: ${FILES.map((f) => f.name).join(', ')}; attackers: ${STALLED_UPLOADERS} stalled uploads, ${PACED_UPLOADERS} paced uploads, ${ABANDONERS} abandoned, ${STALLED_FETCHERS} stalled fetches, ${SLOW_BODIES} slow bodies; a sign-in every ${SIGN_IN_EVERY_MS / 1000} s, a bad input every ${BAD_INPUT_EVERY_MS / 1000} s; load average at start ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
const HEADER = [
  't(min)',
  'server RSS MB',
  'worker RSS MB',
  'server fds',
  'work files',
  'jobs done',
  'refused 429',
  'cut',
  'sign-ins',
  'bad inputs',
  '5xx',
  'load 1m',
];
console.log(`| ${HEADER.join(' | ')} |\n|${HEADER.map(() => '---:|').join('')}`);
const fiveXx = () =>
  Object.values(statuses).reduce(
    (sum, lane) => sum + Object.entries(lane).reduce((s, [k, v]) => s + (/^5\d\d$/.test(k) ? v : 0), 0),
    0,
  );
const samples = [];
const row = (label) => {
  const s = { t: (Date.now() - began) / 1000, paused: paused || label !== undefined, ...sample() };
  samples.push(s);
  const cells = [
    label ?? (s.t / 60).toFixed(0),
    s.server,
    s.worker,
    s.fds,
    s.work,
    stats.honestServed,
    stats.honestBusy,
    stats.uploadsCut + stats.pacedCut + stats.fetchesCut,
    stats.signIns,
    stats.badInputs,
    fiveXx(),
    loadavg()[0].toFixed(2),
  ];
  console.log(`| ${cells.join(' | ')} |`);
};
const minute = setInterval(() => row(), 60_000);
// Idle checks every 10 minutes, or once at half time in a shorter run.
const checkAt =
  MINUTES >= 20
    ? Array.from({ length: Math.floor((MINUTES - 1) / 10) }, (_, i) => (i + 1) * 10)
    : [MINUTES / 2];
const idleTimers = checkAt.map((m) => setTimeout(() => void idleCheck(`at ${m} min`), m * 60_000));

await Promise.all([
  ...honest.map((account, i) => honestUploader(i, account)),
  honestFetcher(honestMcp),
  signer(),
  badInputs(bad),
  ...Array.from({ length: STALLED_UPLOADERS }, (_, i) => stalledUploader(i, stalled[i])),
  ...Array.from({ length: ABANDONERS }, (_, i) => abandoner(i, stalled[STALLED_UPLOADERS + i])),
  ...Array.from({ length: PACED_UPLOADERS }, (_, i) =>
    pacedUploader(i, stalled[STALLED_UPLOADERS + ABANDONERS + i]),
  ),
  ...Array.from({ length: STALLED_FETCHERS }, (_, i) => stalledFetcher(i)),
  ...Array.from({ length: SLOW_BODIES }, (_, i) => slowBodySender(i, bad.key)),
]);
running = false;
for (const timer of idleTimers) clearTimeout(timer);
clearInterval(minute);
row('end');
await idleCheck('at the end');
// The clients' kept-alive connections go too: the end measure is the server's own.
await Promise.all(agents.map((agent) => agent.destroy()));
await sleep(5000);
const end = sample();
let charged = 0;
for (const account of [...stalled, bad]) {
  const shown = JSON.parse(await server.admin('show', '--email', account.email));
  charged += account.credits - shown.balance + shown.usage.length;
}
const ledger = await ledgerCheck();
const serverErrors = server.logs.filter((l) => l.level >= 50);

const rows = [
  ['honest requests served (uploads + /mcp)', stats.honestServed],
  ['honest requests failed (not 200, not 429)', stats.honestFailed],
  [
    'idle checks: clients still in flight after 2 min',
    idleChecks.flatMap((c) => c.stuck).join(', ') || 'none',
  ],
  ['honest 429 busy (retried)', stats.honestBusy],
  ['of which honest /mcp: served / busy', `${stats.honestMcpServed} / ${stats.honestMcpBusy}`],
  ['honest latency p50 (ms, first attempt to answer)', percentile(stats.latencies, 50)],
  ['honest latency p95 (ms)', percentile(stats.latencies, 95)],
  ['max wait for a queue place (ms)', stats.maxWaitForPlace],
  ['honest uploads by file and status', JSON.stringify(byFile)],
  ['keys-page sign-ins completed / failed', `${stats.signIns} / ${stats.signInsFailed}`],
  [
    'bad inputs answered as the spec says / refused busy / cut (408, slot taken over) / wrong answer',
    `${stats.badInputs} / ${stats.badInputsBusy} / ${stats.badInputsCut} / ${stats.badInputsWrong}`,
  ],
  ['stalled uploads cut (408)', stats.uploadsCut],
  ['stalled uploads refused (429)', stats.uploadsRefused],
  ['paced uploads taken over (408)', stats.pacedCut],
  ['paced uploads refused (429)', stats.pacedRefused],
  ['abandoned uploads', stats.abandoned],
  ['stalled fetches cut', stats.fetchesCut],
  ['stalled fetches refused (busy)', stats.fetchesRefused],
  [
    `slow bodies cut within ${SLOW_BODY_CUT_MS / 1000} s / held longer (must be 0) / longest (ms)`,
    `${stats.slowBodiesCut} / ${stats.slowBodiesHeld} / ${stats.slowBodyLongestMs}`,
  ],
  ['credits charged to stalled senders and bad inputs (must be 0)', charged],
  ['server open fds start / end', `${start.fds} / ${end.fds}`],
  ['server RSS MB start / end', `${start.server} / ${end.server}`],
  ['worker RSS MB start / end', `${start.worker} / ${end.worker}`],
  ['server log lines at level error or above', serverErrors.length],
  [
    'load average at the end (1, 5, 15 min)',
    loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  ],
];
console.log('');
console.log('| measure | value |\n|---|---|');
for (const [name, value] of rows) console.log(`| ${name} | ${value} |`);

console.log('\nanswers by lane and status:');
for (const [lane, counts] of Object.entries(statuses)) console.log(`  ${lane}: ${JSON.stringify(counts)}`);
const all5xx = Object.entries(statuses).flatMap(([lane, counts]) =>
  Object.entries(counts)
    .filter(([status]) => /^5\d\d$/.test(status))
    .map(([status, n]) => ({ lane, status, n })),
);
const provoked = all5xx.filter((x) => PROVOKED_5XX.has(`${x.lane} ${x.status}`));
const unexpected = all5xx.filter((x) => !PROVOKED_5XX.has(`${x.lane} ${x.status}`));
const sumN = (xs) => xs.reduce((s, x) => s + x.n, 0);
console.log(
  `  5xx: provoked ${sumN(provoked)} (none by design), unexpected ${sumN(unexpected)}${unexpected.length ? ` ${JSON.stringify(unexpected)}` : ''}`,
);
if (stats.failures.length) console.log(`failures (first 20):\n  ${stats.failures.join('\n  ')}`);
if (serverErrors.length) {
  console.log(
    `server errors (first 5):\n  ${serverErrors
      .slice(0, 5)
      .map((l) => JSON.stringify(l))
      .join('\n  ')}`,
  );
}

console.log('\nidle checks (load paused until no client request was in flight):');
for (const c of idleChecks) {
  console.log(
    `  ${c.label}: clients done after ${c.drainS.toFixed(1)} s${c.stuck.length ? ` (still in flight: ${c.stuck.join(', ')})` : ''}; work files then ${c.atQuiet}, ${c.files} after ${c.emptyAfterS.toFixed(1)} s; server RSS ${c.idleRss} MB`,
  );
}

// Samples taken while an idle check held the load back are not load samples, nor are those of the
// warm-up after it (REWARM_S): both are left out of the trend.
const rewarming = (s) => idleChecks.some((c) => s.t >= c.resumedAtS && s.t < c.resumedAtS + REWARM_S);
const inWindow = (s) => !s.paused && s.t >= samples.at(-1).t - TREND_MINUTES * 60 - 1;
const fitTrend = (picked) =>
  ['server', 'worker', 'fds'].map((field) => {
    const points = picked.filter((s) => Number.isFinite(s[field]));
    const fit = slope(
      points.map((s) => s.t),
      points.map((s) => s[field]),
    );
    const limit = field === 'fds' ? FLAT.fds : FLAT.rssMb;
    const rise = fit.perMin * TREND_MINUTES;
    return { field, points: points.length, ...fit, rise, limit, flat: points.length >= 3 && rise < limit };
  });
const printTrend = (title, fits) => {
  console.log(title);
  for (const t of fits) {
    const unit = t.field === 'fds' ? 'fds' : 'MB';
    console.log(
      `  ${t.field === 'fds' ? 'server fds' : `${t.field} RSS`}: ${t.perMin.toFixed(3)} ${unit}/min (± ${t.se.toFixed(3)}), ${t.rise.toFixed(1)} ${unit} across the window over ${t.points} samples (mean ${t.mean.toFixed(1)}): ${t.flat ? 'FLAT' : 'GROWING'} (limit ${t.limit} ${unit})`,
    );
  }
};
const trend = fitTrend(samples.filter((s) => inWindow(s) && !rewarming(s)));
printTrend(
  `\ntrend over the last ${TREND_MINUTES.toFixed(0)} min (least squares, one sample a minute, the ${REWARM_S} s after each idle check left out):`,
  trend,
);
printTrend(
  '  for comparison, the same fit with the warm-up samples after each idle check kept:',
  fitTrend(samples.filter(inWindow)),
);
console.log(
  `  server RSS with nothing in flight, check by check: ${idleChecks.map((c) => c.idleRss).join(', ')} MB; worker RSS: ${idleChecks.map((c) => c.idleWorkerRss).join(', ')} MB`,
);

console.log(
  `\nledger: ${ledger.accounts} accounts, ${ledger.entries} entries ${JSON.stringify(ledger.kinds)}; balance ≠ sum of entries: ${ledger.mismatched.length}${ledger.mismatched.length ? ` ${JSON.stringify(ledger.mismatched)}` : ''}; balance_after ≠ running sum: ${ledger.chainBreaks.length}`,
);

const verdicts = [
  ['RSS and descriptors flat after warm-up', trend.every((t) => t.flat)],
  ['<data>/work empty whenever idle', idleChecks.every((c) => c.files === 0) && end.work === 0],
  ['ledger balance = sum of its entries', ledger.mismatched.length === 0 && ledger.chainBreaks.length === 0],
  ['zero unexpected 5xx', unexpected.length === 0],
  ['nothing charged to stalled senders or bad inputs', charged === 0],
  ['every bad input answered as the spec says', stats.badInputsWrong === 0 && stats.badInputs > 0],
  ['every sign-in completed', stats.signInsFailed === 0 && stats.signIns > 0],
  ['every honest request served', stats.honestFailed === 0 && stats.honestServed > 0],
  [
    `every slow body cut within ${SLOW_BODY_CUT_MS / 1000} s`,
    stats.slowBodiesHeld === 0 && (SLOW_BODIES === 0 || stats.slowBodiesCut > 0),
  ],
];
console.log('\ntargets:');
for (const [name, ok] of verdicts) console.log(`  ${ok ? 'PASS' : 'FAIL'}  ${name}`);

await server.stop();
origin.closeAllConnections();
origin.close();
await new Promise((resolve) => smtp.close(resolve));
moto?.child.kill('SIGTERM');
process.exit(verdicts.every(([, ok]) => ok) ? 0 : 1);
