/**
 * The keys page, `{base_url}/keys` (DESIGN §5, §7): sign in with an e-mail code, mint and revoke
 * API keys, buy credit packs through Stripe Checkout, read the usage table. Works without
 * JavaScript: every action is a form POST (CSRF-protected) answered by a redirect back to the page
 * (post/redirect/get), so a reload never repeats an action.
 *
 * A new key is shown exactly once: the POST that mints it hands it to the next GET in a short-lived
 * http-only cookie that the GET clears, so a reload of the page does not show it again.
 */
import fastifyCookie from '@fastify/cookie';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyFormbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { packById } from '#vidsheet/core/packs.js';
import { KEY_PATTERN, normalizeEmail } from '../billing/ledger.js';
import type { ServerDeps } from '../deps.js';
import { type PageState, renderKeysPage } from '../keys/page.js';
import { SESSION_COOKIE, Sessions } from '../keys/sessions.js';
import { isValidEmail } from '../keys/sign-in.js';

/** Usage rows per page. */
const USAGE_PAGE = 25;
const NEW_KEY_COOKIE = 'vidsheet_new_key';
const NOTICE_COOKIE = 'vidsheet_notice';

type Form = Record<string, string | undefined>;

export async function keysRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  const { config, ledger, sessions, signIn, payments } = deps;
  const cookieOptions = Sessions.cookieOptions(config.baseUrl);
  const flashOptions = { ...cookieOptions, path: '/keys', maxAge: 60 };

  await app.register(fastifyCookie);
  await app.register(fastifyFormbody, { bodyLimit: 16 * 1024 });
  await app.register(fastifyCsrf, {
    cookieKey: 'vidsheet_csrf',
    cookieOpts: { ...cookieOptions, path: '/keys', maxAge: undefined },
  });

  const page = (reply: FastifyReply, state: PageState, status = 200) =>
    reply
      .code(status)
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('x-frame-options', 'DENY')
      .header(
        'content-security-policy',
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'",
      )
      .send(renderKeysPage(state));

  const back = (reply: FastifyReply, notice?: string) => {
    if (notice) reply.setCookie(NOTICE_COOKIE, notice, flashOptions);
    return reply.redirect('/keys', 303);
  };

  async function signedInAccount(request: FastifyRequest) {
    const accountId = await sessions.accountId(request.cookies[SESSION_COOKIE]);
    return accountId === undefined ? undefined : ledger.accountById(accountId);
  }

  /** State-changing routes: a valid CSRF token, and (except the sign-in steps) a session. */
  const guarded = { preHandler: app.csrfProtection };

  app.get<{ Querystring: { page?: string } }>('/keys', { schema: { hide: true } }, async (request, reply) => {
    const csrf = reply.generateCsrf();
    const notice = request.cookies[NOTICE_COOKIE];
    if (notice) reply.clearCookie(NOTICE_COOKIE, { path: '/keys' });
    const account = await signedInAccount(request);
    if (!account) return page(reply, { kind: 'signed-out', csrf, notice });

    const flashedKey = request.cookies[NEW_KEY_COOKIE];
    if (flashedKey) reply.clearCookie(NEW_KEY_COOKIE, { path: '/keys' });
    // Only ever a key's shape: the cookie is shown as it is.
    const newKey = flashedKey && KEY_PATTERN.test(flashedKey) ? flashedKey : undefined;
    const pageNumber = Math.max(1, Math.min(10_000, Number.parseInt(request.query.page ?? '1', 10) || 1));
    // One row more than a page tells whether an older page exists.
    const usage = await ledger.usage(account.id, pageNumber * USAGE_PAGE + 1);
    const rows = usage.slice((pageNumber - 1) * USAGE_PAGE, pageNumber * USAGE_PAGE);
    const purchase = (request.query as Record<string, string | undefined>).purchase;
    return page(reply, {
      kind: 'signed-in',
      csrf,
      email: account.email,
      balance: account.balance,
      keys: await ledger.listKeys(account.id),
      newKey,
      buyingEnabled: payments.enabled,
      usage: rows.map((u) => ({
        createdAt: u.createdAt,
        surface: u.surface,
        density: u.density,
        sheets: u.sheets,
        credits: u.refunded ? 0 : u.credits,
      })),
      page: pageNumber,
      hasNextPage: usage.length > pageNumber * USAGE_PAGE,
      notice:
        notice ??
        (purchase === 'success'
          ? 'Thank you: your credits appear here as soon as the payment is confirmed.'
          : purchase === 'cancelled'
            ? 'The purchase was cancelled; nothing was charged.'
            : undefined),
    });
  });

  app.post<{ Body: Form }>('/keys/code', { ...guarded, schema: { hide: true } }, async (request, reply) => {
    const email = String(request.body?.email ?? '').trim();
    const csrf = reply.generateCsrf();
    if (!isValidEmail(email)) {
      return page(reply, { kind: 'signed-out', csrf, notice: 'Please enter a valid e-mail address.' }, 422);
    }
    const sent = await signIn.sendCode(email, request.ip);
    if (!sent.ok) {
      return page(
        reply,
        {
          kind: 'signed-out',
          csrf,
          codeSentTo: normalizeEmail(email),
          notice: 'Too many codes were asked for. Wait a few minutes, then try again.',
        },
        429,
      );
    }
    // The same answer whether or not the address has an account.
    return page(reply, { kind: 'signed-out', csrf, codeSentTo: normalizeEmail(email) });
  });

  app.post<{ Body: Form }>(
    '/keys/sign-in',
    { ...guarded, schema: { hide: true } },
    async (request, reply) => {
      const email = String(request.body?.email ?? '').trim();
      const code = String(request.body?.code ?? '').trim();
      const csrf = reply.generateCsrf();
      if (!isValidEmail(email)) return back(reply, 'Please start again with your e-mail address.');
      const result = await signIn.verify(email, code, request.ip);
      if (!result.ok) {
        const notice =
          result.reason === 'rate_limited'
            ? 'Too many tries. Wait a few minutes, then try again.'
            : 'That code is not right, or it has expired. Check the newest mail, or send a new code.';
        const status = result.reason === 'rate_limited' ? 429 : 422;
        return page(reply, { kind: 'signed-out', csrf, codeSentTo: normalizeEmail(email), notice }, status);
      }
      // A fresh session id at sign-in: whatever session the browser had is ended.
      await sessions.destroy(request.cookies[SESSION_COOKIE]);
      reply.setCookie(SESSION_COOKIE, await sessions.create(result.accountId), cookieOptions);
      return back(reply);
    },
  );

  app.post('/keys/sign-out', { ...guarded, schema: { hide: true } }, async (request, reply) => {
    await sessions.destroy(request.cookies[SESSION_COOKIE]);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return back(reply, 'You are signed out.');
  });

  app.post('/keys/create-key', { ...guarded, schema: { hide: true } }, async (request, reply) => {
    const account = await signedInAccount(request);
    if (!account) return back(reply, 'Please sign in again.');
    const { key, prefix } = await ledger.createKey(account.id);
    request.log.info({ keyPrefix: prefix }, 'key created on the keys page');
    reply.setCookie(NEW_KEY_COOKIE, key, flashOptions);
    return back(reply);
  });

  app.post<{ Body: Form }>('/keys/revoke', { ...guarded, schema: { hide: true } }, async (request, reply) => {
    const account = await signedInAccount(request);
    if (!account) return back(reply, 'Please sign in again.');
    const keyId = Number(request.body?.key_id);
    const revoked = Number.isSafeInteger(keyId) && (await ledger.revokeKeyById(account.id, keyId));
    return back(
      reply,
      revoked ? 'The key is revoked: it is refused from now on.' : 'That key was already revoked.',
    );
  });

  app.post<{ Body: Form }>('/keys/buy', { ...guarded, schema: { hide: true } }, async (request, reply) => {
    const account = await signedInAccount(request);
    if (!account) return back(reply, 'Please sign in again.');
    const pack = packById(request.body?.pack);
    if (!pack) return back(reply, 'Please pick one of the packs.');
    if (!payments.enabled) return back(reply, 'Buying is unavailable on this server right now.');
    const url = await payments.createCheckout(account.id, pack.id);
    return reply.redirect(url, 303);
  });
}
