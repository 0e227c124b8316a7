/**
 * The app in process (`buildApp`, then `inject` or a listener on loopback) over real components, on
 * either database the server speaks: inside `describe.each(BACKENDS)`, `inProcessApps(name)` registers
 * the suite's databases (test/helpers/databases.ts) and, for PostgreSQL, an S3-compatible store
 * (test/helpers/s3.ts, moto on loopback), as a server past one machine runs (DESIGN §8). Each `build()`
 * is one server instance on a fresh database: the real ledger, video registry, sheet and video store,
 * sign-in (its mail through `smtpUrl` when given), sessions, payments, queue and transfer slots.
 *
 * Only the worker stands in: `jobs.probe` answers a fixed 10 s clip and `jobs.run` is not expected
 * (unless a test hands its own), so routes are tested up to and around the engine without starting
 * one. Accounts are made through the ledger in process, as the operator's commands would make them.
 */

import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net, { type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { buildApp } from '../../src/server/app.js';
import { AnonymousLane } from '../../src/server/billing/anonymous-lane.js';
import { type Clock, Ledger } from '../../src/server/billing/ledger.js';
import { Payments } from '../../src/server/billing/payments.js';
import { loadConfig, type ServerConfig } from '../../src/server/config.js';
import type { Database } from '../../src/server/db/schema.js';
import { Admission } from '../../src/server/hosted/admission.js';
import { FreeActors } from '../../src/server/hosted/free-actors.js';
import type { HostedJobs } from '../../src/server/hosted/jobs.js';
import { Transfers } from '../../src/server/hosted/transfers.js';
import { createMailer } from '../../src/server/keys/mail.js';
import { Sessions } from '../../src/server/keys/sessions.js';
import { SignIn } from '../../src/server/keys/sign-in.js';
import { VideoCache } from '../../src/server/sessions/cache.js';
import { VideoRegistry } from '../../src/server/sessions/registry.js';
import { LocalSheetStorage } from '../../src/server/storage/local.js';
import { S3SheetStorage } from '../../src/server/storage/s3.js';
import type { SheetStorage } from '../../src/server/storage/storage.js';
import { type BackendName, type TestDatabase, useBackend } from './databases.js';
import { startS3, TEST_AWS_ENV, type TestS3, testS3Client } from './s3.js';

const silent = { info() {}, warn() {}, error() {} };

export interface InProcessApp {
  app: FastifyInstance;
  config: ServerConfig;
  database: TestDatabase;
  db: Kysely<Database>;
  ledger: Ledger;
  signIn: SignIn;
  registry: VideoRegistry;
  /** The sheet store's `videos` area (a directory, or the bucket's prefix). */
  videos: SheetStorage;
  /** Every file kept under the store's `videos/` (directory or bucket), and what is left in `work/`. */
  keptFiles(): Promise<string[]>;
  workLeft(): string[];
  /** Starts listening on 127.0.0.1 (once) and gives `http://127.0.0.1:<port>`. */
  listen(): Promise<string>;
  /** A raw connection from 127.0.0.1 to the app (listening first), closed after the test. */
  connect(): Promise<RawClient>;
  /**
   * An account by the ledger with one key: `grant` credits by the operator (not a purchase), or a
   * purchase of `purchase` credits; neither leaves it living on the allowance.
   */
  account(email: string, money?: { grant?: number; purchase?: number }): Promise<{ id: number; key: string }>;
}

/** A raw loopback connection: what the server sends, and when it closes. */
export interface RawClient {
  socket: Socket;
  received(): string;
  /** Resolves with the time the connection closed. */
  closed: Promise<number>;
}

export interface BuildOptions {
  /** More variables (DESIGN §7). */
  env?: Record<string, string>;
  /** The hosted job in the worker's place (default: none expected). */
  run?: HostedJobs['run'];
  /** The job queue (default: one running plus `VIDSHEET_QUEUE_LENGTH` waiting). */
  admission?: Admission;
  /** Collects the app's log lines (JSON text). */
  log?: string[];
  /** An SMTP server for the sign-in mail (else the mailer logs codes, silently here). */
  smtpUrl?: string;
  clock?: Clock;
}

export function inProcessApps(name: BackendName): { build(options?: BuildOptions): Promise<InProcessApp> } {
  const databases = useBackend(name);
  let s3: TestS3 | undefined;
  let dir: string | undefined;
  const apps: FastifyInstance[] = [];
  const sockets: Socket[] = [];
  beforeAll(async () => {
    if (name === 'postgres') s3 = await startS3();
  });
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    for (const app of apps.splice(0)) await app.close();
  });
  afterAll(async () => {
    await s3?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  let made = 0;
  return {
    async build(options = {}) {
      dir ??= mkdtempSync(join(tmpdir(), `vidsheet-app-${name}-`));
      const appNumber = ++made;
      const dataDir = join(dir, `app${appNumber}`);
      mkdirSync(join(dataDir, 'sheets'), { recursive: true });
      const database = await databases.fresh();
      const { db } = database;
      const config = loadConfig({
        VIDSHEET_BASE_URL: 'http://127.0.0.1:9',
        VIDSHEET_DATA_DIR: dataDir,
        ...(options.smtpUrl
          ? { VIDSHEET_SMTP_URL: options.smtpUrl, VIDSHEET_MAIL_FROM: 'noreply@vidsheet.test' }
          : {}),
        ...options.env,
      });
      const clock = options.clock ?? (() => new Date());
      const ledger = new Ledger(db, { allowanceFloor: config.allowanceFloor, clock });
      // PostgreSQL goes with S3-compatible storage, as past one machine; SQLite with the data directory.
      const storage: SheetStorage = s3
        ? await S3SheetStorage.open(s3.url.replace('/sheets?', `/app${appNumber}?`), { env: TEST_AWS_ENV })
        : new LocalSheetStorage(join(dataDir, 'sheets'));
      const videos = storage.under?.('videos');
      if (!videos) throw new Error('the sheet storage cannot keep videos');
      const registry = new VideoRegistry(db, clock);
      const signIn = new SignIn({ db, ledger, mailer: createMailer(config, silent), clock, log: silent });
      const jobs: Pick<HostedJobs, 'run' | 'probe'> = {
        run:
          options.run ??
          (() => {
            throw new Error('no job expected');
          }),
        probe: async () => ({ durationMs: 10_000, probe: { format: 'mov,mp4,m4a,3gp,3g2,mj2' } as never }),
      };
      const loggerInstance = options.log ? collectingLogger(options.log) : undefined;
      const app = await buildApp(
        {
          config,
          version: '9.9.9-test',
          clock,
          checkDatabase: async () => {},
          ledger,
          storage,
          hosted: {
            admission: options.admission ?? new Admission(1 + config.queueLength),
            transfers: new Transfers(config.maxTransfers, config.transfersPerClient),
            freeActors: new FreeActors((accountId) => ledger.credits.livesOnAllowance(accountId)),
            jobs,
          },
          sessions: {
            registry,
            store: videos,
            cache: new VideoCache(join(dataDir, 'video-cache'), config.videoCacheMb * 1024 * 1024, videos),
          },
          anonymous: new AnonymousLane(db, {
            daily: config.anonDaily,
            perAddress: config.anonPerAddress,
            ceiling: config.anonCeiling,
            clock,
          }),
          keysPage: {
            sessions: new Sessions(db, { clock }),
            signIn,
            payments: new Payments({ config, db, ledger, clock, log: silent }),
          },
        },
        { loggerInstance },
      );
      apps.push(app);
      const listen = async () => {
        if (!app.server.listening) await app.listen({ host: '127.0.0.1', port: 0 });
        return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      };
      let purchases = 0;
      return {
        app,
        config,
        database,
        db,
        ledger,
        signIn,
        registry,
        videos,
        async keptFiles() {
          if (s3) {
            const client = testS3Client(s3.endpoint);
            try {
              const listed = await client.send(
                new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: `app${appNumber}/videos/` }),
              );
              return (listed.Contents ?? []).map((object) => String(object.Key));
            } finally {
              client.destroy();
            }
          }
          const root = join(dataDir, 'sheets', 'videos');
          if (!existsSync(root)) return [];
          return readdirSync(root, { recursive: true, withFileTypes: true })
            .filter((entry) => entry.isFile())
            .map((entry) => join(entry.parentPath, entry.name));
        },
        workLeft() {
          const work = join(dataDir, 'work');
          return existsSync(work) ? readdirSync(work) : [];
        },
        listen,
        async connect() {
          const client = await rawConnect(Number(new URL(await listen()).port));
          sockets.push(client.socket);
          return client;
        },
        async account(email, money = {}) {
          const { id } = await ledger.accounts.findOrCreateAccount(email);
          if (money.grant) await ledger.credits.grant(id, money.grant);
          if (money.purchase) await ledger.credits.purchase(id, money.purchase, `test:${id}:${++purchases}`);
          return { id, key: (await ledger.accounts.createKey(id)).key };
        },
      };
    },
  };
}

/** A multipart body with one `video` part (a few bytes: no engine opens it here). */
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

/** What an MCP client sends with each request, with the Host the apps allow. */
export const MCP_HEADERS = {
  host: '127.0.0.1:9',
  accept: 'application/json, text/event-stream',
  'content-type': 'application/json',
};

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
    headers: { ...MCP_HEADERS } as Record<string, string>,
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

/** A pino logger at `info` whose lines (JSON text) are pushed to `lines`. */
export function collectingLogger(lines: string[]) {
  return pino(
    { level: 'info' },
    new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    }),
  );
}

/** A raw connection from 127.0.0.1 to `port` on 127.0.0.1 (the caller destroys its socket). */
export async function rawConnect(port: number): Promise<RawClient> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let received = '';
  socket.on('data', (chunk) => (received += chunk));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
  return { socket, received: () => received, closed };
}
