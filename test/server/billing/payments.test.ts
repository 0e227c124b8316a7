/**
 * Buying credit packs (DESIGN §7 "Stripe") against a local test double of the Stripe API on loopback
 * and a real SQLite file: the Checkout Session's exact parameters, and the signed webhook crediting the
 * recorded pack exactly once under replays, second events, concurrent deliveries (also from two server
 * instances) and a database failure on either side of the credit, on SQLite and on a real PostgreSQL
 * (DESIGN §8); bad signatures and stale timestamps change nothing.
 */
import Fastify from 'fastify';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKS, type PackId } from '../../../src/core/packs.js';
import { Ledger } from '../../../src/server/billing/ledger.js';
import { Payments, type PaymentsDeps } from '../../../src/server/billing/payments.js';
import type { Database } from '../../../src/server/db/schema.js';
import { stripeWebhookRoutes } from '../../../src/server/routes/stripe-webhook.js';
import { BACKENDS, type TestBackend, useBackend } from '../../helpers/databases.js';
import {
  type StripeDouble,
  sessionEvent,
  startStripeDouble,
  stripeEventId,
  stripeSignature,
} from '../../helpers/stripe-double.js';

const SECRET_KEY = 'sk_test_vidsheet_double';
const WEBHOOK_SECRET = 'whsec_vidsheet_test_secret';
const BASE_URL = 'https://vidsheet.example';
const FLOOR = 7;

/** The Stripe API test double, started before the tests. */
let stripe: StripeDouble;

// ---------------------------------------------------------------------------------------------------
// A fresh database, ledger and Payments per test.

/** The tests that are not about the database's part run on SQLite only. */
const sqlite = useBackend('sqlite');
let buyers = 0;

interface LogLine {
  level: 'info' | 'warn' | 'error';
  object: object;
  message: string;
}

async function fresh(options: { configured?: boolean; databases?: TestBackend } = {}) {
  const databases = options.databases ?? sqlite;
  const database = await databases.fresh();
  const db = database.db;
  const clock = () => new Date('2025-03-01T12:00:00.000Z');
  const ledger = new Ledger(db, { allowanceFloor: FLOOR, clock });
  const logs: LogLine[] = [];
  const log = {
    info: (object: object, message: string) => logs.push({ level: 'info', object, message }),
    warn: (object: object, message: string) => logs.push({ level: 'warn', object, message }),
    error: (object: object, message: string) => logs.push({ level: 'error', object, message }),
  };
  const configured = options.configured ?? true;
  const config: PaymentsDeps['config'] = {
    baseUrl: BASE_URL,
    stripeSecretKey: configured ? SECRET_KEY : undefined,
    stripeWebhookSecret: configured ? WEBHOOK_SECRET : undefined,
    stripeApiUrl: stripe.url,
  };
  const deps = { config, db, ledger, clock, log };
  const payments = new Payments(deps);
  const account = await ledger.accounts.findOrCreateAccount(`buyer${++buyers}@example.com`);
  /** The same Payments on a second server instance of the same database. */
  const instance = async () => {
    const other = await databases.open(database.options);
    const otherLedger = new Ledger(other, { allowanceFloor: FLOOR, clock });
    return new Payments({ ...deps, db: other, ledger: otherLedger });
  };
  return { database, databases, db, ledger, payments, account, logs, deps, instance };
}

/** Everything a webhook could change, to compare before and after. */
async function snapshot(db: Kysely<Database>, accountId: number) {
  const account = await db
    .selectFrom('accounts')
    .select(['balance', 'purchased'])
    .where('id', '=', accountId)
    .executeTakeFirstOrThrow();
  const ledger = await db
    .selectFrom('ledger')
    .select(['kind', 'amount', 'balance_after', 'idempotency_key'])
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute();
  const sessions = await db.selectFrom('checkout_sessions').selectAll().orderBy('session_id').execute();
  const events = await db.selectFrom('stripe_events').selectAll().orderBy('event_id').execute();
  return { ...account, ledger, sessions, events };
}

// ---------------------------------------------------------------------------------------------------
// Webhook deliveries, signed the way Stripe signs them (the events: sessionEvent).

