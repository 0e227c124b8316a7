/**
 * The anonymous remote lane's quota (spec: "3 jobs per UTC day, per user or per IP, under a shared
 * daily ceiling"; DESIGN §5, §5a). A job is taken before its video is fetched (the fetch is the costly,
 * abusable part) and given back only when the service itself failed it.
 *
 * Each job counts three times: against its own counter (the subject id, or without one the client
 * address; `daily` per UTC day), against its client address whatever the subject (`perAddress`: a
 * subject id is a hint anyone can invent, not an identity, so inventing new ones buys no more than
 * that), and against the endpoint-wide ceiling.
 *
 * The counter key is opaque: a subject id is hashed before it is stored, because it only counts
 * jobs and must never serve as an identity. Addresses are counted by `addressKey` (IPv6 per /64).
 */
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { addressKey } from '#vidsheet/core/client-address.js';
import { writeTransaction } from '../db/open.js';
import type { Database } from '../db/schema.js';
import type { Clock } from './ledger.js';

/** The endpoint-wide ceiling's counter. */
const CEILING = '*';

/** Whose quota a call spends: a subject's (also counted against its client address), or an IP's. */
export type AnonymousCounter =
  | { kind: 'subject'; subject: string; address: string }
  | { kind: 'ip'; ip: string };

/** What a take counted, for `giveBack`: the day, the call's own counter and its address's counter. */
export interface TakenJob {
  day: string;
  counter: string;
  address: string;
}

export type TakeResult =
  | ({ ok: true; remaining: number } & TakenJob)
  | { ok: false; exhausted: 'counter' | 'address' | 'ceiling' };

const utcDay = (now: Date): string => now.toISOString().slice(0, 10);

export function counterKey(counter: AnonymousCounter): string {
  return counter.kind === 'subject'
    ? `subject:${createHash('sha256').update(counter.subject).digest('hex')}`
    : `ip:${addressKey(counter.ip)}`;
}

/** The counter of every anonymous job from one client address, subject-counted ones included. */
export function addressCounterKey(counter: AnonymousCounter): string {
  return `address:${addressKey(counter.kind === 'subject' ? counter.address : counter.ip)}`;
}

export class AnonymousLane {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly limits: { daily: number; perAddress: number; ceiling: number; clock: Clock },
  ) {}

  /**
   * Takes one job of today's quota for this counter, if it, its client address and the ceiling each
   * have one left.
   *
   * Each counter moves by one guarded upsert (`insert ... on conflict do update set jobs = jobs + 1
   * where jobs < limit returning jobs`): the database compares and increments in one step on the row it
   * has locked, so two instances taking at once cannot both pass a check made on an earlier read. The
   * subject's (or IP's) counter goes first, then the address's, then the ceiling; when a later one is
   * full the transaction is rolled back, so the earlier increments are undone with it.
   */
  async take(counter: AnonymousCounter): Promise<TakeResult> {
    const day = utcDay(this.limits.clock());
    const key = counterKey(counter);
    const address = addressCounterKey(counter);
    const { daily, perAddress, ceiling } = this.limits;
    if (daily < 1) return { ok: false, exhausted: 'counter' };
    if (perAddress < 1) return { ok: false, exhausted: 'address' };
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
        const fromAddress = await increment(address, perAddress);
        if (fromAddress === undefined) throw new LimitReached('address');
        if ((await increment(CEILING, ceiling)) === undefined) throw new LimitReached('ceiling');
        const remaining = Math.min(daily - taken.jobs, perAddress - fromAddress.jobs);
        return { ok: true, day, counter: key, address, remaining } as const;
      });
    } catch (error) {
      if (error instanceof LimitReached) return { ok: false, exhausted: error.limit };
      throw error;
    }
  }

  /**
   * Gives a taken job back (the service failed it), on the day it was taken: to the counter, and then
   * to the address and the ceiling only if the counter had it to give (so a give-back without its take,
   * or repeated, cannot return to them a job another counter took). In the order `take` locks them, so
   * a give-back and a take on another instance never wait for each other in a cycle.
   */
  async giveBack(taken: TakenJob): Promise<void> {
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
      if (returned.numUpdatedRows === 0n) return;
      await giveBackTo(taken.address);
      await giveBackTo(CEILING);
    });
  }
}

/** Thrown inside `take`'s transaction to roll back the earlier increments when a later limit is full. */
class LimitReached extends Error {
  constructor(readonly limit: 'address' | 'ceiling') {
    super(`the ${limit} limit is reached`);
  }
}
