/**
 * The hosted HTTP API's contract, against the real `vidsheet-server` bin on loopback (spec: "Hosted
 * API", "Errors → Hosted API", "Limits", "Authentication", "States and transitions"; DESIGN §5, §7).
 *
 * Every assertion is on what a client sees: exact statuses, exact JSON bodies (key order included),
 * headers, sheet bytes read back pixel by pixel, and the money as the operator's `admin show` reports
 * it (balance and usage rows), plus what the server leaves on disk and writes to its log.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ledger } from '../../dist/server/billing/ledger.js';
import { openDatabase } from '../../dist/server/db/open.js';
import type { Density } from '../../src/core/density.js';
import { cellRect, computeGrid } from '../../src/core/layout.js';
import { makePlan } from '../../src/core/plan.js';
import { parseTimeMs } from '../../src/core/time.js';
import { type DamagedFile, damagedFiles, indexClip, plainClip } from '../helpers/fixtures.js';
import { decodeIndex, decodeJpeg } from '../helpers/frames.js';
import { expectModelAids } from '../helpers/model-aids.js';
import { freePort } from '../helpers/net.js';
import { expectedIndex, frameTimes } from '../helpers/oracle.js';
import { AID_KEYS, HOSTED_KEYS } from '../helpers/result-keys.js';
import {
  newAccount as newAdminAccount,
  removeServerDirs,
  type ShownAccount,
  showAccount,
  startServer,
  type TestAccount,
  type TestServer,
} from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

// ---------------------------------------------------------------------------------------------
// The contract's numbers, written out here (not imported) so the server is checked against the spec.

const CONTRACT = 'vidsheet-http-v0';
const CELLS: Record<Density, number> = { '3x3': 9, '4x4': 16, '5x5': 25, '6x6': 36 };
const PRICE: Record<Density, number> = { '3x3': 1, '4x4': 2, '5x5': 3, '6x6': 5 };
// DESIGN §10's keys after the last key of §5.
const RESULT_KEYS = [...HOSTED_KEYS, ...AID_KEYS];
const JOB_ID = /^[A-Za-z0-9_-]{22}$/;
const LABEL = /^\d+:[0-5]\d(\.\d{1,3})?$/;
const VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** The committed 120 s sample: 480x270, two sheets at every density. */
const SAMPLE_PATH = fileURLToPath(new URL('../../fixtures/sample.mp4', import.meta.url));
const SAMPLE = readFileSync(SAMPLE_PATH);
const SAMPLE_SHEETS = 2;

// ---------------------------------------------------------------------------------------------
// Servers

const servers: TestServer[] = [];
/** Default caps. */
let main: TestServer;
/** `VIDSHEET_MAX_UPLOAD_MB=1`, `VIDSHEET_MAX_DURATION_S=60` (the 995 KB sample fits the size cap). */
let capped: TestServer;
/** `VIDSHEET_QUEUE_LENGTH=0` and `VIDSHEET_MAX_TRANSFERS=1`: one place and one transfer in all. */
let queue: TestServer;

async function start(env: Record<string, string> = {}): Promise<TestServer> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = await startServer({ PORT: String(port), VIDSHEET_BASE_URL: base, ...env });
  servers.push(server);
  expect(server.url).toBe(base);
  return server;
}

// ---------------------------------------------------------------------------------------------
// Clips

interface Upload {
  bytes: Uint8Array;
  filename: string;
}

let small: Upload; // 5 s, one 3x3 sheet: 1 credit
let twenty: Upload; // 20 s
let indexPath: string; // 100 s, frames carry their own index
let unreadableDamaged: DamagedFile[];
const textClip: Upload = {
  bytes: Buffer.from('This is not a video, only some text named like one.\n'),
  filename: 'clip.mp4',
};
const sample = (filename = 'sample.mp4'): Upload => ({ bytes: SAMPLE, filename });

beforeAll(async () => {
  const [smallPath, twentyPath, index, damaged] = await Promise.all([
    plainClip(5),
    plainClip(20),
    indexClip({ seconds: 100 }),
    damagedFiles(),
    (async () => {
      main = await start();
      capped = await start({ VIDSHEET_MAX_UPLOAD_MB: '1', VIDSHEET_MAX_DURATION_S: '60' });
      queue = await start({ VIDSHEET_QUEUE_LENGTH: '0', VIDSHEET_MAX_TRANSFERS: '1' });
    })(),
  ]);
  small = { bytes: readFileSync(smallPath), filename: 'small.mp4' };
  twenty = { bytes: readFileSync(twentyPath), filename: 'twenty.mp4' };
  indexPath = index;
  unreadableDamaged = damaged.filter((file) => file.expect === 'unreadable');
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  removeServerDirs();
});

// ---------------------------------------------------------------------------------------------
// Accounts, through the operator's commands (and the ledger itself for a purchase)

/** Every key minted on each server, for the "never logged" check. */
const mintedKeys = new Map<TestServer, string[]>();

/** A new never-purchased account with one key, and `credits` granted by the operator (not a purchase). */
async function newAccount(server: TestServer, credits = 0): Promise<TestAccount> {
  const account = await newAdminAccount(server, credits);
  mintedKeys.set(server, [...(mintedKeys.get(server) ?? []), account.key]);
  return account;
}

