/**
 * Builds the Fastify app from its parts (no listening, no work at import time): tests inject
 * requests into it or listen on loopback; server.ts listens for real.
 *
 * Every error leaves as the catalog's body, `{ error, ...extras }`; a 5xx body never carries a
 * path, a stack or FFmpeg text (those go to the log with the request and job ids).
 */
import { randomBytes } from 'node:crypto';
import multipart from '@fastify/multipart';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { hostedErrors, VidsheetError, webErrors } from '#vidsheet/core/errors.js';
import type { ServerDeps } from './deps.js';
import { answerBeforeBody } from './early-answer.js';
import { healthRoutes } from './routes/health.js';
import { keysRoutes } from './routes/keys.js';
import { mcpRoutes } from './routes/mcp.js';
import { sheetRoutes } from './routes/sheets.js';
import { stripeWebhookRoutes } from './routes/stripe-webhook.js';
import { vidsheetRoutes } from './routes/vidsheet.js';

export interface AppOptions {
  /** A pino logger (server.ts), or false for silence (tests). */
  loggerInstance?: FastifyServerOptions['loggerInstance'];
}

export async function buildApp(deps: ServerDeps, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    ...(options.loggerInstance ? { loggerInstance: options.loggerInstance } : { logger: false }),
    trustProxy: deps.config.trustProxy,
    // Unique across instances and restarts, so a log line finds its request anywhere.
    genReqId: () => randomBytes(8).toString('hex'),
  }) as unknown as FastifyInstance;

  await app.register(swagger, {
    openapi: {
      info: {
        title: 'vidsheet hosted API',
        version: deps.version,
        description: 'Video to timestamped JPEG contact sheets. Contract vidsheet-http-v0.',
      },
      servers: [{ url: deps.config.baseUrl }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    },
  });
  await app.register(multipart, {
    limits: {
      fileSize: deps.config.maxUploadMb * 1024 * 1024,
      fieldSize: 1024,
      fields: 32,
      parts: 64,
      headerPairs: 64,
    },
  });

  app.setErrorHandler((error: Error & { code?: string; statusCode?: number }, request, reply) => {
    const known = toCatalogError(error, deps.config.maxUploadMb);
    if (known.status >= 500) {
      request.log.error({ err: error, detail: known.detail }, 'request failed');
    } else {
      request.log.info({ error: known.code, why: known.message }, 'request refused');
    }
    answerBeforeBody(request, reply);
    return reply.code(known.status).send(known.body());
  });
  // While stopping, every answer closes its connection: a kept-alive idle connection would
  // otherwise hold the stop until the client's keep-alive timeout.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  app.setNotFoundHandler((_request, reply) => {
    const notFound = hostedErrors.notFound();
    return reply.code(notFound.status).send(notFound.body());
  });

  await app.register(healthRoutes, deps);
  await app.register(sheetRoutes, deps);
  await app.register(vidsheetRoutes, deps);
  await app.register(mcpRoutes, deps);
  await app.register(keysRoutes, deps);
  await app.register(stripeWebhookRoutes, { payments: deps.payments });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  return app;
}

/** Anything thrown in a request, as a catalog error. */
function toCatalogError(error: Error & { code?: string; statusCode?: number }, maxUploadMb: number) {
  if (error instanceof VidsheetError) return error;
  if (error.code?.startsWith('FST_CSRF_')) return webErrors.staleForm();
  if (error.code === 'FST_REQ_FILE_TOO_LARGE' || error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return hostedErrors.tooLarge(maxUploadMb);
  }
  // Fastify's and the multipart parser's own 4xx (content type, malformed multipart, limits).
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    return hostedErrors.badRequest(error.message);
  }
  // Nothing was charged outside a job (jobs.ts answers its own failures), so the balance is whole.
  return hostedErrors.processingFailed(true, error);
}
