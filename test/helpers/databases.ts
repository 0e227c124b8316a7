/**
 * The two databases the server speaks, for tests that must hold on both (DESIGN §8): a suite written
 * once inside `describe.each(BACKENDS)` calls `useBackend(name)` and gets fresh, migrated databases from
 * it: SQLite files in a temporary directory, or databases in a throwaway PostgreSQL this helper starts
 * (test/helpers/postgres.ts) and stops. Every database opened through it is closed after the suite.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll } from 'vitest';
import { DATABASE_FILE, type OpenDatabaseOptions, openDatabase } from '../../src/server/db/open.js';
import type { Database } from '../../src/server/db/schema.js';
import { startPostgres, type TestPostgres } from './postgres.js';

/** PostgreSQL: the database migrated once at start that every fresh one is copied from. */
const TEMPLATE = 'vidsheet_migrated';

export type BackendName = 'sqlite' | 'postgres';
export const BACKENDS: BackendName[] = ['sqlite', 'postgres'];

export interface TestDatabase {
  db: Kysely<Database>;
  /** What `openDatabase` was given: opening it again is a second server instance on the same database. */
  options: OpenDatabaseOptions;
}

export interface TestBackend {
  readonly name: BackendName;
  /** A new, empty and migrated database. */
  fresh(): Promise<TestDatabase>;
  /** Options for a new database that nothing has opened (so not migrated yet). */
  blank(): Promise<OpenDatabaseOptions>;
  /** `openDatabase(options)`, closed with the rest after the suite. */
  open(options: OpenDatabaseOptions): Promise<Kysely<Database>>;
  /**
   * Whether any byte the database keeps at rest spells `text` (UTF-8), to show what is never stored.
   * SQLite: the file, its WAL and shared-memory index. PostgreSQL: the database's own directory under
   * `base/` and the whole WAL, after a CHECKPOINT has written the shared buffers out.
   */
  storedAnywhere(database: TestDatabase, text: string): Promise<boolean>;
  /** The running PostgreSQL (postgres only; after the suite's beforeAll). */
  readonly postgres: TestPostgres | undefined;
}

/** Registers the suite's beforeAll (starting PostgreSQL when asked) and afterAll (closing everything). */
export function useBackend(name: BackendName): TestBackend {
  // Made at first use, so a suite that is filtered out entirely leaves nothing behind.
  let tmp: string | undefined;
  const dir = (): string => {
    tmp ??= mkdtempSync(join(tmpdir(), `vidsheet-${name}-`));
    return tmp;
  };
  const opened: Kysely<Database>[] = [];
  let server: TestPostgres | undefined;
  let dirs = 0;

  beforeAll(async () => {
    if (name !== 'postgres') return;
    server = await startPostgres();
    // Migrated once, then copied for every fresh database (a copy is faster than migrating again).
    const template = await openDatabase({
      dataDir: dir(),
      databaseUrl: await server.createDatabase({ name: TEMPLATE }),
    });
    await template.destroy();
  });
  afterAll(async () => {
    for (const db of opened.splice(0)) await db.destroy().catch(() => undefined);
    await server?.stop();
    if (tmp !== undefined) rmSync(tmp, { recursive: true, force: true });
  });

  const running = (): TestPostgres => {
    if (server === undefined) throw new Error('PostgreSQL is not running (outside the suite?)');
    return server;
  };

  const backend: TestBackend = {
    name,
    get postgres() {
      return server;
    },
    async blank() {
      const dataDir = join(dir(), `db${++dirs}`);
      if (name === 'sqlite') return { dataDir };
      return { dataDir, databaseUrl: await running().createDatabase() };
    },
    async open(options) {
      const db = await openDatabase(options);
      opened.push(db);
      return db;
    },
    async fresh() {
      let options: OpenDatabaseOptions;
      if (name === 'sqlite') options = await backend.blank();
      else {
        const databaseUrl = await running().createDatabase({ template: TEMPLATE });
        options = { dataDir: join(dir(), `db${++dirs}`), databaseUrl };
      }
      return { db: await backend.open(options), options };
    },
    async storedAnywhere(database, text) {
      let paths: string[];
      if (name === 'sqlite') {
        const file = join(database.options.dataDir, DATABASE_FILE);
        paths = [file, `${file}-wal`, `${file}-shm`].filter((path) => existsSync(path));
      } else {
        await sql`checkpoint`.execute(database.db);
        const { rows } = await sql<{
          oid: number;
        }>`select oid from pg_database where datname = current_database()`.execute(database.db);
        const dataDir = running().dataDir;
        paths = [join(dataDir, 'base', String(rows[0]?.oid)), join(dataDir, 'pg_wal')].flatMap(files);
      }
      if (paths.length === 0) throw new Error('the database keeps no files?');
      // File by file: a PostgreSQL cluster holds far more than one string should.
      return paths.some((path) => readFileSync(path).includes(text));
    },
  };
  return backend;
}

function files(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}
