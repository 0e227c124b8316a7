/**
 * Credits, keys and the job registry (DESIGN §5 "Credits", spec "Account, credits and keys").
 *
 * Money rules live in the database rather than in process memory, so they hold for an admin command
 * writing beside the server and for several servers sharing one PostgreSQL (DESIGN §8):
 * - every balance change is an append-only ledger entry written in the same transaction, so the sum
 *   of an account's entries always equals its balance;
 * - the debit is one conditional statement that cannot take a balance below zero (and a CHECK backs it);
 * - "exactly once" (a purchase per payment session, a refund per job, the allowance per UTC day) is a
 *   unique idempotency key on the ledger, not a check in code that two writers could both pass;
 * - every timestamp and every day comes from the injected clock, never from the database's `now`.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { isDensity } from '#vidsheet/core/density.js';
import { isSqlite, writeTransaction } from '../db/open.js';
import type { AccountsTable, Database, LedgerKind } from '../db/schema.js';

/** Injected so tests can stand on either side of 00:00 UTC. */
export type Clock = () => Date;

export interface Account {
  id: number;
  email: string;
  balance: number;
  purchased: boolean;
  createdAt: string;
}

/** `allowance`: credits the free daily allowance added in this very call (0 if none), granted or refused. */
export type ChargeResult =
  | { ok: true; balance: number; allowance: number }
  | { ok: false; balance: number; allowance: number };

export type Surface = 'http' | 'mcp';

export interface ChargeInput {
  accountId: number;
  /** Also the charge's idempotency key (`charge:<jobId>`): one job is charged at most once. */
  jobId: string;
  price: number;
  surface: Surface;
  density: string;
  sheets: number;
  /** Lifetime of the job's sheets (`VIDSHEET_SHEET_TTL_S`). */
  ttlSeconds: number;
}

export interface KeyInfo {
  id: number;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}

export interface UsageRow {
  jobId: string;
  surface: string;
  density: string;
  sheets: number;
  credits: number;
  refunded: boolean;
  createdAt: string;
}

/** Spec: `vs_live_` followed by 40 hex characters (lowercase, as minted). */
export const KEY_PATTERN = /^vs_live_[0-9a-f]{40}$/;
const KEY_PREFIX_LENGTH = 12;
/**
 * Ceiling for one amount (a grant, a purchase, a price): far above any pack, far below the 32-bit
 * `integer` PostgreSQL will store, so a typo such as an extra few zeros is refused, not stored.
 */
export const MAX_CREDITS = 1_000_000_000;
const MAX_EMAIL_LENGTH = 254;

/**
 * The one spelling of an address the accounts table holds (trimmed, lowercased), or a clear Error when
 * it does not look like an address at all. Exported for the sign-in page, which must agree.
 */
export function normalizeEmail(email: string): string {
  const normalized = email.trim().toLowerCase();
  if (normalized.length > MAX_EMAIL_LENGTH || !/^[^\s@]+@[^\s@]+$/.test(normalized)) {
    throw new Error(`not an e-mail address: ${JSON.stringify(email)}`);
  }
  return normalized;
}

/** Only this is stored for a key, so a copy of the database cannot be used to call the API. */
export const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');

export class Ledger {
  readonly #db: Kysely<Database>;
  readonly #floor: number;
  readonly #clock: Clock;
  readonly #instance: string | null;

  /**
   * `allowanceFloor`: the balance a never-purchased account is raised to once per UTC day (spec: 7).
   * `instance` names the server instance whose worker runs the jobs this ledger charges: at start,
   * an instance refunds only the jobs it left running (several instances share one database).
   */
  constructor(db: Kysely<Database>, options: { allowanceFloor: number; clock?: Clock; instance?: string }) {
    if (!Number.isSafeInteger(options.allowanceFloor) || options.allowanceFloor < 0) {
      throw new Error(`allowanceFloor must be an integer ≥ 0, got ${options.allowanceFloor}`);
    }
    this.#db = db;
    this.#floor = options.allowanceFloor;
    this.#clock = options.clock ?? (() => new Date());
    this.#instance = options.instance ?? null;
  }

