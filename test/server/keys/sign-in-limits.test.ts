/**
 * Sign-in hardening (DESIGN §5a "Sign-in", "Sign-in cannot be locked by others"): the mailbox rule
 * where mail is sent, and at most 20 wrong codes per address and client per UTC day across codes, on
 * SQLite and on a real PostgreSQL, racing instances included. Mail goes to a real SMTP server in this
 * process on loopback (test/helpers/smtp.ts), which records every connection and recipient: a refused
 * address must not even open one. The last part runs the built server with that SMTP server and posts
 * the forms as a browser would.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ledger } from '../../../src/server/billing/ledger.js';
import { createMailer, type Mailer } from '../../../src/server/keys/mail.js';
import {
  InvalidEmailError,
  MAX_TRIES_PER_CODE,
  SEND_LIMITS,
  SignIn,
  WRONG_CODES_PER_DAY,
} from '../../../src/server/keys/sign-in.js';
import { BACKENDS, type TestBackend, type TestDatabase, useBackend } from '../../helpers/databases.js';
import { removeServerDirs, startServer, type TestServer } from '../../helpers/server.js';
import { useSmtp } from '../../helpers/smtp.js';
import { visitor } from '../../helpers/visitor.js';

/** One browser's sign-in session: the tests here ask and check codes from the same browser. */
const BROWSER = 'browser-session-1';
const ATTACKER_BROWSER = 'browser-session-2';

const quiet = { info: () => undefined, warn: () => undefined };

/** A SignIn on a fresh database (or a second instance on `sameAs`), a movable clock, mails recorded. */
async function fresh(databases: TestBackend, options: { sameAs?: TestDatabase; mailer?: Mailer } = {}) {
  const database = options.sameAs
    ? { db: await databases.open(options.sameAs.options), options: options.sameAs.options }
    : await databases.fresh();
  const clock = { now: new Date('2025-03-01T12:00:00.000Z') };
  const now = () => clock.now;
  const sent: { to: string; code: string }[] = [];
  const mailer: Mailer = options.mailer ?? {
    kind: 'log',
    async sendSignInCode(to, code) {
      sent.push({ to, code });
    },
  };
  const ledger = new Ledger(database.db, { allowanceFloor: 7, clock: now });
  const signIn = new SignIn({ db: database.db, ledger, mailer, clock: now, log: quiet });
  const lastCode = () => sent.at(-1)?.code ?? '';
  const at = (iso: string) => {
    clock.now = new Date(iso);
  };
  return { database, db: database.db, signIn, sent, lastCode, at, clock };
}

/** Another code than `code`, so a "wrong" try is never right by chance. */
const wrong = (code: string, step = 1) => ((Number(code) + step) % 1_000_000).toString().padStart(6, '0');

