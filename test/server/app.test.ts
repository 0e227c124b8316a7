/**
 * The app in process (`buildApp` + `inject`, no listening server, no worker): a real SQLite ledger in a
 * temporary directory, real sheet storage, and a fake hosted job where a test needs one. Fast feedback
 * for what every route shares: the auth plugin, the not-found answer, the error handler, OpenAPI.
 * The spawned-server contract tests (http.test.ts, remote/mcp.test.ts) check the same rules end to end.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net, { type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AppParts, buildApp } from '../../src/server/app.js';
import { AnonymousLane } from '../../src/server/billing/anonymous-lane.js';
import { Ledger } from '../../src/server/billing/ledger.js';
import { Payments } from '../../src/server/billing/payments.js';
import { loadConfig } from '../../src/server/config.js';
import { openDatabase } from '../../src/server/db/open.js';
import type { Database } from '../../src/server/db/schema.js';
import { Admission } from '../../src/server/hosted/admission.js';
import { FreeActors } from '../../src/server/hosted/free-actors.js';
import type { HostedJobRequest, HostedJobs } from '../../src/server/hosted/jobs.js';
import { Transfers } from '../../src/server/hosted/transfers.js';
import { createMailer } from '../../src/server/keys/mail.js';
import { Sessions } from '../../src/server/keys/sessions.js';
import { SignIn } from '../../src/server/keys/sign-in.js';
import { VideoCache } from '../../src/server/sessions/cache.js';
import { VideoRegistry } from '../../src/server/sessions/registry.js';
import { LocalSheetStorage } from '../../src/server/storage/local.js';
import type { SheetStorage } from '../../src/server/storage/storage.js';
import {
  bodyOf,
  collectingLogger,
  MCP_HEADERS,
  mcpToolCall,
  rawConnect,
  multipartUpload as upload,
} from '../helpers/app.js';
import { slowUpload } from '../helpers/slow-client.js';
import { waitFor } from '../helpers/wait.js';

const BASE = 'http://127.0.0.1:9';
const VERSION = '9.9.9-test';
const INVALID_KEY = '{"error":"invalid_key"}';
const NOT_FOUND = '{"error":"not_found"}';
/** What a failing engine might say: none of it may reach a client. */
const INTERNAL = 'ffmpeg exited 1 reading /srv/vidsheet/data/work/abc/upload.mp4: moov atom not found';

const silent = { info() {}, warn() {}, error() {} };
let dir: string;
let db: Kysely<Database>;
let ledger: Ledger;
let key: string;
let revokedKey: string;
let accountId: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vidsheet-app-'));
  mkdirSync(join(dir, 'sheets'));
  db = await openDatabase({ dataDir: dir });
  ledger = new Ledger(db, { allowanceFloor: 7 });
  const account = await ledger.accounts.findOrCreateAccount('app@example.com');
  accountId = account.id;
  key = (await ledger.accounts.createKey(account.id)).key;
  revokedKey = (await ledger.accounts.createKey(account.id)).key;
  expect(await ledger.accounts.revokeKey(revokedKey)).toBe(true);
});
afterAll(async () => {
  await db.destroy();
  rmSync(dir, { recursive: true, force: true });
});

/** Every hosted job this file asked for, and what the fake answers. */
const runs: HostedJobRequest[] = [];
let runJob: (request: HostedJobRequest) => ReturnType<HostedJobs['run']> = () => {
  throw new Error('no job expected');
};
const apps: FastifyInstance[] = [];
/** Raw loopback clients a test opened (`rawClient`): gone before the apps close. */
const rawSockets: Socket[] = [];
afterEach(async () => {
  for (const socket of rawSockets.splice(0)) socket.destroy();
  for (const app of apps.splice(0)) await app.close();
  runs.length = 0;
});

