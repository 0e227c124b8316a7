/**
 * The soak's end-of-run checks (bench/soak-checks.mjs): the ledger check against a real SQLite ledger
 * written by the server's own Ledger (grants, charges, a refund), then the same database broken by
 * hand in each way the check must see; and the trend fit against lines whose slope is known.
 */
import { describe, expect, it } from 'vitest';
import { ledgerBalances, slope } from '../../bench/soak-checks.mjs';
import { Ledger } from '../../src/server/billing/ledger.js';
import { useBackend } from '../helpers/databases.js';

const sqlite = useBackend('sqlite');

async function books() {
  const { db } = await sqlite.fresh();
  const ledger = new Ledger(db, { allowanceFloor: 7 });
  const a = await ledger.accounts.findOrCreateAccount('a@example.com');
  const b = await ledger.accounts.findOrCreateAccount('b@example.com');
  await ledger.credits.grant(a.id, 50);
  await ledger.credits.grant(b.id, 20);
  const job = { surface: 'http' as const, density: '3x3', sheets: 2, ttlSeconds: 60 };
  expect(await ledger.credits.charge({ ...job, accountId: a.id, jobId: 'j1', price: 2 })).toMatchObject({
    ok: true,
  });
  expect(await ledger.credits.charge({ ...job, accountId: a.id, jobId: 'j2', price: 6 })).toMatchObject({
    ok: true,
  });
  expect(await ledger.credits.charge({ ...job, accountId: b.id, jobId: 'j3', price: 4 })).toMatchObject({
    ok: true,
  });
  expect(await ledger.credits.refund('j2')).toBe(true);
  return { db, a, b };
}

describe('ledgerBalances', () => {
  it('finds every balance equal to the sum of its entries in books the Ledger kept', async () => {
    const { db } = await books();
    const balances = await db.selectFrom('accounts').select(['email', 'balance']).orderBy('id').execute();
    // 50 - 2 - 6 + 6 and 20 - 4, worked out by hand.
    expect(balances).toEqual([
      { email: 'a@example.com', balance: 48 },
      { email: 'b@example.com', balance: 16 },
    ]);
    expect(await ledgerBalances(db)).toEqual({
      accounts: 2,
      entries: 6,
      kinds: { grant: 2, charge: 3, refund: 1 },
      mismatched: [],
      chainBreaks: [],
    });
  });

  it('names an account whose balance moved without an entry', async () => {
    const { db, b } = await books();
    await db.updateTable('accounts').set({ balance: 17 }).where('id', '=', b.id).execute();
    const result = await ledgerBalances(db);
    expect(result.mismatched).toEqual([{ id: b.id, email: 'b@example.com', balance: 17, sum: 16 }]);
    expect(result.chainBreaks).toEqual([]);
  });

  it("names an entry whose balance_after is not the running sum, and an account missing an entry's amount", async () => {
    const { db, a } = await books();
    const last = await db
      .selectFrom('ledger')
      .select(['id', 'amount'])
      .where('account_id', '=', a.id)
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow();
    await db.updateTable('ledger').set({ balance_after: 49 }).where('id', '=', last.id).execute();
    expect((await ledgerBalances(db)).chainBreaks).toEqual([{ id: last.id, balanceAfter: 49, sum: 48 }]);
    // An entry lost: the balance no longer equals the sum.
    await db.deleteFrom('ledger').where('id', '=', last.id).execute();
    expect((await ledgerBalances(db)).mismatched).toEqual([
      { id: a.id, email: 'a@example.com', balance: 48, sum: 48 - last.amount },
    ]);
  });
});

describe('slope', () => {
  const minutes = Array.from({ length: 21 }, (_, i) => (10 + i) * 60);

  it('gives the slope per minute of an exact line, with no error', () => {
    const fit = slope(
      minutes,
      minutes.map((t) => 100 + 0.5 * (t / 60)),
    );
    expect(fit.perMin).toBeCloseTo(0.5, 10);
    expect(fit.se).toBeCloseTo(0, 10);
    expect(fit.mean).toBeCloseTo(100 + 0.5 * 20, 10);
  });

  it('gives about 0 for noise around a flat level, and the noise shows in the error', () => {
    const ys = minutes.map((_, i) => 40 + (i % 2 ? 3 : -3));
    const fit = slope(minutes, ys);
    expect(Math.abs(fit.perMin)).toBeLessThan(0.05);
    expect(fit.se).toBeGreaterThan(0.01);
  });
});
