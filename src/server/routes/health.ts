/**
 * `GET /healthz`: no authentication. The three contract keys, then (DESIGN §8) whether the
 * database and the sheet storage answer, each `"ok"` or one of the fixed words of DESIGN §5a
 * (`"unreachable"`, `"bucket missing"`, `"denied"`), never a driver's own text: the endpoint is public,
 * and that text can name hosts, paths or accounts (it goes to the log instead). `ok` is false, and the
 * status 503, when either does not answer, so a load balancer takes the instance out.
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { CONTRACTS } from '#vidsheet/core/report.js';
import { HEALTH_REASONS, type HealthReason, type SheetStorage } from '../storage/storage.js';
import { healthSchema } from './schemas.js';

/** How long a dependency may take to answer before it counts as unreachable. */
const CHECK_TIMEOUT_MS = 3_000;

const isHealthReason = (value: unknown): value is HealthReason =>
  (HEALTH_REASONS as readonly unknown[]).includes(value);

async function probe(
  part: 'database' | 'storage',
  check: () => Promise<void>,
  log: FastifyBaseLogger,
): Promise<'ok' | HealthReason> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('no answer within 3 s')), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([check(), timeout]);
    return 'ok';
  } catch (error) {
    log.warn({ err: error, part }, 'health check failed');
    const health = (error as { health?: unknown } | undefined)?.health;
    return isHealthReason(health) ? health : 'unreachable';
  } finally {
    clearTimeout(timer);
  }
}

export interface HealthParts {
  version: string;
  storage: SheetStorage;
  /** Resolves when the database answers. */
  checkDatabase: () => Promise<void>;
}

export async function healthRoutes(app: FastifyInstance, deps: HealthParts): Promise<void> {
  app.get('/healthz', { schema: healthSchema }, async (request, reply) => {
    const [database, storage] = await Promise.all([
      probe('database', deps.checkDatabase, request.log),
      probe('storage', async () => deps.storage.check?.(), request.log),
    ]);
    const ok = database === 'ok' && storage === 'ok';
    return reply
      .code(ok ? 200 : 503)
      .send({ ok, contract: CONTRACTS.http, version: deps.version, database, storage });
  });
}
