/**
 * What the ledger's three parts (accounts.ts, credits.ts, job-registry.ts) share: the database, the
 * clock, and the one way they write. Every write is one `write` transaction; inside it a balance
 * changes only with its ledger entry (`post`, or the charge's guarded debit and `entry`), so the money
 * rules of ledger.ts hold for every part alike.
 */
import type { Kysely, Selectable } from 'kysely';
import { isDensity } from '#vidsheet/core/density.js';
import { isSqlite, writeTransaction } from '../db/open.js';
import type { AccountsTable, Database, LedgerKind } from '../db/schema.js';

/** Injected so tests can stand on either side of 00:00 UTC. */
export type Clock = () => Date;

export type Surface = 'http' | 'mcp';

export interface Account {
  id: number;
  email: string;
  balance: number;
  purchased: boolean;
  createdAt: string;
}

/** One line of the append-only ledger. */
export interface Entry {
  accountId: number;
  kind: LedgerKind;
  amount: number;
  balanceAfter: number;
  /** Unique across the ledger: writing the same key twice writes nothing the second time. */
  idempotencyKey: string;
  /** The job it belongs to (a charge, a refund); null by default. */
  jobId?: string | null;
  /** Defaults to the clock's now. */
  at?: Date;
}

/**
 * Ceiling for one amount (a grant, a purchase, a price): far above any pack, far below the 32-bit
 * `integer` PostgreSQL will store, so a typo such as an extra few zeros is refused, not stored.
 */
export const MAX_CREDITS = 1_000_000_000;

export class Books {
  constructor(
    readonly db: Kysely<Database>,
    readonly clock: Clock,
    /** The server instance whose worker runs the jobs charged here (null: an admin command). */
    readonly instance: string | null,
  ) {}

  now(): string {
    return this.clock().toISOString();
  }

  /** The one transaction helper: every write of the ledger runs in one of these. */
  write<T>(work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
    return writeTransaction(this.db, work);
  }

  /**
   * Reads the account for a change of its balance. Under SQLite the transaction already holds the
   * database's write lock; PostgreSQL needs the row locked so a concurrent charge waits for us.
   */
  async lockAccount(trx: Kysely<Database>, accountId: number): Promise<Selectable<AccountsTable>> {
    const row = await trx
      .selectFrom('accounts')
      .selectAll()
      .where('id', '=', accountId)
      .$if(!isSqlite(trx), (qb) => qb.forUpdate())
      .executeTakeFirst();
    return required(row, `account ${accountId}`);
  }

  /**
   * Posts an entry under the account's lock: appends it and moves the balance by its amount, both or
   * neither. False when its idempotency key was used already (nothing is written then).
   */
  async post(trx: Kysely<Database>, entry: Entry): Promise<boolean> {
    if (!(await this.entry(trx, entry))) return false;
    await this.#credit(trx, entry.accountId, entry.amount);
    return true;
  }

  /** Appends a ledger entry; false when its idempotency key was already used (and nothing was written). */
  async entry(trx: Kysely<Database>, entry: Entry): Promise<boolean> {
    const result = await trx
      .insertInto('ledger')
      .values({
        account_id: entry.accountId,
        kind: entry.kind,
        amount: entry.amount,
        balance_after: entry.balanceAfter,
        idempotency_key: entry.idempotencyKey,
        job_id: entry.jobId ?? null,
        created_at: (entry.at ?? this.clock()).toISOString(),
      })
      .onConflict((oc) => oc.column('idempotency_key').doNothing())
      .executeTakeFirst();
    return (result.numInsertedOrUpdatedRows ?? 0n) > 0n;
  }

  /**
   * Adds to a balance relative to what the row holds (`balance = balance + n`), never by writing back a
   * value computed from an earlier read, so the balance and the ledger's sum cannot drift apart.
   */
  async #credit(trx: Kysely<Database>, accountId: number, credits: number): Promise<number> {
    const row = await trx
      .updateTable('accounts')
      .set((eb) => ({ balance: eb('balance', '+', credits) }))
      .where('id', '=', accountId)
      .returning('balance')
      .executeTakeFirst();
    return required(row, `account ${accountId}`).balance;
  }
}

export function toAccount(row: Selectable<AccountsTable>): Account {
  return {
    id: row.id,
    email: row.email,
    balance: row.balance,
    purchased: row.purchased === 1,
    createdAt: row.created_at,
  };
}

export function required<T>(row: T | undefined, what: string): T {
  if (row === undefined) throw new Error(`unknown ${what}`);
  return row;
}

export function positiveInteger(value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error(`${what} must be a positive integer, got ${value}`);
}

export function creditAmount(value: number, what: string): void {
  positiveInteger(value, what);
  if (value > MAX_CREDITS) throw new Error(`${what} must be at most ${MAX_CREDITS}, got ${value}`);
}

export function jobId(value: string): void {
  if (typeof value !== 'string' || value.length === 0) throw new Error('a job needs a non-empty job id');
}

/** The job row's fields shared by charged and free jobs, validated. */
export function jobFields(input: {
  jobId: string;
  surface: Surface;
  density: string;
  sheets: number;
  ttlSeconds: number;
}) {
  if (input.surface !== 'http' && input.surface !== 'mcp') {
    throw new Error(`surface must be "http" or "mcp", got ${JSON.stringify(input.surface)}`);
  }
  if (!isDensity(input.density)) throw new Error(`not a density: ${JSON.stringify(input.density)}`);
  positiveInteger(input.sheets, 'sheets');
  positiveInteger(input.ttlSeconds, 'ttlSeconds');
  return {
    job_id: input.jobId,
    surface: input.surface,
    density: input.density,
    sheets: input.sheets,
    state: 'charged' as const,
  };
}

/** The job's timestamps from one clock reading: sheets expire `ttlSeconds` after the job was created. */
export function lifetime(now: Date, ttlSeconds: number): { created_at: string; expires_at: string } {
  return {
    created_at: now.toISOString(),
    expires_at: new Date(now.getTime() + ttlSeconds * 1000).toISOString(),
  };
}
