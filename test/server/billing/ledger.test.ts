/**
 * The credits ledger, the same suite on a real SQLite file and on a real PostgreSQL started by the tests
 * (DESIGN §8): keys stored only as hashes, the debit that cannot go below zero under concurrency (in one
 * process, across instances and across processes sharing the database), the free daily allowance on
 * both sides of 00:00 UTC, purchases and refunds exactly once, crash recovery and expiry, and migrations
 * that run once when instances start together.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashKey, Ledger } from '../../../src/server/billing/ledger.js';
import { loadConfig } from '../../../src/server/config.js';
import { DATABASE_FILE, MAX_POOL_SIZE, openDatabase } from '../../../src/server/db/open.js';
import type { Database } from '../../../src/server/db/schema.js';
import { ROOT } from '../../global-setup.js';
import { BACKENDS, useBackend } from '../../helpers/databases.js';

const FLOOR = 7;
const TTL = 86_400;
const MIGRATIONS = [
  '0001_initial',
  '0002_anonymous_lane',
  '0003_keys_page',
  '0004_job_owner',
  '0005_sign_in_wrong_codes',
  '0006_videos',
  '0007_mailboxes',
  '0008_sign_in_code_sessions',
];
const TABLES = [
  'accounts',
  'anonymous_usage',
  'api_keys',
  'checkout_sessions',
  'jobs',
  'ledger',
  'sessions',
  'settings',
  'sign_in_codes',
  'sign_in_tries',
  'sign_in_wrong_tries',
  'stripe_events',
  'videos',
];
const tmp = mkdtempSync(join(tmpdir(), 'vidsheet-ledger-'));

let jobs = 0;
const job = (accountId: number, price: number, extra: { jobId?: string; ttlSeconds?: number } = {}) => ({
  accountId,
  jobId: extra.jobId ?? `job-${++jobs}`,
  price,
  surface: 'http' as const,
  density: '3x3',
  sheets: price,
  ttlSeconds: extra.ttlSeconds ?? TTL,
});

const entries = (db: Kysely<Database>, accountId: number, kind?: string) =>
  db
    .selectFrom('ledger')
    .selectAll()
    .where('account_id', '=', accountId)
    .$if(kind !== undefined, (qb) => qb.where('kind', '=', kind as 'charge'))
    .orderBy('id')
    .execute();

/**
 * The books balance: the entries' sum is the account's balance, and each entry's `balance_after` is the
 * running sum up to it (entries of one account are written one at a time, in id order).
 */
async function expectBooksBalance(db: Kysely<Database>, accountId: number, balance: number) {
  let running = 0;
  for (const entry of await entries(db, accountId)) {
    running += entry.amount;
    expect(entry.balance_after, `entry ${entry.id} (${entry.kind})`).toBe(running);
  }
  expect(running).toBe(balance);
}

const migrationNames = async (db: Kysely<Database>) =>
  (await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db)).rows.map(
    (row) => row.name,
  );

afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

