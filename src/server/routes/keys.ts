/**
 * The keys page, `{base_url}/keys` (DESIGN §5, §7): sign in with an e-mail code, mint and revoke
 * API keys, buy credit packs through Stripe Checkout, read the usage table. Works without
 * JavaScript: every action is a form POST (CSRF-protected) answered by a redirect back to the page
 * (post/redirect/get), so a reload never repeats an action.
 *
 * A new key is shown exactly once, and only to the session that minted it: the POST that mints it hands
 * it to the next GET in a short-lived http-only cookie bound to that session, and every GET clears the
 * cookie (signed in or not), so neither a reload nor the next person on the browser sees it again.
 *
 * Hardening (DESIGN §5a "Keys page headers"): every answer under /keys carries a CSP that allows forms
 * to post only here (and the redirect to Stripe Checkout) and no framing, `nosniff` and `no-referrer`;
 * on an https base URL the session and CSRF cookies are `__Host-` cookies (Secure, path /, no Domain),
 * so no sibling subdomain can plant or overwrite them; the CSRF secret is renewed at sign-in, so a
 * token learnt before it is worth nothing after it.
 *
 * A sign-in code belongs to the browser that asked for it (DESIGN §5a "Sign-in cannot be locked by
 * others"): every "Send code" gives the browser a new sign-in session in its own cookie (http-only,
 * `__Host-` on https, living as long as a code), and "Sign in" checks the code against that session's
 * code only, so no other client can supersede, guess at or burn it. Sign-in clears the cookie.
 */
import { createHash } from 'node:crypto';
import fastifyCookie from '@fastify/cookie';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyFormbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { normalizeMailbox } from '#vidsheet/core/mailbox.js';
import { packById } from '#vidsheet/core/packs.js';
import { KEY_PATTERN, type Ledger } from '../billing/ledger.js';
import type { Payments } from '../billing/payments.js';
import type { ServerConfig } from '../config.js';
import { type PageState, renderKeysPage } from '../keys/page.js';
import { Sessions } from '../keys/sessions.js';
import { CODE_TTL_S, newSignInSession, type SignIn } from '../keys/sign-in.js';

/** Usage rows per page. */
const USAGE_PAGE = 25;
/** A form here holds an e-mail address, a code or a key id: 16 KiB is far more than any needs. */
const FORM_BODY_LIMIT = 16 * 1024;
const NEW_KEY_COOKIE = 'vidsheet_new_key';
const NOTICE_COOKIE = 'vidsheet_notice';
/** The browser's sign-in session: the codes it asked for are the only ones it can use. */
const SIGN_IN_COOKIE = 'vidsheet_sign_in';
/** Where Stripe Checkout's pages live: the `Buy` form's redirect goes there, so form-action allows it. */
export const STRIPE_CHECKOUT_ORIGIN = 'https://checkout.stripe.com';

type Form = Record<string, string | undefined>;

export interface KeysPageParts {
  config: ServerConfig;
  ledger: Ledger;
  sessions: Sessions;
  signIn: SignIn;
  payments: Payments;
}

/**
 * The headers of every answer under /keys (DESIGN §5a). `checkoutOrigins`: where the `Buy` form's 303
 * may lead (browsers hold a form's redirects to form-action too); none when buying is off.
 */
export function keysPageHeaders(checkoutOrigins: readonly string[]): Record<string, string> {
  const formAction = ["'self'", ...checkoutOrigins].join(' ');
  return {
    'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action ${formAction}; frame-ancestors 'none'`,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'cache-control': 'no-store',
  };
}

/**
 * The new-key cookie's tie to the session that minted the key: a hash of the session token, so the key
 * shows only where that very token is presented (never to a later session on the same browser).
 */
const mintedBy = (sessionToken: string | undefined): string =>
  createHash('sha256')
    .update(`new-key:${sessionToken ?? ''}`)
    .digest('base64url');

