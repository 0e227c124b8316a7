/**
 * The anonymous remote lane's daily counters (DESIGN §5, §8) on SQLite and on a real PostgreSQL: 3 jobs
 * per UTC day per subject or IP under an endpoint-wide ceiling, give-back, the next UTC day by the
 * injected clock (never the database's), and the quota holding when two instances take at once.
 * (The per-address cap of DESIGN §5a has its own suite, anonymous-address.test.ts; here each subject
 * comes from its own address, far below the cap.)
 */
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import {
  type AnonymousCounter,
  AnonymousLane,
  counterKey,
} from '../../../src/server/billing/anonymous-lane.js';
import type { Database } from '../../../src/server/db/schema.js';
import { BACKENDS, useBackend } from '../../helpers/databases.js';

const alice: AnonymousCounter = { kind: 'subject', subject: 'user-alice', address: '2001:db8:a::1' };
const bob: AnonymousCounter = { kind: 'subject', subject: 'user-bob', address: '2001:db8:b::1' };
const ip: AnonymousCounter = { kind: 'ip', ip: '198.51.100.7' };

const counters = (db: Kysely<Database>) =>
  db.selectFrom('anonymous_usage').selectAll().orderBy('day').orderBy('counter').execute();

describe.each(BACKENDS)('the anonymous lane on %s', (backend) => {
  const databases = useBackend(backend);

  async function fresh(limits: { daily?: number; ceiling?: number } = {}) {
    const database = await databases.fresh();
    const clock = { now: new Date('2025-03-01T12:00:00.000Z') };
    const options = {
      daily: limits.daily ?? 3,
      perAddress: 1000,
      ceiling: limits.ceiling ?? 500,
      clock: () => clock.now,
    };
    const lane = new AnonymousLane(database.db, options);
    /** A second server instance on the same database, with the same limits and clock. */
    const instance = async () => new AnonymousLane(await databases.open(database.options), options);
    return { db: database.db, lane, clock, instance };
  }

  it('takes 3 per UTC day per counter, counting down what remains; counters are independent', async () => {
    const { db, lane } = await fresh();
    const key = counterKey(alice);
    expect(key).toBe(`subject:${createHash('sha256').update('user-alice').digest('hex')}`);
    expect(await lane.take(alice)).toEqual({
      ok: true,
      day: '2025-03-01',
      counter: key,
      address: 'address:2001:db8:a:0::/64',
      remaining: 2,
    });
    expect(await lane.take(alice)).toMatchObject({ ok: true, remaining: 1 });
    expect(await lane.take(alice)).toMatchObject({ ok: true, remaining: 0 });
    expect(await lane.take(alice)).toEqual({ ok: false, exhausted: 'counter' });
    expect(await lane.take(bob)).toMatchObject({ ok: true, remaining: 2 });
    expect(await lane.take(ip)).toEqual({
      ok: true,
      day: '2025-03-01',
      counter: 'ip:198.51.100.7',
      address: 'address:198.51.100.7',
      remaining: 2,
    });
    // The subject is stored only as its hash; a refused take counted nothing.
    expect(await counters(db)).toEqual([
      { day: '2025-03-01', counter: '*', jobs: 5 },
      { day: '2025-03-01', counter: 'address:198.51.100.7', jobs: 1 },
      { day: '2025-03-01', counter: 'address:2001:db8:a:0::/64', jobs: 3 },
      { day: '2025-03-01', counter: 'address:2001:db8:b:0::/64', jobs: 1 },
      { day: '2025-03-01', counter: 'ip:198.51.100.7', jobs: 1 },
      { day: '2025-03-01', counter: counterKey(bob), jobs: 1 },
      { day: '2025-03-01', counter: key, jobs: 3 },
    ]);
  });

  it('refuses everyone once the ceiling is reached, without counting the refused take', async () => {
    const { db, lane } = await fresh({ ceiling: 4 });
    for (const counter of [alice, alice, bob, ip]) expect((await lane.take(counter)).ok).toBe(true);
    expect(await lane.take(bob)).toEqual({ ok: false, exhausted: 'ceiling' });
    expect(await lane.take({ kind: 'ip', ip: '203.0.113.1' })).toEqual({ ok: false, exhausted: 'ceiling' });
    expect(await lane.take(alice)).toEqual({ ok: false, exhausted: 'ceiling' });
    const rows = await counters(db);
    expect(rows.find((r) => r.counter === '*')?.jobs).toBe(4);
    expect(rows.find((r) => r.counter === counterKey(bob))?.jobs).toBe(1);
    expect(rows.some((r) => r.counter === 'ip:203.0.113.1')).toBe(false);
    expect(rows.some((r) => r.counter === 'address:203.0.113.1')).toBe(false);
  });

  it('a full counter is refused as the counter, before the ceiling', async () => {
    const { lane } = await fresh({ daily: 2, ceiling: 2 });
    expect((await lane.take(alice)).ok).toBe(true);
    expect((await lane.take(alice)).ok).toBe(true);
    expect(await lane.take(alice)).toEqual({ ok: false, exhausted: 'counter' });
    expect(await lane.take(bob)).toEqual({ ok: false, exhausted: 'ceiling' });
  });

  it('gives a job back to the counter and the ceiling, never below zero', async () => {
    const { db, lane } = await fresh({ ceiling: 3 });
    const taken = [await lane.take(alice), await lane.take(alice), await lane.take(alice)];
    expect(await lane.take(alice)).toEqual({ ok: false, exhausted: 'counter' });
    const first = taken[0];
    if (!first?.ok) throw new Error('the first take failed');
    await lane.giveBack(first);
    expect(await lane.take(alice)).toMatchObject({ ok: true, remaining: 0 });
    // More give-backs than takes leave the counters at zero, not below.
    for (let i = 0; i < 5; i++) await lane.giveBack(first);
    expect((await counters(db)).map((r) => r.jobs)).toEqual([0, 0, 0]);
    // A give-back for a day with no row changes nothing.
    await lane.giveBack({ day: '2025-02-28', counter: first.counter, address: first.address });
    expect(await counters(db)).toHaveLength(3);
  });

  it('starts a new day at 00:00 UTC by the injected clock, and a give-back goes to the day of the take', async () => {
    const { db, lane, clock } = await fresh();
    clock.now = new Date('2025-03-01T23:59:59.999Z');
    const late = await lane.take(alice);
    await lane.take(alice);
    await lane.take(alice);
    expect(await lane.take(alice)).toEqual({ ok: false, exhausted: 'counter' });
    clock.now = new Date('2025-03-02T00:00:00.000Z');
    expect(await lane.take(alice)).toMatchObject({ ok: true, day: '2025-03-02', remaining: 2 });
    if (!late.ok) throw new Error('the late take failed');
    await lane.giveBack(late);
    const rows = await counters(db);
    expect(rows.filter((r) => r.day === '2025-03-01').map((r) => r.jobs)).toEqual([2, 2, 2]);
    expect(rows.filter((r) => r.day === '2025-03-02').map((r) => r.jobs)).toEqual([1, 1, 1]);
  });

  it('20 takes at once on one counter from two instances: exactly 3 succeed', async () => {
    const { db, lane, instance } = await fresh();
    const other = await instance();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? lane : other).take(alice)),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(3);
    expect(
      results
        .filter((r) => r.ok)
        .map((r) => (r.ok ? r.remaining : -1))
        .sort(),
    ).toEqual([0, 1, 2]);
    expect((await counters(db)).map((r) => r.jobs)).toEqual([3, 3, 3]);
  });

  it('30 takes at once on distinct counters from two instances under a ceiling of 10: exactly 10 succeed', async () => {
    const { db, lane, instance } = await fresh({ ceiling: 10 });
    const other = await instance();
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 ? lane : other).take({ kind: 'ip', ip: `192.0.2.${i}` })),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(10);
    expect(results.filter((r) => !r.ok)).toEqual(
      Array.from({ length: 20 }, () => ({ ok: false, exhausted: 'ceiling' })),
    );
    const rows = await counters(db);
    expect(rows.find((r) => r.counter === '*')?.jobs).toBe(10);
    // The refused takes' counter increments (own and address) were rolled back with them.
    expect(rows.filter((r) => r.counter !== '*').map((r) => r.jobs)).toEqual(Array(20).fill(1));
  });

  it('takes and give-backs racing on two instances never deadlock and end where they should', async () => {
    const { db, lane, instance } = await fresh({ daily: 50, ceiling: 1000 });
    const other = await instance();
    const first = await lane.take(alice);
    if (!first.ok) throw new Error('the first take failed');
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 2 ? (i % 4 === 1 ? lane : other).take(alice) : (i % 4 === 0 ? lane : other).giveBack(first),
      ),
    );
    const total = (await counters(db)).map((r) => r.jobs);
    // 1 + 20 takes − 20 give-backs, each give-back finding a job to return unless the count was 0.
    expect(total[0]).toBe(total[1]);
    expect(total[1]).toBe(total[2]);
    expect(total[0]).toBeGreaterThanOrEqual(1);
    expect(total[0]).toBeLessThanOrEqual(21);
  });

  it('daily or ceiling of 0 turns the lane off', async () => {
    const off = await fresh({ daily: 0 });
    expect(await off.lane.take(alice)).toEqual({ ok: false, exhausted: 'counter' });
    const closed = await fresh({ ceiling: 0 });
    expect(await closed.lane.take(alice)).toEqual({ ok: false, exhausted: 'ceiling' });
    expect(await counters(closed.db)).toEqual([]);
  });
});