const sign = (payload: string, options: { secret?: string; timestamp?: number } = {}): string =>
  stripeSignature(payload, options.secret ?? WEBHOOK_SECRET, options.timestamp);

/** Delivers a signed payload straight to `handleWebhook`, as the route does. */
const deliver = (payments: Payments, payload: string, header = sign(payload)) =>
  payments.handleWebhook(Buffer.from(payload, 'utf8'), header);

/** A checkout created through the double, so the session is recorded exactly as in production. */
async function checkout(payments: Payments, accountId: number, packId: PackId = 'p30') {
  const url = await payments.createCheckout(accountId, packId);
  const sessionId = url.slice(url.lastIndexOf('/') + 1);
  return { url, sessionId };
}

beforeAll(async () => {
  stripe = await startStripeDouble();
});

afterAll(() => stripe?.close());

/**
 * Makes every insert into `table` fail with `message` (a failing disk, a crash at that step) until the
 * returned function is called: a trigger, spelt as each database spells one.
 */
async function failInserts(db: Kysely<Database>, backend: TestBackend, table: string, message: string) {
  const name = `fail_${table}`;
  if (backend.name === 'sqlite') {
    await sql`create trigger ${sql.id(name)} before insert on ${sql.table(table)} begin select raise(abort, ${sql.lit(message)}); end`.execute(
      db,
    );
    return async () => void (await sql`drop trigger ${sql.id(name)}`.execute(db));
  }
  await sql`create function ${sql.id(name)}() returns trigger language plpgsql as ${sql.lit(
    `begin raise exception '${message}'; end`,
  )}`.execute(db);
  await sql`create trigger ${sql.id(name)} before insert on ${sql.table(table)} for each row execute function ${sql.id(name)}()`.execute(
    db,
  );
  return async () => {
    await sql`drop trigger ${sql.id(name)} on ${sql.table(table)}`.execute(db);
    await sql`drop function ${sql.id(name)}()`.execute(db);
  };
}

// ---------------------------------------------------------------------------------------------------

describe('creating a Checkout Session', () => {
  it.each(PACKS.map((pack) => [pack.id, pack] as const))(
    'sends the %s pack as one usd line item in payment mode and records the session',
    async (_id, pack) => {
      const { payments, account, db } = await fresh();
      stripe.seen.length = 0;
      const { url, sessionId } = await checkout(payments, account.id, pack.id);

      expect(url).toBe(`${stripe.url}/pay/${sessionId}`);
      expect(sessionId).toMatch(/^cs_test_[0-9a-f]{24}$/);
      expect(stripe.seen).toHaveLength(1);
      const request = stripe.seen[0];
      if (request === undefined) throw new Error('the double saw no request');
      expect(request.method).toBe('POST');
      expect(request.path).toBe('/v1/checkout/sessions');
      expect(request.authorization).toBe(`Bearer ${SECRET_KEY}`);
      expect(request.contentType).toMatch(/^application\/x-www-form-urlencoded/);
      expect(Object.fromEntries(request.form)).toEqual({
        mode: 'payment',
        'line_items[0][price_data][currency]': 'usd',
        'line_items[0][price_data][unit_amount]': String(pack.cents),
        'line_items[0][price_data][product_data][name]': `${pack.credits} vidsheet credits`,
        'line_items[0][quantity]': '1',
        client_reference_id: String(account.id),
        'metadata[pack]': pack.id,
        'metadata[account_id]': String(account.id),
        success_url: `${BASE_URL}/keys?purchase=success`,
        cancel_url: `${BASE_URL}/keys?purchase=cancelled`,
      });
      expect([300, 900, 2900]).toContain(Number(request.form.get('line_items[0][price_data][unit_amount]')));

      const rows = await db.selectFrom('checkout_sessions').selectAll().execute();
      expect(rows).toEqual([
        {
          session_id: sessionId,
          account_id: account.id,
          pack: pack.id,
          credits: pack.credits,
          created_at: '2025-03-01T12:00:00.000Z',
          completed_at: null,
        },
      ]);
    },
  );

  it('throws and records nothing when Stripe refuses', async () => {
    const { payments, account, db } = await fresh();
    stripe.failNext(400, {
      error: { type: 'invalid_request_error', message: 'No such thing (from the double)' },
    });
    await expect(payments.createCheckout(account.id, 'p120')).rejects.toThrow(/from the double/);
    expect(await db.selectFrom('checkout_sessions').selectAll().execute()).toEqual([]);
  });

  it('refuses an unknown pack without calling Stripe', async () => {
    const { payments, account } = await fresh();
    stripe.seen.length = 0;
    await expect(payments.createCheckout(account.id, 'p999' as PackId)).rejects.toThrow(/unknown pack/);
    expect(stripe.seen).toEqual([]);
  });
});

