/**
 * Buying credit packs through Stripe Checkout (DESIGN §5, §7 "Stripe"): a Checkout Session per click,
 * and the signed webhook that credits the pack once the payment is in.
 *
 * When the payment is in (DESIGN §5a "Payments"): `checkout.session.completed` with `payment_status:
 * "paid"` (cards), or `checkout.session.async_payment_succeeded` (delayed methods such as bank debits,
 * whose `completed` event came earlier, `unpaid`). `async_payment_failed` credits nothing. Both paid
 * events name the session, so a session is credited once whichever of them arrive, in any order.
 *
 * Exactly once, without nesting transactions: the ledger's `purchase` runs its own write transaction and
 * is exactly-once by its unique idempotency key `stripe:<session id>`, so that key is the guard, not
 * the bookkeeping tables. A paid completion is applied in three steps:
 * 1. read-only short cuts: an event id already in `stripe_events`, a session id we never created, or a
 *    session already `completed_at` end here without touching a balance;
 * 2. `ledger.credits.purchase(account, credits recorded for the session, 'stripe:<session id>')`;
 * 3. one write transaction marking the session completed and recording the event id.
 * A crash (or a database error) between 2 and 3 answers 500 or nothing, so Stripe delivers again; the
 * retry passes step 1 (nothing was recorded), and step 2 finds the key already in the ledger and changes
 * nothing, then step 3 records the event. Two deliveries racing through step 1 meet at the same key.
 * So a credit can be neither lost (nothing is recorded as done before the purchase committed) nor
 * doubled (the database's unique key, not a check in code, decides).
 */
import type { Kysely } from 'kysely';
import Stripe from 'stripe';
import { type PackId, packById } from '#vidsheet/core/packs.js';
import type { ServerConfig } from '../config.js';
import { writeTransaction } from '../db/open.js';
import type { Database } from '../db/schema.js';
import type { Clock, Ledger } from './ledger.js';

/** The slice of a pino logger this needs (the server passes `app.log`; tests pass a recorder). */
export interface PaymentsLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

export interface PaymentsDeps {
  config: Pick<ServerConfig, 'stripeSecretKey' | 'stripeWebhookSecret' | 'stripeApiUrl' | 'baseUrl'>;
  db: Kysely<Database>;
  ledger: Ledger;
  /** Timestamps of the bookkeeping rows; the signature's 300 s tolerance is checked on the real clock. */
  clock: Clock;
  log: PaymentsLog;
}

/**
 * What a webhook delivery comes to. `status` is the HTTP answer: Stripe retries anything but a 2xx, so
 * 500 is kept for "try again later" (the database failed) and 400 for deliveries that can never succeed.
 */
export interface WebhookResult {
  status: 200 | 400 | 500;
  outcome: WebhookOutcome;
}

export type WebhookOutcome =
  | 'credited'
  | 'already credited'
  | 'duplicate event'
  | 'unknown session'
  | 'payment failed'
  | 'ignored'
  | 'bad signature'
  | 'malformed'
  | 'not configured'
  | 'database error';

/** Prefix of the ledger idempotency key of a purchase: one credit per Checkout Session, ever. */
export const PURCHASE_KEY_PREFIX = 'stripe:';

/** DESIGN §5a: an event is accepted only within this many seconds of its signed timestamp, either way. */
export const WEBHOOK_TOLERANCE_S = 300;

/**
 * The `t=` of a `Stripe-Signature` header (seconds since the epoch), undefined when there is none.
 * Stripe's own check refuses a timestamp too far in the past only; DESIGN §5a also refuses one too
 * far in the future (a signature made ahead of time must not stay valid until then and 300 s after).
 */
function signedAt(header: string): number | undefined {
  for (const item of header.split(',')) {
    const [key, value] = item.split('=', 2);
    if (key?.trim() === 't' && value !== undefined && /^\d+$/.test(value.trim())) return Number(value.trim());
  }
  return undefined;
}

/** The events that say a session's payment is in (see the module comment). */
const COMPLETED = 'checkout.session.completed';
const ASYNC_SUCCEEDED = 'checkout.session.async_payment_succeeded';
const ASYNC_FAILED = 'checkout.session.async_payment_failed';

/** A page click waits for Stripe; the SDK's 80 s default would hold the browser far too long. */
const STRIPE_TIMEOUT_MS = 20_000;

/** Stripe Checkout for credit packs: creating sessions and applying the signed webhook. */
export class Payments {
  readonly #deps: PaymentsDeps;
  readonly #stripe: Stripe | undefined;
  readonly #webhookSecret: string | undefined;

