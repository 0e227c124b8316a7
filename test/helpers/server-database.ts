/**
 * The database a test server runs on, for server suites that must hold on both (DESIGN §8): inside
 * `describe.each(BACKENDS)`, `serverDatabase(name)` registers the suite's PostgreSQL (started before,
 * stopped after) and returns a function giving the environment of a fresh database for one server:
 * nothing for SQLite (the server's own file in its data directory), `VIDSHEET_DATABASE_URL` of a new
 * database in that PostgreSQL otherwise. `scaledOutServer` is one server on PostgreSQL and S3.
 */
import { afterAll, beforeAll } from 'vitest';
import type { BackendName } from './databases.js';
import { startPostgres, type TestPostgres } from './postgres.js';
import { startS3, TEST_AWS_ENV, type TestS3 } from './s3.js';
import { startServer, type TestServer } from './server.js';

export function serverDatabase(name: BackendName): () => Promise<Record<string, string>> {
  let pg: TestPostgres | undefined;
  beforeAll(async () => {
    if (name === 'postgres') pg = await startPostgres();
  });
  afterAll(async () => {
    await pg?.stop();
  });
  return async (): Promise<Record<string, string>> => {
    if (name === 'sqlite') return {};
    if (!pg) throw new Error('PostgreSQL is not running (outside the suite?)');
    return { VIDSHEET_DATABASE_URL: await pg.createDatabase() };
  };
}

/**
 * Inside a suite: one real server on PostgreSQL and S3-compatible storage (DESIGN §8), both started
 * before the suite and stopped after it; `env` adds to the server's environment. `server` is set
 * once the suite's tests run.
 */
export function scaledOutServer(env: Record<string, string>): { server: TestServer } {
  const held = {} as { server: TestServer };
  let pg: TestPostgres | undefined;
  let s3: TestS3 | undefined;
  beforeAll(async () => {
    [pg, s3] = await Promise.all([startPostgres(), startS3('sheets')]);
    held.server = await startServer({
      ...TEST_AWS_ENV,
      VIDSHEET_DATABASE_URL: pg.url,
      VIDSHEET_STORAGE_URL: s3.url,
      ...env,
    });
  }, 120_000);
  afterAll(async () => {
    await held.server?.stop();
    await Promise.all([pg?.stop(), s3?.stop()]);
  });
  return held;
}
