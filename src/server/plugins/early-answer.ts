/**
 * Answering before the whole request body has arrived (401, 429 and an announced 413 before any
 * byte of it; a 413 or 422 part-way through an upload).
 *
 * Closing the connection at once makes many clients (fetch among them) report a reset instead of
 * the answer, because they are still sending. So a body announced at most DRAIN_LIMIT_BYTES long
 * is read to its end and dropped (the connection then stays usable); anything larger, or of
 * unknown length, gets `Connection: close`, so a huge or endless body costs the server nothing.
 * Either way the body is never looked at.
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
    const cut = setTimeout(() => {
      if (!request.raw.complete) request.raw.socket?.destroy();
    }, STALL_RULE.earlyAnswerDrainMs);
    cut.unref();
    request.raw.once('end', () => clearTimeout(cut));
    request.raw.socket?.once('close', () => clearTimeout(cut));
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
