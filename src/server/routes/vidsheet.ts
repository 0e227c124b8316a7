/**
 * `POST /v1/vidsheet`: a multipart upload in, sheets out, in DESIGN §5's order of checks:
 * credential (401), who may queue (402), transfer slots and a full queue (429), all before any body
 * byte is read; then the upload streamed to disk under the size cap (413), a place in the queue
 * taken only now that the video is complete (429 and the file deleted when there is none), the
 * request's shape (422), and the hosted job (jobs.ts).
 */
import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type {} from '@fastify/multipart';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Density } from '#vidsheet/core/density.js';
import { hostedErrors } from '#vidsheet/core/errors.js';
import { shortJobId } from '#vidsheet/core/redact.js';
import { hostedReport } from '#vidsheet/core/report.js';
import { parseHostedFields, type ResponseMode } from '#vidsheet/core/request.js';
import type { Account } from '../billing/ledger.js';
import type { ServerConfig } from '../config.js';
import type { Admission } from '../hosted/admission.js';
import { type HostedJobResult, type HostedJobs, newJobId, sheetName } from '../hosted/jobs.js';
import { watchTransfer } from '../hosted/stall.js';
import type { Transfers } from '../hosted/transfers.js';
import { refuseBeforeBody } from '../plugins/early-answer.js';
import type { SheetStorage } from '../storage/storage.js';
import { hostedJobSchema } from './schemas.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Gives back this request's place in the job queue (idempotent). */
    releaseAdmission?: () => void;
    /** Gives back this request's transfer slot (idempotent). */
    releaseTransfer?: () => void;
  }
}

/** DESIGN §5a: the answer to an upload cut for stalling, when it can still be answered. */
const UPLOAD_STALLED = { error: 'bad_request', message: 'the upload stalled' };

/** Multipart framing around a file is a few hundred bytes; this leaves room for the text fields. */
const FRAMING_SLACK = 1024 * 1024;

export interface UploadParts {
  config: ServerConfig;
  storage: SheetStorage;
  admission: Admission;
  transfers: Transfers;
  jobs: Pick<HostedJobs, 'run'>;
  credits: { mayQueue(accountId: number): Promise<boolean> };
}

