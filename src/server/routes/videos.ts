/**
 * Video sessions (DESIGN §9): upload once, zoom many times.
 * - `POST /v1/videos`: credential (401), the caps (409, body unread), then the upload rules every
 *   upload shares (hosted/upload.ts) and the probe (422); the file goes to the sheet store under
 *   `videos/`, its probe facts to the database. Nothing is charged. The caps (DESIGN §9, §5a "Kept
 *   videos cost storage"): `VIDSHEET_MAX_VIDEOS` live videos, 1 for an account that lives on the
 *   allowance (`too_many_videos`), and `VIDSHEET_VIDEO_QUOTA_MB` of them in all (`video_quota`),
 *   checked before the body from its declared length, again as it streams, and once more when the
 *   video is recorded (uploads of one account finishing together).
 * - `POST /v1/videos/{video_id}/sheets`: a hosted job on the kept video with the local window rules,
 *   priced, charged and refunded like `/v1/vidsheet` (jobs.ts), its result built by the same code.
 * - `GET` / `DELETE /v1/videos/{video_id}`.
 * Another account's video, an expired, deleted or unknown one: `404 not_found`, never `403`.
 */
import { rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hostedErrors } from '#vidsheet/core/errors.js';
import { excerpt, shortJobId } from '#vidsheet/core/redact.js';
import { CONTRACTS, hostedReport } from '#vidsheet/core/report.js';
import { explainedWindowError, parseSessionFields } from '#vidsheet/core/request.js';
import type { ProbeInfo } from '#vidsheet/engine/types.js';
import type { Account } from '../billing/ledger.js';
import { callerGone } from '../hosted/caller-gone.js';
import { type HostedJobs, newJobId } from '../hosted/jobs.js';
import { FRAMING_SLACK, type UploadParts, uploads } from '../hosted/upload.js';
import { refuseBeforeBody, requireJsonBody } from '../plugins/early-answer.js';
import type { VideoCache } from '../sessions/cache.js';
import type { KeptVideo, VideoRegistry } from '../sessions/registry.js';
import type { SheetStorage } from '../storage/storage.js';
import { sendJobResult } from './job-result.js';
import { deleteVideoSchema, getVideoSchema, keepVideoSchema, videoSheetsSchema } from './schemas.js';

/** What the session routes are built from (server.ts makes them; `AppParts.sessions`). */
export interface SessionParts {
  registry: VideoRegistry;
  cache: VideoCache;
  /** The sheet store's `videos` area. */
  store: SheetStorage;
}

export interface VideoRouteParts extends UploadParts, SessionParts {
  /** The sheet store (a zoom's sheets, as any job's). */
  storage: SheetStorage;
  jobs: Pick<HostedJobs, 'run' | 'probe'>;
  credits: UploadParts['credits'] & { livesOnAllowance(accountId: number): Promise<boolean> };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** `POST /v1/videos`: the bytes this account may still keep, as counted before the body. */
    keptBytesLeft?: number;
  }
}

const MB = 1024 * 1024;

const VIDEO_ID = /^[A-Za-z0-9_-]{22}$/;

/** The `201` body, and `GET`'s: keys in DESIGN §9's order. */
const videoBody = (video: { videoId: string; input: string; durationMs: number; expiresAt: string }) => ({
  video_id: video.videoId,
  input: video.input,
  duration: video.durationMs / 1000,
  expires_at: video.expiresAt,
  contract: CONTRACTS.http,
});

