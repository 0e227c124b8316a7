/**
 * Builds the Fastify app from its parts (no listening, no work at import time): tests inject
 * requests into it or listen on loopback; server.ts listens for real.
 *
 * Every error leaves as the catalog's body, `{ error, ...extras }`; a 5xx body never carries a
 * path, a stack or FFmpeg text (those go to the log with the request and job ids).
 */
import { randomBytes } from 'node:crypto';
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import multipart from '@fastify/multipart';
import swagger from '@fastify/swagger';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import { hostedErrors, transportAnswers, VidsheetError, webErrors } from '#vidsheet/core/errors.js';
import type { AnonymousLane } from './billing/anonymous-lane.js';
import type { Clock, Ledger } from './billing/ledger.js';
import type { Payments } from './billing/payments.js';
import type { ServerConfig, TrustProxy } from './config.js';
import type { Admission } from './hosted/admission.js';
import type { FreeActors } from './hosted/free-actors.js';
import type { HostedJobs } from './hosted/jobs.js';
import { STALL_RULE } from './hosted/stall.js';
import type { Transfers } from './hosted/transfers.js';
import type { Sessions } from './keys/sessions.js';
import type { SignIn } from './keys/sign-in.js';
import { auth } from './plugins/auth.js';
import { BODY_DEADLINE_MS, bodyDeadlines } from './plugins/body-deadline.js';
import { answerBeforeBody } from './plugins/early-answer.js';
import { requestLogSerializers } from './plugins/request-log.js';
import { healthRoutes } from './routes/health.js';
import { keysRoutes } from './routes/keys.js';
import { mcpRoutes } from './routes/mcp.js';
import { sheetRoutes } from './routes/sheets.js';
import { stripeWebhookRoutes } from './routes/stripe-webhook.js';
import { type SessionParts, videoRoutes } from './routes/videos.js';
import { vidsheetRoutes } from './routes/vidsheet.js';
import type { SheetStorage } from './storage/storage.js';

/**
 * What the app is built from: every stateful part is made by server.ts (or a test) and passed in,
 * grouped by the wing that uses it; each route plugin is handed only the parts it reads.
 */
export interface AppParts {
  config: ServerConfig;
  version: string;
  clock: Clock;
  /** Resolves when the database answers (health check). */
  checkDatabase: () => Promise<void>;
  /** Accounts and keys, credits, the job registry. */
  ledger: Ledger;
  storage: SheetStorage;
  /**
   * The job queue, the transfer slots, the one job of each free actor (DESIGN §5a), and the hosted job,
   * shared by uploads and the remote tool.
   */
  hosted: {
    admission: Admission;
    transfers: Transfers;
    freeActors: FreeActors;
    jobs: Pick<HostedJobs, 'run' | 'probe'>;
  };
  /** Kept videos (DESIGN §9): their database rows, their store, this instance's local copies. */
  sessions: SessionParts;
  /** The remote endpoint's anonymous daily quota. */
  anonymous: Pick<AnonymousLane, 'take' | 'giveBack'>;
  /** The keys page: browser sessions, e-mail sign-in, Stripe payments. */
  keysPage: { sessions: Sessions; signIn: SignIn; payments: Payments };
}

export interface AppOptions {
  /** A pino logger (server.ts), or false for silence (tests). */
  loggerInstance?: FastifyServerOptions['loggerInstance'];
  /**
   * DESIGN §5a: how long a body other than an upload may take to arrive (30 s). DESIGN §7 has no
   * variable for it, so only tests shorten it, here.
   */
  bodyDeadlineMs?: number;
}