describe.each(BACKENDS)('wrong codes per address and client per UTC day on %s', (backend) => {
  const databases = useBackend(backend);

  it("20 wrong codes from one client lock that client out until 00:00 UTC, never another client's right code", async () => {
    const { signIn, lastCode, at, db } = await fresh(databases);
    const email = 'target@example.com';
    const attacker = '198.51.100.7';
    // Four codes the owner asked for; 5 wrong tries at each from one other client and browser: 20 wrong
    // codes today, counted against that client (its tries never reach the owner's codes).
    for (let round = 0; round < WRONG_CODES_PER_DAY / MAX_TRIES_PER_CODE; round++) {
      at(`2025-03-01T1${round}:00:00.000Z`);
      await signIn.sendCode(email, '192.0.2.1', BROWSER);
      const code = lastCode();
      for (let i = 1; i <= MAX_TRIES_PER_CODE; i++) {
        expect(await signIn.verify(email, wrong(code, i), attacker, ATTACKER_BROWSER)).toEqual({
          ok: false,
          reason: 'wrong_code',
        });
      }
    }
    at('2025-03-01T23:59:00.000Z');
    await signIn.sendCode(email, '192.0.2.1', BROWSER);
    const fifth = lastCode();
    // The locked client is refused, the right code included, under any spelling of the mailbox.
    for (const spelling of [email, ` ${email.toUpperCase()}`, 'target+x@example.com']) {
      expect(await signIn.verify(spelling, fifth, attacker, ATTACKER_BROWSER), spelling).toEqual({
        ok: false,
        reason: 'address_limited',
      });
    }
    // The refused tries were not checked: the code was not touched.
    const row = await db
      .selectFrom('sign_in_codes')
      .select(['attempts', 'used_at'])
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ attempts: 0, used_at: null });
    // The owner, from another client, signs in with the right code: the attacker's 20 do not count.
    expect(await signIn.verify(email, fifth, '203.0.113.1', BROWSER)).toMatchObject({ ok: true });

    // The next day the locked client is a client like any other again.
    at('2025-03-02T00:00:30.000Z');
    await signIn.sendCode(email, '192.0.2.1', BROWSER);
    expect(await signIn.verify(email, lastCode(), attacker, BROWSER)).toMatchObject({ ok: true });
  });

  it('19 wrong codes, then the right one, signs in; wrong codes with no live code count too', async () => {
    const { signIn, lastCode } = await fresh(databases);
    const email = 'careful@example.com';
    const client = '198.51.100.9';
    // No code sent yet: these 9 are wrong codes for the address all the same.
    for (let i = 0; i < 9; i++) {
      expect(await signIn.verify(email, '123456', client, BROWSER)).toEqual({
        ok: false,
        reason: 'wrong_code',
      });
    }
    // Two codes burned by 5 wrong tries each: 19 wrong codes today.
    for (let round = 0; round < 2; round++) {
      await signIn.sendCode(email, '192.0.2.1', BROWSER);
      const code = lastCode();
      for (let i = 1; i <= MAX_TRIES_PER_CODE; i++)
        await signIn.verify(email, wrong(code, i), client, BROWSER);
    }
    await signIn.sendCode(email, '192.0.2.1', BROWSER);
    expect(await signIn.verify(email, lastCode(), client, BROWSER)).toMatchObject({ ok: true });
  });

  it('wrong codes counted at 23:59 UTC do not carry over to the next day', async () => {
    const { signIn, at } = await fresh(databases);
    const email = 'late@example.com';
    const client = '198.51.100.10';
    at('2025-03-01T23:59:00.000Z');
    for (let i = 0; i < WRONG_CODES_PER_DAY; i++) await signIn.verify(email, '000000', client, BROWSER);
    expect(await signIn.verify(email, '000000', client, BROWSER)).toEqual({
      ok: false,
      reason: 'address_limited',
    });
    at('2025-03-02T00:00:00.000Z');
    expect(await signIn.verify(email, '000000', client, BROWSER)).toEqual({
      ok: false,
      reason: 'wrong_code',
    });
  });

  it('the spellings of one mailbox share one count; an IPv6 /64 is one client', async () => {
    const { signIn, lastCode } = await fresh(databases);
    // Twenty addresses of one /64, twenty spellings of one mailbox: one client, one address.
    for (let i = 0; i < WRONG_CODES_PER_DAY; i++) {
      const spelling = i % 2 ? `jane.doe+${i}@gmail.com` : 'j.a.n.e.d.o.e@gmail.com';
      expect(
        await signIn.verify(spelling, '000000', `2001:db8:7:8::${(i + 1).toString(16)}`, BROWSER),
      ).toEqual({
        ok: false,
        reason: 'wrong_code',
      });
    }
    await signIn.sendCode('janedoe@gmail.com', '192.0.2.1', BROWSER);
    const code = lastCode();
    expect(await signIn.verify('jane.doe@gmail.com', code, '2001:db8:7:8:ffff::1', BROWSER)).toEqual({
      ok: false,
      reason: 'address_limited',
    });
    // The next /64 is another client; googlemail.com is another mailbox (DESIGN merges dots only).
    expect(await signIn.verify('janedoe@googlemail.com', '000000', '2001:db8:7:8::1', BROWSER)).toEqual({
      ok: false,
      reason: 'wrong_code',
    });
    expect(await signIn.verify('JaneDoe+phone@gmail.com', code, '2001:db8:7:9::1', BROWSER)).toMatchObject({
      ok: true,
    });
  });

  it('wrong tries racing on two instances: exactly 20 are checked, the rest refused', async () => {
    const first = await fresh(databases);
    const second = await fresh(databases, { sameAs: first.database });
    const email = 'raced@example.com';
    const client = '198.51.100.11';
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        (i % 2 ? first : second).signIn.verify(email, '000000', client, BROWSER),
      ),
    );
    expect(results.filter((r) => !r.ok && r.reason === 'wrong_code')).toHaveLength(WRONG_CODES_PER_DAY);
    expect(results.filter((r) => !r.ok && r.reason === 'address_limited')).toHaveLength(
      32 - WRONG_CODES_PER_DAY,
    );
    const rows = await first.db.selectFrom('sign_in_wrong_tries').selectAll().execute();
    expect(rows).toEqual([{ day: '2025-03-01', mailbox: email, client, wrong: WRONG_CODES_PER_DAY }]);
  });
});

// ---------------------------------------------------------------------------------------------------
// A real SMTP server on loopback, recording every connection, envelope and code.
const smtp = useSmtp();

async function waitForDeliveries(count: number): Promise<void> {
  if (count > 0) await smtp.delivery(count - 1);
  expect(smtp.deliveries).toHaveLength(count);
}

/** Each of these parses, in nodemailer, to a delivery to victim@example.com. */
const HOSTILE = [
  'victim@example.com,1',
  'victim@example.com,attacker@example.org',
  'x1<victim@example.com>',
  'Victim <victim@example.com>',
  '"victim@example.com"',
  'victim(x)@example.com',
  'victim@example.com;other@example.org',
  'victim@example.com victim2@example.com',
  'victim@example.com\nBcc: other@example.org',
];