export async function videoRoutes(app: FastifyInstance, deps: VideoRouteParts): Promise<void> {
  const { config, registry, cache, store, jobs } = deps;
  const upload = uploads(app, deps);
  const notFound = (reply: FastifyReply) => {
    const error = hostedErrors.notFound();
    return reply.code(error.status).send(error.body());
  };
  /** This account's live video, asked of the database on every use (so a dead one is 404 everywhere). */
  const owned = (request: FastifyRequest<{ Params: { videoId: string } }>) => {
    const { videoId } = request.params;
    return VIDEO_ID.test(videoId) ? registry.find(videoId, (request.account as Account).id) : undefined;
  };

  /** What this account may keep: DESIGN §9's count (1 on the allowance, §5a), §5a's bytes. */
  const limitsOf = async (accountId: number) => ({
    maxVideos: (await deps.credits.livesOnAllowance(accountId)) ? 1 : config.maxVideos,
    maxBytes: config.videoQuotaMb * MB,
  });
  const quotaError = () => hostedErrors.videoQuota(config.videoQuotaMb);

  /**
   * Right after the credential, the body unread: one video more than the account's count is
   * `too_many_videos`; one that its kept bytes could not take, by the length the body declares (less
   * the multipart framing, as for the size cap), is `video_quota`.
   */
  async function underCap(request: FastifyRequest, reply: FastifyReply) {
    const accountId = (request.account as Account).id;
    const [limits, used] = await Promise.all([limitsOf(accountId), registry.usage(accountId)]);
    if (used.count >= limits.maxVideos)
      return refuseBeforeBody(request, reply, hostedErrors.tooManyVideos(limits.maxVideos));
    const left = limits.maxBytes - used.bytes;
    const declared = Number(request.headers['content-length']);
    if (left <= 0 || declared > left + FRAMING_SLACK) return refuseBeforeBody(request, reply, quotaError());
    request.keptBytesLeft = left;
  }

  /**
   * DESIGN §5a "One at a time for free actors": a zoom is a job, so an account on the allowance that
   * already has one waiting or running is `429 busy` before the body is read.
   */
  async function oneJobEach(request: FastifyRequest, reply: FastifyReply) {
    const ticket = await deps.freeActors.enter({
      accountId: (request.account as Account).id,
      address: request.ip,
    });
    if (!ticket) return refuseBeforeBody(request, reply, hostedErrors.busy());
    request.releaseFreeActor = ticket.release;
    request.freeActor = ticket.free;
  }

  app.post('/v1/videos', {
    schema: keepVideoSchema,
    config: { upload: true },
    // Multipart, read by the handler as a stream (see /v1/vidsheet).
    validatorCompiler: () => () => true,
    onRequest: [app.requireKey, underCap, ...upload.hooks],
    handler: async (request, reply) => {
      const account = request.account as Account;
      const videoId = newJobId();
      const workDir = join(config.dataDir, 'work', videoId);
      const log = request.log.child({ videoId: shortJobId(videoId) });
      try {
        // DESIGN §5a: the quota again as the video streams, so an undeclared length cannot pass it.
        const received = await upload.receive(request, reply, workDir, log, {
          bytes: request.keptBytesLeft ?? 0,
          error: quotaError,
        });
        if (!received) return reply;
        // DESIGN §5a: the name as any answer may show it, cut once and stored so.
        const input = excerpt(received.filename);
        const probed = await jobs.probe({
          file: received.path,
          workDir,
          inputName: input,
          free: request.freeActor,
          log,
        });
        request.releaseAdmission?.();
        const fileName = basename(received.path);
        const limits = await limitsOf(account.id);
        await store.put(videoId, [received.path]);
        const added = await registry
          .add(
            {
              videoId,
              accountId: account.id,
              input,
              fileName,
              bytes: received.bytes,
              durationMs: probed.durationMs,
              probe: probed.probe,
            },
            config.videoTtlS,
            limits,
          )
          .catch(async (error: unknown) => {
            await store.remove(videoId).catch(() => {});
            throw error;
          });
        if ('refused' in added) {
          // Another upload of this account took the last place or bytes while this one arrived.
          await store.remove(videoId);
          throw added.refused === 'count' ? hostedErrors.tooManyVideos(limits.maxVideos) : quotaError();
        }
        log.info({ bytes: received.bytes, durationMs: probed.durationMs }, 'video kept');
        return reply.code(201).send(
          videoBody({
            videoId,
            input,
            durationMs: probed.durationMs,
            expiresAt: added.expiresAt,
          }),
        );
      } finally {
        await rm(workDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 }).catch((err) =>
          log.error({ err }, 'could not remove the upload directory'),
        );
        request.releaseTransfer?.();
        request.releaseAdmission?.();
        request.releaseFreeActor?.();
      }
    },
  });

  app.post<{ Params: { videoId: string } }>('/v1/videos/:videoId/sheets', {
    schema: videoSheetsSchema,
    // The body is validated by core/request.ts (the local window rules and wording), not by Fastify.
    validatorCompiler: () => () => true,
    onRequest: [app.requireKey, requireJsonBody, oneJobEach],
    handler: async (request, reply) => {
      const video = await owned(request);
      if (!video) return notFound(reply);
      const fields = parseSessionFields(request.body);
      // DESIGN §5a: a key that could not pay the cheapest job is refused before it takes a queue place.
      if (!(await deps.credits.mayQueue((request.account as Account).id)))
        throw hostedErrors.insufficientCredits();
      const release = deps.admission.tryEnter(request.freeActor);
      if (!release) throw hostedErrors.busy();
      request.releaseAdmission = release;
      const jobId = newJobId();
      const workDir = join(config.dataDir, 'work', jobId);
      const log = request.log.child({ jobId: shortJobId(jobId), videoId: shortJobId(video.videoId) });
      try {
        const result = await cache
          .use(video, (file, how) => {
            log.info({ copy: how }, 'zoom on a kept video');
            return jobs.run({
              jobId,
              file,
              workDir,
              inputName: video.input,
              density: fields.density,
              startMs: fields.startMs,
              endMs: fields.endMs,
              probe: video.probe as ProbeInfo,
              surface: 'http',
              payer: { accountId: video.accountId },
              free: request.freeActor,
              gone: callerGone(reply.raw),
              log,
            });
          })
          .catch((error: unknown) => {
            throw explainedWindowError(error);
          });
        log.info({ sheets: result.outcome.files.length, credits: result.creditsCharged }, 'job done');
        return sendJobResult(reply, deps.storage, fields.response, result, (outcome) =>
          hostedReport(outcome, {
            jobId,
            videoId: video.videoId,
            density: fields.density,
            creditsCharged: result.creditsCharged,
            creditsRemaining: result.creditsRemaining ?? 0,
          }),
        );
      } finally {
        await rm(workDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 }).catch((err) =>
          log.error({ err }, 'could not remove the job directory'),
        );
        release();
        request.releaseFreeActor?.();
      }
    },
  });

  app.get<{ Params: { videoId: string } }>('/v1/videos/:videoId', {
    schema: getVideoSchema,
    onRequest: [app.requireKey],
    handler: async (request, reply) => {
      const video: KeptVideo | undefined = await owned(request);
      return video ? reply.send(videoBody(video)) : notFound(reply);
    },
  });

  app.delete<{ Params: { videoId: string } }>('/v1/videos/:videoId', {
    schema: deleteVideoSchema,
    onRequest: [app.requireKey],
    handler: async (request, reply) => {
      const { videoId } = request.params;
      if (!VIDEO_ID.test(videoId) || !(await registry.delete(videoId, (request.account as Account).id)))
        return notFound(reply);
      // Gone for every instance from the row's update on; the file and this instance's copy now (the
      // sweeper retries a removal that fails; other instances drop their copies at their next sweep).
      await store
        .remove(videoId)
        .catch((err: unknown) =>
          request.log.error({ err }, 'could not remove a deleted video (the sweeper will)'),
        );
      await cache.drop(videoId);
      return reply.code(204).send();
    },
  });
}
