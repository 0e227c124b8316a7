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

  /** Takes one job of today's quota for this counter, if both it and the ceiling have one left. */
  async take(counter: AnonymousCounter): Promise<TakeResult> {
    const day = utcDay(this.limits.clock());
    const key = counterKey(counter);
    return writeTransaction(this.db, async (trx) => {
      const rows = await trx
        .selectFrom('anonymous_usage')
        .select(['counter', 'jobs'])
        .where('day', '=', day)
        .where('counter', 'in', [key, CEILING])
        .execute();
      const used = (name: string) => rows.find((r) => r.counter === name)?.jobs ?? 0;
      if (used(key) >= this.limits.daily) return { ok: false, exhausted: 'counter' } as const;
      if (used(CEILING) >= this.limits.ceiling) return { ok: false, exhausted: 'ceiling' } as const;
      for (const name of [key, CEILING]) {
        await trx
          .insertInto('anonymous_usage')
          .values({ day, counter: name, jobs: 1 })
          .onConflict((oc) =>
            oc
              .columns(['day', 'counter'])
              .doUpdateSet((eb) => ({ jobs: eb('anonymous_usage.jobs', '+', 1) })),
          )
          .execute();
      }
      return { ok: true, day, counter: key, remaining: this.limits.daily - used(key) - 1 } as const;
    });
  }

  /** Gives a taken job back (the service failed it), on the day it was taken. */
  async giveBack(taken: { day: string; counter: string }): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      await trx
        .updateTable('anonymous_usage')
        .set((eb) => ({ jobs: eb('jobs', '-', 1) }))
        .where('day', '=', taken.day)
        .where('counter', 'in', [taken.counter, CEILING])
        .where('jobs', '>', 0)
        .execute();
    });
  }
}