/** A paid pack, the way the payment webhook applies it: the account becomes "purchased" (no allowance). */
async function purchase(server: TestServer, email: string, credits: number): Promise<void> {
  const db = await openDatabase({ dataDir: server.dataDir });
  try {
    const ledger = new Ledger(db, { allowanceFloor: 7 });
    const account = await ledger.accounts.accountByEmail(email);
    if (!account) throw new Error(`no account ${email}`);
    const result = await ledger.credits.purchase(account.id, credits, `test:${randomUUID()}`);
    expect(result.applied).toBe(true);
  } finally {
    await db.destroy();
  }
}

/** A purchased account holding exactly `credits`. */
async function purchasedAccount(server: TestServer, credits: number): Promise<TestAccount> {
  const account = await newAccount(server);
  await purchase(server, account.email, credits);
  const shown = await showAccount(server, account.email);
  expect({ balance: shown.balance, purchased: shown.purchased }).toEqual({
    balance: credits,
    purchased: true,
  });
  return account;
}

// ---------------------------------------------------------------------------------------------
// Requests

function form(video: Upload | undefined, fields: Array<[string, string]> = []): FormData {
  const body = new FormData();
  for (const [name, value] of fields) body.append(name, value);
  if (video) body.append('video', new Blob([new Uint8Array(video.bytes)]), video.filename);
  return body;
}

/**
 * POST /v1/vidsheet through `node:http`: the whole body is written, and the answer is read even when
 * the server answered before reading the body and closed the connection. (fetch/undici often fails
 * such a request with EPIPE instead; that is asserted separately, see "a fetch client".)
 */
async function post(
  server: TestServer,
  options: { auth?: string; key?: string; body: FormData | string; headers?: Record<string, string> },
): Promise<Response> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  if (options.auth !== undefined) headers.authorization = options.auth;
  let body: Buffer;
  if (typeof options.body === 'string') {
    body = Buffer.from(options.body);
  } else {
    const encoded = new Request('http://127.0.0.1/', { method: 'POST', body: options.body });
    headers['content-type'] = encoded.headers.get('content-type') as string;
    body = Buffer.from(await encoded.arrayBuffer());
  }
  headers['content-length'] = String(body.length);
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}/v1/vidsheet`, { method: 'POST', headers, agent: false });
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const received = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          for (const item of [value ?? []].flat()) received.append(name, item);
        }
        resolve(
          new Response(new Uint8Array(Buffer.concat(chunks)), { status: res.statusCode, headers: received }),
        );
      });
    });
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    req.end(body);
  });
}

/** A job that must succeed; returns its result. */
async function job(server: TestServer, key: string, video: Upload, fields: Array<[string, string]> = []) {
  const res = await post(server, { key, body: form(video, fields) });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return JSON.parse(text) as HostedResult;
}

interface HostedResult {
  job_id: string;
  input: string;
  duration: number;
  frames: number;
  sheets: number;
  density: string;
  credits_charged: number;
  credits_remaining: number;
  files: string[];
  timecodes: string[][];
  warnings: string[];
  contract: string;
  frame_times: Array<Array<number | null>>;
  zoom_hints: Array<{ start: string; end: string; score: number; signals: string[] }>;
}

/** Exact status, exact body (key order included), a JSON content type. */
async function expectError(res: Response, status: number, body: Record<string, unknown>): Promise<void> {
  const text = await res.text();
  expect({ status: res.status, body: text }).toEqual({ status, body: JSON.stringify(body) });
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
}

/**
 * A POST whose headers announce a body that is never sent: the answer must come without it (an
 * early refusal: 401 before the body, 429, or 413 from the announced length).
 */
function announce(
  server: TestServer,
  headers: Record<string, string>,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const req = http.request(`${server.url}/v1/vidsheet`, { method: 'POST', headers, agent: false });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error('no answer within 10 s although the body was never sent'));
    }, 10_000);
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body, headers: res.headers, ms: Date.now() - started });
        req.destroy();
      });
    });
    req.flushHeaders();
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const workEntries = (server: TestServer) => server.leftovers().filter((f) => f.startsWith('work/'));

/**
 * Takes the server's one place with a slow upload: valid headers announcing an 8 MB multipart body,
 * only its first 64 KB sent. Resolves once the handler is streaming it (its work directory exists).
 */
async function holdPlace(server: TestServer, key: string) {
  const boundary = 'vidsheet-slow-upload-boundary';
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="video"; filename="slow.mp4"\r\n` +
      'Content-Type: video/mp4\r\n\r\n',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const length = head.length + 8 * 1024 * 1024 + tail.length;
  const { port } = new URL(server.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await once(socket, 'connect');
  let received = '';
  socket.on('data', (chunk) => {
    received += chunk;
  });
  socket.on('error', () => {});
  socket.write(
    `POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${length}\r\n\r\n`,
  );
  socket.write(head);
  socket.write(Buffer.alloc(64 * 1024, 0x2a));
  await waitFor(() => workEntries(server).length > 0, 'the slow upload to reach the work directory');
  return {
    /** What the server sent back so far (nothing while it waits for the body). */
    received: () => received,
    release: () => socket.destroy(),
  };
}