export async function buildApp(parts: AppParts, options: AppOptions = {}): Promise<FastifyInstance> {
  const { config, version, ledger, storage, hosted, keysPage } = parts;
  const deadlines = {
    bodyMs: options.bodyDeadlineMs ?? BODY_DEADLINE_MS,
    uploadMs: config.uploadTimeoutS * 1000,
  };
  const app = Fastify({
    // Request lines quote the client's URL and Host by 64 characters at most (DESIGN §5a).
    ...(options.loggerInstance
      ? { loggerInstance: options.loggerInstance.child({}, { serializers: requestLogSerializers }) }
      : { logger: false }),
    trustProxy: trustProxyOption(config.trustProxy),
    // Unique across instances and restarts, so a log line finds its request anywhere.
    genReqId: () => randomBytes(8).toString('hex'),
    // DESIGN §5a: headers must arrive within 30 s (checked often enough for the cut to be on time),
    // the next request's on a kept-alive connection too (Fastify's own keep-alive is 72 s).
    keepAliveTimeout: STALL_RULE.headersMs,
    http: {
      headersTimeout: STALL_RULE.headersMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1000, STALL_RULE.headersMs / 10)),
    },
    // DESIGN §5a: the body deadlines are kept per request (plugins/body-deadline.ts); Node's own
    // whole-request timeout is only the backstop behind them, for a request no hook ever saw.
    requestTimeout:
      Math.max(deadlines.uploadMs, deadlines.bodyMs, STALL_RULE.headersMs) + STALL_RULE.headersMs,
    // What Node's parser refuses (a malformed request, headers too slow or too large, a body cut
    // short) is answered in the catalog's shape, not Fastify's own `{"error":"Bad Request",...}`.
    clientErrorHandler: answerClientError,
    // What the router refuses before any route (a path parameter over its length, a malformed
    // escape in one) names no route's resource: 404 not_found, as an unknown sheet is, instead of
    // Fastify's own body, which quoted the whole path.
    frameworkErrors: (error, request, reply: FastifyReply) => {
      request.log.info({ code: error.code }, 'request refused by the router');
      const known =
        error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? hostedErrors.notFound()
          : toCatalogError(error, request, config.maxUploadMb);
      return reply.code(known.status).send(known.body());
    },
  }) as unknown as FastifyInstance;

  if (typeof config.trustProxy === 'number') {
    const hops = config.trustProxy;
    app.server.prependListener('request', (request: IncomingMessage) => dropShortChain(request, hops));
  }
  // An `Expect` other than 100-continue: Node's own 417 has an empty body; this one the catalog's.
  app.server.on('checkExpectation', (_request, response: ServerResponse) => {
    const { status, body } = transportAnswers.expectationFailed;
    response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', connection: 'close' });
    response.end(JSON.stringify(body));
  });
  // A JSON content type with no body is no body (a zoom then is an overview, as `{}` is; a method a
  // route refuses is refused as such), not Fastify's "empty JSON body" error.
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) =>
    body === '' ? done(null, undefined) : json(request, String(body), done),
  );

  await app.register(swagger, {
    openapi: {
      info: {
        title: 'vidsheet hosted API',
        version: version,
        description: 'Video to timestamped JPEG contact sheets. Contract vidsheet-http-v0.',
      },
      servers: [{ url: config.baseUrl }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    },
  });
  await app.register(multipart, {
    limits: {
      fileSize: config.maxUploadMb * 1024 * 1024,
      fieldSize: 1024,
      fields: 32,
      parts: 64,
      headerPairs: 64,
    },
  });

  app.setErrorHandler((error: Error & { code?: string; statusCode?: number }, request, reply) => {
    const known = toCatalogError(error, request, config.maxUploadMb);
    if (known.status >= 500) {
      request.log.error({ err: error, detail: known.detail }, 'request failed');
    } else {
      request.log.info({ error: known.code, why: known.message }, 'request refused');
    }
    answerBeforeBody(request, reply);
    return reply.code(known.status).send(known.body());
  });
  // DESIGN §5a: every body has a deadline; on a stop, connections only receiving a body close at once.
  const bodies = bodyDeadlines(app, deadlines);
  // While stopping, every answer closes its connection: a kept-alive idle connection would
  // otherwise hold the stop until the client's keep-alive timeout.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    const closed = bodies.closeReceiving();
    if (closed) app.log.info({ closed }, 'stopping: closed the connections still receiving a body');
  });
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  app.setNotFoundHandler((_request, reply) => {
    const notFound = hostedErrors.notFound();
    return reply.code(notFound.status).send(notFound.body());
  });

  await app.register(auth, { accounts: ledger.accounts });
  await app.register(healthRoutes, { version, storage, checkDatabase: parts.checkDatabase });
  await app.register(sheetRoutes, { registry: ledger.jobs, storage, clock: parts.clock });
  await app.register(vidsheetRoutes, { config, storage, credits: ledger.credits, ...hosted });
  await app.register(videoRoutes, { config, storage, credits: ledger.credits, ...hosted, ...parts.sessions });
  await app.register(mcpRoutes, { config, version, storage, anonymous: parts.anonymous, ...hosted });
  await app.register(keysRoutes, { config, ledger, ...keysPage });
  await app.register(stripeWebhookRoutes, { payments: keysPage.payments });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  return app;
}