export async function keysRoutes(app: FastifyInstance, deps: KeysPageParts): Promise<void> {
  const { config, ledger, sessions, signIn, payments } = deps;
  const cookieOptions = Sessions.cookieOptions(config.baseUrl);
  const sessionCookie = Sessions.cookieName(config.baseUrl);
  const secure = cookieOptions.secure;
  // A `__Host-` cookie must be Secure with path /; plain http keeps the CSRF secret to /keys.
  const csrfCookie = secure ? '__Host-vidsheet_csrf' : 'vidsheet_csrf';
  const csrfOptions = { ...cookieOptions, path: secure ? '/' : '/keys', maxAge: undefined };
  const flashOptions = { ...cookieOptions, path: '/keys', maxAge: 60 };
  // Like the CSRF secret's: `__Host-` on https; as long-lived as the code it holds.
  const signInCookie = secure ? `__Host-${SIGN_IN_COOKIE}` : SIGN_IN_COOKIE;
  const signInOptions = { ...csrfOptions, maxAge: CODE_TTL_S };
  // Checkout's own origin, and a stand-in API's (stripe-mock, a test double) whose pages it serves.
  const apiOrigin = config.stripeApiUrl === undefined ? [] : [new URL(config.stripeApiUrl).origin];
  const headers = keysPageHeaders(payments.enabled ? [STRIPE_CHECKOUT_ORIGIN, ...apiOrigin] : []);

  await app.register(fastifyCookie);
  // Set on every route of this plugin too, so that a 413 states the limit that applied (app.ts).
  app.addHook('onRoute', (route) => {
    route.bodyLimit ??= FORM_BODY_LIMIT;
  });
  await app.register(fastifyFormbody, { bodyLimit: FORM_BODY_LIMIT });
  await app.register(fastifyCsrf, { cookieKey: csrfCookie, cookieOpts: csrfOptions });
  // On every answer of this plugin, errors and redirects included, before anything else can answer.
  app.addHook('onRequest', async (_request, reply) => {
    reply.headers(headers);
  });

  const page = (reply: FastifyReply, state: PageState, status = 200) =>
    reply.code(status).type('text/html; charset=utf-8').send(renderKeysPage(state));

  const back = (reply: FastifyReply, notice?: string) => {
    if (notice) reply.setCookie(NOTICE_COOKIE, notice, flashOptions);
    return reply.redirect('/keys', 303);
  };

  async function signedInAccount(request: FastifyRequest) {
    const accountId = await sessions.accountId(request.cookies[sessionCookie]);
    return accountId === undefined ? undefined : ledger.accounts.accountById(accountId);
  }

  /** State-changing routes: a valid CSRF token, and (except the sign-in steps) a session. */
  const guarded = { preHandler: app.csrfProtection };

  app.get<{ Querystring: { page?: string } }>('/keys', { schema: { hide: true } }, async (request, reply) => {
    const csrf = reply.generateCsrf();
    const notice = request.cookies[NOTICE_COOKIE];
    if (notice) reply.clearCookie(NOTICE_COOKIE, flashOptions);
    // Any page load ends the new key's one showing, whoever loads it.
    const flashed = request.cookies[NEW_KEY_COOKIE];
    if (flashed) reply.clearCookie(NEW_KEY_COOKIE, flashOptions);
    const account = await signedInAccount(request);
    if (!account) return page(reply, { kind: 'signed-out', csrf, notice });

    // `<key>.<mintedBy(session)>`: shown only to the session that minted it, and only ever a key's shape.
    const [flashedKey, tag] = (flashed ?? '').split('.');
    const newKey =
      flashedKey && KEY_PATTERN.test(flashedKey) && tag === mintedBy(request.cookies[sessionCookie])
        ? flashedKey
        : undefined;
    const pageNumber = Math.max(1, Math.min(10_000, Number.parseInt(request.query.page ?? '1', 10) || 1));
    // One row more than a page tells whether an older page exists.
    const usage = await ledger.jobs.usage(account.id, pageNumber * USAGE_PAGE + 1);
    const rows = usage.slice((pageNumber - 1) * USAGE_PAGE, pageNumber * USAGE_PAGE);
    const purchase = (request.query as Record<string, string | undefined>).purchase;
    return page(reply, {
      kind: 'signed-in',
      csrf,
      email: account.email,
      balance: account.balance,
      keys: await ledger.accounts.listKeys(account.id),
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
    const csrf = reply.generateCsrf();
    // The one mailbox rule (DESIGN §5a): anything else is refused here and mails nothing.
    const email = normalizeMailbox(String(request.body?.email ?? ''));
    if (email === undefined) {
      return page(reply, { kind: 'signed-out', csrf, notice: 'Please enter a valid e-mail address.' }, 422);
    }
    // A new session at every send: one planted or left over from before never holds the new code.
    const signInSession = newSignInSession();
    const sent = await signIn.sendCode(email, request.ip, signInSession);
    if (!sent.ok) {
      return page(
        reply,
        {
          kind: 'signed-out',
          csrf,
          codeSentTo: email,
          notice: 'Too many codes were asked for. Wait a few minutes, then try again.',
        },
        429,
      );
    }
    reply.setCookie(signInCookie, signInSession, signInOptions);
    // The same answer whether or not the address has an account.
    return page(reply, { kind: 'signed-out', csrf, codeSentTo: email });
  });

  app.post<{ Body: Form }>(
    '/keys/sign-in',
    { ...guarded, schema: { hide: true } },
    async (request, reply) => {
      const email = normalizeMailbox(String(request.body?.email ?? ''));
      const code = String(request.body?.code ?? '').trim();
      if (email === undefined) return back(reply, 'Please start again with your e-mail address.');
      const result = await signIn.verify(email, code, request.ip, request.cookies[signInCookie]);
      if (!result.ok) {
        const { notice, status } = VERIFY_REFUSALS[result.reason];
        const csrf = reply.generateCsrf();
        return page(reply, { kind: 'signed-out', csrf, codeSentTo: email, notice }, status);
      }
      // A fresh session id at sign-in: whatever session the browser had is ended.
      await sessions.destroy(request.cookies[sessionCookie]);
      reply.setCookie(sessionCookie, await sessions.create(result.accountId), cookieOptions);
      reply.clearCookie(signInCookie, signInOptions);
      // And a fresh CSRF secret: with no secret in the request, generateCsrf makes and sets a new one.
      delete request.cookies[csrfCookie];
      reply.generateCsrf();
      return back(reply);
    },
  );

  app.post('/keys/sign-out', { ...guarded, schema: { hide: true } }, async (request, reply) => {
    await sessions.destroy(request.cookies[sessionCookie]);
    // The same attributes it was set with: a browser ignores a `__Host-` cookie without Secure and path /.
    reply.clearCookie(sessionCookie, cookieOptions);
    return back(reply, 'You are signed out.');
  });

  app.post('/keys/create-key', { ...guarded, schema: { hide: true } }, async (request, reply) => {
    const account = await signedInAccount(request);
    if (!account) return back(reply, 'Please sign in again.');
    const { key, prefix } = await ledger.accounts.createKey(account.id);
    request.log.info({ keyPrefix: prefix }, 'key created on the keys page');
    reply.setCookie(NEW_KEY_COOKIE, `${key}.${mintedBy(request.cookies[sessionCookie])}`, flashOptions);
    return back(reply);
  });

  app.post<{ Body: Form }>('/keys/revoke', { ...guarded, schema: { hide: true } }, async (request, reply) => {
    const account = await signedInAccount(request);
    if (!account) return back(reply, 'Please sign in again.');
    const keyId = Number(request.body?.key_id);
    const revoked = Number.isSafeInteger(keyId) && (await ledger.accounts.revokeKeyById(account.id, keyId));
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

/** What the page says, and answers, when a code is refused. */
const VERIFY_REFUSALS = {
  wrong_code: {
    notice: 'That code is not right, or it has expired. Check the newest mail, or send a new code.',
    status: 422,
  },
  rate_limited: { notice: 'Too many tries. Wait a few minutes, then try again.', status: 429 },
  address_limited: {
    notice: 'Too many wrong codes for this address today. Try again after 00:00 UTC.',
    status: 429,
  },
} as const;
