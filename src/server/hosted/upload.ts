/**
 * Receiving an uploaded video, the same way for every route that takes one (`POST /v1/vidsheet`,
 * `POST /v1/videos`), in DESIGN §5's order of checks: credential (401, the route's own hook), who may
 * queue (402), transfer slots and a full queue (429), an announced size over the cap (413), all before
 * any body byte is read; then the body streamed to disk under the size cap (413), cut when it stalls
 * (§5a: 408), and a place in the queue taken only once the video is complete (429, the file deleted).
 * The container allow-list is applied by the probe that follows (jobs.ts), never here.
 */
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type {} from '@fastify/multipart';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { hostedErrors, transportAnswers, VidsheetError } from '#vidsheet/core/errors.js';
import type { Account } from '../billing/ledger.js';
import type { ServerConfig } from '../config.js';
import { refuseBeforeBody } from '../plugins/early-answer.js';
import type { Admission } from './admission.js';
import type { FreeActors } from './free-actors.js';
import type { JobLog } from './jobs.js';
import { watchTransfer } from './stall.js';
import type { TransferSlot, Transfers } from './transfers.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Gives back this request's place in the job queue (idempotent). */
    releaseAdmission?: () => void;
    /** Gives back this request's transfer slot (idempotent). */
    releaseTransfer?: () => void;
    /** Ends this free actor's one job (DESIGN §5a; idempotent, a no-op for a paying account). */
    releaseFreeActor?: () => void;
    /** This request's job is a free actor's (its queue place is never the last one). */
    freeActor?: boolean;
    /** This request's transfer slot, while its body is received. */
    transferSlot?: TransferSlot;
  }
}

/** DESIGN §5a: the answer to an upload cut for stalling, when it can still be answered. */
export const UPLOAD_STALLED = transportAnswers.uploadStalled.body;

/**
 * Multipart framing around a file is a few hundred bytes; this leaves room for the text fields. A body
 * announced longer than a limit plus this is over the limit whatever its parts hold.
 */
export const FRAMING_SLACK = 1024 * 1024;

/** A cap on the `video` part's bytes, beyond the size cap: past `bytes`, the upload fails with `error`. */
export interface VideoByteLimit {
  bytes: number;
  error: () => VidsheetError;
}

export interface UploadParts {
  config: ServerConfig;
  admission: Admission;
  transfers: Transfers;
  freeActors: FreeActors;
  credits: { mayQueue(accountId: number): Promise<boolean> };
}

export interface Upload {
  /** The video on disk, under the request's work directory, by the server's own fixed name. */
  path: string;
  /** The upload's own file name (how results name the input). */
  filename: string;
  bytes: number;
  /** The text fields, each name with every value it was sent with. */
  fields: Map<string, string[]>;
}

/**
 * The upload hooks and receiver over one set of parts. Register `hooks` after the route's credential
 * check (`onRequest: [app.requireKey, ...own checks, ...uploads.hooks]`); call `receive` in the handler.
 */
