/**
 * `GET /healthz`: no authentication. The three contract keys, then (DESIGN §8) whether the
 * database and the sheet storage answer, each `"ok"` or a short reason; `ok` is false, and the
 * status 503, when either does not, so a load balancer takes the instance out.
 */
import type { FastifyInstance } from 'fastify';
import { CONTRACTS } from '#vidsheet/core/report.js';
import type { ServerDeps } from '../deps.js';
import { healthSchema } from '../schemas.js';

/** How long a dependency may take to answer before it counts as unreachable. */
const CHECK_TIMEOUT_MS = 3_000;

async function probe(check: () => Promise<void>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('no answer within 3 s')), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([check(), timeout]);
    return 'ok';
  } catch (error) {
    const reason = (error as { reason?: unknown }).reason;
    return typeof reason === 'string'
      ? reason
      : error instanceof Error
        ? error.message.slice(0, 120)
        : 'unreachable';
  } finally {
    clearTimeout(timer);
  }
}

export async function healthRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.get('/healthz', { schema: healthSchema }, async (_request, reply) => {
    const [database, storage] = await Promise.all([
      probe(deps.checkDatabase),
      probe(async () => deps.storage.check?.()),
    ]);
    const ok = database === 'ok' && storage === 'ok';
    return reply
      .code(ok ? 200 : 503)
      .send({ ok, contract: CONTRACTS.http, version: deps.version, database, storage });
  });
}
