/**
 * `POST /stripe/webhook` (DESIGN §7): Stripe's signed deliveries. Stripe signs the exact bytes it sent,
 * so this plugin replaces every body parser of its own encapsulated context with one that keeps the
 * body as a Buffer; parsing JSON first and re-serialising it would break every signature. Registered as
 * its own plugin, so the rest of the app keeps its JSON, form and multipart parsers.
 */
import type { FastifyInstance } from 'fastify';
import type { Payments } from '../billing/payments.js';

/** Stripe's events are a few kilobytes; anything near this is not from Stripe. */
export const WEBHOOK_BODY_LIMIT = 1024 * 1024;

const BODIES = {
  200: { received: true },
  400: { error: 'bad_signature' },
  500: { error: 'retry' },
} as const;

/** Registers the webhook route; `app.register(stripeWebhookRoutes, { payments })`. */
export async function stripeWebhookRoutes(app: FastifyInstance, deps: { payments: Payments }): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    ['application/json', '*'],
    { parseAs: 'buffer', bodyLimit: WEBHOOK_BODY_LIMIT },
    (_request, body, done) => done(null, body),
  );

  app.post(
    '/stripe/webhook',
    { bodyLimit: WEBHOOK_BODY_LIMIT, schema: { hide: true } },
    async (request, reply) => {
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const header = request.headers['stripe-signature'];
      const signature = typeof header === 'string' ? header : undefined;
      const { status, outcome } = await deps.payments.handleWebhook(raw, signature);
      request.log.info({ status, outcome }, 'stripe webhook');
      return reply.code(status).send(BODIES[status]);
    },
  );
}
