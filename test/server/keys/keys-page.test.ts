/**
 * The keys page as a person uses it: Debian's Chromium driven by playwright-core against the built
 * server on loopback, a real SMTP server in this process receiving the sign-in codes, and a local
 * test double standing in for the Stripe API (the one outside service), with webhooks signed by the
 * Stripe SDK itself. Controls are found by the accessible names DESIGN §7 fixes.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { simpleParser } from 'mailparser';
import { type Browser, chromium, type Page } from 'playwright-core';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ledger } from '../../../dist/server/billing/ledger.js';
import { openDatabase } from '../../../dist/server/db/open.js';
import { removeServerDirs, startServer, type TestServer } from '../../helpers/server.js';
import {
  type StripeDouble,
  sessionEvent,
  startStripeDouble,
  stripeSignature,
} from '../../helpers/stripe-double.js';
import { visitor } from '../../helpers/visitor.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const SAMPLE = readFileSync(join(ROOT, 'fixtures', 'sample.mp4'));
const WEBHOOK_SECRET = 'whsec_test_vidsheet';

interface Mail {
  to: string;
  subject: string;
  text: string;
  from: string;
}

const mails: Mail[] = [];
let smtp: SMTPServer;
let smtpPort: number;
/** The Stripe API test double: records Checkout Sessions, serves a stand-in payment page. */
let stripe: StripeDouble;
let browser: Browser;
let server: TestServer;

