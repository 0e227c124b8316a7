/**
 * The soak's end-of-run judgements (bench/soak.mjs), apart so they can be tested on their own
 * (test/bench/soak-checks.test.ts): the ledger read straight from its tables, and the trend fit.
 */

/**
 * Per account, from the `accounts` and `ledger` tables of `db` (a Kysely instance): the balance must
 * equal the sum of the account's entries, and each entry's `balance_after` the running sum up to it
 * (entries in id order). Returns the counts, the entries by kind, the accounts whose balance is off
 * (`{ id, email, balance, sum }`) and the entries whose `balance_after` is off.
 */
export async function ledgerBalances(db) {
  const accounts = await db.selectFrom('accounts').select(['id', 'email', 'balance']).execute();
  const entries = await db
    .selectFrom('ledger')
    .select(['id', 'account_id', 'kind', 'amount', 'balance_after'])
    .orderBy('id')
    .execute();
  const sums = new Map();
  const kinds = {};
  const chainBreaks = [];
  for (const e of entries) {
    const sum = (sums.get(e.account_id) ?? 0) + Number(e.amount);
    sums.set(e.account_id, sum);
    if (Number(e.balance_after) !== sum) chainBreaks.push({ id: e.id, balanceAfter: e.balance_after, sum });
    kinds[e.kind] = (kinds[e.kind] ?? 0) + 1;
  }
  const mismatched = accounts
    .map((a) => ({ id: a.id, email: a.email, balance: Number(a.balance), sum: sums.get(a.id) ?? 0 }))
    .filter((a) => a.balance !== a.sum);
  return { accounts: accounts.length, entries: entries.length, kinds, mismatched, chainBreaks };
}

/**
 * Least-squares line through the points (`ts` in seconds, `ys` any unit): its slope per minute, the
 * slope's standard error (NaN with fewer than 3 points) and the mean of `ys`.
 */
export function slope(ts, ys) {
  const n = ts.length;
  const xs = ts.map((t) => t / 60);
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  const sxx = xs.reduce((a, x) => a + (x - mx) ** 2, 0);
  const b = xs.reduce((a, x, i) => a + (x - mx) * (ys[i] - my), 0) / sxx;
  const residual = ys.reduce((a, y, i) => a + (y - (my + b * (xs[i] - mx))) ** 2, 0);
  return { perMin: b, se: n > 2 ? Math.sqrt(residual / (n - 2) / sxx) : Number.NaN, mean: my };
}