async function fetchBytes(url: string) {
  const res = await fetch(url);
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    bytes: new Uint8Array(await res.arrayBuffer()),
  };
}

const isJpeg = (bytes: Uint8Array) =>
  bytes[0] === 0xff && bytes[1] === 0xd8 && bytes.at(-2) === 0xff && bytes.at(-1) === 0xd9;

// ---------------------------------------------------------------------------------------------

describe('401 invalid_key: credential missing, malformed, unknown, revoked or not Bearer', () => {
  const unknownKey = `vs_live_${randomBytes(20).toString('hex')}`;
  const cases: Array<[string, (key: string) => string | undefined]> = [
    ['no Authorization header', () => undefined],
    ['Bearer with a malformed key (too short)', () => 'Bearer vs_live_0123456789abcdef'],
    ['Bearer with a malformed key (not hex)', () => `Bearer vs_live_${'g'.repeat(40)}`],
    ['Bearer with a malformed key (wrong prefix)', (key) => `Bearer vs_test_${key.slice(8)}`],
    ['Bearer with no key', () => 'Bearer '],
    ['Bearer with a well-formed key that does not exist', () => `Bearer ${unknownKey}`],
    ['Basic scheme carrying a valid key', (key) => `Basic ${Buffer.from(`${key}:`).toString('base64')}`],
    ['the valid key without a scheme', (key) => key],
  ];

  // One account for the cases below: after each, it must still be exactly as it was at the start.
  let account: TestAccount;
  let before: ShownAccount;
  beforeAll(async () => {
    account = await newAccount(main, 20);
    before = await showAccount(main, account.email);
  });

  it.each(cases)('%s: 401 {"error":"invalid_key"}, nothing charged', async (_name, auth) => {
    const res = await post(main, { auth: auth(account.key), body: form(small) });
    await expectError(res, 401, { error: 'invalid_key' });
    expect(await showAccount(main, account.email)).toEqual(before);
    expect(main.leftovers()).toEqual([]);
  });

  it('a wrong key is refused before the body is read (50 MB announced, none sent)', async () => {
    const answer = await announce(main, {
      authorization: `Bearer ${unknownKey}`,
      'content-type': 'multipart/form-data; boundary=x',
      'content-length': String(50 * 1024 * 1024),
    });
    expect({ status: answer.status, body: answer.body }).toEqual({
      status: 401,
      body: '{"error":"invalid_key"}',
    });
    expect(answer.ms).toBeLessThan(2000);
  });

  it('a fetch client (undici) uploading a small clip with a wrong key receives the 401, every time', async () => {
    // The 401 goes out before the body is read; a client still writing its (small) body must get
    // to read it rather than a reset connection (EPIPE), or it cannot tell a bad key from an outage.
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) {
      try {
        const res = await fetch(`${main.url}/v1/vidsheet`, {
          method: 'POST',
          headers: { authorization: `Bearer ${unknownKey}` },
          body: form(small),
        });
        outcomes.push(`${res.status} ${await res.text()}`);
      } catch (error) {
        const cause = (error as { cause?: { code?: string; message?: string } }).cause;
        outcomes.push(`fetch failed: ${cause?.code ?? cause?.message ?? String(error)}`);
      }
    }
    expect(outcomes).toEqual(Array(10).fill('401 {"error":"invalid_key"}'));
  });

  it('a revoked key: the very next request after admin revoke-key is 401, nothing charged', async () => {
    const account = await newAccount(main, 20);
    const first = await job(main, account.key, small);
    expect(first.credits_remaining).toBe(19);
    const revoked = await main.admin('revoke-key', '--key', account.key);
    expect(revoked.code, revoked.stderr).toBe(0);
    const before = await showAccount(main, account.email);
    expect(before.keys[0]?.revoked_at).toEqual(expect.any(String));
    const res = await post(main, { key: account.key, body: form(small) });
    await expectError(res, 401, { error: 'invalid_key' });
    expect(await showAccount(main, account.email)).toEqual(before);
    expect(before.balance).toBe(19);
  });
});

describe('402 insufficient_credits', () => {
  it('a purchased account with 1 credit sends a 6x6 job of the 120 s sample (price 10)', async () => {
    const account = await purchasedAccount(main, 1);
    const before = await showAccount(main, account.email);
    const res = await post(main, { key: account.key, body: form(sample(), [['density', '6x6']]) });
    await expectError(res, 402, { error: 'insufficient_credits' });
    const after = await showAccount(main, account.email);
    expect(after).toEqual(before);
    expect(after.balance).toBe(1);
    expect(after.usage).toEqual([]);
    expect(main.leftovers()).toEqual([]);
  });
});