async function nextMail(to: string, after: number): Promise<Mail> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const mail = mails.slice(after).find((m) => m.to === to);
    if (mail) return mail;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no mail to ${to}`);
}

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((parsed) => {
          mails.push({
            to: session.envelope.rcptTo.map((r) => r.address).join(','),
            subject: parsed.subject ?? '',
            text: parsed.text ?? '',
            from: parsed.from?.text ?? '',
          });
          callback();
        })
        .catch(callback);
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  smtpPort = (smtp.server.address() as AddressInfo).port;

  stripe = await startStripeDouble();

  server = await startServer({
    VIDSHEET_SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
    VIDSHEET_MAIL_FROM: 'vidsheet <noreply@vidsheet.test>',
    VIDSHEET_STRIPE_SECRET_KEY: 'sk_test_vidsheet',
    VIDSHEET_STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    VIDSHEET_STRIPE_API_URL: stripe.url,
  });
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--disable-background-networking', '--disable-component-update', '--no-first-run', '--no-sandbox'],
  });
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await new Promise<void>((resolve) => smtp?.close(() => resolve()));
  await stripe?.close();
  removeServerDirs();
});

/** Signs in through the page with the code from the mail; returns the page, signed in. */
async function signIn(page: Page, email: string): Promise<void> {
  await page.goto(`${server.url}/keys`);
  const before = mails.length;
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Send code' }).click();
  const mail = await nextMail(email, before);
  const code = /\b(\d{6})\b/.exec(mail.text)?.[1] as string;
  await page.getByLabel('Code').fill(code);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect.poll(() => page.getByText(/^Balance: \d+ credits$/).count()).toBe(1);
}

const balanceOf = async (page: Page) =>
  Number(
    /Balance: (\d+) credits/.exec((await page.getByText(/^Balance: \d+ credits$/).textContent()) ?? '')?.[1],
  );

async function postJob(key: string) {
  const form = new FormData();
  form.append('video', new Blob([SAMPLE]), 'sample.mp4');
  return fetch(`${server.url}/v1/vidsheet`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: form,
  });
}

/** A webhook delivery as Stripe would send it, signed with the endpoint's secret. */
async function deliver(payload: string, secret = WEBHOOK_SECRET) {
  return fetch(`${server.url}/stripe/webhook`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': stripeSignature(payload, secret) },
    body: payload,
  });
}

const completed = (id: string, sessionId: string) => sessionEvent({ id, sessionId });

describe('the keys page in a real browser', () => {
  it('sign in (a wrong code is refused), create a key and use it, reload, buy a pack, usage, revoke, sign out', async () => {
    const page = await browser.newPage();
    const email = 'person@example.com';

    // Signed out: the Email field and Send code; then Code and Sign in. A wrong code is refused.
    await page.goto(`${server.url}/keys`);
    expect(await page.getByRole('heading', { level: 1 }).count()).toBe(1);
    const before = mails.length;
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Send code' }).click();
    const mail = await nextMail(email, before);
    expect(mail.subject).toBe('Your vidsheet sign-in code');
    expect(mail.from).toContain('noreply@vidsheet.test');
    const code = /\b(\d{6})\b/.exec(mail.text)?.[1] as string;
    expect(code).toMatch(/^\d{6}$/);
    const wrong = code === '000000' ? '000001' : '000000';
    await page.getByLabel('Code').fill(wrong);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByText(/not right/).count()).toBe(1);
    expect(await page.getByLabel('Code').count()).toBe(1);
    await page.getByLabel('Code').fill(code);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByText(/^Balance: \d+ credits$/).count()).toBe(1);
    expect(await balanceOf(page)).toBe(0);
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'vidsheet_session');
    expect(session?.httpOnly).toBe(true);
    expect(session?.sameSite).toBe('Lax');

    // Create a key: shown once, as text, with the note; it works on the API.
    await page.getByRole('button', { name: 'Create key' }).click();
    const keyText = (await page.locator('.key').textContent())?.trim() ?? '';
    expect(keyText).toMatch(/^vs_live_[0-9a-f]{40}$/);
    expect(await page.getByText(/cannot be shown again/).count()).toBe(1);
    const job = await postJob(keyText);
    expect(job.status).toBe(200);
    const result = await job.json();
    // Never purchased: topped up to 7, then charged 2 for two 3x3 sheets.
    expect(result.credits_remaining).toBe(5);

    // A reload does not show the key again; the key is listed by its prefix; the usage row is there.
    await page.reload();
    expect(await page.locator('.key').count()).toBe(0);
    expect(await page.getByText(keyText).count()).toBe(0);
    expect(await page.getByText(`${keyText.slice(0, 12)}…`).count()).toBe(1);
    expect(await balanceOf(page)).toBe(5);
    for (const name of ['Time', 'Surface', 'Density', 'Sheets', 'Credits']) {
      expect(await page.getByRole('columnheader', { name, exact: true }).count(), name).toBe(1);
    }
    const firstRow = page.locator('tbody tr').first();
    expect(await firstRow.locator('td').allTextContents()).toEqual([
      expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/),
      'HTTP API',
      '3x3',
      '2',
      '2',
    ]);
    if (process.env.UPDATE_SCREENSHOTS) {
      // The README's picture of the page: `UPDATE_SCREENSHOTS=1 npx vitest run test/server/keys/keys-page.test.ts`.
      mkdirSync(join(ROOT, 'docs'), { recursive: true });
      await page.setViewportSize({ width: 1000, height: 1100 });
      await page.screenshot({ path: join(ROOT, 'docs', 'keys-page.png'), fullPage: true });
    }

    // Buy 30 credits: Checkout Session as DESIGN §7 says, the browser goes to the payment page.
    // Readable on a phone: nothing wider than a 360 px screen, every control still there.
    await page.setViewportSize({ width: 360, height: 740 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    expect(await page.getByRole('button', { name: /^Buy \d+ credits/ }).count()).toBe(3);
    // Focus is visible: a focused button draws an outline.
    await page.getByRole('button', { name: 'Create key' }).focus();
    const outline = await page.evaluate(
      () => getComputedStyle(document.activeElement as Element).outlineStyle,
    );
    expect(outline).not.toBe('none');
    await page.setViewportSize({ width: 1280, height: 800 });

    await page.getByRole('button', { name: /^Buy 30 credits/ }).click();
    await page.waitForURL(/\/pay\/cs_test_/);
    const checkout = stripe.seen.filter((r) => r.path === '/v1/checkout/sessions').at(-1)
      ?.form as URLSearchParams;
    expect(checkout.get('mode')).toBe('payment');
    expect(checkout.get('metadata[pack]')).toBe('p30');
    expect(checkout.get('line_items[0][price_data][unit_amount]')).toBe('300');
    expect(checkout.get('line_items[0][quantity]')).toBe('1');
    const sessionId = new URL(page.url()).pathname.split('/').at(-1) as string;
    // The webhook credits the pack once; a replay and a second event for the session change nothing.
    expect((await deliver(completed('evt_1', sessionId))).status).toBe(200);
    expect((await deliver(completed('evt_1', sessionId))).status).toBe(200);
    expect((await deliver(completed('evt_2', sessionId))).status).toBe(200);
    expect((await deliver(completed('evt_3', sessionId), 'whsec_wrong')).status).toBe(400);
    await page.goto(`${server.url}/keys`);
    expect(await balanceOf(page)).toBe(35);

    // Revoke: the key answers 401 at once.
    await page.getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => page.getByText(/is revoked/).count()).toBe(1);
    expect((await postJob(keyText)).status).toBe(401);

    // Sign out: back to the Email field; the old session cookie no longer signs anyone in.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await expect.poll(() => page.getByLabel('Email').count()).toBe(1);
    const stale = await fetch(`${server.url}/keys`, {
      headers: { cookie: `vidsheet_session=${session?.value}` },
    });
    expect(await stale.text()).not.toMatch(/Balance:/);
    await page.close();
  });

  it('sign-in sets a fresh session id (a planted cookie is replaced); a form without its CSRF token is refused', async () => {
    const context = await browser.newContext();
    const planted = 'A'.repeat(43);
    await context.addCookies([{ name: 'vidsheet_session', value: planted, url: server.url }]);
    const page = await context.newPage();
    await signIn(page, 'second@example.com');
    const second = (await context.cookies()).find((c) => c.name === 'vidsheet_session')?.value;
    expect(second).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(second).not.toBe(planted);
    const other = await browser.newContext();
    const otherPage = await other.newPage();
    await signIn(otherPage, 'second@example.com');
    const third = (await other.cookies()).find((c) => c.name === 'vidsheet_session')?.value;
    expect(third).not.toBe(second);
    await other.close();

    // The session cookie alone (as another site's form would send it) cannot create a key.
    const forged = await fetch(`${server.url}/keys/create-key`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `vidsheet_session=${second}` },
      body: '',
      redirect: 'manual',
    });
    expect(forged.status).toBe(403);
    await page.goto(`${server.url}/keys`);
    expect(await page.locator('ul.plain li').count()).toBe(0);
    await context.close();
  });
});

describe('the keys page over plain HTTP, with no SMTP and no Stripe configured', () => {
  let bare: TestServer;
  beforeAll(async () => {
    bare = await startServer();
  });
  afterAll(() => bare.stop());

  it('warns at start that codes go to the log; the code in the log signs in; buying says it is unavailable', async () => {
    const warning = bare.logs.find((l) => /development only/.test(l.msg));
    expect(warning?.level).toBe(40);
    const v = visitor();
    const { csrf } = await v.get(bare.url);
    const sent = await v.post(bare.url, '/keys/code', { _csrf: csrf, email: 'logged@example.com' });
    expect(sent.status).toBe(200);
    const logged = await bare.waitForLog(
      (l) => l.email === 'logged@example.com' && typeof l.code === 'string',
    );
    const fresh = /name="_csrf" value="([^"]+)"/.exec(sent.html)?.[1] ?? '';
    const signedIn = await v.post(bare.url, '/keys/sign-in', {
      _csrf: fresh,
      email: 'logged@example.com',
      code: String(logged.code),
    });
    expect(signedIn.status).toBe(303);
    const page = await v.get(bare.url);
    expect(page.html).toContain('Balance: 0 credits');
    expect(page.html).toContain('Buying is unavailable on this server right now.');
    expect(page.html).toMatch(/<button type="submit" disabled>Buy 30 credits for \$3<\/button>/);
    const buy = await v.post(bare.url, '/keys/buy', { _csrf: page.csrf, pack: 'p30' });
    expect(buy.status).toBe(303);
    expect(buy.location).toBe('/keys');
  });

  it('the usage table: newest first, 25 rows a page, a refunded job at 0 credits', async () => {
    const v = visitor();
    await v.post(bare.url, '/keys/code', { _csrf: (await v.get(bare.url)).csrf, email: 'busy@example.com' });
    const logged = await bare.waitForLog((l) => l.email === 'busy@example.com' && typeof l.code === 'string');
    const code = String(logged.code);
    await v.post(bare.url, '/keys/sign-in', {
      _csrf: (await v.get(bare.url)).csrf,
      email: 'busy@example.com',
      code,
    });
    // 27 jobs written through the server's own ledger (safe beside the running server), one refunded.
    const db = await openDatabase({ dataDir: bare.dataDir });
    try {
      let now = Date.parse('2026-01-01T00:00:00.000Z');
      const ledger = new Ledger(db, { allowanceFloor: 7, clock: () => new Date(now) });
      const account = await ledger.accounts.findOrCreateAccount('busy@example.com');
      await ledger.credits.grant(account.id, 1000);
      for (let i = 1; i <= 27; i++) {
        now += 60_000;
        const density = i % 2 ? '3x3' : '6x6';
        const price = i % 2 ? 1 : 5;
        await ledger.credits.charge({
          accountId: account.id,
          jobId: `job${i}`,
          price,
          surface: i % 3 ? 'http' : 'mcp',
          density,
          sheets: 1,
          ttlSeconds: 60,
        });
      }
      await ledger.credits.refund('job26');
    } finally {
      await db.destroy();
    }
    const cells = (html: string) =>
      [
        ...html.matchAll(
          /<tr><td>([^<]+)<\/td><td>([^<]+)<\/td>\s*<td>([^<]+)<\/td><td class="num">(\d+)<\/td><td class="num">(\d+)<\/td><\/tr>/g,
        ),
      ].map((m) => m.slice(1));
    const first = await v.get(bare.url);
    const rows = cells(first.html);
    expect(rows).toHaveLength(25);
    // Newest first: job27 (remote, 3x3, 1 credit, at 00:27), then the refunded job26 (6x6, shown at 0).
    expect(rows[0]).toEqual(['2026-01-01 00:27 UTC', 'Remote MCP', '3x3', '1', '1']);
    expect(rows[1]).toEqual(['2026-01-01 00:26 UTC', 'HTTP API', '6x6', '1', '0']);
    expect(rows[2]).toEqual(['2026-01-01 00:25 UTC', 'HTTP API', '3x3', '1', '1']);
    expect(rows[3]?.[1]).toBe('Remote MCP');
    expect(first.html).toContain('href="/keys?page=2"');
    expect(first.html).not.toContain('Newer jobs');
    const second = await fetch(`${bare.url}/keys?page=2`, {
      headers: { cookie: `vidsheet_session=${v.cookie('vidsheet_session')}` },
    });
    const older = cells(await second.text());
    expect(older.map((r) => r[0])).toEqual(['2026-01-01 00:02 UTC', '2026-01-01 00:01 UTC']);
  });

  it('no account enumeration: the same answer, in the same time, for a known and an unknown address', async () => {
    await bare.admin('create-key', '--email', 'known@example.com');
    const v = visitor();
    const answer = async (email: string) => {
      const { csrf } = await v.get(bare.url);
      const started = performance.now();
      const r = await v.post(bare.url, '/keys/code', { _csrf: csrf, email });
      const ms = performance.now() - started;
      return {
        status: r.status,
        html: r.html.replace(/value="[^"]*"/g, 'value=""').replaceAll(email, 'EMAIL'),
        ms,
      };
    };
    const known: number[] = [];
    const unknown: number[] = [];
    // Within the per-address send limit (5 per 10 minutes): alternating, 4 each.
    for (let i = 0; i < 4; i++) {
      const a = await answer('known@example.com');
      const b = await answer(`nobody${i}@example.com`);
      expect({ status: a.status, html: a.html }).toEqual({ status: b.status, html: b.html });
      known.push(a.ms);
      unknown.push(b.ms);
    }
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;
    expect(Math.abs(median(known) - median(unknown))).toBeLessThan(25);
  });

  it("a form without its CSRF token, or with another visitor's token, is refused with 403", async () => {
    const v = visitor();
    await v.get(bare.url);
    expect((await v.post(bare.url, '/keys/code', { email: 'a@example.com' })).status).toBe(403);
    const other = visitor();
    const { csrf } = await other.get(bare.url);
    expect((await v.post(bare.url, '/keys/code', { _csrf: csrf, email: 'a@example.com' })).status).toBe(403);
  });
});
