/** `GET /healthz`: no authentication; the three contract keys. */
import type { FastifyInstance } from 'fastify';
import { CONTRACTS } from '../../core/report.js';
import type { ServerDeps } from '../deps.js';
import { healthSchema } from '../schemas.js';

export async function healthRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.get('/healthz', { schema: healthSchema }, async () => ({
    ok: true,
    contract: CONTRACTS.http,
    version: deps.version,
  }));
}