describe.each(BACKENDS)('the ledger on %s', (backend) => {
  const databases = useBackend(backend);

  /** A fresh database, and a clock the test can move. */
  async function fresh(start = '2025-03-01T12:00:00.000Z') {
    const database = await databases.fresh();
    const clock = { now: new Date(start) };
    const ledger = new Ledger(database.db, { allowanceFloor: FLOOR, clock: () => clock.now });
    return { database, db: database.db, ledger, clock };
  }

  describe('opening the database', () => {
    it('creates its tables, migrates once, and opens again finding nothing to do', async () => {
      const { database, db } = await fresh();
      const again = await databases.open(database.options);
      expect(await migrationNames(again)).toEqual(MIGRATIONS);
      const tables = (await db.introspection.getTables()).map((t) => t.name).sort();
      expect(tables).toEqual(TABLES);
      if (backend === 'sqlite') {
        // SQLite: the file in the data directory, in WAL mode.
        const file = join(database.options.dataDir, DATABASE_FILE);
        expect(existsSync(file)).toBe(true);
        const raw = new SQLite(file, { readonly: true });
        try {
          expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
        } finally {
          raw.close();
        }
      }
    });

    it('four instances starting together on a new database migrate it once, and all of them open', async () => {
      const options = await databases.blank();
      const opened = await Promise.all([0, 1, 2, 3].map(() => databases.open(options)));
      for (const db of opened) expect(await migrationNames(db)).toEqual(MIGRATIONS);
      const [first, last] = [opened[0], opened[3]].map(
        (db) => new Ledger(db as Kysely<Database>, { allowanceFloor: FLOOR }),
      );
      const account = await first?.accounts.findOrCreateAccount('first@example.com');
      expect(await last?.accounts.accountByEmail('first@example.com')).toEqual(account);
    });

    it.runIf(backend === 'postgres')(
      'PostgreSQL: an unreachable server or a bad pool size fails the open clearly, never showing the password',
      async () => {
        const closed = new URL(databases.postgres?.url ?? '');
        closed.port = String(await closedPort());
        closed.password = 'hunter2-secret';
        const failure = openDatabase({ dataDir: tmp, databaseUrl: closed.toString() });
        await expect(failure).rejects.toThrow(
          /^cannot prepare the database postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:/,
        );
        await expect(failure).rejects.not.toThrow(/hunter2/);
        for (const poolSize of [0, 1.5, MAX_POOL_SIZE + 1]) {
          await expect(
            openDatabase({ dataDir: tmp, databaseUrl: databases.postgres?.url, poolSize }),
          ).rejects.toThrow(/pool size must be an integer from 1 to 100/);
        }
      },
    );

    it.runIf(backend === 'postgres')(
      "PostgreSQL: VIDSHEET_DATABASE_URL's pool_size sizes the pool; a bad one is a configuration error",
      async () => {
        const env = (query: string) => ({ VIDSHEET_DATABASE_URL: `${databases.postgres?.url}${query}` });
        const config = loadConfig(env('?pool_size=3'));
        expect(config.databasePoolSize).toBe(3);
        expect(config.databaseUrl).toBe(databases.postgres?.url);
        const db = await openDatabase({
          dataDir: tmp,
          databaseUrl: config.databaseUrl,
          poolSize: config.databasePoolSize,
        });
        try {
          // Twelve queries at once on a pool of three: exactly three server connections serve them.
          const pids = await Promise.all(
            Array.from({ length: 12 }, () =>
              sql<{ pid: number }>`select pg_backend_pid() as pid, pg_sleep(0.1)`.execute(db),
            ),
          );
          expect(new Set(pids.map((r) => r.rows[0]?.pid)).size).toBe(3);
        } finally {
          await db.destroy();
        }
        for (const bad of ['0', '101', 'ten', '2.5']) {
          expect(() => loadConfig(env(`?pool_size=${bad}`))).toThrow(
            `VIDSHEET_DATABASE_URL's pool_size must be an integer from 1 to 100 — got "${bad}"`,
          );
        }
      },
    );

    it('refuses a balance below zero at the database level too (CHECK)', async () => {
      const { db, ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('check@example.com');
      await expect(
        db.updateTable('accounts').set({ balance: -1 }).where('id', '=', account.id).execute(),
      ).rejects.toThrow(/check/i);
    });
  });

  describe('accounts and keys', () => {
    let env: Awaited<ReturnType<typeof fresh>>;
    beforeAll(async () => {
      env = await fresh();
    });

    it('keeps one account per address, trimmed and lowercased, and refuses what is not an address', async () => {
      const a = await env.ledger.accounts.findOrCreateAccount('  Alice@Example.COM ');
      const b = await env.ledger.accounts.findOrCreateAccount('alice@example.com');
      expect(b).toEqual(a);
      expect(a).toEqual({
        id: a.id,
        email: 'alice@example.com',
        balance: 0,
        purchased: false,
        createdAt: env.clock.now.toISOString(),
      });
      expect(await env.ledger.accounts.accountByEmail('ALICE@example.com')).toEqual(a);
      expect(await env.ledger.accounts.accountById(a.id)).toEqual(a);
      expect(await env.ledger.accounts.accountById(a.id + 1000)).toBeUndefined();
      for (const bad of ['', 'alice', 'a b@example.com', 'a@b@c', '@example.com']) {
        await expect(env.ledger.accounts.findOrCreateAccount(bad)).rejects.toThrow(/not an e-mail address/);
      }
    });

    it('mints vs_live_ + 40 hex, stores only its SHA-256 and prefix, and authenticates with it', async () => {
      const account = await env.ledger.accounts.findOrCreateAccount('keys@example.com');
      const minted = await env.ledger.accounts.createKey(account.id);
      expect(minted.key).toMatch(/^vs_live_[0-9a-f]{40}$/);
      expect(minted.prefix).toBe(minted.key.slice(0, 12));
      expect(minted.createdAt).toBe(env.clock.now.toISOString());
      expect(await env.ledger.accounts.accountForKey(minted.key)).toEqual(account);

      const rows = await env.db
        .selectFrom('api_keys')
        .selectAll()
        .where('account_id', '=', account.id)
        .execute();
      expect(rows).toHaveLength(1);
      expect(rows[0]?.key_hash).toBe(hashKey(minted.key));
      expect(rows[0]?.key_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(rows[0]?.prefix).toBe(minted.prefix);

      // The bytes at rest (SQLite: file and WAL; PostgreSQL: table files and WAL) hold the hash and never
      // the key or its secret part.
      expect(await databases.storedAnywhere(env.database, hashKey(minted.key))).toBe(true);
      expect(await databases.storedAnywhere(env.database, minted.key)).toBe(false);
      expect(await databases.storedAnywhere(env.database, minted.key.slice(12))).toBe(false);
    });

    it('answers undefined for malformed, unknown and revoked keys, revocation taking effect at once', async () => {
      const account = await env.ledger.accounts.findOrCreateAccount('revoke@example.com');
      const { key } = await env.ledger.accounts.createKey(account.id);
      const other = await env.ledger.accounts.createKey(account.id);
      for (const bad of [
        '',
        key.toUpperCase(),
        `${key}0`,
        key.slice(0, -1),
        key.replace('vs_live_', 'vs_test_'),
      ]) {
        expect(await env.ledger.accounts.accountForKey(bad)).toBeUndefined();
      }
      expect(await env.ledger.accounts.accountForKey(`vs_live_${'0'.repeat(40)}`)).toBeUndefined();

      expect(await env.ledger.accounts.revokeKey(key)).toBe(true);
      expect(await env.ledger.accounts.accountForKey(key)).toBeUndefined();
      expect(await env.ledger.accounts.revokeKey(key)).toBe(false);
      expect(await env.ledger.accounts.revokeKey(`vs_live_${'0'.repeat(40)}`)).toBe(false);
      expect(await env.ledger.accounts.revokeKey('nonsense')).toBe(false);
      expect(await env.ledger.accounts.accountForKey(other.key)).toEqual(account);

      const listed = await env.ledger.accounts.listKeys(account.id);
      expect(listed.map((k) => [k.prefix, k.revokedAt])).toEqual([
        [key.slice(0, 12), env.clock.now.toISOString()],
        [other.prefix, null],
      ]);
    });

    it('revokes by id only within the owning account', async () => {
      const owner = await env.ledger.accounts.findOrCreateAccount('owner@example.com');
      const stranger = await env.ledger.accounts.findOrCreateAccount('stranger@example.com');
      const { key } = await env.ledger.accounts.createKey(owner.id);
      const [listed] = await env.ledger.accounts.listKeys(owner.id);
      const keyId = listed?.id as number;
      expect(await env.ledger.accounts.revokeKeyById(stranger.id, keyId)).toBe(false);
      expect(await env.ledger.accounts.accountForKey(key)).toEqual(owner);
      expect(await env.ledger.accounts.revokeKeyById(owner.id, keyId)).toBe(true);
      expect(await env.ledger.accounts.revokeKeyById(owner.id, keyId)).toBe(false);
      expect(await env.ledger.accounts.accountForKey(key)).toBeUndefined();
    });

    it('refuses a key for an unknown account', async () => {
      await expect(env.ledger.accounts.createKey(999_999)).rejects.toThrow(/unknown account/);
    });
  });

  describe('the debit under concurrency', () => {
    it('100 concurrent charges never take a balance of 57 below zero, and the books balance', async () => {
      const { db, ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('race@example.com');
      await ledger.credits.purchase(account.id, 57, 'stripe:race');
      const prices = Array.from({ length: 100 }, (_, i) => (i % 5) + 1);
      const results = await Promise.all(prices.map((price) => ledger.credits.charge(job(account.id, price))));

      const ok = results.filter((r) => r.ok);
      const final = (await ledger.accounts.accountById(account.id))?.balance as number;
      for (const result of results) expect(result.balance).toBeGreaterThanOrEqual(0);
      expect(final).toBeGreaterThanOrEqual(0);
      const spent = prices.filter((_, i) => results[i]?.ok).reduce((a, b) => a + b, 0);
      expect(final).toBe(57 - spent);
      // A refused charge asked for more than there was; the balance only went down, so also more than is left.
      for (const [i, result] of results.entries()) {
        if (!result.ok) expect(prices[i]).toBeGreaterThan(final);
      }
      expect(final).toBeLessThan(5);
      expect(ok.length).toBeGreaterThan(0);
      expect(await ledger.credits.ledgerSum(account.id)).toBe(final);
      await expectBooksBalance(db, account.id, final);
      expect(await entries(db, account.id, 'charge')).toHaveLength(ok.length);
      expect(await ledger.jobs.usage(account.id)).toHaveLength(ok.length);
      expect(results.every((r) => r.allowance === 0)).toBe(true);
    });

    it('charges from two instances at once: never below zero, the books balance', async () => {
      const { database, db, ledger } = await fresh();
      const other = new Ledger(await databases.open(database.options), { allowanceFloor: FLOOR });
      const account = await ledger.accounts.findOrCreateAccount('instances@example.com');
      await ledger.credits.purchase(account.id, 40, 'stripe:instances');
      const results = await Promise.all(
        Array.from({ length: 60 }, (_, i) => (i % 2 ? ledger : other).credits.charge(job(account.id, 1))),
      );
      expect(results.filter((r) => r.ok)).toHaveLength(40);
      expect((await ledger.accounts.accountById(account.id))?.balance).toBe(0);
      expect(await other.credits.ledgerSum(account.id)).toBe(0);
      await expectBooksBalance(db, account.id, 0);
    });

    it('charges, purchases, grants and refunds racing on two instances: every balance_after is right', async () => {
      const { database, db, ledger } = await fresh();
      const other = new Ledger(await databases.open(database.options), { allowanceFloor: FLOOR });
      const account = await ledger.accounts.findOrCreateAccount('mixed@example.com');
      await ledger.credits.purchase(account.id, 100, 'stripe:mixed-0');
      const earlier = Array.from({ length: 10 }, () => job(account.id, 2));
      for (const charged of earlier) await ledger.credits.charge(charged);
      const on = (i: number) => (i % 2 ? ledger : other);
      await Promise.all([
        ...Array.from({ length: 40 }, (_, i) => on(i).credits.charge(job(account.id, (i % 3) + 1))),
        ...Array.from({ length: 6 }, (_, i) =>
          on(i).credits.purchase(account.id, 10, `stripe:mixed-${i + 1}`),
        ),
        ...Array.from({ length: 6 }, (_, i) => on(i + 1).credits.grant(account.id, 5)),
        ...earlier.map((charged, i) => on(i).credits.refund(charged.jobId)),
      ]);
      const balance = (await ledger.accounts.accountById(account.id))?.balance as number;
      expect(balance).toBeGreaterThanOrEqual(0);
      await expectBooksBalance(db, account.id, balance);
      expect(await entries(db, account.id, 'refund')).toHaveLength(10);
    });

    it('the day’s allowance is granted once when two instances race for it', async () => {
      const { database, db, ledger } = await fresh();
      const other = new Ledger(await databases.open(database.options), {
        allowanceFloor: FLOOR,
        clock: () => new Date('2025-03-01T12:00:00.000Z'),
      });
      const account = await ledger.accounts.findOrCreateAccount('allowance-race@example.com');
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => (i % 2 ? ledger : other).credits.charge(job(account.id, 1))),
      );
      expect(results.filter((r) => r.allowance > 0).map((r) => r.allowance)).toEqual([FLOOR]);
      expect(results.filter((r) => r.ok)).toHaveLength(FLOOR);
      expect(await entries(db, account.id, 'allowance')).toHaveLength(1);
      await expectBooksBalance(db, account.id, 0);
    });

    it('4 processes charging one database at once: never below zero, the books balance', async () => {
      const dist = join(ROOT, 'dist');
      expect(
        existsSync(join(dist, 'server', 'billing', 'ledger.js')),
        'dist/ is built by test/global-setup.ts',
      ).toBe(true);
      const { database, db, ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('processes@example.com');
      await ledger.credits.purchase(account.id, 150, 'stripe:processes');

      const script = join(tmp, 'charger.mjs');
      writeFileSync(script, CHILD_SCRIPT);
      const startAt = Date.now() + 1500;
      // SQLite: each process charges one after the other, and the processes meet at the file's write
      // lock (no SQLITE_BUSY may escape). PostgreSQL: each process charges its 30 all at once through its
      // own pool of 4 connections, and they meet at the account's row lock.
      const options = JSON.stringify({ ...database.options, poolSize: 4 });
      const together = backend === 'postgres' ? '1' : '0';
      const children = [0, 1, 2, 3].map((worker) =>
        runNode([script, dist, options, String(account.id), String(worker), String(startAt), together]),
      );
      const outputs = await Promise.all(children);
      const results: Array<{ price: number; ok: boolean; balance: number }> = [];
      for (const output of outputs) {
        expect(output.stderr).not.toMatch(/BUSY/);
        expect(output.code, output.stderr).toBe(0);
        results.push(...JSON.parse(output.stdout));
      }
      expect(results).toHaveLength(120);
      const final = (await ledger.accounts.accountById(account.id))?.balance as number;
      for (const result of results) expect(result.balance).toBeGreaterThanOrEqual(0);
      const ok = results.filter((r) => r.ok);
      expect(final).toBe(150 - ok.reduce((sum, r) => sum + r.price, 0));
      expect(final).toBeGreaterThanOrEqual(0);
      expect(final).toBeLessThan(5);
      expect(await ledger.credits.ledgerSum(account.id)).toBe(final);
      await expectBooksBalance(db, account.id, final);
      expect(await entries(db, account.id, 'charge')).toHaveLength(ok.length);
    });
  });

  describe('the free daily allowance (floor 7)', () => {
    it('raises a never-purchased account to 7 once per UTC day, and yesterday’s leftover reduces today’s grant', async () => {
      const { db, ledger, clock } = await fresh('2025-03-01T12:00:00.000Z');
      const account = await ledger.accounts.findOrCreateAccount('daily@example.com');

      expect(await ledger.credits.charge(job(account.id, 2))).toEqual({ ok: true, balance: 5, allowance: 7 });
      const first = await entries(db, account.id);
      expect(first.map((e) => [e.kind, e.amount, e.balance_after, e.idempotency_key.split(':')[0]])).toEqual([
        ['allowance', 7, 7, 'allowance'],
        ['charge', -2, 5, 'charge'],
      ]);
      expect(first[0]?.idempotency_key).toBe(`allowance:${account.id}:2025-03-01`);

      // Same day, below the floor again: nothing more.
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({ ok: true, balance: 4, allowance: 0 });
      clock.now = new Date('2025-03-01T23:59:59.999Z');
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({ ok: true, balance: 3, allowance: 0 });

      // The next UTC day: 3 left over, so the grant is 4, not 7.
      clock.now = new Date('2025-03-02T00:00:00.000Z');
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({ ok: true, balance: 6, allowance: 4 });
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({ ok: true, balance: 5, allowance: 0 });

      const allowances = await entries(db, account.id, 'allowance');
      expect(allowances.map((e) => [e.amount, e.created_at])).toEqual([
        [7, '2025-03-01T12:00:00.000Z'],
        [4, '2025-03-02T00:00:00.000Z'],
      ]);
      expect(await ledger.credits.ledgerSum(account.id)).toBe(5);
    });

    it('grants nothing at or above the floor, and applies at the day’s first request that finds it below', async () => {
      const { db, ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('above@example.com');
      expect(await ledger.credits.grant(account.id, 8)).toBe(8);
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({ ok: true, balance: 7, allowance: 0 });
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({ ok: true, balance: 6, allowance: 0 });
      expect(await entries(db, account.id, 'allowance')).toHaveLength(0);
      // Operator grants are not purchases: the allowance applies once the balance is found below 7.
      expect((await ledger.accounts.accountById(account.id))?.purchased).toBe(false);
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({ ok: true, balance: 6, allowance: 1 });
      expect(await entries(db, account.id, 'allowance')).toHaveLength(1);
      expect(await ledger.credits.ledgerSum(account.id)).toBe(6);
    });

    it('never touches an account that purchased, on any day', async () => {
      const { db, ledger, clock } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('paid@example.com');
      expect(await ledger.credits.purchase(account.id, 3, 'stripe:cs_paid')).toEqual({
        applied: true,
        balance: 3,
      });
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({ ok: true, balance: 2, allowance: 0 });
      clock.now = new Date('2025-03-02T00:00:00.000Z');
      expect(await ledger.credits.charge(job(account.id, 2))).toEqual({ ok: true, balance: 0, allowance: 0 });
      clock.now = new Date('2025-03-03T08:00:00.000Z');
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({
        ok: false,
        balance: 0,
        allowance: 0,
      });
      expect(await entries(db, account.id, 'allowance')).toHaveLength(0);
    });

    it('402 path: the allowance is applied first and stays, the charge is refused, nothing else is written', async () => {
      const { db, ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('short@example.com');
      const refused = job(account.id, 20);
      expect(await ledger.credits.charge(refused)).toEqual({ ok: false, balance: 7, allowance: 7 });
      expect((await ledger.accounts.accountById(account.id))?.balance).toBe(7);
      expect((await entries(db, account.id)).map((e) => [e.kind, e.amount])).toEqual([['allowance', 7]]);
      expect(await ledger.jobs.job(refused.jobId)).toBeUndefined();
      expect(await ledger.jobs.usage(account.id)).toEqual([]);
      // A second try the same day gets no second allowance.
      expect(await ledger.credits.charge(job(account.id, 20))).toEqual({
        ok: false,
        balance: 7,
        allowance: 0,
      });
      expect(await ledger.credits.ledgerSum(account.id)).toBe(7);
    });

    it('is off with a floor of 0', async () => {
      const { db } = await fresh();
      const ledger = new Ledger(db, { allowanceFloor: 0 });
      const account = await ledger.accounts.findOrCreateAccount('nofloor@example.com');
      expect(await ledger.credits.charge(job(account.id, 1))).toEqual({
        ok: false,
        balance: 0,
        allowance: 0,
      });
    });
  });

  describe('purchases, refunds and the job lifecycle', () => {
    it('applies a purchase exactly once per idempotency key and marks the account purchased', async () => {
      const { db, ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('buyer@example.com');
      expect(await ledger.credits.purchase(account.id, 30, 'stripe:cs_1')).toEqual({
        applied: true,
        balance: 30,
      });
      expect(await ledger.credits.purchase(account.id, 30, 'stripe:cs_1')).toEqual({
        applied: false,
        balance: 30,
      });
      const twice = await Promise.all([
        ledger.credits.purchase(account.id, 120, 'stripe:cs_2'),
        ledger.credits.purchase(account.id, 120, 'stripe:cs_2'),
      ]);
      expect(twice.map((r) => r.applied).sort()).toEqual([false, true]);
      expect(await ledger.accounts.accountById(account.id)).toMatchObject({ balance: 150, purchased: true });
      expect(await entries(db, account.id, 'purchase')).toHaveLength(2);
      expect(await ledger.credits.ledgerSum(account.id)).toBe(150);
    });

    it('refunds a charged job once: balance back, entry written, job marked refunded and failed', async () => {
      const { db, ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('refund@example.com');
      await ledger.credits.purchase(account.id, 10, 'stripe:refund');
      const charged = job(account.id, 4);
      expect(await ledger.credits.charge(charged)).toMatchObject({ ok: true, balance: 6 });
      expect(await ledger.credits.refund(charged.jobId)).toBe(true);
      expect(await ledger.credits.refund(charged.jobId)).toBe(false);
      expect((await ledger.accounts.accountById(account.id))?.balance).toBe(10);
      const row = await db
        .selectFrom('jobs')
        .selectAll()
        .where('job_id', '=', charged.jobId)
        .executeTakeFirst();
      expect(row).toMatchObject({ refunded: 1, state: 'failed', credits: 4 });
      expect((await entries(db, account.id, 'refund')).map((e) => [e.amount, e.idempotency_key])).toEqual([
        [4, `refund:${charged.jobId}`],
      ]);
      expect(await ledger.credits.ledgerSum(account.id)).toBe(10);
      expect(await ledger.credits.refund('no-such-job')).toBe(false);
      const [usage] = await ledger.jobs.usage(account.id);
      expect(usage).toMatchObject({ jobId: charged.jobId, credits: 4, refunded: true });
    });

    it('finishes a job, and a job id is charged at most once', async () => {
      const { ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('finish@example.com');
      await ledger.credits.purchase(account.id, 10, 'stripe:finish');
      const charged = job(account.id, 2, { jobId: 'same-id' });
      await ledger.credits.charge(charged);
      await expect(ledger.credits.charge(charged)).rejects.toThrow(/already exists/);
      expect((await ledger.accounts.accountById(account.id))?.balance).toBe(8);
      await ledger.jobs.finishJob('same-id');
      expect((await ledger.jobs.job('same-id'))?.state).toBe('done');
      await expect(ledger.jobs.finishJob('missing')).rejects.toThrow(/unknown job/);
    });

    it('recoverInterrupted refunds every job still charged, fails free ones and leaves finished ones', async () => {
      const { ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('crash@example.com');
      await ledger.credits.purchase(account.id, 20, 'stripe:crash');
      const a = job(account.id, 3);
      const b = job(account.id, 5);
      const done = job(account.id, 1);
      for (const j of [a, b, done]) await ledger.credits.charge(j);
      await ledger.jobs.finishJob(done.jobId);
      await ledger.jobs.recordFreeJob({
        jobId: 'anon-1',
        surface: 'mcp',
        density: '4x4',
        sheets: 2,
        ttlSeconds: TTL,
      });
      expect((await ledger.accounts.accountById(account.id))?.balance).toBe(11);

      expect((await ledger.jobs.recoverInterrupted()).sort()).toEqual([a.jobId, b.jobId, 'anon-1'].sort());
      expect((await ledger.accounts.accountById(account.id))?.balance).toBe(19);
      expect(await ledger.credits.ledgerSum(account.id)).toBe(19);
      expect((await ledger.jobs.job(a.jobId))?.state).toBe('failed');
      expect((await ledger.jobs.job('anon-1'))?.state).toBe('failed');
      expect((await ledger.jobs.job(done.jobId))?.state).toBe('done');
      expect(await ledger.jobs.recoverInterrupted()).toEqual([]);
    });

    it('lists expired jobs by the clock (expires_at <= now) until they are swept', async () => {
      const { ledger, clock } = await fresh('2025-03-01T12:00:00.000Z');
      await ledger.jobs.recordFreeJob({
        jobId: 'short',
        surface: 'mcp',
        density: '3x3',
        sheets: 1,
        ttlSeconds: 60,
      });
      await ledger.jobs.recordFreeJob({
        jobId: 'long',
        surface: 'mcp',
        density: '3x3',
        sheets: 1,
        ttlSeconds: 120,
      });
      expect(await ledger.jobs.job('short')).toEqual({
        jobId: 'short',
        sheets: 1,
        expiresAt: '2025-03-01T12:01:00.000Z',
        state: 'charged',
      });
      clock.now = new Date('2025-03-01T12:00:59.999Z');
      expect(await ledger.jobs.expiredJobs()).toEqual([]);
      clock.now = new Date('2025-03-01T12:01:00.000Z');
      expect(await ledger.jobs.expiredJobs()).toEqual(['short']);
      clock.now = new Date('2025-03-01T13:00:00.000Z');
      expect(await ledger.jobs.expiredJobs()).toEqual(['short', 'long']);
      expect(await ledger.jobs.expiredJobs(1)).toEqual(['short']);
      // The sweep is claimed once: a second instance's claim of the same job fails.
      expect(await ledger.jobs.markSwept('short')).toBe(true);
      expect(await ledger.jobs.markSwept('short')).toBe(false);
      expect(await ledger.jobs.expiredJobs()).toEqual(['long']);
    });

    it('lists usage newest first with its own fields', async () => {
      const { ledger, clock } = await fresh('2025-03-01T12:00:00.000Z');
      const account = await ledger.accounts.findOrCreateAccount('usage@example.com');
      await ledger.credits.purchase(account.id, 50, 'stripe:usage');
      await ledger.credits.charge({ ...job(account.id, 1), jobId: 'older' });
      clock.now = new Date('2025-03-01T12:00:01.000Z');
      await ledger.credits.charge({
        ...job(account.id, 10),
        jobId: 'newer',
        surface: 'mcp',
        density: '6x6',
        sheets: 2,
      });
      expect(await ledger.jobs.usage(account.id)).toEqual([
        {
          jobId: 'newer',
          surface: 'mcp',
          density: '6x6',
          sheets: 2,
          credits: 10,
          refunded: false,
          createdAt: '2025-03-01T12:00:01.000Z',
        },
        {
          jobId: 'older',
          surface: 'http',
          density: '3x3',
          sheets: 1,
          credits: 1,
          refunded: false,
          createdAt: '2025-03-01T12:00:00.000Z',
        },
      ]);
      expect(await ledger.jobs.usage(account.id, 1)).toHaveLength(1);
    });
  });

  describe('argument validation', () => {
    it('refuses amounts that are not positive integers and jobs with bad fields, writing nothing', async () => {
      const { db, ledger } = await fresh();
      const account = await ledger.accounts.findOrCreateAccount('valid@example.com');
      for (const credits of [0, -1, 1.5, Number.NaN, 2e9]) {
        await expect(ledger.credits.grant(account.id, credits)).rejects.toThrow(/credits must be/);
        await expect(ledger.credits.purchase(account.id, credits, 'stripe:x')).rejects.toThrow(
          /credits must be/,
        );
        await expect(ledger.credits.charge(job(account.id, credits))).rejects.toThrow(/price must be/);
      }
      await expect(ledger.credits.purchase(account.id, 1, '')).rejects.toThrow(/idempotency key/);
      await expect(ledger.credits.charge({ ...job(account.id, 1), density: '7x7' })).rejects.toThrow(
        /density/,
      );
      await expect(ledger.credits.charge({ ...job(account.id, 1), sheets: 0 })).rejects.toThrow(/sheets/);
      await expect(ledger.credits.charge({ ...job(account.id, 1), jobId: '' })).rejects.toThrow(/job id/);
      await expect(
        ledger.credits.charge({ ...job(account.id, 1), surface: 'ftp' as 'http' }),
      ).rejects.toThrow(/surface/);
      await expect(ledger.credits.charge(job(999_999, 1))).rejects.toThrow(/unknown account/);
      expect(() => new Ledger(db, { allowanceFloor: -1 })).toThrow(/allowanceFloor/);
      expect(await entries(db, account.id)).toEqual([]);
    });
  });
});

/**
 * Each child opens the same database through the built ledger (`openDatabase` options as JSON) and
 * charges 30 times from a common start: one after the other, or all 30 at once when `together` is 1.
 */
const CHILD_SCRIPT = `
import { pathToFileURL } from 'node:url';
const [dist, options, accountId, worker, startAt, together] = process.argv.slice(2);
const { openDatabase } = await import(pathToFileURL(dist + '/server/db/open.js').href);
const { Ledger } = await import(pathToFileURL(dist + '/server/billing/ledger.js').href);
const db = await openDatabase(JSON.parse(options));
const ledger = new Ledger(db, { allowanceFloor: 7 });
await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(startAt) - Date.now())));
const charge = async (i) => {
  const price = ((i + Number(worker)) % 5) + 1;
  const result = await ledger.credits.charge({
    accountId: Number(accountId), jobId: 'w' + worker + '-' + i, price,
    surface: 'http', density: '3x3', sheets: 1, ttlSeconds: 60,
  });
  return { price, ...result };
};
const indexes = Array.from({ length: 30 }, (_, i) => i);
const results = [];
if (together === '1') results.push(...(await Promise.all(indexes.map(charge))));
else for (const i of indexes) results.push(await charge(i));
await db.destroy();
process.stdout.write(JSON.stringify(results));
`;

function runNode(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A loopback port nothing listens on (it was free a moment ago). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}
