/**
 * Credits (DESIGN §5 "Credits"): operator grants, paid packs, the free daily allowance, the charge
 * before a job and its refund. Each is a ledger entry written with the balance change it records.
 */
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { shortJobId } from '#vidsheet/core/redact.js';
import type { AccountsTable, Database } from '../db/schema.js';
import {
  type Books,
  creditAmount,
  jobFields,
  jobId,
  lifetime,
  positiveInteger,
  type Surface,
} from './books.js';

/** `allowance`: credits the free daily allowance added in this very call (0 if none), granted or refused. */
export type ChargeResult =
  | { ok: true; balance: number; allowance: number }
  | { ok: false; balance: number; allowance: number };

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

/** The cheapest job: one sheet at the cheapest density. */
const CHEAPEST_PRICE = 1;

export class Credits {
  /**
   * `allowanceFloor`: the balance a never-purchased account is raised to once per UTC day (spec: 7).
   */
  constructor(
    private readonly books: Books,
    private readonly allowanceFloor: number,
  ) {
    if (!Number.isSafeInteger(allowanceFloor) || allowanceFloor < 0) {
      throw new Error(`allowanceFloor must be an integer ≥ 0, got ${allowanceFloor}`);
    }
  }

  /**
   * An operator grant (`admin add-credits`). Deliberately not a purchase: `purchased` stays as it was,
   * so a pre-funded trial account keeps its free daily allowance. Returns the new balance.
   */
  async grant(accountId: number, credits: number): Promise<number> {
    positiveInteger(accountId, 'account id');
    creditAmount(credits, 'credits');
    return this.books.write(async (trx) => {
      const account = await this.books.lockAccount(trx, accountId);
      const balanceAfter = account.balance + credits;
      const idempotencyKey = `grant:${randomUUID()}`;
      await this.books.post(trx, { accountId, kind: 'grant', amount: credits, balanceAfter, idempotencyKey });
      return balanceAfter;
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
    return this.books.write(async (trx) => {
      const account = await this.books.lockAccount(trx, accountId);
      const balanceAfter = account.balance + credits;
      const entry = { accountId, kind: 'purchase', amount: credits, balanceAfter, idempotencyKey } as const;
      if (!(await this.books.post(trx, entry))) return { applied: false, balance: account.balance };
      await trx.updateTable('accounts').set({ purchased: 1 }).where('id', '=', accountId).execute();
      return { applied: true, balance: balanceAfter };
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
    const { books } = this;
    const job = { ...jobFields(input), instance: books.instance };
    return books.write(async (trx) => {
      const now = books.clock();
      const account = await books.lockAccount(trx, input.accountId);
      const existing = await trx
        .selectFrom('jobs')
        .select('job_id')
        .where('job_id', '=', input.jobId)
        .executeTakeFirst();
      if (existing !== undefined) throw new Error(`job ${shortJobId(input.jobId)}… already exists`);
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
      await books.entry(trx, {
        accountId: input.accountId,
        kind: 'charge',
        amount: -input.price,
        balanceAfter: debited.balance,
        idempotencyKey: `charge:${input.jobId}`,
        jobId: input.jobId,
        at: now,
      });
      return { ok: true, balance: debited.balance, allowance };
    });
  }

  /**
   * Gives a failed job's credits back, once (`refund:<jobId>`): balance, refund entry, `refunded=1`,
   * state `failed`. A job that cost nothing (anonymous lane) is only marked `failed`. Returns whether
   * credits were returned; false for an unknown job or one already refunded.
   */
  async refund(jobId: string): Promise<boolean> {
    const { books } = this;
    return books.write(async (trx) => {
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
      const accountId = job.account_id;
      const account = await books.lockAccount(trx, accountId);
      const balanceAfter = account.balance + job.credits;
      const entry = { accountId, kind: 'refund', amount: job.credits, balanceAfter, jobId } as const;
      if (!(await books.post(trx, { ...entry, idempotencyKey: `refund:${jobId}` }))) return false;
      await failJob(1);
      return true;
    });
  }

  /** The sum of the account's ledger entries: equal to its balance, or the books are broken. */
  async ledgerSum(accountId: number): Promise<number> {
    positiveInteger(accountId, 'account id');
    const row = await this.books.db
      .selectFrom('ledger')
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number | string>('amount'), eb.lit(0)).as('total'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    return Number(row.total);
  }

  /**
   * DESIGN §5a "Who may queue": whether the account could pay the cheapest price (1 credit) now, its
   * balance plus an allowance still due today counted. Read only; the charge decides for real.
   */
  async mayQueue(accountId: number): Promise<boolean> {
    const { books } = this;
    const account = await books.db
      .selectFrom('accounts')
      .select(['balance', 'purchased'])
      .where('id', '=', accountId)
      .executeTakeFirst();
    if (account === undefined) return false;
    if (account.balance >= CHEAPEST_PRICE) return true;
    if (account.purchased === 1 || this.allowanceFloor < CHEAPEST_PRICE) return false;
    const day = books.clock().toISOString().slice(0, 10);
    const taken = await books.db
      .selectFrom('ledger')
      .select('id')
      .where('idempotency_key', '=', `allowance:${accountId}:${day}`)
      .executeTakeFirst();
    return taken === undefined;
  }

  /**
   * DESIGN §5a: whether the account lives on the free allowance, i.e. no credit ever came to it but the
   * allowance: never a purchase (`purchased`, and its `purchase` entries) and never an operator grant
   * (its `grant` entries). The ledger's kinds tell them apart, so nothing else is recorded for it. Such
   * an account keeps at most one video, and is a free actor for the one-job rule.
   */
  async livesOnAllowance(accountId: number): Promise<boolean> {
    positiveInteger(accountId, 'account id');
    const { db } = this.books;
    const account = await db
      .selectFrom('accounts')
      .select('purchased')
      .where('id', '=', accountId)
      .executeTakeFirst();
    if (account === undefined || account.purchased === 1) return false;
    const paidIn = await db
      .selectFrom('ledger')
      .select('id')
      .where('account_id', '=', accountId)
      .where('kind', 'in', ['grant', 'purchase'])
      .limit(1)
      .executeTakeFirst();
    return paidIn === undefined;
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
    const floor = this.allowanceFloor;
    if (account.purchased === 1 || account.balance >= floor) return 0;
    const grant = floor - account.balance;
    const day = now.toISOString().slice(0, 10);
    const entry = {
      accountId: account.id,
      kind: 'allowance',
      amount: grant,
      balanceAfter: floor,
      at: now,
    } as const;
    if (!(await this.books.post(trx, { ...entry, idempotencyKey: `allowance:${account.id}:${day}` })))
      return 0;
    return grant;
  }
}
