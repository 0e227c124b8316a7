/**
 * The anonymous remote lane's quota (spec: "3 jobs per UTC day, per user or per IP, under a shared
 * daily ceiling"; DESIGN §5). A job is taken before its video is fetched (the fetch is the costly,
 * abusable part) and given back only when the service itself failed it.
 *
 * The counter key is opaque: a subject id is hashed before it is stored, because it only counts
 * jobs and must never serve as an identity.
 */
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { writeTransaction } from '../db/open.js';
import type { Database } from '../db/schema.js';
import type { Clock } from './ledger.js';

/** The endpoint-wide ceiling's counter. */
const CEILING = '*';

export type AnonymousCounter = { kind: 'subject'; subject: string } | { kind: 'ip'; ip: string };

export type TakeResult =
  | { ok: true; day: string; counter: string; remaining: number }
  | { ok: false; exhausted: 'counter' | 'ceiling' };

const utcDay = (now: Date): string => now.toISOString().slice(0, 10);

export function counterKey(counter: AnonymousCounter): string {
  return counter.kind === 'subject'
    ? `subject:${createHash('sha256').update(counter.subject).digest('hex')}`
    : `ip:${counter.ip}`;
}

export class AnonymousLane {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly limits: { daily: number; ceiling: number; clock: Clock },
  ) {}

  /**
   * Takes one job of today's quota for this counter, if both it and the ceiling have one left.
   *
   * Each counter moves by one guarded upsert (`insert ... on conflict do update set jobs = jobs + 1
   * where jobs < limit returning jobs`): the database compares and increments in one step on the row it
   * has locked, so two instances taking at once cannot both pass a check made on an earlier read. The
   * subject's (or IP's) counter goes first, then the ceiling; when the ceiling is full the transaction
   * is rolled back, so the counter's increment is undone with it.
   */
  async take(counter: AnonymousCounter): Promise<TakeResult> {
    const day = utcDay(this.limits.clock());
    const key = counterKey(counter);
    const { daily, ceiling } = this.limits;
    if (daily < 1) return { ok: false, exhausted: 'counter' };
    if (ceiling < 1) return { ok: false, exhausted: 'ceiling' };
    try {
      return await writeTransaction(this.db, async (trx) => {
        const increment = (name: string, limit: number) =>
          trx
            .insertInto('anonymous_usage')
            .values({ day, counter: name, jobs: 1 })
            .onConflict((oc) =>
              oc
                .columns(['day', 'counter'])
                .doUpdateSet((eb) => ({ jobs: eb('anonymous_usage.jobs', '+', 1) }))
                .where('anonymous_usage.jobs', '<', limit),
            )
            .returning('jobs')
            .executeTakeFirst();
        const taken = await increment(key, daily);
        if (taken === undefined) return { ok: false, exhausted: 'counter' } as const;
        if ((await increment(CEILING, ceiling)) === undefined) throw new CeilingReached();
        return { ok: true, day, counter: key, remaining: daily - taken.jobs } as const;
      });
    } catch (error) {
      if (error instanceof CeilingReached) return { ok: false, exhausted: 'ceiling' };
      throw error;
    }
  }

  /**
   * Gives a taken job back (the service failed it), on the day it was taken: to the counter, and then
   * to the ceiling only if the counter had it to give (so a give-back without its take, or repeated,
   * cannot return to the ceiling a job another counter took). Counter first, as `take` locks them, so a
   * give-back and a take on another instance never wait for each other in a cycle.
   */
  async giveBack(taken: { day: string; counter: string }): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      const giveBackTo = (name: string) =>
        trx
          .updateTable('anonymous_usage')
          .set((eb) => ({ jobs: eb('jobs', '-', 1) }))
          .where('day', '=', taken.day)
          .where('counter', '=', name)
          .where('jobs', '>', 0)
          .executeTakeFirst();
      if (taken.counter === CEILING) return;
      const returned = await giveBackTo(taken.counter);
      if (returned.numUpdatedRows > 0n) await giveBackTo(CEILING);
    });
  }
}

/** Thrown inside `take`'s transaction to roll back the counter's increment when the ceiling is full. */
class CeilingReached extends Error {}