describe('the mailbox rule where mail is sent (SQLite, real SMTP)', () => {
  const sqlite = useBackend('sqlite');

  it('hostile spellings are refused before anything is stored or mailed; the normalised address gets one mail', async () => {
    const mailer = createMailer(
      { smtpUrl: smtp.url, mailFrom: 'noreply@example.com', baseUrl: 'http://127.0.0.1:8080' },
      quiet,
    );
    const { signIn, db } = await fresh(sqlite, { mailer });
    const before = { deliveries: smtp.deliveries.length, connections: smtp.connections() };
    for (const address of HOSTILE) {
      await expect(signIn.sendCode(address, '192.0.2.1', BROWSER), address).rejects.toThrow(
        InvalidEmailError,
      );
      // The mailer itself refuses too, whoever calls it.
      await expect(mailer.sendSignInCode(address, '123456'), address).rejects.toThrow(
        /one normalised mailbox/,
      );
    }
    await signIn.settled();
    expect(await db.selectFrom('sign_in_codes').select('id').execute()).toEqual([]);
    expect(smtp.connections()).toBe(before.connections);

    // More than the per-address send limit's worth of spellings of one address, from one client: they
    // are one address.
    const spellings = [
      'Victim@Example.com',
      ' victim@example.com',
      'VICTIM@EXAMPLE.COM',
      'victim@Example.COM',
    ];
    const answers = [];
    for (let i = 0; i < SEND_LIMITS.perEmail + 2; i++) {
      answers.push(
        await signIn.sendCode(spellings[i % spellings.length] as string, '192.0.2.1', `browser-${i}`),
      );
    }
    expect(answers.filter((a) => a.ok)).toHaveLength(SEND_LIMITS.perEmail);
    await signIn.settled();
    await waitForDeliveries(before.deliveries + SEND_LIMITS.perEmail);
    for (const delivery of smtp.deliveries.slice(before.deliveries)) {
      expect(delivery.rcpt).toEqual(['victim@example.com']);
      expect(delivery.to).toBe('victim@example.com');
    }
  });
});

describe('the built server: sign-in forms with the mailbox rule and the daily limit', () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({ VIDSHEET_SMTP_URL: smtp.url, VIDSHEET_MAIL_FROM: 'noreply@vidsheet.test' });
  });
  afterAll(async () => {
    await server?.stop();
    removeServerDirs();
  });

  it('a hostile address gets the invalid-address message and no mail; a valid one gets one mail, to itself', async () => {
    const v = visitor();
    const before = { deliveries: smtp.deliveries.length, connections: smtp.connections() };
    for (const email of HOSTILE) {
      const { csrf } = await v.get(server.url);
      const answer = await v.post(server.url, '/keys/code', { _csrf: csrf, email });
      expect(answer.status, email).toBe(422);
      expect(answer.html).toContain('Please enter a valid e-mail address.');
      expect(answer.html).not.toContain('code is on its way');
    }
    const { csrf } = await v.get(server.url);
    const sent = await v.post(server.url, '/keys/code', { _csrf: csrf, email: ' Victim@Example.COM ' });
    expect(sent.status).toBe(200);
    expect(sent.html).toContain('If victim@example.com can sign in, a six-digit code is on its way.');
    await waitForDeliveries(before.deliveries + 1);
    expect(smtp.deliveries.at(-1)?.rcpt).toEqual(['victim@example.com']);
    // One connection: the one mail. The hostile forms opened none.
    expect(smtp.connections()).toBe(before.connections + 1);
  });

  it('after 20 wrong codes today the right code is refused with 429 and the daily-limit notice', async () => {
    const v = visitor();
    const email = 'guessed@example.com';
    const sendCode = async () => {
      const count = smtp.deliveries.length;
      const sent = await v.post(server.url, '/keys/code', { _csrf: (await v.get(server.url)).csrf, email });
      expect(sent.status).toBe(200);
      await waitForDeliveries(count + 1);
      return smtp.deliveries.at(-1)?.code as string;
    };
    const submit = async (code: string) => {
      const { csrf } = await v.get(server.url);
      return v.post(server.url, '/keys/sign-in', { _csrf: csrf, email, code });
    };
    for (let round = 0; round < WRONG_CODES_PER_DAY / MAX_TRIES_PER_CODE; round++) {
      const code = await sendCode();
      for (let i = 1; i <= MAX_TRIES_PER_CODE; i++) {
        const answer = await submit(wrong(code, i));
        expect(answer.status).toBe(422);
        expect(answer.html).toContain('That code is not right, or it has expired.');
      }
    }
    const right = await sendCode();
    const refused = await submit(right);
    expect(refused.status).toBe(429);
    expect(refused.html).toContain('Too many wrong codes for this address today. Try again after 00:00 UTC.');
    expect(v.cookie('vidsheet_session')).toBeUndefined();
  });
});