/** The app over the shared database; `log` collects its log lines when given. */
async function app(
  options: {
    admission?: Admission;
    checkDatabase?: () => Promise<void>;
    storage?: SheetStorage;
    log?: string[];
    /** DESIGN §5a's 30 s body deadline, shortened. */
    bodyDeadlineMs?: number;
    /** More variables (DESIGN §7). */
    env?: Record<string, string>;
  } = {},
) {
  const config = loadConfig({ VIDSHEET_BASE_URL: BASE, VIDSHEET_DATA_DIR: dir, ...options.env });
  const clock = () => new Date();
  const parts: AppParts = {
    config,
    version: VERSION,
    clock,
    checkDatabase: options.checkDatabase ?? (async () => {}),
    ledger,
    storage: options.storage ?? new LocalSheetStorage(join(dir, 'sheets')),
    hosted: {
      admission: options.admission ?? new Admission(2),
      transfers: new Transfers(8, 2),
      freeActors: new FreeActors((id) => ledger.credits.livesOnAllowance(id)),
      jobs: {
        run: (request) => {
          runs.push(request);
          return runJob(request);
        },
        probe: () => {
          throw new Error('no probe expected');
        },
      },
    },
    sessions: (() => {
      const sheets = options.storage ?? new LocalSheetStorage(join(dir, 'sheets'));
      const store = sheets.under?.('videos') ?? new LocalSheetStorage(join(dir, 'sheets', 'videos'));
      return {
        registry: new VideoRegistry(db, clock),
        store,
        cache: new VideoCache(join(dir, 'video-cache'), 1024 * 1024, store),
      };
    })(),
    anonymous: new AnonymousLane(db, { daily: 3, perAddress: 30, ceiling: 100, clock }),
    keysPage: {
      sessions: new Sessions(db, { clock }),
      signIn: new SignIn({ db, ledger, mailer: createMailer(config, silent), clock, log: silent }),
      payments: new Payments({ config, db, ledger, clock, log: silent }),
    },
  };
  const loggerInstance = options.log ? collectingLogger(options.log) : undefined;
  const built = await buildApp(parts, { loggerInstance, bodyDeadlineMs: options.bodyDeadlineMs });
  apps.push(built);
  return built;
}