describe('without Stripe configured', () => {
  it('is not enabled, createCheckout says buying is unavailable, and webhooks are refused', async () => {
    const { payments, account, db } = await fresh({ configured: false });
    expect(payments.enabled).toBe(false);
    stripe.seen.length = 0;
    await expect(payments.createCheckout(account.id, 'p30')).rejects.toThrow(
      /buying is unavailable: VIDSHEET_STRIPE_SECRET_KEY and VIDSHEET_STRIPE_WEBHOOK_SECRET are not set/,
    );
    expect(stripe.seen).toEqual([]);
    const before = await snapshot(db, account.id);
    expect(await deliver(payments, sessionEvent({ sessionId: 'cs_test_x' }))).toEqual({
      status: 400,
      outcome: 'not configured',
    });
    expect(await snapshot(db, account.id)).toEqual(before);
  });

  it('is enabled with both keys', async () => {
    const { payments } = await fresh();
    expect(payments.enabled).toBe(true);
  });
});

describe.each(BACKENDS)('the webhook on %s', (backend) => {
  const databases = useBackend(backend);

  it('credits the recorded pack once, marks the account purchased, and ends the free allowance', async () => {
    const { payments, account, db, ledger } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id, 'p30');
    const payload = sessionEvent({ sessionId });

    expect(await deliver(payments, payload)).toEqual({ status: 200, outcome: 'credited' });
    const after = await snapshot(db, account.id);
    expect(after.balance).toBe(30);
    expect(after.purchased).toBe(1);
    expect(after.ledger).toEqual([
      { kind: 'purchase', amount: 30, balance_after: 30, idempotency_key: `stripe:${sessionId}` },
    ]);
    expect(after.sessions[0]?.completed_at).toBe('2025-03-01T12:00:00.000Z');
    expect(after.events).toHaveLength(1);
    expect((await ledger.accounts.accountById(account.id))?.purchased).toBe(true);

    // The same delivery again (Stripe retries, or an attacker replays it within 300 s): nothing changes.
    expect(await deliver(payments, payload)).toEqual({ status: 200, outcome: 'duplicate event' });
    expect(await deliver(payments, payload, sign(payload))).toEqual({
      status: 200,
      outcome: 'duplicate event',
    });
    // A second, different event for the same session: nothing changes either.
    expect(await deliver(payments, sessionEvent({ sessionId }))).toEqual({
      status: 200,
      outcome: 'already credited',
    });
    const final = await snapshot(db, account.id);
    expect({ ...final, events: final.events.length }).toEqual({ ...after, events: 2 });

    // Purchased: spending down to zero is not topped up by the allowance any more.
    const charge = (jobId: string, price: number) =>
      ledger.credits.charge({
        accountId: account.id,
        jobId,
        price,
        surface: 'http',
        density: '3x3',
        sheets: price,
        ttlSeconds: 86_400,
      });
    expect(await charge('job-a', 30)).toEqual({ ok: true, balance: 0, allowance: 0 });
    expect(await charge('job-b', 1)).toEqual({ ok: false, balance: 0, allowance: 0 });
  });

  it("credits the pack recorded for the session, whatever the event's metadata says", async () => {
    const { payments, account, db } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id, 'p120');
    const payload = sessionEvent({
      sessionId,
      metadata: { pack: 'p500', account_id: '999' },
      clientReferenceId: '999',
    });
    expect(await deliver(payments, payload)).toEqual({ status: 200, outcome: 'credited' });
    const after = await snapshot(db, account.id);
    expect(after.balance).toBe(120);
    expect(after.ledger.map((entry) => entry.amount)).toEqual([120]);
  });

  it('credits once when deliveries race: the same event twice and a second event at once', async () => {
    const { payments, account, db } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id, 'p500');
    const first = sessionEvent({ sessionId });
    const second = sessionEvent({ sessionId });
    const results = await Promise.all([
      deliver(payments, first),
      deliver(payments, first),
      deliver(payments, second),
      deliver(payments, second),
    ]);
    expect(results.every((result) => result.status === 200)).toBe(true);
    expect(results.filter((result) => result.outcome === 'credited')).toHaveLength(1);
    const after = await snapshot(db, account.id);
    expect(after.balance).toBe(500);
    expect(after.ledger).toHaveLength(1);
    expect(after.events).toHaveLength(2);
  });

  it('credits once when two server instances receive the deliveries at once', async () => {
    const { payments, account, db, instance } = await fresh({ databases });
    const other = await instance();
    const { sessionId } = await checkout(payments, account.id, 'p120');
    const events = [sessionEvent({ sessionId }), sessionEvent({ sessionId })];
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => deliver(i % 2 ? payments : other, events[i % 3 ? 0 : 1] as string)),
    );
    expect(results.every((result) => result.status === 200)).toBe(true);
    expect(results.filter((result) => result.outcome === 'credited')).toHaveLength(1);
    const after = await snapshot(db, account.id);
    expect(after.balance).toBe(120);
    expect(after.ledger).toHaveLength(1);
    expect(after.events).toHaveLength(2);
    expect(after.sessions[0]?.completed_at).not.toBeNull();
  });

  it('refuses a bad signature, a wrong secret, a missing header and a stale timestamp with 400', async () => {
    const { payments, account, db } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id);
    const payload = sessionEvent({ sessionId });
    const before = await snapshot(db, account.id);

    const wrongSecret = sign(payload, { secret: 'whsec_someone_else' });
    expect(await deliver(payments, payload, wrongSecret)).toEqual({ status: 400, outcome: 'bad signature' });
    const tampered = payload.replace('"paid"', '"paid" ');
    expect(await deliver(payments, tampered, sign(payload))).toEqual({
      status: 400,
      outcome: 'bad signature',
    });
    expect(await payments.handleWebhook(Buffer.from(payload), undefined)).toEqual({
      status: 400,
      outcome: 'bad signature',
    });
    expect(await deliver(payments, payload, 'garbage')).toEqual({ status: 400, outcome: 'bad signature' });
    const stale = sign(payload, { timestamp: Math.floor(Date.now() / 1000) - 400 });
    expect(await deliver(payments, payload, stale)).toEqual({ status: 400, outcome: 'bad signature' });
    expect(await snapshot(db, account.id)).toEqual(before);

    // Inside Stripe's default 300 s tolerance the same event is accepted.
    const recent = sign(payload, { timestamp: Math.floor(Date.now() / 1000) - 200 });
    expect(await deliver(payments, payload, recent)).toEqual({ status: 200, outcome: 'credited' });
  });

  it('refuses an event signed more than 300 s ahead (DESIGN §5a: either way), accepts 200 s ahead', async () => {
    const { payments, account, db } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id);
    const payload = sessionEvent({ sessionId });
    const before = await snapshot(db, account.id);
    const ahead = (s: number) => sign(payload, { timestamp: Math.floor(Date.now() / 1000) + s });
    expect(await deliver(payments, payload, ahead(400))).toEqual({ status: 400, outcome: 'bad signature' });
    expect(await deliver(payments, payload, ahead(302))).toEqual({ status: 400, outcome: 'bad signature' });
    expect(await snapshot(db, account.id)).toEqual(before);
    expect(await deliver(payments, payload, ahead(200))).toEqual({ status: 200, outcome: 'credited' });
  });

  it('refuses a correctly signed body that is not an event with 400', async () => {
    const { payments, account, db } = await fresh({ databases });
    const before = await snapshot(db, account.id);
    for (const payload of ['not json', 'null', '{"id":"evt_1","type":"checkout.session.completed"}']) {
      expect((await deliver(payments, payload)).status).toBe(400);
    }
    expect(await snapshot(db, account.id)).toEqual(before);
  });

  it('ignores an unpaid completion, other event types and unknown sessions', async () => {
    const { payments, account, db } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id);
    const before = await snapshot(db, account.id);

    expect(await deliver(payments, sessionEvent({ sessionId, paymentStatus: 'unpaid' }))).toEqual({
      status: 200,
      outcome: 'ignored',
    });
    expect(await deliver(payments, sessionEvent({ sessionId, type: 'checkout.session.expired' }))).toEqual({
      status: 200,
      outcome: 'ignored',
    });
    expect(await deliver(payments, sessionEvent({ sessionId: 'cs_test_not_ours' }))).toEqual({
      status: 200,
      outcome: 'unknown session',
    });
    expect(await snapshot(db, account.id)).toEqual(before);
  });

  it('answers 500 when the database is gone, and changes nothing', async () => {
    const { payments, account, database, deps } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id);
    const observer = await databases.open(database.options);
    const before = await snapshot(observer, account.id);

    await deps.db.destroy();
    expect(await deliver(payments, sessionEvent({ sessionId }))).toEqual({
      status: 500,
      outcome: 'database error',
    });
    expect(await snapshot(observer, account.id)).toEqual(before);
  });

  it('answers 500 when the credit fails, changing nothing, and the retry credits once', async () => {
    const { payments, account, db, logs } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id);
    const payload = sessionEvent({ sessionId });
    const before = await snapshot(db, account.id);

    const repair = await failInserts(db, databases, 'ledger', 'disk full (test)');
    expect(await deliver(payments, payload)).toEqual({ status: 500, outcome: 'database error' });
    expect(await snapshot(db, account.id)).toEqual(before);
    expect(logs.some((line) => line.level === 'error' && /Stripe will retry/.test(line.message))).toBe(true);

    await repair();
    expect(await deliver(payments, payload)).toEqual({ status: 200, outcome: 'credited' });
    expect((await snapshot(db, account.id)).balance).toBe(30);
  });

  it('neither loses nor doubles the credit when the step after it fails (as in a crash between them)', async () => {
    const { payments, account, db } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id);
    const payload = sessionEvent({ sessionId });

    const repair = await failInserts(db, databases, 'stripe_events', 'crash (test)');
    // The credit committed, the bookkeeping did not: 500, so Stripe delivers again.
    expect(await deliver(payments, payload)).toEqual({ status: 500, outcome: 'database error' });
    const between = await snapshot(db, account.id);
    expect(between.balance).toBe(30);
    expect(between.events).toEqual([]);
    expect(between.sessions[0]?.completed_at).toBeNull();

    // Still failing: each retry is refused again, and the balance does not move.
    expect(await deliver(payments, payload)).toEqual({ status: 500, outcome: 'database error' });
    expect((await snapshot(db, account.id)).balance).toBe(30);

    await repair();
    expect(await deliver(payments, payload)).toEqual({ status: 200, outcome: 'already credited' });
    const after = await snapshot(db, account.id);
    expect(after.balance).toBe(30);
    expect(after.ledger).toHaveLength(1);
    expect(after.events).toHaveLength(1);
    expect(after.sessions[0]?.completed_at).not.toBeNull();
    expect(await deliver(payments, payload)).toEqual({ status: 200, outcome: 'duplicate event' });
    expect((await snapshot(db, account.id)).balance).toBe(30);
  });
});

