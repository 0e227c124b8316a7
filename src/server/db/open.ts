/**
 * Opening the database, and the one place that knows which dialect it speaks: SQLite in the data
 * directory today, PostgreSQL (`VIDSHEET_DATABASE_URL`) in a later issue. Everything dialect-specific
 * about writing (how a write transaction starts, whether rows need an explicit lock) lives here too, so
 * the ledger above it is written once for both.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, SqliteAdapter, SqliteDialect, sql } from 'kysely';
import { migrationProvider } from './migrations.js';
import type { Database } from './schema.js';

/** The SQLite file inside the data directory (DESIGN §7: `vidsheet.db`). */
export const DATABASE_FILE = 'vidsheet.db';

/** How long a writer waits for another connection's write transaction before giving up with SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5000;

/**
 * Opens (creating if missing) `<dataDir>/vidsheet.db` and brings its schema up to date. WAL lets
 * readers run beside the one writer; `synchronous=FULL` makes a committed charge survive a power cut;
 * foreign keys are off by default in SQLite and must be switched on per connection.
 */
export async function openDatabase(options: { dataDir: string }): Promise<Kysely<Database>> {
  mkdirSync(options.dataDir, { recursive: true });
  const file = join(options.dataDir, DATABASE_FILE);
  let sqlite: SQLite.Database;
  try {
    sqlite = new SQLite(file, { timeout: BUSY_TIMEOUT_MS });
    sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = FULL');
    sqlite.pragma('foreign_keys = ON');
  } catch (error) {
    throw new Error(`cannot open the database ${file}: ${messageOf(error)}`, { cause: error });
  }
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  try {
    // SQLite has no migration lock of its own in kysely; holding the write lock for the whole run makes a
    // server and an admin command that start together migrate once, the second one finding nothing to do.
    await writeTransaction(db, (conn) => migrate(conn));
  } catch (error) {
    await db.destroy();
    throw new Error(`cannot prepare the database ${file}: ${messageOf(error)}`, { cause: error });
  }
  return db;
}

async function migrate(db: Kysely<Database>): Promise<void> {
  const { error, results } = await new Migrator({ db, provider: migrationProvider }).migrateToLatest();
  if (error === undefined) return;
  const failed = results?.find((result) => result.status === 'Error')?.migrationName;
  throw new Error(`migration ${failed ?? '(before any migration ran)'} failed: ${messageOf(error)}`, {
    cause: error,
  });
}

/** Whether rows are locked by the transaction itself (SQLite) rather than per row (`select ... for update`). */
export function isSqlite<DB>(db: Kysely<DB>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}

/**
 * Runs `work` in one write transaction, committed when it resolves and rolled back when it throws.
 *
 * SQLite: the transaction starts as `BEGIN IMMEDIATE`, taking the database's single write lock before
 * the first read, so no other process (an admin command, a second server) can change a balance between
 * this transaction's read and its write, and a commit can never fail with SQLITE_BUSY half-way. The lock
 * is waited for here, asynchronously, instead of in SQLite's own busy handler: that handler sleeps
 * inside the call and would freeze this process's event loop, and when the other writer is a second
 * connection in this same process (a test, a tool) it could never finish, so both would stall until the
 * timeout. All work must go through `trx`, never the outer `db` (kysely holds its one connection for us).
 */
export async function writeTransaction<DB, T>(
  db: Kysely<DB>,
  work: (trx: Kysely<DB>) => Promise<T>,
): Promise<T> {
  if (!isSqlite(db)) return db.transaction().execute(work);
  return db.connection().execute(async (conn) => {
    await beginImmediate(conn);
    let result: T;
    try {
      result = await work(conn);
    } catch (error) {
      await sql`rollback`.execute(conn).catch(() => undefined);
      throw error;
    }
    try {
      await sql`commit`.execute(conn);
    } catch (error) {
      await sql`rollback`.execute(conn).catch(() => undefined);
      throw error;
    }
    return result;
  });
}

async function beginImmediate<DB>(conn: Kysely<DB>): Promise<void> {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  await sql`pragma busy_timeout = 0`.execute(conn);
  try {
    for (let pause = 1; ; pause = Math.min(pause * 2, 32)) {
      try {
        await sql`begin immediate`.execute(conn);
        return;
      } catch (error) {
        if (!isBusy(error) || Date.now() + pause > deadline) throw error;
        // Jitter, so processes that collided once do not keep retrying in step.
        await sleep(pause * (0.5 + Math.random()));
      }
    }
  } finally {
    await sql`pragma busy_timeout = ${sql.lit(BUSY_TIMEOUT_MS)}`.execute(conn);
  }
}

const isBusy = (error: unknown): boolean =>
  typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'SQLITE_BUSY';

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
