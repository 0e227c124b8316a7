/**
 * What Fastify's own request lines (`incoming request`, `request completed`) carry. DESIGN §5a "Small
 * inputs stay small": no input is ever echoed whole, at most 64 characters of it in a log line. The
 * URL (a query string of any length), the Host header and, behind a proxy, the forwarded address are
 * the client's text, so each is quoted by `excerpt` (core/redact.ts); Fastify's `accept-version`
 * header is left out (no route is versioned). Fastify's default logged all of them whole.
 */
import type { FastifyRequest } from 'fastify';
import { excerpt } from '#vidsheet/core/redact.js';

export const requestLogSerializers = {
  req: (request: FastifyRequest) => ({
    method: request.method,
    url: excerpt(request.url),
    host: excerpt(request.host),
    remoteAddress: excerpt(request.ip),
    remotePort: request.socket?.remotePort,
  }),
};