describe('413 too_large (VIDSHEET_MAX_UPLOAD_MB=1)', () => {
  it.each([
    ['1.5 MiB', 1.5 * 1024 * 1024],
    ['2 MB', 2_000_000],
  ])(
    'a %s upload streamed past the cap: {"error":"too_large","max_mb":1}, nothing charged',
    async (_n, size) => {
      const account = await newAccount(capped, 20);
      const before = await showAccount(capped, account.email);
      const res = await post(capped, {
        key: account.key,
        body: form({ bytes: randomBytes(size), filename: 'x.mp4' }),
      });
      await expectError(res, 413, { error: 'too_large', max_mb: 1 });
      expect(await showAccount(capped, account.email)).toEqual(before);
      expect(capped.leftovers()).toEqual([]);
    },
  );

  it('a Content-Length far above the cap is refused at once, without the body', async () => {
    const account = await newAccount(capped, 20);
    const before = await showAccount(capped, account.email);
    const answer = await announce(capped, {
      authorization: `Bearer ${account.key}`,
      'content-type': 'multipart/form-data; boundary=x',
      'content-length': String(500 * 1024 * 1024),
    });
    expect({ status: answer.status, body: answer.body }).toEqual({
      status: 413,
      body: '{"error":"too_large","max_mb":1}',
    });
    expect(answer.ms).toBeLessThan(2000);
    expect(await showAccount(capped, account.email)).toEqual(before);
    expect(capped.leftovers()).toEqual([]);
  });
});

describe("413 too_large on a body that is not an upload: max_mb is its route's limit", () => {
  // `main` takes 300 MB uploads; these bodies are refused at their own route's limit, and say it.
  it.each([
    ['/mcp', 'a JSON-RPC body over 1 MiB', 'application/json', `"${'x'.repeat(1_100_000)}"`, 1],
    [
      '/keys/code',
      'a keys form over 16 KiB',
      'application/x-www-form-urlencoded',
      `email=${'a'.repeat(20_000)}`,
      0.016,
    ],
  ])('%s: %s', async (path, _what, type, body, maxMb) => {
    const res = await fetch(`${main.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': type },
      body,
    });
    expect({ status: res.status, body: await res.text() }).toEqual({
      status: 413,
      body: JSON.stringify({ error: 'too_large', max_mb: maxMb }),
    });
  });
});

describe('422 bad_request: wrong request shape, or a bad density or response', () => {
  const video = () => small;
  const cases: Array<[string, () => { body: FormData | string; headers?: Record<string, string> }]> = [
    ['no video part (only a density field)', () => ({ body: form(undefined, [['density', '3x3']]) })],
    ['an empty multipart body', () => ({ body: new FormData() })],
    ['video sent as a text field', () => ({ body: form(undefined, [['video', 'not a file']]) })],
    [
      'two video file parts',
      () => {
        const body = form(video());
        body.append('video', new Blob([new Uint8Array(video().bytes)]), 'second.mp4');
        return { body };
      },
    ],
    ['density=7x7', () => ({ body: form(video(), [['density', '7x7']]) })],
    ['density=3X3 (the enum is exact)', () => ({ body: form(video(), [['density', '3X3']]) })],
    ['density empty', () => ({ body: form(video(), [['density', '']]) })],
    ['response=pdf', () => ({ body: form(video(), [['response', 'pdf']]) })],
    [
      'density sent twice',
      () => ({
        body: form(video(), [
          ['density', '3x3'],
          ['density', '3x3'],
        ]),
      }),
    ],
    [
      'response sent twice',
      () => ({
        body: form(video(), [
          ['response', 'json'],
          ['response', 'image'],
        ]),
      }),
    ],
    [
      'a JSON body',
      () => ({
        body: JSON.stringify({ video: 'x', density: '3x3' }),
        headers: { 'content-type': 'application/json' },
      }),
    ],
    [
      'an urlencoded body',
      () => ({
        body: 'video=x&density=3x3',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
    ],
    ['a text/plain body', () => ({ body: 'video', headers: { 'content-type': 'text/plain' } })],
    [
      'bad density with an unreadable upload (request shape is checked before the probe)',
      () => ({ body: form(textClip, [['density', '7x7']]) }),
    ],
  ];

  let account: TestAccount;
  let before: ShownAccount;
  beforeAll(async () => {
    account = await newAccount(main, 20);
    before = await showAccount(main, account.email);
  });

  it.each(cases)('%s: 422 {"error":"bad_request"}, nothing charged', async (_name, make) => {
    const { body, headers } = make();
    const res = await post(main, { key: account.key, body, headers });
    await expectError(res, 422, { error: 'bad_request' });
    expect(await showAccount(main, account.email)).toEqual(before);
    expect(main.leftovers()).toEqual([]);
  });

  it('start/end fields and an extra file part named other are ignored: the job covers the whole clip', async () => {
    const account = await newAccount(main, 20);
    const baseline = await job(main, account.key, twenty);
    const res = await post(main, {
      key: account.key,
      body: (() => {
        const body = form(twenty, [
          ['start', '5'],
          ['end', '0:10'],
        ]);
        body.append('other', new Blob([new Uint8Array(4096)]), 'other.bin');
        return body;
      })(),
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const result = JSON.parse(text) as HostedResult;
    const plan = makePlan({ startMs: 0, endMs: 20_000 }, '3x3');
    expect(result.duration).toBe(20);
    expect(result.sheets).toBe(1);
    expect(result.timecodes).toEqual(plan.sheets.map((cells) => cells.map((cell) => cell.label)));
    expect(result.timecodes).toEqual(baseline.timecodes);
    expect({ ...result, job_id: '', files: [], credits_remaining: 0 }).toEqual({
      ...baseline,
      job_id: '',
      files: [],
      credits_remaining: 0,
    });
    expect(result.credits_remaining).toBe(18);
    expect((await showAccount(main, account.email)).balance).toBe(18);
  });
});

describe('422 unreadable_video and too_long', () => {
  it('a text file named clip.mp4: 422 {"error":"unreadable_video"}, nothing charged', async () => {
    const account = await newAccount(main, 20);
    const before = await showAccount(main, account.email);
    const res = await post(main, { key: account.key, body: form(textClip) });
    await expectError(res, 422, { error: 'unreadable_video' });
    expect(await showAccount(main, account.email)).toEqual(before);
    expect(main.leftovers()).toEqual([]);
  });

  it('a playlist or list naming a video on the server is not a video: 422, nothing of that file read', async () => {
    // Locally both engines would render the named file (the file protocol stays allowed there).
    const samplePath = fileURLToPath(new URL('../../fixtures/sample.mp4', import.meta.url));
    const lists = [
      ['list.m3u8', `#EXTM3U\n#EXT-X-TARGETDURATION:120\n#EXTINF:120,\n${samplePath}\n#EXT-X-ENDLIST\n`],
      ['list.mp4', `#EXTM3U\n#EXTINF:120,\nfile://${samplePath}\n#EXT-X-ENDLIST\n`],
      ['list.ffconcat', `ffconcat version 1.0\nfile ${samplePath}\n`],
    ];
    const account = await newAccount(main, 20);
    const before = await showAccount(main, account.email);
    for (const [filename, text] of lists) {
      const res = await post(main, {
        key: account.key,
        body: form({ bytes: new TextEncoder().encode(text), filename: filename as string }),
      });
      await expectError(res, 422, { error: 'unreadable_video' });
    }
    expect(await showAccount(main, account.email)).toEqual(before);
  });

  it('every damaged file the CLI calls unreadable: 422 {"error":"unreadable_video"}, nothing charged', async () => {
    expect(unreadableDamaged.map((file) => file.name).sort()).toEqual(
      [
        'audio-only.mp4',
        'empty.mp4',
        'random.mp4',
        'text.mkv',
        'truncated-10.mp4',
        'truncated-50.mp4',
        'truncated-90.mp4',
      ].sort(),
    );
    const account = await newAccount(main, 20);
    const before = await showAccount(main, account.email);
    for (const file of unreadableDamaged) {
      const res = await post(main, {
        key: account.key,
        body: form({ bytes: readFileSync(file.path), filename: file.name }),
      });
      const text = await res.text();
      expect({ file: file.name, status: res.status, body: text }).toEqual({
        file: file.name,
        status: 422,
        body: '{"error":"unreadable_video"}',
      });
      expect(main.leftovers(), file.name).toEqual([]);
    }
    expect(await showAccount(main, account.email)).toEqual(before);
  });

  it('VIDSHEET_MAX_DURATION_S=60 and the 120 s sample: 422 {"error":"too_long","max_s":60}, nothing charged', async () => {
    const account = await newAccount(capped, 20);
    const before = await showAccount(capped, account.email);
    const res = await post(capped, { key: account.key, body: form(sample()) });
    await expectError(res, 422, { error: 'too_long', max_s: 60 });
    expect(await showAccount(capped, account.email)).toEqual(before);
    expect(capped.leftovers()).toEqual([]);
  });
});

