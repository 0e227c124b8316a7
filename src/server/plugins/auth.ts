/**
 * API keys on requests (spec "Authentication"): `Authorization: Bearer <key>` is read here and nowhere
 * else. Registered once on the app (fastify-plugin, so its decorators reach every route), it gives
 * routes two `onRequest` hooks, both run before any body byte is read and both setting
 * `request.account`:
 * - `app.requireKey`: a missing, malformed or revoked key is `401 invalid_key` (the hosted API);
 * - `app.keyIfPresent`: no header is an anonymous call, but a header that is present must hold a live
 *   key, never a silent fall back to the anonymous lane (the remote tool endpoint).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hostedErrors } from '#vidsheet/core/errors.js';
import type { Account, Ledger } from '../billing/ledger.js';
import { refuseBeforeBody } from './early-answer.js';

type KeyHook = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>;

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's account, set by the auth hooks; undefined on an anonymous call. */
    account?: Account;
  }
  interface FastifyInstance {
    requireKey: KeyHook;
    keyIfPresent: KeyHook;
  }
}

/** The key of an `Authorization: Bearer <key>` header; undefined for anything else. */
export const bearerKey = (header: string | undefined): string | undefined =>
  /^Bearer +(\S+)\s*$/i.exec(header ?? '')?.[1];

export const auth = fp<{ accounts: Pick<Ledger['accounts'], 'accountForKey'> }>(
  async (app, { accounts }) => {
    app.decorateRequest('account', undefined);
    const authenticate =
      (required: boolean): KeyHook =>
      async (request, reply) => {
        const header = request.headers.authorization;
        if (header === undefined && !required) return;
        const key = bearerKey(header);
        const account = key ? await accounts.accountForKey(key) : undefined;
        if (!account) return refuseBeforeBody(request, reply, hostedErrors.invalidKey());
        request.account = account;
      };
    app.decorate('requireKey', authenticate(true));
    app.decorate('keyIfPresent', authenticate(false));
  },
  { name: 'vidsheet-auth', fastify: '5.x' },
);