describe('the auth plugin', () => {
  const refused: Array<[string, () => string | undefined]> = [
    ['no Authorization header', () => undefined],
    ['not Bearer', () => `Basic ${Buffer.from(`user:${key}`).toString('base64')}`],
    ['Bearer without a key', () => 'Bearer '],
    ['a malformed key', () => 'Bearer vs_live_not-hex'],
    ['an unknown key of the right shape', () => `Bearer vs_live_${'0'.repeat(40)}`],
    ['a revoked key', () => `Bearer ${revokedKey}`],
    ['a live key with trailing junk', () => `Bearer ${key} extra`],
  ];

  it.each(refused)('POST /v1/vidsheet with %s: 401 invalid_key, no job', async (_name, header) => {
    const server = await app();
    const authorization = header();
    const res = await server.inject({
      method: 'POST',
      url: '/v1/vidsheet',
      ...upload(),
      headers: { ...upload().headers, ...(authorization === undefined ? {} : { authorization }) },
    });
    expect([res.statusCode, res.body]).toEqual([401, INVALID_KEY]);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(runs).toEqual([]);
  });

  it('is checked before the queue: a full queue still answers 401 to a bad key, 429 to a good one', async () => {
    const admission = new Admission(1);
    const place = admission.tryEnter();
    expect(place).toBeDefined();
    const server = await app({ admission });
    const anonymous = await server.inject({ method: 'POST', url: '/v1/vidsheet', ...upload() });
    expect([anonymous.statusCode, anonymous.body]).toEqual([401, INVALID_KEY]);
    const keyed = await server.inject({
      method: 'POST',
      url: '/v1/vidsheet',
      ...upload(),
      headers: { ...upload().headers, authorization: `Bearer ${key}` },
    });
    expect([keyed.statusCode, keyed.body]).toEqual([429, '{"error":"busy"}']);
    place?.();
    expect(admission.size).toBe(0);
  });

  it('early answers on one kept-alive connection leave nothing attached to its socket (issue 21 leak)', async () => {
    // Each 401 goes out while the body is unfinished, so the drain deadline is armed; the body then
    // ends and the next request comes on the same connection. A per-request listener left on the
    // socket would hold that request for as long as the client keeps the connection open.
    const server = await app();
    const sockets: Socket[] = [];
    server.server.on('connection', (socket: Socket) => sockets.push(socket));
    await server.listen({ host: '127.0.0.1', port: 0 });
    const { port } = server.server.address() as AddressInfo;
    const client = net.connect(port, '127.0.0.1');
    await once(client, 'connect');
    let received = '';
    client.on('data', (chunk) => (received += chunk));
    const closeListeners: number[] = [];
    for (let i = 0; i < 15; i++) {
      received = '';
      client.write(
        `POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer vs_live_${'0'.repeat(40)}\r\n` +
          'Content-Type: application/octet-stream\r\nContent-Length: 20000\r\n\r\n',
      );
      client.write(Buffer.alloc(1000, 0x2a));
      await waitFor(() => received.endsWith(INVALID_KEY), 'the 401');
      expect(received).toMatch(/^HTTP\/1\.1 401 /);
      expect(received).not.toMatch(/^connection: close/im);
      client.write(Buffer.alloc(19_000, 0x2a));
      // By this answer the server has read every earlier body to its end (one request at a time).
      closeListeners.push((sockets[0] as Socket).listenerCount('close'));
    }
    client.destroy();
    expect(sockets).toHaveLength(1);
    expect(closeListeners.at(-1)).toBe(closeListeners[1]);
  });

  it('a live key (any case of "bearer", spaces around) reaches the job as its account', async () => {
    runJob = async () => {
      throw new Error('stop here');
    };
    const server = await app();
    for (const authorization of [`Bearer ${key}`, `bearer   ${key}  `]) {
      await server.inject({
        method: 'POST',
        url: '/v1/vidsheet',
        ...upload({ density: '4x4' }),
        headers: { ...upload().headers, authorization },
      });
    }
    expect(runs.map((r) => [r.payer, r.surface, r.density, r.inputName])).toEqual([
      [{ accountId }, 'http', '4x4', 'clip.mp4'],
      [{ accountId }, 'http', '4x4', 'clip.mp4'],
    ]);
  });

  describe('POST /mcp: a header that is present must hold a live key', () => {
    const mcp = (authorization?: string) => ({
      method: 'POST' as const,
      url: '/mcp',
      headers: { ...MCP_HEADERS, ...(authorization === undefined ? {} : { authorization }) },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
    });

    it.each(refused.slice(1))('%s: 401 invalid_key, never the anonymous lane', async (_name, header) => {
      const res = await (await app()).inject(mcp(header()));
      expect([res.statusCode, res.body]).toEqual([401, INVALID_KEY]);
    });

    it('no header (anonymous) and a live key both reach the tool', async () => {
      const server = await app();
      for (const authorization of [undefined, `Bearer ${key}`]) {
        const res = await server.inject(mcp(authorization));
        expect(res.statusCode).toBe(200);
        const tools = (res.json() as { result: { tools: Array<{ name: string }> } }).result.tools;
        expect(tools.map((t) => t.name)).toEqual(['vidsheet_video']);
      }
    });

    it.each([
      ['a form', 'jsonrpc=2.0', 'application/x-www-form-urlencoded'],
      ['text', '{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 'text/plain'],
      ['XML', '<call/>', 'application/xml'],
    ])("a body sent as %s is 415, in the shape of the zoom's", async (_name, payload, contentType) => {
      const res = await (await app()).inject({
        ...mcp(),
        headers: { ...MCP_HEADERS, 'content-type': contentType },
        payload,
      });
      expect([res.statusCode, res.body]).toEqual([415, NOT_JSON]);
    });
  });
});

describe('the answers every route shares', () => {
  it('an unknown route, method or sheet is 404 {"error":"not_found"}', async () => {
    const server = await app();
    const answers = await Promise.all(
      [
        { method: 'GET' as const, url: '/nothing-here' },
        { method: 'PUT' as const, url: '/v1/vidsheet' },
        { method: 'GET' as const, url: `/v1/sheets/${'A'.repeat(22)}/video.sheet-1.jpg` },
        { method: 'GET' as const, url: `/v1/sheets/${'A'.repeat(22)}/video.sheet-0.jpg` },
        { method: 'GET' as const, url: '/v1/sheets/short/video.sheet-1.jpg' },
      ].map((request) => server.inject(request)),
    );
    expect(answers.map((res) => [res.statusCode, res.body])).toEqual(Array(5).fill([404, NOT_FOUND]));
  });

  /** The 500 body, exactly, and the detail in the log line of the request; nothing internal leaks. */
  async function expectOpaque500(
    request: (server: FastifyInstance) => Promise<{ statusCode: number; body: string; headers: object }>,
    storage?: SheetStorage,
  ) {
    const log: string[] = [];
    const res = await request(await app({ log, storage }));
    expect([res.statusCode, res.body]).toEqual([500, '{"error":"processing_failed","refunded":true}']);
    for (const leak of ['ffmpeg', '/srv', 'moov', 'Error', 'at ']) {
      expect(JSON.stringify(res.headers) + res.body).not.toContain(leak);
    }
    const failed = log.map((line) => JSON.parse(line)).find((line) => line.msg === 'request failed');
    expect(failed?.detail).toBe(INTERNAL);
    expect(failed?.err?.message).toBe(INTERNAL);
    expect(failed?.err?.stack).toContain('app.test.ts');
    expect(failed?.reqId).toMatch(/^[0-9a-f]{16}$/);
  }

  it('a failure inside a job is 500 {"error":"processing_failed","refunded":true}; the detail only in the log', async () => {
    runJob = async () => {
      throw new Error(INTERNAL);
    };
    await expectOpaque500((server) =>
      server.inject({
        method: 'POST',
        url: '/v1/vidsheet',
        ...upload(),
        headers: { ...upload().headers, authorization: `Bearer ${key}` },
      }),
    );
    // The video of a failed job is gone before the answer leaves.
    expect(runs).toHaveLength(1);
    expect(readdirSync(join(dir, 'work'))).toEqual([]);
  });

  it('a route with no 500 in its schema leaks nothing either (the error handler, not the serializer)', async () => {
    const jobId = 'B'.repeat(22);
    await ledger.credits.grant(accountId, 1);
    const charged = await ledger.credits.charge({
      accountId,
      jobId,
      price: 1,
      surface: 'http',
      density: '3x3',
      sheets: 1,
      ttlSeconds: 3600,
    });
    expect(charged.ok).toBe(true);
    await ledger.jobs.finishJob(jobId);
    const broken: SheetStorage = {
      put: async () => {},
      remove: async () => {},
      get: async () => {
        throw new Error(INTERNAL);
      },
    };
    await expectOpaque500(
      (server) => server.inject({ method: 'GET', url: `/v1/sheets/${jobId}/video.sheet-1.jpg` }),
      broken,
    );
  });

  it('/healthz says which dependency does not answer: 503 with a fixed word, never the driver text', async () => {
    const down = await app({
      checkDatabase: async () => {
        throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
      },
    });
    const res = await down.inject({ method: 'GET', url: '/healthz' });
    expect([res.statusCode, res.body]).toEqual([
      503,
      JSON.stringify({
        ok: false,
        contract: 'vidsheet-http-v0',
        version: VERSION,
        database: 'unreachable',
        storage: 'ok',
      }),
    ]);
    const up = await (await app()).inject({ method: 'GET', url: '/healthz' });
    expect([up.statusCode, up.json()]).toEqual([
      200,
      { ok: true, contract: 'vidsheet-http-v0', version: VERSION, database: 'ok', storage: 'ok' },
    ]);
  });

  it('serves the OpenAPI document of the public routes only', async () => {
    const res = await (await app()).inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as {
      openapi: string;
      info: { title: string; version: string };
      servers: Array<{ url: string }>;
      paths: Record<string, Record<string, { security?: unknown }>>;
      components: { securitySchemes: unknown };
    };
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.title).toBe('vidsheet hosted API');
    expect(doc.info.version).toBe(VERSION);
    expect(doc.servers).toEqual([{ url: BASE }]);
    expect(Object.keys(doc.paths).sort()).toEqual([
      '/healthz',
      '/v1/sheets/{jobId}/{name}',
      '/v1/videos',
      '/v1/videos/{videoId}',
      '/v1/videos/{videoId}/sheets',
      '/v1/vidsheet',
    ]);
    expect(doc.paths['/v1/vidsheet']?.post?.security).toEqual([{ bearer: [] }]);
    // DESIGN §9's routes, each behind the key, with their codes.
    const videos = doc.paths as Record<string, Record<string, { security?: unknown; responses?: object }>>;
    for (const [path, method, codes] of [
      ['/v1/videos', 'post', ['201', '401', '402', '408', '409', '413', '422', '429', '500']],
      [
        '/v1/videos/{videoId}/sheets',
        'post',
        ['200', '401', '402', '404', '408', '415', '422', '429', '500'],
      ],
      ['/v1/videos/{videoId}', 'get', ['200', '401', '404']],
      ['/v1/videos/{videoId}', 'delete', ['204', '401', '404']],
    ] as const) {
      expect(videos[path]?.[method]?.security, `${method} ${path}`).toEqual([{ bearer: [] }]);
      expect(Object.keys(videos[path]?.[method]?.responses ?? {}).sort(), `${method} ${path}`).toEqual([
        ...codes,
      ]);
    }
    expect(doc.components.securitySchemes).toEqual({ bearer: { type: 'http', scheme: 'bearer' } });
  });
});