describe('429 busy (VIDSHEET_MAX_TRANSFERS=1)', () => {
  it('while a slow upload holds the only transfer slot, a request is refused at once; the place comes back', async () => {
    const holder = await newAccount(queue, 20);
    const account = await newAccount(queue, 20);
    const before = await showAccount(queue, account.email);
    const hold = await holdPlace(queue, holder.key);
    try {
      const started = Date.now();
      const res = await post(queue, { key: account.key, body: form(small) });
      const elapsed = Date.now() - started;
      expect(res.headers.get('retry-after')).toBeNull();
      await expectError(res, 429, { error: 'busy' });
      expect(elapsed).toBeLessThan(2000);
      // Nothing charged, and the refused upload left nothing: only the held upload is on disk.
      expect(await showAccount(queue, account.email)).toEqual(before);
      expect(workEntries(queue)).toHaveLength(1);
      // The credential is checked first (DESIGN §5), and health is not a job.
      await expectError(await post(queue, { body: form(small) }), 401, { error: 'invalid_key' });
      expect((await fetch(`${queue.url}/healthz`)).status).toBe(200);
      // The held request is still waiting for its body: no answer yet.
      expect(hold.received()).toBe('');
    } finally {
      hold.release();
    }
    await waitFor(() => queue.leftovers().length === 0, 'the abandoned upload to be deleted');
    const result = await job(queue, account.key, small);
    expect(result.credits_charged).toBe(1);
    expect(result.credits_remaining).toBe(19);
    expect((await showAccount(queue, holder.email)).usage).toEqual([]);
    expect((await showAccount(queue, holder.email)).balance).toBe(20);
  });
});

