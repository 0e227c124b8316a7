/**
 * DESIGN §5a "Anonymous lane": a subject id is a hint, not an identity. Subject-counted jobs also count
 * against their client address, at most `perAddress` per UTC day, with calls without a subject; on
 * SQLite and on a real PostgreSQL, including two instances taking at once. Addresses are fake inputs
 * (no traffic), so other ranges than loopback may appear.
 */
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type AnonymousCounter, AnonymousLane } from '../../../src/server/billing/anonymous-lane.js';
import type { Database } from '../../../src/server/db/schema.js';
import { BACKENDS, useBackend } from '../../helpers/databases.js';

const subject = (name: string, address: string): AnonymousCounter => ({
  kind: 'subject',
  subject: name,
  address,
});

const jobsOf = async (db: Kysely<Database>, counter: string) =>
  (await db.selectFrom('anonymous_usage').select('jobs').where('counter', '=', counter).executeTakeFirst())
    ?.jobs ?? 0;

describe.each(BACKENDS)('the per-address cap on %s', (backend) => {
  const databases = useBackend(backend);

  async function fresh(perAddress: number, limits: { daily?: number; ceiling?: number } = {}) {
    const database = await databases.fresh();
    const clock = { now: new Date('2025-03-01T12:00:00.000Z') };
    const options = {
      daily: limits.daily ?? 3,
      perAddress,
      ceiling: limits.ceiling ?? 500,
      clock: () => clock.now,
    };
    const lane = new AnonymousLane(database.db, options);
    const instance = async () => new AnonymousLane(await databases.open(database.options), options);
    return { db: database.db, lane, clock, instance };
  }

  it('invented subject ids from one address stop at the cap; the refused take counts nothing', async () => {
    const { db, lane } = await fresh(5);
    for (let i = 1; i <= 5; i++) {
      const taken = await lane.take(subject(`invented-${i}`, '198.51.100.7'));
      expect(taken).toMatchObject({
        ok: true,
        address: 'address:198.51.100.7',
        remaining: Math.min(2, 5 - i),
      });
    }
    expect(await lane.take(subject('invented-6', '198.51.100.7'))).toEqual({
      ok: false,
      exhausted: 'address',
    });
    // A subject with quota left is refused too: the address is spent.
    expect(await lane.take(subject('invented-1', '198.51.100.7'))).toEqual({
      ok: false,
      exhausted: 'address',
    });
    expect(await jobsOf(db, 'address:198.51.100.7')).toBe(5);
    expect(await jobsOf(db, '*')).toBe(5);
    // The refused subjects' own counters were rolled back with the take.
    const rows = await db.selectFrom('anonymous_usage').select(['counter', 'jobs']).execute();
    expect(rows.filter((r) => r.counter.startsWith('subject:')).map((r) => r.jobs)).toEqual([1, 1, 1, 1, 1]);
    // Another address has its own cap; the same invented subject from there works.
    expect(await lane.take(subject('invented-6', '198.51.100.8'))).toMatchObject({ ok: true, remaining: 2 });
  });

  it('counts calls without a subject against the same address, and the other way round', async () => {
    const { lane } = await fresh(4);
    const byIp: AnonymousCounter = { kind: 'ip', ip: '203.0.113.5' };
    expect(await lane.take(byIp)).toMatchObject({ ok: true, remaining: 2 });
    expect(await lane.take(byIp)).toMatchObject({ ok: true, remaining: 1 });
    expect(await lane.take(subject('s1', '203.0.113.5'))).toMatchObject({ ok: true, remaining: 1 });
    expect(await lane.take(subject('s2', '203.0.113.5'))).toMatchObject({ ok: true, remaining: 0 });
    expect(await lane.take(byIp)).toEqual({ ok: false, exhausted: 'address' });
    expect(await lane.take(subject('s3', '203.0.113.5'))).toEqual({ ok: false, exhausted: 'address' });
  });

  it('an IPv6 client is one client across its /64, and IPv4-mapped is the IPv4 address', async () => {
    const { lane } = await fresh(3);
    for (const address of ['2001:db8:1:2::1', '2001:db8:1:2::ffff', '2001:db8:1:2:aaaa:bbbb:cccc:dddd']) {
      expect((await lane.take(subject(`from-${address}`, address))).ok).toBe(true);
    }
    expect(await lane.take(subject('one-more', '2001:db8:1:2:1:2:3:4'))).toEqual({
      ok: false,
      exhausted: 'address',
    });
    expect((await lane.take(subject('next-64', '2001:db8:1:3::1'))).ok).toBe(true);

    for (const address of ['192.0.2.44', '::ffff:192.0.2.44', '::ffff:c000:22c']) {
      expect((await lane.take(subject(`v4-${address}`, address))).ok).toBe(true);
    }
    expect(await lane.take({ kind: 'ip', ip: '::ffff:192.0.2.44' })).toEqual({
      ok: false,
      exhausted: 'address',
    });
  });

  it('calls without a subject: the daily counter is the address key too (one /64, one counter)', async () => {
    const { lane } = await fresh(1000);
    for (const ip of ['2001:db8:7:8::1', '2001:db8:7:8::2', '2001:db8:7:8:ffff::3']) {
      expect((await lane.take({ kind: 'ip', ip })).ok).toBe(true);
    }
    expect(await lane.take({ kind: 'ip', ip: '2001:db8:7:8::4' })).toEqual({
      ok: false,
      exhausted: 'counter',
    });
    expect((await lane.take({ kind: 'ip', ip: '2001:db8:7:9::1' })).ok).toBe(true);
  });

  it('a give-back returns the job to the subject, the address and the ceiling, once', async () => {
    const { db, lane } = await fresh(2);
    const first = await lane.take(subject('a', '198.51.100.9'));
    expect((await lane.take(subject('b', '198.51.100.9'))).ok).toBe(true);
    expect(await lane.take(subject('c', '198.51.100.9'))).toEqual({ ok: false, exhausted: 'address' });
    if (!first.ok) throw new Error('the first take failed');
    await lane.giveBack(first);
    await lane.giveBack(first); // a repeat finds nothing to give back
    expect(await jobsOf(db, 'address:198.51.100.9')).toBe(1);
    expect(await jobsOf(db, '*')).toBe(1);
    expect(await lane.take(subject('c', '198.51.100.9'))).toMatchObject({ ok: true, remaining: 0 });
  });

  it('a cap of 0 turns subject and address calls off', async () => {
    const { db, lane } = await fresh(0);
    expect(await lane.take(subject('a', '198.51.100.1'))).toEqual({ ok: false, exhausted: 'address' });
    expect(await lane.take({ kind: 'ip', ip: '198.51.100.1' })).toEqual({ ok: false, exhausted: 'address' });
    expect(await db.selectFrom('anonymous_usage').selectAll().execute()).toEqual([]);
  });

  it('40 invented subjects from one address at once, on two instances: exactly the cap succeeds', async () => {
    const { db, lane, instance } = await fresh(7);
    const other = await instance();
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 ? lane : other).take(subject(`burst-${i}`, '198.51.100.77')),
      ),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(7);
    expect(results.filter((r) => !r.ok)).toEqual(
      Array.from({ length: 33 }, () => ({ ok: false, exhausted: 'address' })),
    );
    expect(await jobsOf(db, 'address:198.51.100.77')).toBe(7);
    expect(await jobsOf(db, '*')).toBe(7);
  });
});