  /** Signing in and operator commands name accounts by address; the first use creates the account. */
  async findOrCreateAccount(email: string): Promise<Account> {
    const normalized = normalizeEmail(email);
    return writeTransaction(this.#db, async (trx) => {
      await trx
        .insertInto('accounts')
        .values({ email: normalized, created_at: this.#now() })
        .onConflict((oc) => oc.column('email').doNothing())
        .execute();
      const row = await trx
        .selectFrom('accounts')
        .selectAll()
        .where('email', '=', normalized)
        .executeTakeFirst();
      return toAccount(required(row, `account ${normalized}`));
    });
  }

  async accountByEmail(email: string): Promise<Account | undefined> {
    const row = await this.#db
      .selectFrom('accounts')
      .selectAll()
      .where('email', '=', normalizeEmail(email))
      .executeTakeFirst();
    return row && toAccount(row);
  }

  async accountById(id: number): Promise<Account | undefined> {
    positiveInteger(id, 'account id');
    const row = await this.#db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toAccount(row);
  }

  /**
   * Mints `vs_live_` + 40 lowercase hex (160 random bits) and stores only its SHA-256 and its prefix.
   * The key itself is returned once and exists nowhere else afterwards.
   */
  async createKey(accountId: number): Promise<{ key: string; prefix: string; createdAt: string }> {
    positiveInteger(accountId, 'account id');
    const key = `vs_live_${randomBytes(20).toString('hex')}`;
    const prefix = key.slice(0, KEY_PREFIX_LENGTH);
    const createdAt = this.#now();
    await writeTransaction(this.#db, async (trx) => {
      await this.#lockAccount(trx, accountId);
      await trx
        .insertInto('api_keys')
        .values({ account_id: accountId, key_hash: hashKey(key), prefix, created_at: createdAt })
        .execute();
    });
    return { key, prefix, createdAt };
  }

  /**
   * The account a bearer key belongs to, or undefined for anything that is not a live key: wrong shape
   * (checked before hashing, so junk costs nothing), unknown, or revoked (effective at once).
   */
  async accountForKey(key: string): Promise<Account | undefined> {
    if (typeof key !== 'string' || !KEY_PATTERN.test(key)) return undefined;
    const row = await this.#db
      .selectFrom('api_keys')
      .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
      .selectAll('accounts')
      .where('api_keys.key_hash', '=', hashKey(key))
      .where('api_keys.revoked_at', 'is', null)
      .executeTakeFirst();
    return row && toAccount(row);
  }