  constructor(deps: PaymentsDeps) {
    this.#deps = deps;
    const { stripeSecretKey, stripeWebhookSecret, stripeApiUrl } = deps.config;
    if (stripeSecretKey !== undefined && stripeWebhookSecret !== undefined) {
      this.#stripe = new Stripe(stripeSecretKey, { ...apiBase(stripeApiUrl), timeout: STRIPE_TIMEOUT_MS });
      this.#webhookSecret = stripeWebhookSecret;
    }
  }

  /**
   * False when `VIDSHEET_STRIPE_SECRET_KEY` / `VIDSHEET_STRIPE_WEBHOOK_SECRET` are unset: the page still
   * lists the packs (DESIGN §7) but says buying is unavailable, and every webhook is refused.
   */
  get enabled(): boolean {
    return this.#stripe !== undefined;
  }

  /**
   * Creates the Checkout Session for one pack (mode `payment`, one line item priced from the pack,
   * `client_reference_id` = the account id, `metadata[pack]`), records which account and pack it sells
   * (the webhook credits that record, never the event's metadata), and returns Stripe's page to redirect
   * to. Throws when buying is not configured, for an unknown pack, or when Stripe fails.
   */
  async createCheckout(accountId: number, packId: PackId): Promise<string> {
    const stripe = this.#stripe;
    if (stripe === undefined) {
      throw new Error(
        'buying is unavailable: VIDSHEET_STRIPE_SECRET_KEY and VIDSHEET_STRIPE_WEBHOOK_SECRET are not set',
      );
    }
    if (!Number.isSafeInteger(accountId) || accountId <= 0) {
      throw new Error(`account id must be a positive integer, got ${accountId}`);
    }
    const pack = packById(packId);
    if (pack === undefined) throw new Error(`unknown pack: ${JSON.stringify(packId)}`);
    const { baseUrl } = this.#deps.config;
    const session = await stripe.checkout.sessions.create({
      mode: 'payment',
      line_items: [
        {
          price_data: {
            currency: 'usd',
            unit_amount: pack.cents,
            product_data: { name: `${pack.credits} vidsheet credits` },
          },
          quantity: 1,
        },
      ],
      client_reference_id: String(accountId),
      metadata: { pack: pack.id, account_id: String(accountId) },
      success_url: `${baseUrl}/keys?purchase=success`,
      cancel_url: `${baseUrl}/keys?purchase=cancelled`,
    });
    if (typeof session.id !== 'string' || session.id === '' || !session.url) {
      throw new Error('Stripe created a Checkout Session without an id or a url');
    }
    const createdAt = this.#deps.clock().toISOString();
    // Recorded before the buyer is sent to pay, so a completion can never arrive for a session we lack.
    await writeTransaction(this.#deps.db, async (trx) => {
      await trx
        .insertInto('checkout_sessions')
        .values({
          session_id: session.id,
          account_id: accountId,
          pack: pack.id,
          credits: pack.credits,
          created_at: createdAt,
        })
        .execute();
    });
    this.#deps.log.info({ accountId, pack: pack.id, sessionId: session.id }, 'checkout session created');
    return session.url;
  }

  /**
   * Verifies and applies one webhook delivery: the raw body exactly as received (any re-serialisation
   * breaks the signature) and the `Stripe-Signature` header. 200 when applied or deliberately ignored,
   * 400 for a bad signature, a timestamp outside Stripe's default 300 s tolerance or a malformed event
   * (nothing changed), 500 when the database failed (nothing or only the idempotent credit done; Stripe
   * retries and the retry completes it). See the module comment for why this is exactly once.
   */
  async handleWebhook(rawBody: Buffer, signature: string | undefined): Promise<WebhookResult> {
    const { log } = this.#deps;
    if (this.#stripe === undefined || this.#webhookSecret === undefined) {
      return { status: 400, outcome: 'not configured' };
    }
    if (signature === undefined || signature === '') return { status: 400, outcome: 'bad signature' };
    let event: Stripe.Event;
    try {
      event = this.#stripe.webhooks.constructEvent(
        rawBody,
        signature,
        this.#webhookSecret,
        WEBHOOK_TOLERANCE_S,
      );
    } catch (error) {
      const outcome = isSignatureError(error) ? 'bad signature' : 'malformed';
      log.warn({ err: messageOf(error) }, `stripe webhook refused: ${outcome}`);
      return { status: 400, outcome };
    }
    const at = signedAt(signature);
    if (at === undefined || at > Date.now() / 1000 + WEBHOOK_TOLERANCE_S) {
      log.warn({ signedAt: at }, 'stripe webhook refused: bad signature (timestamp in the future)');
      return { status: 400, outcome: 'bad signature' };
    }
    // Signed, so from Stripe, but still only JSON: anything not shaped like an event is refused, not thrown.
    if (typeof event !== 'object' || event === null || typeof event.type !== 'string') {
      return { status: 400, outcome: 'malformed' };
    }
    if (event.type !== COMPLETED && event.type !== ASYNC_SUCCEEDED && event.type !== ASYNC_FAILED) {
      return { status: 200, outcome: 'ignored' };
    }
    const session = (event.data as Partial<typeof event.data> | undefined)?.object;
    if (typeof event.id !== 'string' || event.id === '' || typeof session?.id !== 'string' || !session.id) {
      log.warn(
        { eventId: event.id, type: event.type },
        'stripe webhook refused: a session event without ids',
      );
      return { status: 400, outcome: 'malformed' };
    }
    if (event.type === ASYNC_FAILED) {
      log.warn({ eventId: event.id, sessionId: session.id }, 'checkout payment failed: nothing credited');
      return { status: 200, outcome: 'payment failed' };
    }
    // A delayed payment method completes `unpaid`: it is credited at its async_payment_succeeded event,
    // which is itself the word that the money is in.
    if (event.type === COMPLETED && session.payment_status !== 'paid') {
      return { status: 200, outcome: 'ignored' };
    }
    try {
      return await this.#applyCompletion(event.id, session.id);
    } catch (error) {
      log.error(
        { err: error, eventId: event.id, sessionId: session.id },
        'stripe webhook not applied: database error (Stripe will retry)',
      );
      return { status: 500, outcome: 'database error' };
    }
  }

  async #applyCompletion(eventId: string, sessionId: string): Promise<WebhookResult> {
    const { db, ledger, log } = this.#deps;
    const seen = await db
      .selectFrom('stripe_events')
      .select('event_id')
      .where('event_id', '=', eventId)
      .executeTakeFirst();
    if (seen !== undefined) return { status: 200, outcome: 'duplicate event' };
    const recorded = await db
      .selectFrom('checkout_sessions')
      .select(['account_id', 'pack', 'credits', 'completed_at'])
      .where('session_id', '=', sessionId)
      .executeTakeFirst();
    if (recorded === undefined) {
      // Not one of ours (another server's, or a test event from the dashboard): nothing to credit.
      log.warn({ eventId, sessionId }, 'stripe webhook for an unknown checkout session: nothing credited');
      return { status: 200, outcome: 'unknown session' };
    }
    if (recorded.completed_at !== null) {
      await this.#record(eventId, sessionId);
      return { status: 200, outcome: 'already credited' };
    }
    const purchase = await ledger.credits.purchase(
      recorded.account_id,
      recorded.credits,
      `${PURCHASE_KEY_PREFIX}${sessionId}`,
    );
    await this.#record(eventId, sessionId);
    if (!purchase.applied) return { status: 200, outcome: 'already credited' };
    log.info(
      { accountId: recorded.account_id, pack: recorded.pack, credits: recorded.credits, sessionId, eventId },
      'credit pack purchased',
    );
    return { status: 200, outcome: 'credited' };
  }

  /** Step 3: the bookkeeping, only ever after the credit committed; both writes are idempotent. */
  async #record(eventId: string, sessionId: string): Promise<void> {
    const now = this.#deps.clock().toISOString();
    await writeTransaction(this.#deps.db, async (trx) => {
      await trx
        .updateTable('checkout_sessions')
        .set({ completed_at: now })
        .where('session_id', '=', sessionId)
        .where('completed_at', 'is', null)
        .execute();
      await trx
        .insertInto('stripe_events')
        .values({ event_id: eventId, received_at: now })
        .onConflict((oc) => oc.column('event_id').doNothing())
        .execute();
    });
  }
}

/** `VIDSHEET_STRIPE_API_URL` (stripe-mock, a test double) as the SDK's host/port/protocol options. */
function apiBase(url: string | undefined): Pick<Stripe.StripeConfig, 'host' | 'port' | 'protocol'> {
  if (url === undefined) return {};
  const parsed = new URL(url);
  const protocol = parsed.protocol === 'http:' ? 'http' : 'https';
  return {
    host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: parsed.port === '' ? (protocol === 'http' ? 80 : 443) : Number(parsed.port),
    protocol,
  };
}

const isSignatureError = (error: unknown): boolean =>
  error instanceof Stripe.errors.StripeSignatureVerificationError;

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
