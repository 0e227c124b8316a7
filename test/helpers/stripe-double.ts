/**
 * A local test double of the Stripe API on loopback (the one outside service vidsheet calls), and
 * webhook events for its sessions signed as Stripe signs them, by the Stripe SDK itself. The double
 * answers `POST /v1/checkout/sessions` with a Checkout Session whose payment page it serves at
 * `/pay/<id>`, records every request it saw, and can fail the next call with a Stripe error.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

export interface SeenRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  /** The body as a form (Stripe's API takes form-encoded parameters). */
  form: URLSearchParams;
}

export interface StripeDouble {
  /** `http://127.0.0.1:<port>`: the API base URL (VIDSHEET_STRIPE_API_URL) and the payment pages' origin. */
  url: string;
  /** Every request the double saw, oldest first; tests clear it with `seen.length = 0`. */
  seen: SeenRequest[];
  /** Answers the next Checkout Session request with `status` and `body` (a Stripe error) instead. */
  failNext(status: number, body: object): void;
  close(): Promise<void>;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function answer(
  response: ServerResponse,
  status: number,
  body: object,
  headers: Record<string, string> = {},
) {
  response.writeHead(status, { 'content-type': 'application/json', ...headers });
  response.end(JSON.stringify(body));
}

/** Starts the double on a free loopback port. */
export async function startStripeDouble(): Promise<StripeDouble> {
  const seen: SeenRequest[] = [];
  let failure: { status: number; body: object } | undefined;
  let url = '';
  const server = createServer(async (request, response) => {
    const form = new URLSearchParams(await readBody(request));
    const path = request.url ?? '';
    seen.push({
      method: request.method ?? '',
      path,
      authorization: request.headers.authorization,
      contentType: request.headers['content-type'],
      form,
    });
    if (request.method === 'GET' && path.startsWith('/pay/')) {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end('<!doctype html><title>Test checkout</title><h1>Stripe test checkout</h1>');
      return;
    }
    if (request.method !== 'POST' || path !== '/v1/checkout/sessions') {
      return answer(response, 404, {
        error: { type: 'invalid_request_error', message: 'not in the double' },
      });
    }
    if (failure !== undefined) {
      const { status, body } = failure;
      failure = undefined;
      return answer(response, status, body);
    }
    const id = `cs_test_${randomBytes(12).toString('hex')}`;
    answer(
      response,
      200,
      {
        id,
        object: 'checkout.session',
        url: `${url}/pay/${id}`,
        mode: 'payment',
        status: 'open',
        payment_status: 'unpaid',
        client_reference_id: form.get('client_reference_id'),
        metadata: { pack: form.get('metadata[pack]'), account_id: form.get('metadata[account_id]') },
        amount_total: Number(form.get('line_items[0][price_data][unit_amount]')),
        currency: 'usd',
        success_url: form.get('success_url'),
        cancel_url: form.get('cancel_url'),
      },
      { 'request-id': `req_${id}` },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    seen,
    failNext(status, body) {
      failure = { status, body };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let events = 0;

/** A fresh event id, unique within the run. */
export const stripeEventId = (): string => `evt_test_${++events}_${randomBytes(6).toString('hex')}`;

export interface SessionEventOptions {
  sessionId: string;
  /** Defaults to a fresh id; the same id again is the same event (a replay). */
  id?: string;
  /** Defaults to `checkout.session.completed`. */
  type?: string;
  /** Defaults to `paid`. */
  paymentStatus?: 'paid' | 'unpaid' | 'no_payment_required';
  metadata?: Record<string, string>;
  clientReferenceId?: string;
}

/** A `checkout.session.*` event for `sessionId`, as the JSON payload Stripe delivers. */
export function sessionEvent(options: SessionEventOptions): string {
  return JSON.stringify({
    id: options.id ?? stripeEventId(),
    object: 'event',
    api_version: Stripe.API_VERSION,
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type: options.type ?? 'checkout.session.completed',
    data: {
      object: {
        id: options.sessionId,
        object: 'checkout.session',
        mode: 'payment',
        status: 'complete',
        payment_status: options.paymentStatus ?? 'paid',
        client_reference_id: options.clientReferenceId ?? null,
        metadata: options.metadata ?? {},
      },
    },
  });
}

/** The `Stripe-Signature` header for `payload`, signed with `secret` at `timestamp` (seconds; default now). */
export function stripeSignature(payload: string, secret: string, timestamp?: number): string {
  return Stripe.webhooks.generateTestHeaderString({
    payload,
    secret,
    ...(timestamp === undefined ? {} : { timestamp }),
  });
}