  /** Revokes by the full key (operator command); false when it is unknown or already revoked. */
  async revokeKey(key: string): Promise<boolean> {
    if (typeof key !== 'string' || !KEY_PATTERN.test(key)) return false;
    const now = this.#now();
    return writeTransaction(this.#db, async (trx) => {
      const result = await trx
        .updateTable('api_keys')
        .set({ revoked_at: now })
        .where('key_hash', '=', hashKey(key))
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    });
  }

  /** Revokes by id for the keys page, which knows keys only by id; a key of another account is left alone. */
  async revokeKeyById(accountId: number, keyId: number): Promise<boolean> {
    positiveInteger(accountId, 'account id');
    positiveInteger(keyId, 'key id');
    const now = this.#now();
    return writeTransaction(this.#db, async (trx) => {
      const result = await trx
        .updateTable('api_keys')
        .set({ revoked_at: now })
        .where('id', '=', keyId)
        .where('account_id', '=', accountId)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    });
  }

  /** Every key of the account, revoked ones included, oldest first. */
  async listKeys(accountId: number): Promise<KeyInfo[]> {
    positiveInteger(accountId, 'account id');
    const rows = await this.#db
      .selectFrom('api_keys')
      .select(['id', 'prefix', 'created_at', 'revoked_at'])
      .where('account_id', '=', accountId)
      .orderBy('id')
      .execute();
    return rows.map((row) => ({
      id: row.id,
      prefix: row.prefix,
      createdAt: row.created_at,
      revokedAt: row.revoked_at,
    }));
  }

  /**
   * An operator grant (`admin add-credits`). Deliberately not a purchase: `purchased` stays as it was,
   * so a pre-funded trial account keeps its free daily allowance. Returns the new balance.
   */
  async grant(accountId: number, credits: number): Promise<number> {
    positiveInteger(accountId, 'account id');
    creditAmount(credits, 'credits');
    return writeTransaction(this.#db, async (trx) => {
      await this.#lockAccount(trx, accountId);
      const balance = await this.#credit(trx, accountId, credits);
      await this.#entry(trx, accountId, 'grant', credits, balance, `grant:${randomUUID()}`, null);
      return balance;
    });
  }

  /**
   * Credits a paid pack exactly once per `idempotencyKey` (`stripe:<checkout session id>`): a webhook
   * replayed or delivered twice changes nothing. Marks the account purchased, which ends its allowance.
   */
  async purchase(
    accountId: number,
    credits: number,
    idempotencyKey: string,
  ): Promise<{ applied: boolean; balance: number }> {
    positiveInteger(accountId, 'account id');
    creditAmount(credits, 'credits');
    if (typeof idempotencyKey !== 'string' || idempotencyKey.length === 0) {
      throw new Error('a purchase needs a non-empty idempotency key');
    }
    return writeTransaction(this.#db, async (trx) => {
      const account = await this.#lockAccount(trx, accountId);
      const balance = account.balance + credits;
      const inserted = await this.#entry(trx, accountId, 'purchase', credits, balance, idempotencyKey, null);
      if (!inserted) return { applied: false, balance: account.balance };
      await trx.updateTable('accounts').set({ purchased: 1 }).where('id', '=', accountId).execute();
      return { applied: true, balance: await this.#credit(trx, accountId, credits) };
    });
  }

  /**
   * The charge before extraction (spec: "charged, atomically"), in one transaction: first the free
   * allowance (spec "Limits"), then the debit, its ledger entry and the job row. When the balance is
   * short nothing is charged and no job row is written, but an allowance granted on the way stays: the
   * spec applies it before the price is compared, and the 402 tells the caller so.
   */
  async charge(input: ChargeInput): Promise<ChargeResult> {
    positiveInteger(input.accountId, 'account id');
    jobId(input.jobId);
    creditAmount(input.price, 'price');
    const job = { ...jobFields(input), instance: this.#instance };
    return writeTransaction(this.#db, async (trx) => {
      const now = this.#clock();
      const account = await this.#lockAccount(trx, input.accountId);
      const existing = await trx
        .selectFrom('jobs')
        .select('job_id')
        .where('job_id', '=', input.jobId)
        .executeTakeFirst();
      if (existing !== undefined) throw new Error(`job ${input.jobId} already exists`);
      const allowance = await this.#applyAllowance(trx, account, now);
      const debited = await trx
        .updateTable('accounts')
        .set((eb) => ({ balance: eb('balance', '-', input.price) }))
        .where('id', '=', input.accountId)
        .where('balance', '>=', input.price)
        .returning('balance')
        .executeTakeFirst();
      if (debited === undefined) return { ok: false, balance: account.balance + allowance, allowance };
      await trx
        .insertInto('jobs')
        .values({
          ...job,
          account_id: input.accountId,
          credits: input.price,
          ...lifetime(now, input.ttlSeconds),
        })
        .execute();
      const key = `charge:${input.jobId}`;
      await this.#entry(trx, input.accountId, 'charge', -input.price, debited.balance, key, input.jobId, now);
      return { ok: true, balance: debited.balance, allowance };
    });
  }

  /**
   * Gives a failed job's credits back, once (`refund:<jobId>`): balance, refund entry, `refunded=1`,
   * state `failed`. A job that cost nothing (anonymous lane) is only marked `failed`. Returns whether
   * credits were returned; false for an unknown job or one already refunded.
   */
  async refund(jobId: string): Promise<boolean> {
    return writeTransaction(this.#db, async (trx) => {
      const job = await trx
        .selectFrom('jobs')
        .select(['account_id', 'credits', 'refunded', 'state'])
        .where('job_id', '=', jobId)
        .executeTakeFirst();
      if (job === undefined || job.refunded === 1) return false;
      const failJob = (refunded: number) =>
        trx.updateTable('jobs').set({ refunded, state: 'failed' }).where('job_id', '=', jobId).execute();
      if (job.account_id === null || job.credits === 0) {
        if (job.state === 'charged') await failJob(0);
        return false;
      }
      const account = await this.#lockAccount(trx, job.account_id);
      const balance = account.balance + job.credits;
      if (
        !(await this.#entry(trx, job.account_id, 'refund', job.credits, balance, `refund:${jobId}`, jobId))
      ) {
        return false;
      }
      await this.#credit(trx, job.account_id, job.credits);
      await failJob(1);
      return true;
    });
  }

  /** Marks a job that produced its sheets `done`, so a restart does not take it for an interrupted one. */
  async finishJob(jobId: string): Promise<void> {
    await writeTransaction(this.#db, async (trx) => {
      const result = await trx
        .updateTable('jobs')
        .set({ state: 'done' })
        .where('job_id', '=', jobId)
        .where('state', '=', 'charged')
        .executeTakeFirst();
      if (result.numUpdatedRows > 0n) return;
      const exists = await trx
        .selectFrom('jobs')
        .select('job_id')
        .where('job_id', '=', jobId)
        .executeTakeFirst();
      if (exists === undefined) throw new Error(`unknown job: ${jobId}`);
    });
  }

  /** A job that cost nothing (the anonymous remote lane): it still needs a row for its sheet URLs. */
  async recordFreeJob(input: Omit<ChargeInput, 'accountId' | 'price'>): Promise<void> {
    jobId(input.jobId);
    const job = { ...jobFields(input), instance: this.#instance };
    const now = this.#clock();
    await writeTransaction(this.#db, async (trx) => {
      await trx
        .insertInto('jobs')
        .values({ ...job, account_id: null, credits: 0, ...lifetime(now, input.ttlSeconds) })
        .execute();
    });
  }

  /**
   * At server start: a job still `charged` was interrupted by a crash or a kill, so its caller never got
   * sheets. Each one is refunded (or, if it cost nothing, marked failed). Returns their ids.
   * With several servers on one database this must only run for jobs of the starting instance.
   */
  async recoverInterrupted(): Promise<string[]> {
    // Jobs of this instance, and jobs from before instances were recorded.
    const rows = await this.#db
      .selectFrom('jobs')
      .select('job_id')
      .where('state', '=', 'charged')
      .where((eb) => eb.or([eb('instance', '=', this.#instance), eb('instance', 'is', null)]))
      .execute();
    for (const { job_id } of rows) await this.refund(job_id);
    return rows.map((row) => row.job_id);
  }

  /** What the sheet URL route needs to answer 200 or 404. */
  async job(
    jobId: string,
  ): Promise<{ jobId: string; sheets: number; expiresAt: string; state: string } | undefined> {
    const row = await this.#db
      .selectFrom('jobs')
      .select(['job_id', 'sheets', 'expires_at', 'state'])
      .where('job_id', '=', jobId)
      .executeTakeFirst();
    return row && { jobId: row.job_id, sheets: row.sheets, expiresAt: row.expires_at, state: row.state };
  }

  /** Jobs whose sheets are due for deletion (expired by the clock, not yet swept), oldest first. */
  async expiredJobs(limit = 100): Promise<string[]> {
    positiveInteger(limit, 'limit');
    const rows = await this.#db
      .selectFrom('jobs')
      .select('job_id')
      .where('expires_at', '<=', this.#now())
      .where('swept_at', 'is', null)
      .orderBy('expires_at')
      .limit(limit)
      .execute();
    return rows.map((row) => row.job_id);
  }

  /**
   * Claims an expired job's sweep: true for the one caller (of any instance) that marks it first, so
   * instances sharing a database never sweep the same job twice.
   */
  async markSwept(jobId: string): Promise<boolean> {
    const now = this.#now();
    return writeTransaction(this.#db, async (trx) => {
      const result = await trx
        .updateTable('jobs')
        .set({ swept_at: now })
        .where('job_id', '=', jobId)
        .where('swept_at', 'is', null)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    });
  }

  /** The usage table (keys page, `admin show`): one row per job, newest first; all rows without `limit`. */
  async usage(accountId: number, limit?: number): Promise<UsageRow[]> {
    positiveInteger(accountId, 'account id');
    if (limit !== undefined) positiveInteger(limit, 'limit');
    const rows = await this.#db
      .selectFrom('jobs')
      .select(['job_id', 'surface', 'density', 'sheets', 'credits', 'refunded', 'created_at'])
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'desc')
      .orderBy('job_id', 'desc')
      .$if(limit !== undefined, (qb) => qb.limit(limit as number))
      .execute();
    return rows.map((row) => ({
      jobId: row.job_id,
      surface: row.surface,
      density: row.density,
      sheets: row.sheets,
      credits: row.credits,
      refunded: row.refunded === 1,
      createdAt: row.created_at,
    }));
  }

  /** The sum of the account's ledger entries: equal to its balance, or the books are broken. */
  async ledgerSum(accountId: number): Promise<number> {
    positiveInteger(accountId, 'account id');
    const row = await this.#db
      .selectFrom('ledger')
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number | string>('amount'), eb.lit(0)).as('total'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    return Number(row.total);
  }

  /**
   * Spec "Limits": a never-purchased account whose balance is below the floor is raised to it at the
   * first priced request of the UTC day that finds it so. The day's unique key makes it once per day
   * even for two servers racing; a purchased balance is never touched. Returns the credits granted.
   */
  async #applyAllowance(
    trx: Kysely<Database>,
    account: Selectable<AccountsTable>,
    now: Date,
  ): Promise<number> {
    if (account.purchased === 1 || account.balance >= this.#floor) return 0;
    const grant = this.#floor - account.balance;
    const key = `allowance:${account.id}:${now.toISOString().slice(0, 10)}`;
    if (!(await this.#entry(trx, account.id, 'allowance', grant, this.#floor, key, null, now))) return 0;
    await this.#credit(trx, account.id, grant);
    return grant;
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

  /**
   * Reads the account for a change of its balance. Under SQLite the transaction already holds the
   * database's write lock; PostgreSQL needs the row locked so a concurrent charge waits for us.
   */
  async #lockAccount(trx: Kysely<Database>, accountId: number): Promise<Selectable<AccountsTable>> {
    const row = await trx
      .selectFrom('accounts')
      .selectAll()
      .where('id', '=', accountId)
      .$if(!isSqlite(trx), (qb) => qb.forUpdate())
      .executeTakeFirst();
    return required(row, `account ${accountId}`);
  }

  /** Appends a ledger entry; false when its idempotency key was already used (and nothing was written). */
  async #entry(
    trx: Kysely<Database>,
    accountId: number,
    kind: LedgerKind,
    amount: number,
    balanceAfter: number,
    idempotencyKey: string,
    jobId: string | null,
    at: Date = this.#clock(),
  ): Promise<boolean> {
    const result = await trx
      .insertInto('ledger')
      .values({
        account_id: accountId,
        kind,
        amount,
        balance_after: balanceAfter,
        idempotency_key: idempotencyKey,
        job_id: jobId,
        created_at: at.toISOString(),
      })
      .onConflict((oc) => oc.column('idempotency_key').doNothing())
      .executeTakeFirst();
    return (result.numInsertedOrUpdatedRows ?? 0n) > 0n;
  }

  #now(): string {
    return this.#clock().toISOString();
  }
}

function toAccount(row: Selectable<AccountsTable>): Account {
  return {
    id: row.id,
    email: row.email,
    balance: row.balance,
    purchased: row.purchased === 1,
    createdAt: row.created_at,
  };
}

function required<T>(row: T | undefined, what: string): T {
  if (row === undefined) throw new Error(`unknown ${what}`);
  return row;
}

function positiveInteger(value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error(`${what} must be a positive integer, got ${value}`);
}

function creditAmount(value: number, what: string): void {
  positiveInteger(value, what);
  if (value > MAX_CREDITS) throw new Error(`${what} must be at most ${MAX_CREDITS}, got ${value}`);
}

function jobId(value: string): void {
  if (typeof value !== 'string' || value.length === 0) throw new Error('a job needs a non-empty job id');
}

/** The job row's fields shared by charged and free jobs, validated. */
function jobFields(input: {
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
function lifetime(now: Date, ttlSeconds: number): { created_at: string; expires_at: string } {
  return {
    created_at: now.toISOString(),
    expires_at: new Date(now.getTime() + ttlSeconds * 1000).toISOString(),
  };
}