export async function vidsheetRoutes(app: FastifyInstance, deps: UploadParts): Promise<void> {
  const { config, admission, transfers, jobs, credits } = deps;
  const maxBytes = config.maxUploadMb * 1024 * 1024;

  /** DESIGN §5a "Who may queue": a key that could not pay the cheapest job is refused unread. */
  async function mayQueue(request: FastifyRequest, reply: FastifyReply) {
    if (!(await credits.mayQueue((request.account as Account).id)))
      return refuseBeforeBody(request, reply, hostedErrors.insufficientCredits());
  }

  /**
   * A full queue, or no transfer slot for this instance, account or address: 429 before the body is
   * read. The slot is held while the body arrives; the queue place is taken when it has arrived.
   */
  async function capacity(request: FastifyRequest, reply: FastifyReply) {
    if (admission.isFull) return refuseBeforeBody(request, reply, hostedErrors.busy());
    const release = transfers.tryEnter({ accountId: (request.account as Account).id, address: request.ip });
    if (!release) return refuseBeforeBody(request, reply, hostedErrors.busy());
    request.releaseTransfer = release;
  }

  /** A body announced larger than the cap allows is refused before it is read. */
  async function announcedSize(request: FastifyRequest, reply: FastifyReply) {
    const length = Number(request.headers['content-length']);
    if (length > maxBytes + FRAMING_SLACK)
      return refuseBeforeBody(request, reply, hostedErrors.tooLarge(config.maxUploadMb));
  }

  app.addHook('onResponse', async (request) => {
    request.releaseTransfer?.();
    request.releaseAdmission?.();
  });

  app.post('/v1/vidsheet', {
    schema: hostedJobSchema,
    // The multipart body is read by the handler as a stream, never parsed into `request.body`;
    // the body schema above documents it (OpenAPI) and is not validated.
    validatorCompiler: () => () => true,
    // The key first (401), then the balance (402), then capacity (429), then the announced size (413).
    onRequest: [app.requireKey, mayQueue, capacity, announcedSize],
    handler: async (request, reply) => {
      const account = request.account as Account;
      const jobId = newJobId();
      const workDir = join(config.dataDir, 'work', jobId);
      // Logs name the job by its first 8 characters: the full id is the capability to its sheets.
      const log = request.log.child({ jobId: shortJobId(jobId) });
      let answer: { result: HostedJobResult; density: Density; response: ResponseMode };
      // DESIGN §5a: a body that stalls is cut: 408 while it can still be answered, the connection
      // closed, and the parser's error that follows is this answer's, not a second one.
      let stalled = false;
      let onStall: () => void = () => {};
      const cutOff = new Promise<undefined>((resolve) => {
        onStall = () => resolve(undefined);
      });
      const socket = request.raw.socket;
      const watch = watchTransfer(
        config.stallS * 1000,
        () => socket?.bytesRead ?? 0,
        (why) => {
          stalled = true;
          log.info({ why }, 'upload stalled: cut');
          reply.code(408).header('connection', 'close').send(UPLOAD_STALLED);
          // Once the answer is out, the connection goes; the parser may wait on a body that never
          // comes, so the request is ended here and its cleanup runs at once.
          const close = () => {
            request.raw.destroy();
            socket?.destroy();
          };
          if (reply.raw.writableFinished) close();
          else reply.raw.once('finish', close);
          onStall();
        },
      );
      try {
        if (!request.isMultipart()) throw hostedErrors.badRequest('the body must be multipart/form-data');
        await mkdir(workDir, { recursive: true });
        const upload = await Promise.race([
          receiveUpload(request, workDir, config.maxUploadMb).catch((error: unknown) => {
            if (stalled) return undefined;
            throw error;
          }),
          cutOff,
        ]);
        watch.stop();
        if (!upload) return reply;
        // The video is complete on disk: the transfer is over, and only now is a queue place taken.
        request.releaseTransfer?.();
        const release = admission.tryEnter();
        if (!release) throw hostedErrors.busy();
        request.releaseAdmission = release;
        const { density, response } = parseHostedFields(upload.fields);
        log.info({ input: upload.filename, bytes: upload.bytes, density }, 'upload received');
        const result = await jobs.run({
          jobId,
          file: upload.path,
          workDir,
          inputName: upload.filename,
          density,
          surface: 'http',
          payer: { accountId: account.id },
          log,
        });
        log.info({ sheets: result.outcome.files.length, credits: result.creditsCharged }, 'job done');
        answer = { result, density, response };
      } finally {
        watch.stop();
        // The video is used only for its own job: deleted the moment it ends, success or failure,
        // before the answer leaves. Retried: a killed worker's last writes may still be landing.
        await rm(workDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 }).catch((err) =>
          log.error({ err }, 'could not remove the job directory'),
        );
        request.releaseTransfer?.();
        request.releaseAdmission?.();
      }
      const { result, density, response } = answer;
      if (response === 'image') {
        const first = await deps.storage.get(jobId, sheetName(1));
        if (!first) throw new Error('the first sheet is missing from storage');
        return reply
          .header('x-vidsheet-job', jobId)
          .header('x-credits-remaining', String(result.creditsRemaining ?? 0))
          .type('image/jpeg')
          .send(first);
      }
      return reply.send(
        hostedReport(result.outcome, {
          jobId,
          density,
          creditsCharged: result.creditsCharged,
          creditsRemaining: result.creditsRemaining ?? 0,
        }),
      );
    },
  });
}

interface Upload {
  path: string;
  filename: string;
  bytes: number;
  fields: Map<string, string[]>;
}

/**
 * Streams the one `video` file part to disk (never buffered) and collects the text fields. Other
 * file parts are read and dropped (an unread part would stall the parser); a second `video` part,
 * or none, is a bad request.
 */
async function receiveUpload(request: FastifyRequest, workDir: string, maxUploadMb: number): Promise<Upload> {
  let video: { path: string; filename: string; bytes: number } | undefined;
  const fields = new Map<string, string[]>();
  try {
    for await (const part of request.parts()) {
      if (part.type === 'field') {
        fields.set(part.fieldname, [...(fields.get(part.fieldname) ?? []), String(part.value)]);
        continue;
      }
      if (part.fieldname !== 'video') {
        await pipeline(part.file, discard());
        continue;
      }
      if (video) throw hostedErrors.badRequest('more than one file part named video');
      // The server's own fixed name; the extension helps demuxers that probe by name.
      const ext = /\.([a-z0-9]{1,8})$/i.exec(part.filename)?.[1]?.toLowerCase();
      const path = join(workDir, ext ? `upload.${ext}` : 'upload');
      let bytes = 0;
      part.file.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
      });
      await pipeline(part.file, createWriteStream(path));
      video = { path, filename: part.filename, bytes };
    }
  } catch (error) {
    if ((error as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE')
      throw hostedErrors.tooLarge(maxUploadMb);
    throw error;
  }
  if (!video) throw hostedErrors.badRequest('no file part named video');
  return { ...video, fields };
}

const discard = () =>
  new Writable({
    write(_chunk, _encoding, done) {
      done();
    },
  });