describe('the success result (response=json)', () => {
  it.each(['4x4', '6x6'] as const)(
    '%s of the 120 s sample: keys, receipt, money, capability URLs',
    async (density) => {
      const account = await newAccount(main, 50);
      const filename = `my clip – été 🎬 ${density}.mp4`;
      const res = await post(main, {
        key: account.key,
        body: form(sample(filename), [['density', density]]),
      });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const result = JSON.parse(text) as HostedResult;
      expect(Object.keys(result)).toEqual(RESULT_KEYS);

      const price = SAMPLE_SHEETS * PRICE[density];
      const plan = makePlan({ startMs: 0, endMs: 120_000 }, density);
      expect(result.job_id).toMatch(JOB_ID);
      expect(result).toEqual({
        job_id: result.job_id,
        input: filename,
        duration: 120,
        frames: SAMPLE_SHEETS * CELLS[density],
        sheets: SAMPLE_SHEETS,
        density,
        credits_charged: price,
        credits_remaining: 50 - price,
        files: [1, 2].map((n) => `${main.url}/v1/sheets/${result.job_id}/video.sheet-${n}.jpg`),
        timecodes: plan.sheets.map((cells) => cells.map((cell) => cell.label)),
        warnings: [],
        contract: CONTRACT,
        frame_times: result.frame_times,
        zoom_hints: result.zoom_hints,
      });
      await expectModelAids(result, { clip: SAMPLE_PATH, audio: false });
      for (const labels of result.timecodes) {
        expect(labels).toHaveLength(CELLS[density]);
        for (const label of labels) expect(label).toMatch(LABEL);
      }
      const times = result.timecodes.flat().map((label) => parseTimeMs(label) as number);
      for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThan(times[i - 1] as number);

      const shown = await showAccount(main, account.email);
      expect(shown.balance).toBe(result.credits_remaining);
      expect(shown.usage).toEqual([
        {
          job_id: result.job_id,
          surface: 'http',
          density,
          sheets: SAMPLE_SHEETS,
          credits: price,
          refunded: false,
          created_at: expect.any(String),
        },
      ]);

      const grid = computeGrid(480, 270, density, false);
      for (const url of result.files) {
        const sheet = await fetchBytes(url);
        expect({ url, status: sheet.status, type: sheet.type }).toEqual({
          url,
          status: 200,
          type: 'image/jpeg',
        });
        expect(isJpeg(sheet.bytes), url).toBe(true);
        const image = decodeJpeg(sheet.bytes);
        expect([image.width, image.height]).toEqual([grid.width, grid.height]);
      }
      expect(main.leftovers()).toEqual([]);
    },
  );
});

describe('timecodes agree with the sheets (index clip, 100 s: two sheets)', () => {
  it.each(['3x3', '5x5'] as const)(
    '%s: every cell shows the frame displayed at its label',
    async (density) => {
      const account = await newAccount(main, 50);
      const oracle = await frameTimes(indexPath);
      const result = await job(main, account.key, { bytes: readFileSync(indexPath), filename: 'index.mp4' }, [
        ['density', density],
      ]);
      expect(result.warnings).toEqual([]);
      expect(result.sheets).toBe(2);
      expect(result.timecodes).toHaveLength(2);
      const grid = computeGrid(320, 240, density, false);
      for (const [s, labels] of result.timecodes.entries()) {
        expect(labels).toHaveLength(CELLS[density]);
        const sheet = await fetchBytes(result.files[s] as string);
        expect(sheet.status).toBe(200);
        const image = decodeJpeg(sheet.bytes);
        expect([image.width, image.height]).toEqual([grid.width, grid.height]);
        for (const [c, label] of labels.entries()) {
          const ms = parseTimeMs(label);
          expect(ms, label).not.toBeNull();
          const read = decodeIndex(image, cellRect(grid, c));
          const where = `sheet ${s + 1} cell ${c + 1} (${label})`;
          expect(read.confidence, `${where} is not a clean index frame`).toBeGreaterThan(40);
          expect(read.index, where).toBe(expectedIndex(oracle, (ms as number) / 1000));
        }
      }
    },
  );
});

