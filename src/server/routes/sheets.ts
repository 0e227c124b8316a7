/**
 * Capability URLs: `GET /v1/sheets/<job_id>/video.sheet-<N>.jpg`. The database decides whether a
 * sheet may still be served, so an expired URL is `404` on every instance even before the sweeper
 * has deleted the file.
 */
import type { FastifyInstance } from 'fastify';
import { hostedErrors } from '#vidsheet/core/errors.js';
import type { ServerDeps } from '../deps.js';
import { sheetSchema } from '../schemas.js';

const JOB_ID = /^[A-Za-z0-9_-]{22}$/;
const SHEET = /^video\.sheet-([1-9]\d{0,3})\.jpg$/;

export async function sheetRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.get<{ Params: { jobId: string; name: string } }>(
    '/v1/sheets/:jobId/:name',
    { schema: sheetSchema },
    async (request, reply) => {
      const { jobId, name } = request.params;
      const n = Number(SHEET.exec(name)?.[1]);
      const job = JOB_ID.test(jobId) && n ? await deps.ledger.job(jobId) : undefined;
      const now = deps.clock();
      const live = job && job.state === 'done' && n <= job.sheets && new Date(job.expiresAt) > now;
      const stream = live ? await deps.storage.get(jobId, name) : undefined;
      if (!job || !stream) {
        const notFound = hostedErrors.notFound();
        return reply.code(notFound.status).send(notFound.body());
      }
      const maxAge = Math.max(0, Math.floor((new Date(job.expiresAt).getTime() - now.getTime()) / 1000));
      return reply.type('image/jpeg').header('cache-control', `private, max-age=${maxAge}`).send(stream);
    },
  );
}