describe.each(BACKENDS)('payments that confirm later (async) on %s', (backend) => {
  const databases = useBackend(backend);
  const COMPLETED = 'checkout.session.completed';
  const SUCCEEDED = 'checkout.session.async_payment_succeeded';
  const FAILED = 'checkout.session.async_payment_failed';

  it('async_payment_succeeded credits the recorded pack once; replays and a second event change nothing', async () => {
    const { payments, account, db } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id, 'p120');
    const succeeded = sessionEvent({ sessionId, type: SUCCEEDED, metadata: { pack: 'p500' } });
    expect(await deliver(payments, succeeded)).toEqual({ status: 200, outcome: 'credited' });
    const after = await snapshot(db, account.id);
    expect(after.balance).toBe(120);
    expect(after.purchased).toBe(1);
    expect(after.ledger).toEqual([
      { kind: 'purchase', amount: 120, balance_after: 120, idempotency_key: `stripe:${sessionId}` },
    ]);
    expect(await deliver(payments, succeeded)).toEqual({ status: 200, outcome: 'duplicate event' });
    expect(await deliver(payments, sessionEvent({ sessionId, type: SUCCEEDED }))).toEqual({
      status: 200,
      outcome: 'already credited',
    });
    // A paid `completed` arriving late (out of order) is the same session: nothing more.
    expect(await deliver(payments, sessionEvent({ sessionId, type: COMPLETED }))).toEqual({
      status: 200,
      outcome: 'already credited',
    });
    expect((await snapshot(db, account.id)).ledger).toEqual(after.ledger);
  });

  it('completed "unpaid", then async_payment_succeeded: credited exactly once, at the second', async () => {
    const { payments, account, db } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id, 'p30');
    const before = await snapshot(db, account.id);
    const unpaid = sessionEvent({ sessionId, type: COMPLETED, paymentStatus: 'unpaid' });
    expect(await deliver(payments, unpaid)).toEqual({ status: 200, outcome: 'ignored' });
    expect(await snapshot(db, account.id)).toEqual(before);
    expect(await deliver(payments, sessionEvent({ sessionId, type: SUCCEEDED }))).toEqual({
      status: 200,
      outcome: 'credited',
    });
    // Stripe delivering the unpaid completion again, late, changes nothing.
    expect(await deliver(payments, unpaid)).toEqual({ status: 200, outcome: 'ignored' });
    const after = await snapshot(db, account.id);
    expect(after.balance).toBe(30);
    expect(after.ledger).toHaveLength(1);
    expect(after.sessions[0]?.completed_at).not.toBeNull();
  });

  it('async_payment_failed credits nothing, for a session completed unpaid', async () => {
    const { payments, account, db, logs } = await fresh({ databases });
    const { sessionId } = await checkout(payments, account.id, 'p500');
    const before = await snapshot(db, account.id);
    await deliver(payments, sessionEvent({ sessionId, type: COMPLETED, paymentStatus: 'unpaid' }));
    expect(
      await deliver(payments, sessionEvent({ sessionId, type: FAILED, paymentStatus: 'unpaid' })),
    ).toEqual({
      status: 200,
      outcome: 'payment failed',
    });
    expect(await snapshot(db, account.id)).toEqual(before);
    expect(logs.some((line) => line.level === 'warn' && /payment failed/.test(line.message))).toBe(true);
    // Signed but without a session id, an async event is malformed like a completion would be.
    const payload = JSON.stringify({
      id: stripeEventId(),
      object: 'event',
      type: SUCCEEDED,
      data: { object: {} },
    });
    expect(await deliver(payments, payload)).toEqual({ status: 400, outcome: 'malformed' });
    expect(await snapshot(db, account.id)).toEqual(before);
  });

  it('unpaid completion, success and replays racing on two instances: credited exactly once', async () => {
    const { payments, account, db, instance } = await fresh({ databases });
    const other = await instance();
    const { sessionId } = await checkout(payments, account.id, 'p120');
    const events = [
      sessionEvent({ sessionId, type: COMPLETED, paymentStatus: 'unpaid' }),
      sessionEvent({ sessionId, type: SUCCEEDED }),
      sessionEvent({ sessionId, type: SUCCEEDED }),
    ];
    const results = await Promise.all(
      Array.from({ length: 9 }, (_, i) => deliver(i % 2 ? payments : other, events[i % 3] as string)),
    );
    expect(results.every((result) => result.status === 200)).toBe(true);
    expect(results.filter((result) => result.outcome === 'credited')).toHaveLength(1);
    const after = await snapshot(db, account.id);
    expect(after.balance).toBe(120);
    expect(after.ledger).toHaveLength(1);
    // The two succeeded events are recorded; the unpaid completion credits nothing and is not recorded.
    expect(after.events).toHaveLength(2);
  });
});

