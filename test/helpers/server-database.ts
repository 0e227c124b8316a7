/**
 * The database a test server runs on, for server suites that must hold on both (DESIGN §8): inside
 * `describe.each(BACKENDS)`, `serverDatabase(name)` registers the suite's PostgreSQL (started before,
 * stopped after) and returns a function giving the environment of a fresh database for one server:
 * nothing for SQLite (the server's own file in its data directory), `VIDSHEET_DATABASE_URL` of a new
 * database in that PostgreSQL otherwise.
 */
import { afterAll, beforeAll } from 'vitest';
import type { BackendName } from './databases.js';
import { startPostgres, type TestPostgres } from './postgres.js';

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
