/**
 * `POST /v1/vidsheet`: a multipart upload in, sheets out, in DESIGN §5's order of checks: credential
 * (401), then the upload rules every upload shares (hosted/upload.ts: 402, 429, 413 before the body;
 * the body under the size cap and the stall rule; a queue place once the video is complete), the
 * request's shape (422), and the hosted job (jobs.ts). Nothing is kept: the upload is deleted when the
 * job ends.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Density } from '#vidsheet/core/density.js';
import { excerpt, shortJobId } from '#vidsheet/core/redact.js';
import { hostedReport } from '#vidsheet/core/report.js';
import { parseHostedFields, type ResponseMode } from '#vidsheet/core/request.js';
import type { Account } from '../billing/ledger.js';
import { callerGone } from '../hosted/caller-gone.js';
import { type HostedJobResult, type HostedJobs, newJobId } from '../hosted/jobs.js';
import { type UploadParts, uploads } from '../hosted/upload.js';
import type { SheetStorage } from '../storage/storage.js';
import { sendJobResult } from './job-result.js';
import { hostedJobSchema } from './schemas.js';

export interface VidsheetParts extends UploadParts {
  storage: SheetStorage;
  jobs: Pick<HostedJobs, 'run'>;
}

export async function vidsheetRoutes(app: FastifyInstance, deps: VidsheetParts): Promise<void> {
  const { config, jobs } = deps;
  const upload = uploads(app, deps);

  app.post('/v1/vidsheet', {
    schema: hostedJobSchema,
    // DESIGN §5a: the body is an upload (VIDSHEET_UPLOAD_TIMEOUT_S, plugins/body-deadline.ts).
    config: { upload: true },
    // The multipart body is read by the handler as a stream, never parsed into `request.body`;
    // the body schema above documents it (OpenAPI) and is not validated.
    validatorCompiler: () => () => true,
    // The key first (401), then the balance (402), then capacity (429), then the announced size (413).
    onRequest: [app.requireKey, ...upload.hooks],
    handler: async (request, reply) => {
      const account = request.account as Account;
      const jobId = newJobId();
      const workDir = join(config.dataDir, 'work', jobId);
      // Logs name the job by its first 8 characters: the full id is the capability to its sheets.
      const log = request.log.child({ jobId: shortJobId(jobId) });
      const gone = callerGone(reply.raw);
      let answer: { result: HostedJobResult; density: Density; response: ResponseMode };
      try {
        const received = await upload.receive(request, reply, workDir, log);
        if (!received) return reply;
        const { density, response } = parseHostedFields(received.fields);
        // The file name is the client's text: quoted by 64 characters at most (DESIGN §5a).
        log.info({ input: excerpt(received.filename), bytes: received.bytes, density }, 'upload received');
        const result = await jobs.run({
          jobId,
          file: received.path,
          workDir,
          inputName: received.filename,
          density,
          surface: 'http',
          payer: { accountId: account.id },
          free: request.freeActor,
          gone,
          log,
        });
        log.info({ sheets: result.outcome.files.length, credits: result.creditsCharged }, 'job done');
        answer = { result, density, response };
      } finally {
        // The video is used only for its own job: deleted the moment it ends, success or failure,
        // before the answer leaves. Retried: a killed worker's last writes may still be landing.
        await rm(workDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 }).catch((err) =>
          log.error({ err }, 'could not remove the job directory'),
        );
        request.releaseTransfer?.();
        request.releaseAdmission?.();
        request.releaseFreeActor?.();
      }
      const { result, density, response } = answer;
      return sendJobResult(reply, deps.storage, response, result, (outcome) =>
        hostedReport(outcome, {
          jobId,
          density,
          creditsCharged: result.creditsCharged,
          creditsRemaining: result.creditsRemaining ?? 0,
        }),
      );
    },
  });
}
