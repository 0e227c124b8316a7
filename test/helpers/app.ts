/**
 * The app in process (`buildApp` + `inject`, or a real listener on 127.0.0.1 where the transport
 * matters), for the tests that need no worker: a real SQLite ledger in a temporary directory, real
 * sheet storage, and a fake hosted job. `useApps()` registers the vitest hooks that open the database
 * before the file's tests and close every app and raw client after each test.
 */
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net, { type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
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

/** The base URL the in-process apps are configured with (its host is the one `/mcp` allows). */
export const APP_BASE = 'http://127.0.0.1:9';
export const APP_VERSION = '9.9.9-test';

const silent = { info() {}, warn() {}, error() {} };

export interface AppOptions {
  admission?: Admission;
  transfers?: Transfers;
  freeActors?: FreeActors;
  anonymous?: AppParts['anonymous'];
  checkDatabase?: () => Promise<void>;
  storage?: SheetStorage;
  /** Collects the app's log lines (JSON text) when given. */
  log?: string[];
  /** DESIGN §5a's 30 s body deadline, shortened. */
  bodyDeadlineMs?: number;
  /** More variables (DESIGN §7). */
  env?: Record<string, string>;
}

/** A raw loopback connection: what the server sends, and when it closes. */
export interface RawClient {
  socket: Socket;
  received(): string;
  /** Resolves with the time the connection closed. */
  closed: Promise<number>;
}

export interface Apps {
  /** The data directory (set before the file's tests run). */
  readonly dir: string;
  readonly db: Kysely<Database>;
  /** The ledger over `db` (allowance floor 7): accounts are set up through it. */
  readonly ledger: Ledger;
  /** Every hosted job asked of the fake, this test. */
  readonly runs: HostedJobRequest[];
  /** What the fake hosted job does (by default: throws, no job expected). */
  runJob: (request: HostedJobRequest) => ReturnType<HostedJobs['run']>;
  /** The app over the shared database. */
  app(options?: AppOptions): Promise<FastifyInstance>;
  /** A raw connection to the app, listening on 127.0.0.1 (started here when it is not yet). */
  rawClient(server: FastifyInstance): Promise<RawClient>;
}

const noJob = () => {
  throw new Error('no job expected');
};

/** Registers the hooks and returns the file's apps (see the module comment). */
export function useApps(): Apps {
  let dir = '';
  let db: Kysely<Database> | undefined;
  let ledger: Ledger | undefined;
  const built: FastifyInstance[] = [];
  /** Raw loopback clients a test opened: gone before the apps close. */
  const sockets: Socket[] = [];
  const apps: Apps = {
    get dir() {
      return dir;
    },
    get db() {
      if (!db) throw new Error('the database opens in beforeAll');
      return db;
    },
    get ledger() {
      if (!ledger) throw new Error('the ledger opens in beforeAll');
      return ledger;
    },
    runs: [],
    runJob: noJob,
    app: async (options = {}) => {
      const app = await buildTestApp(apps, options);
      built.push(app);
      return app;
    },
    rawClient: async (server) => {
      if (!server.server.listening) await server.listen({ host: '127.0.0.1', port: 0 });
      const { port } = server.server.address() as AddressInfo;
      const socket = net.connect(port, '127.0.0.1');
      sockets.push(socket);
      await once(socket, 'connect');
      let received = '';
      socket.on('data', (chunk) => (received += chunk));
      socket.on('error', () => {});
      const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
      return { socket, received: () => received, closed };
    },
  };
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vidsheet-app-'));
    mkdirSync(join(dir, 'sheets'));
    db = await openDatabase({ dataDir: dir });
    ledger = new Ledger(db, { allowanceFloor: 7 });
  });
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    for (const app of built.splice(0)) await app.close();
    apps.runs.length = 0;
  });
  afterAll(async () => {
    await db?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  return apps;
}

async function buildTestApp(apps: Apps, options: AppOptions): Promise<FastifyInstance> {
  const { dir, db, ledger } = apps;
  const config = loadConfig({ VIDSHEET_BASE_URL: APP_BASE, VIDSHEET_DATA_DIR: dir, ...options.env });
  const clock = () => new Date();
  const storage = options.storage ?? new LocalSheetStorage(join(dir, 'sheets'));
  const store = storage.under?.('videos') ?? new LocalSheetStorage(join(dir, 'sheets', 'videos'));
  const parts: AppParts = {
    config,
    version: APP_VERSION,
    clock,
    checkDatabase: options.checkDatabase ?? (async () => {}),
    ledger,
    storage,
    hosted: {
      admission: options.admission ?? new Admission(2),
      transfers: options.transfers ?? new Transfers(8, 2),
      freeActors: options.freeActors ?? new FreeActors((id) => ledger.credits.livesOnAllowance(id)),
      jobs: {
        run: (request) => {
          apps.runs.push(request);
          return apps.runJob(request);
        },
        probe: () => {
          throw new Error('no probe expected');
        },
      },
    },
    sessions: {
      registry: new VideoRegistry(db, clock),
      store,
      cache: new VideoCache(join(dir, 'video-cache'), 1024 * 1024, store),
    },
    anonymous: options.anonymous ?? new AnonymousLane(db, { daily: 3, perAddress: 30, ceiling: 100, clock }),
    keysPage: {
      sessions: new Sessions(db, { clock }),
      signIn: new SignIn({ db, ledger, mailer: createMailer(config, silent), clock, log: silent }),
      payments: new Payments({ config, db, ledger, clock, log: silent }),
    },
  };
  const lines = options.log;
  const loggerInstance = lines
    ? pino(
        { level: 'info' },
        new Writable({
          write(chunk, _encoding, done) {
            lines.push(String(chunk));
            done();
          },
        }),
      )
    : undefined;
  return buildApp(parts, { loggerInstance, bodyDeadlineMs: options.bodyDeadlineMs });
}

/** A multipart body with one `video` part (a few bytes: the fake job never opens it). */
export function multipartUpload(fields: Record<string, string> = {}) {
  const boundary = 'vidsheet-test-boundary';
  const parts = [
    ...Object.entries(fields).map(
      ([name, value]) =>
        `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
    ),
    `--${boundary}\r\ncontent-disposition: form-data; name="video"; filename="clip.mp4"\r\n` +
      'content-type: video/mp4\r\n\r\nnot really a video\r\n',
    `--${boundary}--\r\n`,
  ];
  return {
    payload: parts.join(''),
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
  };
}

/**
 * An injected `tools/call` on `POST /mcp`, anonymous (a test adds `authorization` to the headers),
 * with the Host the apps allow; `name` is the remote tool's unless given.
 */
export function mcpToolCall(
  args: Record<string, unknown>,
  meta?: Record<string, unknown>,
  name = 'vidsheet_video',
) {
  return {
    method: 'POST' as const,
    url: '/mcp',
    headers: {
      host: new URL(APP_BASE).host,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
    } as Record<string, string>,
    payload: {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) },
    },
  };
}

/** The text blocks of an injected tool call's result. */
export const toolTexts = (res: { json(): unknown }) =>
  (res.json() as { result: { content: Array<{ text: string }> } }).result.content.map((c) => c.text);

/** The body of a raw HTTP answer (after its headers). */
export const bodyOf = (raw: string) => raw.slice(raw.indexOf('\r\n\r\n') + 4);
