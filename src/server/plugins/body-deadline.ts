/**
 * DESIGN §5a "Every body has a deadline": a request body other than an upload must arrive within 30 s
 * of its headers, an upload within `VIDSHEET_UPLOAD_TIMEOUT_S` (default 900 s; the stall rule cuts it
 * sooner when it stalls). Past the deadline the request is answered
 * `408 {"error":"bad_request","message":"the request body was too slow"}` where it can still be
 * answered (nothing has been sent yet), and its connection is closed either way. Without this, a
 * client that sends one body byte and waits holds a socket and a descriptor for as long as it likes
 * (the review: 500 such sockets stayed open 150 s and more; 260 exhausted an instance's 256
 * descriptors; one held up a SIGTERM for 100 s).
 *
 * On a stop, connections that are only receiving a body are closed at once (`closeReceiving`): nothing
 * has been charged or queued for them, and the stop would otherwise wait for their deadline.
 *
 * A route that reads its body itself (an upload) sets `request.cutBody`, and the deadline ends the
 * body that way (its file stream ended, its slot freed) instead of answering here.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { transportAnswers } from '#vidsheet/core/errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Ends this request's body as its route does when the body deadline passes (uploads). */
    cutBody?: () => void;
  }
  interface FastifyContextConfig {
    /** The route's body is an upload: its deadline is `VIDSHEET_UPLOAD_TIMEOUT_S`, not 30 s. */
    upload?: boolean;
  }
}

/** DESIGN §5a: a body other than an upload must arrive within this long. */
export const BODY_DEADLINE_MS = 30_000;

export interface BodyDeadlines {
  /** A body other than an upload (DESIGN §5a: 30 s). */
  bodyMs: number;
  /** An upload's whole body (`VIDSHEET_UPLOAD_TIMEOUT_S`). */
  uploadMs: number;
}

/** Whether a request announces a body (a length above 0, or a chunked one). */
export function announcesBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return (
    request.headers['transfer-encoding'] !== undefined ||
    (length !== undefined && length !== '' && Number(length) !== 0)
  );
}

/**
 * Arms the deadline on every request that announces a body (register on the root instance, before
 * the routes). Returns `closeReceiving`, which closes every connection still receiving a body.
 */
export function bodyDeadlines(app: FastifyInstance, deadlines: BodyDeadlines): { closeReceiving(): number } {
  /** Requests whose body has not all arrived, with what ends their watch. */
  const receiving = new Map<FastifyRequest, () => void>();

  app.addHook('onRequest', async (request, reply) => {
    const raw = request.raw;
    // `complete` is Node's: an injected request (tests) has none, and its body is always whole.
    if (!announcesBody(request) || raw.complete !== false) return;
    const socket = raw.socket;
    const ms = request.routeOptions.config?.upload ? deadlines.uploadMs : deadlines.bodyMs;
    const timer = setTimeout(() => expire(request, reply), ms);
    timer.unref();
    // Not on the request's own 'close': Node emits it when the answer is done, while a body the
    // route never read may still be arriving (and being thrown away) under this deadline.
    const done = () => {
      clearTimeout(timer);
      receiving.delete(request);
      raw.removeListener('end', done);
      socket?.removeListener('close', done);
    };
    raw.once('end', done);
    socket?.once('close', done);
    receiving.set(request, done);
  });

  function expire(request: FastifyRequest, reply: FastifyReply) {
    receiving.get(request)?.();
    const raw = request.raw;
    if (raw.complete) return;
    request.log.info({ upload: Boolean(request.cutBody) }, 'request body too slow: cut');
    if (request.cutBody) return request.cutBody();
    const socket = raw.socket;
    if (reply.sent || reply.raw.headersSent) {
      socket?.destroy();
      return;
    }
    const { status, body } = transportAnswers.bodyTooSlow;
    reply.code(status).header('connection', 'close').send(body);
    // Once the answer is out the connection goes: the body it waited for is not coming.
    if (reply.raw.writableFinished) socket?.destroy();
    else reply.raw.once('finish', () => socket?.destroy());
  }

  return {
    closeReceiving() {
      let closed = 0;
      for (const [request, done] of [...receiving]) {
        done();
        if (request.raw.complete) continue;
        request.raw.socket?.destroy();
        closed++;
      }
      return closed;
    },
  };
}
