/**
 * Capability URLs: `GET /v1/sheets/<job_id>/video.sheet-<N>.jpg`. The database decides whether a
 * sheet may still be served, so an expired URL is `404` on every instance even before the sweeper
 * has deleted the file.
 */
import type { FastifyInstance } from 'fastify';
import { hostedErrors } from '#vidsheet/core/errors.js';
import type { Clock, Ledger } from '../billing/ledger.js';
import type { SheetStorage } from '../storage/storage.js';
import { sheetSchema } from './schemas.js';

const JOB_ID = /^[A-Za-z0-9_-]{22}$/;
const SHEET = /^video\.sheet-([1-9]\d{0,3})\.jpg$/;

export interface SheetParts {
  registry: Pick<Ledger['jobs'], 'job'>;
  storage: SheetStorage;
  clock: Clock;
}

export async function sheetRoutes(app: FastifyInstance, deps: SheetParts): Promise<void> {
  // DESIGN §5a: a sheet's URL is a capability, so nothing opened from it may carry it on as a referrer;
  // and a sheet is only ever a JPEG, never content a browser should sniff as something else.
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('referrer-policy', 'no-referrer').header('x-content-type-options', 'nosniff');
  });
  app.get<{ Params: { jobId: string; name: string } }>(
    '/v1/sheets/:jobId/:name',
    { schema: sheetSchema },
    async (request, reply) => {
      const { jobId, name } = request.params;
      const n = Number(SHEET.exec(name)?.[1]);
      const job = JOB_ID.test(jobId) && n ? await deps.registry.job(jobId) : undefined;
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