describe('response=image', () => {
  it('the body is sheet 1, byte for byte; x-vidsheet-job and x-credits-remaining', async () => {
    const account = await newAccount(main, 20);
    const res = await post(main, { key: account.key, body: form(sample(), [['response', 'image']]) });
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(res.status, Buffer.from(bytes.subarray(0, 200)).toString()).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/jpeg');
    expect(isJpeg(bytes)).toBe(true);
    const jobId = res.headers.get('x-vidsheet-job') ?? '';
    expect(jobId).toMatch(JOB_ID);
    expect(res.headers.get('x-credits-remaining')).toBe(String(20 - SAMPLE_SHEETS * PRICE['3x3']));

    const shown = await showAccount(main, account.email);
    expect(String(shown.balance)).toBe(res.headers.get('x-credits-remaining'));
    expect(shown.usage).toEqual([
      {
        job_id: jobId,
        surface: 'http',
        density: '3x3',
        sheets: SAMPLE_SHEETS,
        credits: SAMPLE_SHEETS * PRICE['3x3'],
        refunded: false,
        created_at: expect.any(String),
      },
    ]);

    const first = await fetchBytes(`${main.url}/v1/sheets/${jobId}/video.sheet-1.jpg`);
    expect({ status: first.status, type: first.type }).toEqual({ status: 200, type: 'image/jpeg' });
    expect(Buffer.from(bytes).equals(Buffer.from(first.bytes))).toBe(true);
    const second = await fetchBytes(`${main.url}/v1/sheets/${jobId}/video.sheet-2.jpg`);
    expect(second.status).toBe(200);
    expect(Buffer.from(bytes).equals(Buffer.from(second.bytes))).toBe(false);
    const grid = computeGrid(480, 270, '3x3', false);
    const image = decodeJpeg(bytes);
    expect([image.width, image.height]).toEqual([grid.width, grid.height]);
  });
});

describe('the free daily allowance over HTTP', () => {
  it('a never-purchased account with 0 credits: 5, 3, 1, then 402 (no second allowance the same day)', async () => {
    const account = await newAccount(main);
    expect((await showAccount(main, account.email)).balance).toBe(0);
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const result = await job(main, account.key, sample());
      expect(result.credits_charged).toBe(2);
      remaining.push(result.credits_remaining);
      expect((await showAccount(main, account.email)).balance).toBe(result.credits_remaining);
    }
    expect(remaining).toEqual([5, 3, 1]);
    const before = await showAccount(main, account.email);
    const res = await post(main, { key: account.key, body: form(sample()) });
    await expectError(res, 402, { error: 'insufficient_credits' });
    const after = await showAccount(main, account.email);
    expect(after).toEqual(before);
    expect(after.balance).toBe(1);
    expect(after.purchased).toBe(false);
    expect(after.usage).toHaveLength(3);
  });
});

describe('no upload is left behind', () => {
  it('after a success and after every kind of failure, work/ and the TMPDIR are empty', async () => {
    const account = await newAccount(main, 100);
    // Soft, so one kind that leaves something does not hide the others.
    const check = async (server: TestServer, what: string) => {
      expect.soft(server.leftovers(), `${what}: left when the answer arrived`).toEqual([]);
      // Then wait for it to go anyway, so the next kind is judged on its own.
      await waitFor(() => server.leftovers().length === 0, `${what}: the work directory to be deleted`, 5000);
    };

    // A few of each success: the upload must be gone by the time the answer arrives, every time.
    for (let i = 1; i <= 3; i++) {
      await job(main, account.key, small);
      await check(main, `after success ${i} (json)`);
      const image = await post(main, { key: account.key, body: form(small, [['response', 'image']]) });
      expect(image.status).toBe(200);
      expect(isJpeg(new Uint8Array(await image.arrayBuffer()))).toBe(true);
      await check(main, `after success ${i} (response=image)`);
    }
    await expectError(await post(main, { key: `vs_live_${'0'.repeat(40)}`, body: form(small) }), 401, {
      error: 'invalid_key',
    });
    await check(main, 'after 401');
    await expectError(await post(main, { key: account.key, body: form(small, [['density', '7x7']]) }), 422, {
      error: 'bad_request',
    });
    await check(main, 'after 422 bad_request (bad density, video uploaded)');
    await expectError(
      await post(main, {
        key: account.key,
        body: (() => {
          const body = form(small);
          body.append('video', new Blob([new Uint8Array(small.bytes)]), 'again.mp4');
          return body;
        })(),
      }),
      422,
      { error: 'bad_request' },
    );
    await check(main, 'after 422 bad_request (two videos)');
    await expectError(await post(main, { key: account.key, body: form(textClip) }), 422, {
      error: 'unreadable_video',
    });
    await check(main, 'after 422 unreadable_video');
    const poor = await purchasedAccount(main, 1);
    await expectError(await post(main, { key: poor.key, body: form(sample(), [['density', '6x6']]) }), 402, {
      error: 'insufficient_credits',
    });
    await check(main, 'after 402');

    const cappedAccount = await newAccount(capped, 20);
    await expectError(
      await post(capped, {
        key: cappedAccount.key,
        body: form({ bytes: randomBytes(1_500_000), filename: 'x.mp4' }),
      }),
      413,
      { error: 'too_large', max_mb: 1 },
    );
    await check(capped, 'after 413');
    await expectError(await post(capped, { key: cappedAccount.key, body: form(sample()) }), 422, {
      error: 'too_long',
      max_s: 60,
    });
    await check(capped, 'after 422 too_long');

    const queueAccount = await newAccount(queue, 20);
    const hold = await holdPlace(queue, queueAccount.key);
    try {
      await expectError(await post(queue, { key: queueAccount.key, body: form(small) }), 429, {
        error: 'busy',
      });
      expect(workEntries(queue), 'after 429: only the held upload').toHaveLength(1);
    } finally {
      hold.release();
    }
    await waitFor(() => queue.leftovers().length === 0, 'the abandoned upload to be deleted');
    await check(queue, 'after 429 and the abandoned upload');
  });
});