describe('POST /stripe/webhook', () => {
  async function app(payments: Payments) {
    const server = Fastify();
    await server.register(stripeWebhookRoutes, { payments });
    // A sibling route: the raw-body parser must not leak out of the webhook's own plugin.
    server.post('/echo', async (request) => ({ body: request.body }));
    await server.ready();
    return server;
  }

  /** A webhook delivery: `signature` defaults to a valid one for `payload`. */
  function post(
    server: Awaited<ReturnType<typeof app>>,
    payload: string,
    signature = sign(payload),
    contentType = 'application/json',
  ) {
    return server.inject({
      method: 'POST',
      url: '/stripe/webhook',
      headers: { 'content-type': contentType, 'stripe-signature': signature },
      payload,
    });
  }

  it('hands the exact bytes to the verifier and credits once', async () => {
    const { payments, account, db } = await fresh();
    const server = await app(payments);
    try {
      const { sessionId } = await checkout(payments, account.id);
      // Pretty-printed with odd spacing: any parse-and-reserialise on the way would break the signature.
      const payload = `${JSON.stringify(JSON.parse(sessionEvent({ sessionId })), null, 3)}\n`;
      const ok = await post(server, payload);
      expect(ok.statusCode).toBe(200);
      expect(ok.json()).toEqual({ received: true });
      expect((await snapshot(db, account.id)).balance).toBe(30);

      const again = await post(server, payload, sign(payload), 'application/json; charset=utf-8');
      expect(again.statusCode).toBe(200);
      expect((await snapshot(db, account.id)).balance).toBe(30);

      const tampered = await post(server, payload.replace('"paid"', '"paid" '), sign(payload));
      expect(tampered.statusCode).toBe(400);
      expect(tampered.json()).toEqual({ error: 'bad_signature' });

      const missing = await server.inject({
        method: 'POST',
        url: '/stripe/webhook',
        headers: { 'content-type': 'application/json' },
        payload,
      });
      expect(missing.statusCode).toBe(400);
      expect(missing.json()).toEqual({ error: 'bad_signature' });

      // Any other content type still reaches the verifier as bytes.
      const other = sessionEvent({ sessionId });
      const text = await post(server, other, sign(other), 'text/plain');
      expect(text.statusCode).toBe(200);
      expect((await snapshot(db, account.id)).balance).toBe(30);

      const echo = await server.inject({ method: 'POST', url: '/echo', payload: { a: 1 } });
      expect(echo.json()).toEqual({ body: { a: 1 } });
    } finally {
      await server.close();
    }
  });

  it('a delayed payment through the route: unpaid completion, then async success, credits once', async () => {
    const { payments, account, db } = await fresh();
    const server = await app(payments);
    try {
      const { sessionId } = await checkout(payments, account.id);
      const unpaid = await post(server, sessionEvent({ sessionId, paymentStatus: 'unpaid' }));
      expect([unpaid.statusCode, unpaid.json()]).toEqual([200, { received: true }]);
      expect((await snapshot(db, account.id)).balance).toBe(0);
      const type = 'checkout.session.async_payment_succeeded';
      for (const payload of [sessionEvent({ sessionId, type }), sessionEvent({ sessionId, type })]) {
        const answer = await post(server, payload);
        expect([answer.statusCode, answer.json()]).toEqual([200, { received: true }]);
      }
      expect((await snapshot(db, account.id)).ledger).toHaveLength(1);
      expect((await snapshot(db, account.id)).balance).toBe(30);
    } finally {
      await server.close();
    }
  });

  it('answers 500 with a retry body when the database fails', async () => {
    const { payments, account, deps } = await fresh();
    const server = await app(payments);
    try {
      const { sessionId } = await checkout(payments, account.id);
      await deps.db.destroy();
      const payload = sessionEvent({ sessionId });
      const response = await post(server, payload);
      expect(response.statusCode).toBe(500);
      expect(response.json()).toEqual({ error: 'retry' });
    } finally {
      await server.close();
    }
  });

  it('refuses a body over 1 MB', async () => {
    const { payments } = await fresh();
    const server = await app(payments);
    try {
      const payload = JSON.stringify({ padding: 'x'.repeat(1024 * 1024) });
      const response = await post(server, payload);
      expect(response.statusCode).toBe(413);
    } finally {
      await server.close();
    }
  });
});