export function uploads(app: FastifyInstance, deps: UploadParts) {
  const { config, admission, transfers, freeActors, credits } = deps;
  const maxBytes = config.maxUploadMb * 1024 * 1024;

  /** DESIGN §5a "Who may queue": a key that could not pay the cheapest job is refused unread. */
  const mayQueue: onRequestHookHandler = async (request, reply) => {
    if (!(await credits.mayQueue((request.account as Account).id)))
      return refuseBeforeBody(request, reply, hostedErrors.insufficientCredits());
  };

  /**
   * A full queue, a free account that already has a job waiting or running (DESIGN §5a), or no
   * transfer slot for this instance, account or address: 429 before the body is read. The slot is held
   * while the body arrives; the queue place is taken when it has arrived; a free account's one job is
   * held until the request ends.
   */
  const capacity: onRequestHookHandler = async (request, reply) => {
    if (admission.isFull()) return refuseBeforeBody(request, reply, hostedErrors.busy());
    const accountId = (request.account as Account).id;
    const ticket = await freeActors.enter({ accountId, address: request.ip });
    if (!ticket || admission.isFull(ticket.free)) {
      ticket?.release();
      return refuseBeforeBody(request, reply, hostedErrors.busy());
    }
    request.releaseFreeActor = ticket.release;
    request.freeActor = ticket.free;
    const slot = transfers.tryEnter({ accountId, address: request.ip, free: ticket.free });
    if (!slot) {
      ticket.release();
      return refuseBeforeBody(request, reply, hostedErrors.busy());
    }
    request.transferSlot = slot;
    request.releaseTransfer = slot.release;
  };

  /** A body announced larger than the cap allows is refused before it is read. */
  const announcedSize: onRequestHookHandler = async (request, reply) => {
    const length = Number(request.headers['content-length']);
    if (length > maxBytes + FRAMING_SLACK)
      return refuseBeforeBody(request, reply, hostedErrors.tooLarge(config.maxUploadMb));
  };

  app.addHook('onResponse', async (request) => {
    request.releaseTransfer?.();
    request.releaseAdmission?.();
    request.releaseFreeActor?.();
  });

  /**
   * Streams the body's `video` part into `workDir` under the stall rule, gives the transfer slot back
   * and takes a queue place (the caller releases it with `request.releaseAdmission` when its work is
   * done, or the response does). Undefined when the upload stalled: the 408 is already sent and the
   * connection closed. The caller owns `workDir` and removes it, success or failure.
   */
  async function receive(
    request: FastifyRequest,
    reply: FastifyReply,
    workDir: string,
    log: JobLog,
    limit?: VideoByteLimit,
  ): Promise<Upload | undefined> {
    if (!request.isMultipart()) throw hostedErrors.badRequest('the body must be multipart/form-data');
    await mkdir(workDir, { recursive: true });
    // DESIGN §5a: a body that stalls is cut: 408 while it can still be answered, the connection
    // closed, the file stream ended (the abort below), and the parser's error that follows is this
    // answer's, not a second one.
    const cut = new AbortController();
    const socket = request.raw.socket;
    const cutWith = (answer: { status: number; body: object }) => {
      if (cut.signal.aborted) return;
      if (!reply.sent) reply.code(answer.status).header('connection', 'close').send(answer.body);
      // Once the answer is out, the connection goes; the parser may wait on a body that never
      // comes, so the request is ended here and its cleanup runs at once.
      const close = () => {
        request.raw.destroy();
        socket?.destroy();
      };
      if (reply.raw.writableFinished || reply.raw.destroyed) close();
      else reply.raw.once('finish', close);
      cut.abort();
    };
    const watch = watchTransfer(
      config.stallS * 1000,
      () => socket?.bytesRead ?? 0,
      (why) => {
        if (why === 'preempted') {
          // Its slot went to a paying newcomer (transfers.ts): busy, safe to retry.
          log.info({}, 'upload gave its transfer slot to a paying one: cut');
          const busy = hostedErrors.busy();
          return cutWith({ status: busy.status, body: busy.body() });
        }
        log.info({ why }, 'upload stalled: cut');
        cutWith(transportAnswers.uploadStalled);
      },
    );
    // DESIGN §5a: the whole upload within VIDSHEET_UPLOAD_TIMEOUT_S (plugins/body-deadline.ts).
    request.cutBody = () => {
      log.info({}, 'upload not complete by its deadline: cut');
      cutWith(transportAnswers.bodyTooSlow);
    };
    // A newcomer may take this slot while this upload is behind (transfers.ts): cut as above.
    request.transferSlot?.watch(watch);
    // The cut answers at once, whatever the parser is waiting for; the abort ends the file stream.
    const receiving = receiveParts(request, workDir, config.maxUploadMb, cut.signal, limit);
    receiving.catch(() => {});
    const cutOff = new Promise<never>((_resolve, reject) =>
      cut.signal.addEventListener('abort', () => reject(cut.signal.reason), { once: true }),
    );
    let upload: Upload;
    try {
      upload = await Promise.race([receiving, cutOff]);
    } catch (error) {
      if (cut.signal.aborted) return undefined;
      throw error;
    } finally {
      watch.stop();
      request.cutBody = undefined;
    }
    // The video is complete on disk: the transfer is over, and only now is a queue place taken.
    request.releaseTransfer?.();
    const release = admission.tryEnter(request.freeActor);
    if (!release) throw hostedErrors.busy();
    request.releaseAdmission = release;
    return upload;
  }

  return { hooks: [mayQueue, capacity, announcedSize], receive };
}

/**
 * Streams the one `video` file part to disk (never buffered) and collects the text fields. Other
 * file parts are read and dropped (an unread part would stall the parser); a second `video` part,
 * or none, is a bad request. Every file stream it opens is ended before it returns or throws, also
 * when `signal` cuts the transfer, so a cut upload leaves no open descriptor behind. A video part
 * past `limit` fails with its error as the byte that crosses it arrives (the caller deletes the file).
 */
async function receiveParts(
  request: FastifyRequest,
  workDir: string,
  maxUploadMb: number,
  signal: AbortSignal,
  limit: VideoByteLimit | undefined,
): Promise<Upload> {
  let video: { path: string; filename: string; bytes: number } | undefined;
  const fields = new Map<string, string[]>();
  try {
    for await (const part of request.parts()) {
      signal.throwIfAborted();
      if (part.type === 'field') {
        fields.set(part.fieldname, [...(fields.get(part.fieldname) ?? []), String(part.value)]);
        continue;
      }
      if (part.fieldname !== 'video') {
        await pipeline(part.file, discard(), { signal });
        continue;
      }
      if (video) throw hostedErrors.badRequest('more than one file part named video');
      // The server's own fixed name; the extension helps demuxers that probe by name.
      const ext = /\.([a-z0-9]{1,8})$/i.exec(part.filename)?.[1]?.toLowerCase();
      const path = join(workDir, ext ? `upload.${ext}` : 'upload');
      let bytes = 0;
      const counted = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          bytes += chunk.length;
          if (limit !== undefined && bytes > limit.bytes) done(limit.error());
          else done(null, chunk);
        },
      });
      await pipeline(part.file, counted, createWriteStream(path), { signal });
      video = { path, filename: part.filename, bytes };
    }
  } catch (error) {
    if (signal.aborted || error instanceof VidsheetError) throw error;
    const e = error as { code?: string; statusCode?: number; syscall?: string };
    if (e.code === 'FST_REQ_FILE_TOO_LARGE') throw hostedErrors.tooLarge(maxUploadMb);
    // The multipart plugin's own 4xx (limits) and the disk's failures keep their own answers;
    // anything else the parser or the socket throws is the body's fault: cut short or garbled.
    if ((e.statusCode !== undefined && e.statusCode < 500) || e.syscall !== undefined) throw error;
    throw hostedErrors.malformedBody();
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