/** A raw loopback connection: what the server sends, and when it closes. */
async function rawClient(server: FastifyInstance) {
  if (!server.server.listening) await server.listen({ host: '127.0.0.1', port: 0 });
  const { port } = server.server.address() as AddressInfo;
  const client = await rawConnect(port);
  rawSockets.push(client.socket);
  return client;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** DESIGN §5a's answers, written out as DESIGN words them. */
const TOO_SLOW = '{"error":"bad_request","message":"the request body was too slow"}';
const NOT_JSON = '{"error":"bad_request","message":"send the body as application/json"}';

describe('every body has a deadline (DESIGN §5a)', () => {
  const DEADLINE_MS = 400;
  // The review's routes: each one took a body one byte at a time for as long as the client liked.
  const routes: Array<[string, () => string]> = [
    ['/stripe/webhook', () => 'Content-Type: application/json\r\n'],
    ['/keys/code', () => 'Content-Type: application/x-www-form-urlencoded\r\n'],
    ['/mcp', () => 'Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n'],
    [
      `/v1/videos/${'A'.repeat(22)}/sheets`,
      () => `Content-Type: application/json\r\nAuthorization: Bearer ${key}\r\n`,
    ],
  ];

  it.each(routes)(
    'POST %s: one body byte, then nothing: 408 too slow at the deadline, the connection closed',
    async (path, headers) => {
      const lines: string[] = [];
      const server = await app({ bodyDeadlineMs: DEADLINE_MS, log: lines });
      const client = await rawClient(server);
      const sent = Date.now();
      client.socket.write(
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:9\r\n${headers()}Content-Length: 100\r\n\r\n{`,
      );
      const closedAt = await Promise.race([client.closed, sleep(5000).then(() => 0)]);
      expect(closedAt, 'the connection is closed').toBeGreaterThan(0);
      expect(closedAt - sent).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
      expect(client.received()).toMatch(/^HTTP\/1\.1 408 /);
      expect(bodyOf(client.received())).toBe(TOO_SLOW);
      // Answered once: nothing about a second reply, nothing above info.
      expect(lines.map((line) => JSON.parse(line) as { level: number }).filter((l) => l.level > 30)).toEqual(
        [],
      );
    },
  );

  it('a body nobody reads (GET /healthz) is answered, then its connection closed at the deadline', async () => {
    const server = await app({ bodyDeadlineMs: DEADLINE_MS });
    const client = await rawClient(server);
    const sent = Date.now();
    client.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Length: 100\r\n\r\nx');
    const closedAt = await Promise.race([client.closed, sleep(5000).then(() => 0)]);
    expect(closedAt, 'the connection is closed').toBeGreaterThan(0);
    expect(closedAt - sent).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
    expect(client.received()).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('an upload must be complete within VIDSHEET_UPLOAD_TIMEOUT_S, however steadily it trickles', async () => {
    const server = await app({ env: { VIDSHEET_UPLOAD_TIMEOUT_S: '1' } });
    await server.listen({ host: '127.0.0.1', port: 0 });
    const { port } = server.server.address() as AddressInfo;
    const upload = await slowUpload(`http://127.0.0.1:${port}`, key, { size: 1024 * 1024, first: 1000 });
    const sent = Date.now();
    // Faster than the stall rule asks for (no idle gap, 64 KiB in every 30 s), never finished.
    const trickle = setInterval(() => upload.send(Buffer.alloc(4096, 0x2a)), 100);
    try {
      const answer = await Promise.race([upload.answer(), sleep(5000).then(() => 'no answer in 5 s')]);
      expect(answer).toEqual({ status: 408, body: TOO_SLOW });
      expect(Date.now() - sent).toBeGreaterThanOrEqual(900);
      await waitFor(() => upload.closed(), 'the connection closed');
    } finally {
      clearInterval(trickle);
      upload.destroy();
    }
    expect(runs).toEqual([]);
    await waitFor(() => readdirSync(join(dir, 'work')).length === 0, 'the partial upload deleted');
  });

  it('a stop closes at once the connections only receiving a body, and waits for nothing else', async () => {
    const server = await app();
    const clients = await Promise.all([rawClient(server), rawClient(server)]);
    (clients[0] as Awaited<ReturnType<typeof rawClient>>).socket.write(
      'POST /stripe/webhook HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
    );
    (clients[1] as Awaited<ReturnType<typeof rawClient>>).socket.write(
      `POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1:9\r\nAuthorization: Bearer ${key}\r\n` +
        'Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\n',
    );
    await sleep(200);
    const started = Date.now();
    await Promise.race([server.close(), sleep(3000)]);
    expect(Date.now() - started).toBeLessThan(2000);
    for (const client of clients) {
      const closedAt = await Promise.race([client.closed, sleep(1000).then(() => 0)]);
      expect(closedAt).toBeGreaterThan(0);
    }
  });
});

describe("Node's and Fastify's own refusals have the catalog's shape (DESIGN §5)", () => {
  it('a body the client ends short: 400 bad_request with a message, not Fastify\'s "Bad Request"', async () => {
    const server = await app();
    const client = await rawClient(server);
    client.socket.end(
      'POST /stripe/webhook HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":',
    );
    await client.closed;
    expect(client.received()).toMatch(/^HTTP\/1\.1 400 /);
    expect(bodyOf(client.received())).toBe(
      '{"error":"bad_request","message":"the request body was cut short"}',
    );
  });

  it('a malformed request is 400, headers too large 431, each {"error":"bad_request","message":...}', async () => {
    const server = await app();
    const malformed = await rawClient(server);
    malformed.socket.write('GET /healthz HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n');
    await malformed.closed;
    expect(malformed.received()).toMatch(/^HTTP\/1\.1 400 /);
    expect(bodyOf(malformed.received())).toBe('{"error":"bad_request","message":"the request is malformed"}');
    const large = await rawClient(server);
    large.socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    await large.closed;
    expect(large.received()).toMatch(/^HTTP\/1\.1 431 /);
    expect(bodyOf(large.received())).toBe(
      '{"error":"bad_request","message":"the request headers are too large"}',
    );
  });

  it('an Expect other than 100-continue is 417 {"error":"bad_request","message":...}, not an empty body', async () => {
    const server = await app();
    const client = await rawClient(server);
    client.socket.write(
      'POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 200-ok\r\nContent-Length: 0\r\n\r\n',
    );
    await client.closed;
    expect(client.received()).toMatch(/^HTTP\/1\.1 417 /);
    // Node sends it chunked: one chunk, then the last.
    const [size, body, last] = bodyOf(client.received()).split('\r\n');
    const expected =
      '{"error":"bad_request","message":"the only expectation served is Expect: 100-continue"}';
    expect([Number.parseInt(size as string, 16), body, last]).toEqual([expected.length, expected, '0']);
  });

  it('a JSON content type with no body is no body: a method refused is 405, an unknown route 404', async () => {
    const server = await app();
    const ask = (method: 'DELETE' | 'PUT', url: string) =>
      server.inject({ method, url, headers: MCP_HEADERS });
    const refused = await ask('DELETE', '/mcp');
    expect([refused.statusCode, refused.body]).toEqual([405, '{"error":"method_not_allowed"}']);
    // Nor is a body these methods carry ever parsed.
    const malformed = await server.inject({
      method: 'DELETE',
      url: '/mcp',
      headers: MCP_HEADERS,
      payload: '{{{',
    });
    expect([malformed.statusCode, malformed.body]).toEqual([405, '{"error":"method_not_allowed"}']);
    const unknown = await ask('PUT', '/mcp');
    expect([unknown.statusCode, unknown.body]).toEqual([404, '{"error":"not_found"}']);
  });
});

describe('small inputs stay small (DESIGN §5a)', () => {
  /** An account with a kept video (a row only: no test here gets as far as opening it). */
  async function keptVideo(balance?: number) {
    const account = await ledger.accounts.findOrCreateAccount(`small-${randomUUID()}@example.com`);
    const owner = (await ledger.accounts.createKey(account.id)).key;
    if (balance !== undefined) {
      await db.updateTable('accounts').set({ balance, purchased: 1 }).where('id', '=', account.id).execute();
    }
    const videoId = randomUUID().replaceAll('-', '').slice(0, 22);
    const registry = new VideoRegistry(db, () => new Date());
    const probe = { durationMs: 10_000 };
    const fields = { videoId, accountId: account.id, input: 'clip.mp4', fileName: 'upload.mp4', bytes: 10 };
    expect(
      await registry.add({ ...fields, durationMs: 10_000, probe }, 3600, { maxVideos: 5, maxBytes: 1 << 30 }),
    ).toHaveProperty('expiresAt');
    return { owner, videoId, accountId: account.id };
  }
  const zoom = (videoId: string, owner: string, payload: unknown, contentType = 'application/json') => ({
    method: 'POST' as const,
    url: `/v1/videos/${videoId}/sheets`,
    headers: { authorization: `Bearer ${owner}`, 'content-type': contentType },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });

  it.each(['start', 'end', 'density', 'response'])(
    'a zoom %s over 2048 characters is 422 naming it, never echoed (body and log)',
    async (field) => {
      const { owner, videoId } = await keptVideo();
      const lines: string[] = [];
      const server = await app({ log: lines });
      const huge = `9${'x'.repeat(100_000)}`;
      const res = await server.inject(zoom(videoId, owner, { [field]: huge }));
      expect([res.statusCode, res.body]).toEqual([
        422,
        `{"error":"bad_request","message":"${field} is longer than 2048 characters"}`,
      ]);
      expect(lines.join('\n')).not.toContain('x'.repeat(65));
      expect(runs).toEqual([]);
    },
  );

  it('a bad start of 2048 characters is quoted by 64 of them at most', async () => {
    const { owner, videoId } = await keptVideo();
    const lines: string[] = [];
    const server = await app({ log: lines });
    const long = 'y'.repeat(2048);
    const res = await server.inject(zoom(videoId, owner, { start: long }));
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({
      error: 'bad_request',
      message: `could not parse start "${'y'.repeat(64)}…" — use seconds (90) or a timecode (1:30, 1:07.3)`,
    });
    expect(lines.join('\n')).not.toContain('y'.repeat(65));
  });

  it('the hosted form ignores start and end, however long', async () => {
    runJob = async () => {
      throw new Error('stop here');
    };
    const server = await app();
    const res = await server.inject({
      method: 'POST',
      url: '/v1/vidsheet',
      ...upload({ start: 'z'.repeat(100_000), end: 'z'.repeat(3000) }),
      headers: { ...upload().headers, authorization: `Bearer ${key}` },
    });
    expect(res.statusCode).toBe(500);
    expect(runs).toHaveLength(1);
  });

  it.each([
    ['a form', 'density=4x4', 'application/x-www-form-urlencoded'],
    [
      'multipart',
      '--b\r\ncontent-disposition: form-data; name="density"\r\n\r\n4x4\r\n--b--\r\n',
      'multipart/form-data; boundary=b',
    ],
    ['text', '{"density":"4x4"}', 'text/plain'],
  ])('a zoom sent as %s is 415 and not charged', async (_name, payload, contentType) => {
    const { owner, videoId, accountId: owned } = await keptVideo();
    const books = () => db.selectFrom('ledger').selectAll().where('account_id', '=', owned).execute();
    const before = await books();
    const server = await app();
    const res = await server.inject(zoom(videoId, owner, payload, contentType));
    expect([res.statusCode, res.body]).toEqual([415, NOT_JSON]);
    expect(runs).toEqual([]);
    expect(await books()).toEqual(before);
  });

  it('a zoom that could not pay is 402 before it takes a queue place (a full queue does not hide it)', async () => {
    const { owner, videoId } = await keptVideo(0);
    const admission = new Admission(1);
    const place = admission.tryEnter();
    const server = await app({ admission });
    const res = await server.inject(zoom(videoId, owner, {}));
    expect([res.statusCode, res.body]).toEqual([402, '{"error":"insufficient_credits"}']);
    expect(admission.size).toBe(1);
    place?.();
  });

  describe('the remote tool', () => {
    const call = mcpToolCall;
    const url = 'https://example.com/clip.mp4';

    it.each([
      ['video_url', { video_url: `https://example.com/${'v'.repeat(3000)}.mp4` }, undefined],
      ['start', { video_url: url, start: `1${'0'.repeat(100_000)}` }, undefined],
      ['end', { video_url: url, end: 'e'.repeat(2049) }, undefined],
      ['subject id', { video_url: url }, { 'openai/subject': 's'.repeat(2049) }],
    ])('an over-long %s is an error result naming it, the value never echoed', async (field, args, meta) => {
      const lines: string[] = [];
      const res = await (await app({ log: lines })).inject(call(args, meta));
      expect(res.statusCode).toBe(200);
      const result = (res.json() as { result: { isError: boolean; content: Array<{ text: string }> } })
        .result;
      expect(result.isError).toBe(true);
      expect(result.content.map((c) => c.text)).toEqual([`${field} is longer than 2048 characters`]);
      expect(lines.join('\n')).not.toMatch(/([vse0])\1{64}/);
    });
  });
});