/**
 * DESIGN §5a's proxy rule as Fastify's `trustProxy` (which hands it to proxy-addr, walking from the
 * socket's peer leftwards through `X-Forwarded-For` and stopping at the first address not trusted):
 * a proxy list is compiled by proxy-addr itself (the rightmost entry not inside it); a hop count is a
 * function trusting the first `hops` addresses of that walk, so the client is the entry `hops` places
 * from the right. (Fastify 5.12 turns a plain number into "trust nothing", so it is not passed as one.)
 */
/**
 * A hop count's header with fewer entries than hops did not come through the proxies: proxy-addr
 * would then take its leftmost entry, which the client wrote (DESIGN §5a: never trusted). Its
 * header is dropped, so the client is the socket's peer.
 */
function dropShortChain(request: IncomingMessage, hops: number): void {
  const header = request.headers['x-forwarded-for'];
  if (header === undefined) return;
  const entries = String(header)
    .split(',')
    .filter((entry) => entry.trim() !== '').length;
  if (entries < hops) delete request.headers['x-forwarded-for'];
}

export function trustProxyOption(
  trust: TrustProxy,
): false | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  return trust;
}

/**
 * Fastify's `clientErrorHandler`: what Node's HTTP parser refuses before or outside a route (headers
 * too slow or too large, a malformed request, a body the client ended short), answered in the
 * catalog's shape (`transportAnswers`) where nothing has been sent on the connection yet, which is
 * then closed. A reset connection, or one already gone, gets nothing (as in Fastify's own handler).
 */
export function answerClientError(
  this: FastifyInstance,
  error: Error & { code?: string },
  socket: Socket,
): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // The response of the request in progress, if its headers were read.
  const response = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  const answer =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? response
        ? transportAnswers.bodyTooSlow
        : transportAnswers.headersTooSlow
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? transportAnswers.headersTooLarge
        : error.code === 'HPE_INVALID_EOF_STATE'
          ? transportAnswers.bodyCutShort
          : transportAnswers.malformedRequest;
  this.log.info({ code: error.code, status: answer.status }, 'client error');
  if (socket.writable && !response?.headersSent) {
    const body = JSON.stringify(answer.body);
    socket.write(
      `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/** Anything thrown in a request, as a catalog error. */
function toCatalogError(
  error: Error & { code?: string; statusCode?: number },
  request: FastifyRequest,
  maxUploadMb: number,
) {
  if (error instanceof VidsheetError) return error;
  if (error.code?.startsWith('FST_CSRF_')) return webErrors.staleForm();
  // An upload's file part past the cap; any other body past its route's own limit.
  if (error.code === 'FST_REQ_FILE_TOO_LARGE') return hostedErrors.tooLarge(maxUploadMb);
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return hostedErrors.bodyTooLarge(request.routeOptions.bodyLimit);
  }
  // Fastify's and the multipart parser's own 4xx (content type, malformed multipart, limits).
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    return hostedErrors.badRequest(error.message);
  }
  // Nothing was charged outside a job (jobs.ts answers its own failures), so the balance is whole.
  return hostedErrors.processingFailed(true, error);
}