describe('the API key never appears in the server output', () => {
  it('after successes, refusals and a 401 with a wrong key', async () => {
    const account = await newAccount(main, 20);
    const wrong = `vs_live_${randomBytes(20).toString('hex')}`;
    await job(main, account.key, small);
    await expectError(await post(main, { key: account.key, body: form(textClip) }), 422, {
      error: 'unreadable_video',
    });
    await expectError(await post(main, { key: wrong, body: form(small) }), 401, { error: 'invalid_key' });
    await expectError(await post(main, { auth: `Basic ${account.key}`, body: form(small) }), 401, {
      error: 'invalid_key',
    });
    await sleep(200); // let the last log lines arrive
    const output = main.output();
    // The log is really there (so the check below is not vacuous).
    expect(output).toContain('"msg":"request refused"');
    expect(output).toContain('/v1/vidsheet');
    for (const server of servers) {
      const text = server.output();
      for (const key of [...(mintedKeys.get(server) ?? []), ...(server === main ? [wrong] : [])]) {
        // The hex part alone: neither the key nor its secret part may be written anywhere.
        expect(text.includes(key.slice(8)), `${key.slice(0, 12)}… appears in ${server.url}'s output`).toBe(
          false,
        );
      }
    }
  });
});

describe('health, OpenAPI and not found', () => {
  it('GET /healthz: {"ok":true,"contract":"vidsheet-http-v0","version":<package version>}, then database and storage', async () => {
    const res = await fetch(`${main.url}/healthz`);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(text).toBe(
      JSON.stringify({ ok: true, contract: CONTRACT, version: VERSION, database: 'ok', storage: 'ok' }),
    );
  });

  it('GET /healthz with unusable sheet storage: 503, ok false, and which part failed', async () => {
    const server = await startServer();
    try {
      const sheets = join(server.dataDir, 'sheets');
      rmSync(sheets, { recursive: true });
      const down = await fetch(`${server.url}/healthz`);
      expect(down.status).toBe(503);
      const body = await down.json();
      expect(Object.keys(body)).toEqual(['ok', 'contract', 'version', 'database', 'storage']);
      expect(body).toMatchObject({ ok: false, contract: CONTRACT, database: 'ok' });
      expect(body.storage).not.toBe('ok');
      mkdirSync(sheets);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    } finally {
      await server.stop();
    }
  });

  it('GET /v1/openapi.json is an OpenAPI 3 document of the three routes', async () => {
    const res = await fetch(`${main.url}/v1/openapi.json`);
    expect(res.status).toBe(200);
    // biome-ignore lint/suspicious/noExplicitAny: an OpenAPI document is walked by path here
    const doc = (await res.json()) as any;
    expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/);
    expect(Object.keys(doc.paths).sort()).toEqual(
      expect.arrayContaining(['/healthz', '/v1/sheets/{jobId}/{name}', '/v1/vidsheet']),
    );
    const post = doc.paths['/v1/vidsheet'].post;
    expect(post).toBeDefined();
    expect(Object.keys(post.requestBody?.content ?? {})).toContain('multipart/form-data');
    expect(Object.keys(post.responses).sort()).toEqual([
      '200',
      '401',
      '402',
      '408',
      '413',
      '422',
      '429',
      '500',
    ]);
    expect(doc.paths['/v1/sheets/{jobId}/{name}'].get).toBeDefined();
    expect(doc.paths['/healthz'].get).toBeDefined();
  });

  it('an unknown path is 404 {"error":"not_found"}', async () => {
    await expectError(await fetch(`${main.url}/nope`), 404, { error: 'not_found' });
    await expectError(await fetch(`${main.url}/v1/nope`, { method: 'POST', body: 'x' }), 404, {
      error: 'not_found',
    });
    await expectError(await fetch(`${main.url}/v1/vidsheet`), 404, { error: 'not_found' });
  });

  it('an unknown job id or sheet number on the sheet route is 404 {"error":"not_found"}', async () => {
    const account = await newAccount(main, 20);
    const result = await job(main, account.key, sample());
    expect(result.sheets).toBe(2);
    const base = `${main.url}/v1/sheets`;
    const ok = await fetchBytes(`${base}/${result.job_id}/video.sheet-2.jpg`);
    expect(ok.status).toBe(200);
    const unknown = randomBytes(16).toString('base64url');
    for (const path of [
      `${unknown}/video.sheet-1.jpg`,
      `${result.job_id.slice(0, 21)}/video.sheet-1.jpg`,
      `${result.job_id}/video.sheet-3.jpg`,
      `${result.job_id}/video.sheet-0.jpg`,
      `${result.job_id}/video.sheet-01.jpg`,
      `${result.job_id}/video.sheet-1.png`,
      `${result.job_id}/upload.mp4`,
      `${result.job_id}/sample.sheet-1.jpg`,
      `${result.job_id}`,
    ]) {
      const res = await fetch(`${base}/${path}`);
      const text = await res.text();
      expect({ path, status: res.status, body: text }).toEqual({
        path,
        status: 404,
        body: '{"error":"not_found"}',
      });
    }
  });
});
