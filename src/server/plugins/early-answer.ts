/**
 * Answering before the whole request body has arrived: `401`, `402`, `429` and an announced `413`
 * before any byte of it (DESIGN §5's order of checks), and any error answered part-way through an
 * upload (a `413` or `422` from the error handler).
 *
 * Closing the connection at once makes many clients (fetch among them) report a reset instead of
 * the answer, because they are still sending. So the rest of a body announced at most
 * DRAIN_LIMIT_BYTES long is read and dropped (the connection can then stay usable); anything larger,
 * or of unknown length, gets `Connection: close`. Either way the body is never looked at, and
 * DESIGN §5a bounds the drain in time: once the answer is out, a body still unfinished after
 * `STALL_RULE.earlyAnswerDrainMs` (10 s) has its connection closed, so a client that keeps
 * trickling after its answer holds nothing.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { VidsheetError } from '#vidsheet/core/errors.js';
import { STALL_RULE } from '../hosted/stall.js';

export const DRAIN_LIMIT_BYTES = 32 * 1024 * 1024;

export function answerBeforeBody(request: FastifyRequest, reply: FastifyReply): void {
  if (request.raw.complete) return;
  // DESIGN §5a: at most 10 s of the rest of the body once the answer is out, then the connection goes.
  reply.raw.once('finish', () => {
    if (request.raw.complete) return;
    const socket = request.raw.socket;
    const cut = setTimeout(() => {
      if (!request.raw.complete) socket?.destroy();
    }, STALL_RULE.earlyAnswerDrainMs);
    cut.unref();
    // The socket outlives the request when the connection is kept alive: its listener must go with
    // the request, or each early answer on that connection would stay attached (with the request it
    // holds) for as long as the client keeps the connection open (issue 21, ~4 KB a request).
    const stop = () => {
      clearTimeout(cut);
      socket?.removeListener('close', stop);
    };
    request.raw.once('end', stop);
    socket?.once('close', stop);
  });
  const announced = Number(request.headers['content-length']);
  if (request.headers['content-length'] !== undefined && announced <= DRAIN_LIMIT_BYTES) {
    // Whatever was reading the body (the multipart parser) lets go; the rest flows to nowhere.
    request.raw.unpipe();
    request.raw.removeAllListeners('data');
    request.raw.resume();
  } else {
    reply.header('connection', 'close');
  }
}

/** A refusal before the body was read (401, 429, an announced 413): the catalog's body, sent so. */
export function refuseBeforeBody(request: FastifyRequest, reply: FastifyReply, error: VidsheetError) {
  answerBeforeBody(request, reply);
  return reply.code(error.status).send(error.body());
}
