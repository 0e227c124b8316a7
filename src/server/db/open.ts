/**
 * Opening the database, and the one place that knows which dialect it speaks: SQLite in the data
 * directory by default, PostgreSQL when `VIDSHEET_DATABASE_URL` is set (DESIGN §7, §8). Everything
 * dialect-specific about writing (how a write transaction starts, whether rows need an explicit lock,
 * how writers of the same key are serialized) lives here too, so the ledger, the anonymous lane and the
 * keys page above it are written once for both.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteAdapter, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { redactUrl } from '#vidsheet/core/redact.js';
import { migrationProvider } from './migrations.js';
import type { Database } from './schema.js';

/** The SQLite file inside the data directory (DESIGN §7: `vidsheet.db`). */
export const DATABASE_FILE = 'vidsheet.db';

/** How long a writer waits for another connection's write transaction before giving up with SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5000;

/** Connections per PostgreSQL pool (per server instance) unless `poolSize` says otherwise. */
export const DEFAULT_POOL_SIZE = 10;
/** How long taking a PostgreSQL connection may take (an unreachable host fails start within this). */
const CONNECT_TIMEOUT_MS = 10_000;
/** A bound on `poolSize`, so a typo cannot exhaust the server's `max_connections` on its own. */
export const MAX_POOL_SIZE = 100;

/**
 * The key of the session-level advisory lock that migrations run under on PostgreSQL: the ASCII bytes
 * of "vidsheet" as one signed 64-bit integer. Fixed forever, so every instance (of any version) agrees.
 */
export const MIGRATION_LOCK_KEY = 0x7669647368656574n;

export interface OpenDatabaseOptions {
  /** SQLite: `<dataDir>/vidsheet.db` (created if missing). Unused for the database when `databaseUrl` is set. */
  dataDir: string;
  /** `postgres://...` (`VIDSHEET_DATABASE_URL`): PostgreSQL instead of SQLite. */
  databaseUrl?: string;
  /** PostgreSQL only: connections in this instance's pool, 1..MAX_POOL_SIZE; DEFAULT_POOL_SIZE if unset. */
  poolSize?: number;
}

/**
 * Opens the database and brings its schema up to date: PostgreSQL when `databaseUrl` is set, else the
 * SQLite file in the data directory. Throws a clear Error (never with the URL's password) when the
 * database cannot be reached or migrated.
 */
export async function openDatabase(options: OpenDatabaseOptions): Promise<Kysely<Database>> {
  if (options.databaseUrl !== undefined && options.databaseUrl !== '') {
    return openPostgres(options.databaseUrl, options.poolSize ?? DEFAULT_POOL_SIZE);
  }
  return openSqlite(options.dataDir);
}

/**
 * Opens (creating if missing) `<dataDir>/vidsheet.db` and brings its schema up to date. WAL lets
 * readers run beside the one writer; `synchronous=FULL` makes a committed charge survive a power cut;
 * foreign keys are off by default in SQLite and must be switched on per connection.
 */
async function openSqlite(dataDir: string): Promise<Kysely<Database>> {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, DATABASE_FILE);
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

/**
 * A pool of `poolSize` connections to PostgreSQL, and the schema brought up to date under a
 * session-level advisory lock (`pg_advisory_lock(MIGRATION_LOCK_KEY)`) held on one connection for the
 * whole run: instances starting together migrate once, the others wait and then find nothing to do.
 *
 * Types: `integer` columns arrive as JS numbers; `bigint` results (`count(*)`, `sum(...)`) are parsed
 * to numbers too, as SQLite returns them, so callers see the same values from both databases (every
 * such value here is far below 2^53). Timestamps are text, so no date parsing is involved.
 */
async function openPostgres(url: string, poolSize: number): Promise<Kysely<Database>> {
  if (!Number.isSafeInteger(poolSize) || poolSize < 1 || poolSize > MAX_POOL_SIZE) {
    throw new Error(`the database pool size must be an integer from 1 to ${MAX_POOL_SIZE}, got ${poolSize}`);
  }
  const where = redactUrl(url);
  let pool: pg.Pool;
  try {
    pool = new pg.Pool({
      connectionString: url,
      max: poolSize,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      types: { getTypeParser: typeParser },
    });
  } catch (error) {
    throw new Error(`cannot open the database ${where}: ${messageOf(error)}`, { cause: error });
  }
  // An idle connection that breaks (the server restarted, a network blip) is dropped by the pool and
  // reported here; without a listener that event would end the process. The next query reconnects or
  // fails and is answered as any database error.
  pool.on('error', () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    await db.connection().execute(async (conn) => {
      await sql`select pg_advisory_lock(${sql.lit(MIGRATION_LOCK_KEY)})`.execute(conn);
      const unlock = () => sql`select pg_advisory_unlock(${sql.lit(MIGRATION_LOCK_KEY)})`.execute(conn);
      try {
        await migrate(conn);
      } catch (error) {
        // The migration's error is the one to report. Should the unlock fail too, destroying the pool
        // below closes the session, which releases the lock all the same.
        await unlock().catch(() => undefined);
        throw error;
      }
      await unlock();
    });
  } catch (error) {
    await db.destroy().catch(() => undefined);
    throw new Error(`cannot prepare the database ${where}: ${messageOf(error)}`, { cause: error });
  }
  return db;
}

/** pg's default parsers, except `int8` (OID 20: counts and sums) as a JS number. */
function typeParser(oid: number, format?: string): (value: string) => unknown {
  if (oid === 20 && format !== 'binary') return Number;
  return pg.types.getTypeParser(oid, format as 'text');
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
 * Inside a `writeTransaction`: makes every other write transaction that names one of the same `keys`
 * wait until this one ends, for a rule that reads and then writes rows that may not exist yet (a limit
 * counted over recent rows, a code checked then marked used), where `select ... for update` has no row
 * to lock. SQLite: nothing to do, `BEGIN IMMEDIATE` already runs write transactions one at a time.
 * PostgreSQL: one transaction-scoped advisory lock per key (a 64-bit hash of it), taken in sorted order so
 * two transactions never wait for each other in a cycle, and released by the commit or rollback.
 */
export async function serializeOn<DB>(trx: Kysely<DB>, ...keys: string[]): Promise<void> {
  if (isSqlite(trx)) return;
  for (const key of [...new Set(keys)].sort()) {
    await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);
  }
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
 *
 * PostgreSQL: an ordinary transaction (READ COMMITTED). What SQLite gets from its single writer, the
 * callers get there from the statements themselves: the debit is one conditional `update ... where
 * balance >= price`, a balance is read `for update` before it is moved (`isSqlite` decides), the
 * "once" rules are unique keys meeting in `insert ... on conflict`, counters are guarded upserts, and
 * anything else that reads before it writes names its keys with `serializeOn`.
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
