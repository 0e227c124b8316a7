/**
 * The job registry: one row per hosted job (charged ones are written by `Credits.charge`), from its
 * start to its sheets' expiry, and the usage table read from it. After a crash, jobs still running
 * are refunded; expired sheets are claimed for deletion by exactly one instance.
 */

import { shortJobId } from '#vidsheet/core/redact.js';
import { type Books, jobFields, jobId, lifetime, positiveInteger } from './books.js';
import type { ChargeInput, Credits } from './credits.js';

export interface UsageRow {
  jobId: string;
  surface: string;
  density: string;
  sheets: number;
  credits: number;
  refunded: boolean;
  createdAt: string;
}

export class JobRegistry {
  constructor(
    private readonly books: Books,
    /** Refunds the jobs a crash interrupted. */
    private readonly credits: Pick<Credits, 'refund'>,
  ) {}

  /** A job that cost nothing (the anonymous remote lane): it still needs a row for its sheet URLs. */
  async recordFreeJob(input: Omit<ChargeInput, 'accountId' | 'price'>): Promise<void> {
    jobId(input.jobId);
    const job = { ...jobFields(input), instance: this.books.instance };
    const now = this.books.clock();
    await this.books.write(async (trx) => {
      await trx
        .insertInto('jobs')
        .values({ ...job, account_id: null, credits: 0, ...lifetime(now, input.ttlSeconds) })
        .execute();
    });
  }

  /** Marks a job that produced its sheets `done`, so a restart does not take it for an interrupted one. */
  async finishJob(jobId: string): Promise<void> {
    await this.books.write(async (trx) => {
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
      if (exists === undefined) throw new Error(`unknown job: ${shortJobId(jobId)}…`);
    });
  }

  /**
   * At server start: a job still `charged` was interrupted by a crash or a kill, so its caller never got
   * sheets. Each one is refunded (or, if it cost nothing, marked failed). Returns their ids.
   * With several servers on one database this must only run for jobs of the starting instance.
   */
  async recoverInterrupted(): Promise<string[]> {
    // Jobs of this instance, and jobs from before instances were recorded.
    const rows = await this.books.db
      .selectFrom('jobs')
      .select('job_id')
      .where('state', '=', 'charged')
      .where((eb) => eb.or([eb('instance', '=', this.books.instance), eb('instance', 'is', null)]))
      .execute();
    for (const { job_id } of rows) await this.credits.refund(job_id);
    return rows.map((row) => row.job_id);
  }

  /** What the sheet URL route needs to answer 200 or 404. */
  async job(
    jobId: string,
  ): Promise<{ jobId: string; sheets: number; expiresAt: string; state: string } | undefined> {
    const row = await this.books.db
      .selectFrom('jobs')
      .select(['job_id', 'sheets', 'expires_at', 'state'])
      .where('job_id', '=', jobId)
      .executeTakeFirst();
    return row && { jobId: row.job_id, sheets: row.sheets, expiresAt: row.expires_at, state: row.state };
  }

  /** Jobs whose sheets are due for deletion (expired by the clock, not yet swept), oldest first. */
  async expiredJobs(limit = 100): Promise<string[]> {
    positiveInteger(limit, 'limit');
    const rows = await this.books.db
      .selectFrom('jobs')
      .select('job_id')
      .where('expires_at', '<=', this.books.now())
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
    const now = this.books.now();
    return this.books.write(async (trx) => {
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
    const rows = await this.books.db
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
}
