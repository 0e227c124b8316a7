/**
 * Answering before the whole request body has arrived: `401`, `402`, `429` and an announced `413`
 * before any byte of it (DESIGN §5's order of checks), and any error answered part-way through an
 * upload (a `413` or `422` from the error handler).
 *
 * A client that is still sending when its answer comes often reads it only after it has sent its
 * body. Were the connection closed as the answer goes out, the bytes it keeps sending would meet a
 * closed socket, the kernel would answer them with a reset, and a reset throws away whatever the
 * client had not read yet: the answer itself (the review lost a `413` that way, a 200 MB upload
 * announced over a 1 MB cap). So the rest of the body is read and dropped, never looked at:
 * - a body announced at most DRAIN_LIMIT_BYTES long is drained and the connection stays usable;
 * - anything larger, or of unknown length, gets `Connection: close` and a lingering close: once the
 *   answer is out the server ends its side of the connection but keeps reading (and dropping) what
 *   the client still sends, and closes when the body ends or the client closes its side.
 * Either way DESIGN §5a bounds the drain in time: once the answer is out, a body still unfinished
 * after `STALL_RULE.earlyAnswerDrainMs` (10 s) has its connection closed, so a client that keeps
 * sending after its answer holds nothing for long.
 */
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { transportAnswers, type VidsheetError } from '#vidsheet/core/errors.js';
import { STALL_RULE } from '../hosted/stall.js';

export const DRAIN_LIMIT_BYTES = 32 * 1024 * 1024;

export function answerBeforeBody(request: FastifyRequest, reply: FastifyReply): void {
  if (request.raw.complete) return;
  // `complete` is Node's: an injected request (tests) has none, nor a socket to drain or close.
  const socket = request.raw.complete === false ? request.raw.socket : undefined;
  const announced = Number(request.headers['content-length']);
  const keepAlive = request.headers['content-length'] !== undefined && announced <= DRAIN_LIMIT_BYTES;
  if (!keepAlive) {
    reply.header('connection', 'close');
    if (socket) lingerOnClose(socket, request);
  }
  // DESIGN §5a: at most 10 s of the rest of the body once the answer is out, then the connection goes.
  reply.raw.once('finish', () => {
    if (request.raw.complete || !socket) return;
    const cut = setTimeout(() => {
      if (!request.raw.complete) socket.destroy();
    }, STALL_RULE.earlyAnswerDrainMs);
    cut.unref();
    // The socket outlives the request when the connection is kept alive: its listener must go with
    // the request, or each early answer on that connection would stay attached (with the request it
    // holds) for as long as the client keeps the connection open (issue 21, ~4 KB a request).
    const stop = () => {
      clearTimeout(cut);
      socket.removeListener('close', stop);
    };
    request.raw.once('end', stop);
    socket.once('close', stop);
  });
  // Whatever was reading the body (the multipart parser) lets go; the rest flows to nowhere.
  request.raw.unpipe();
  request.raw.removeAllListeners('data');
  request.raw.resume();
}

/**
 * A lingering close for a connection answered with `Connection: close` before its body arrived. Node
 * ends such a connection with `destroySoon()` once the answer is written (and so resets it while the
 * client still sends); here that ends only the server's side: the body keeps being read and dropped,
 * and the connection is closed when the body has all arrived (nothing unread is left to reset), when
 * the client closes its side, or at the drain deadline (answerBeforeBody's timer).
 */
function lingerOnClose(socket: Socket, request: FastifyRequest): void {
  const lingering = socket as Socket & { destroySoon(): void };
  lingering.destroySoon = () => {
    if (socket.writable) socket.end();
    const close = () => {
      if (socket.writableFinished) socket.destroy();
      else socket.once('finish', () => socket.destroy());
    };
    if (request.raw.complete) close();
    else request.raw.once('end', close);
  };
}

/** A refusal before the body was read (401, 429, an announced 413): the catalog's body, sent so. */
export function refuseBeforeBody(request: FastifyRequest, reply: FastifyReply, error: VidsheetError) {
  answerBeforeBody(request, reply);
  return reply.code(error.status).send(error.body());
}

/**
 * DESIGN §5a: a body that is not JSON (a form, text, anything but `application/json`) where a route
 * reads JSON only (a zoom, `/mcp`) is `415` before it is read, and nothing is charged. A request
 * without a body passes (a zoom without one is an overview, as `{}` is).
 */
export async function requireJsonBody(request: FastifyRequest, reply: FastifyReply) {
  const length = request.headers['content-length'];
  const hasBody =
    request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  const type = String(request.headers['content-type'] ?? '')
    .split(';')[0]
    ?.trim()
    .toLowerCase();
  if (hasBody && type !== 'application/json') {
    answerBeforeBody(request, reply);
    return reply.code(transportAnswers.notJson.status).send(transportAnswers.notJson.body);
  }
}
