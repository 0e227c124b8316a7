/**
 * Keys-page sign-in (DESIGN §5, §7): codes stored only as an HMAC, single use, 10 minutes, 5 wrong
 * tries, the send and try limits, and sessions stored only as the token's hash, each on SQLite and on a
 * real PostgreSQL (DESIGN §8), racing instances included; the mail through a real SMTP server in this
 * process (loopback only) and the development log fallback; no account enumeration, in answer or in
 * time.
 */
import { createHash, createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ledger } from '../../../src/server/billing/ledger.js';
import {
  createMailer,
  LOG_CODE_MESSAGE,
  type Mailer,
  SIGN_IN_SUBJECT,
} from '../../../src/server/keys/mail.js';
import { SESSION_COOKIE, SESSION_TTL_S, Sessions } from '../../../src/server/keys/sessions.js';
import {
  CODE_HMAC_KEY_SETTING,
  CODE_TTL_S,
  InvalidEmailError,
  isValidEmail,
  MAX_TRIES_PER_CODE,
  SEND_LIMITS,
  SignIn,
  TRY_LIMIT,
} from '../../../src/server/keys/sign-in.js';
import { BACKENDS, type TestBackend, type TestDatabase, useBackend } from '../../helpers/databases.js';

/** One browser's sign-in session: the tests here ask and check codes from the same browser. */
const BROWSER = 'browser-session-1';

const BASE_URL = 'http://127.0.0.1:8080';

interface LogLine {
  level: 'info' | 'warn';
  o: Record<string, unknown>;
  m: string;
}

function captureLog() {
  const lines: LogLine[] = [];
  return {
    lines,
    info: (o: object, m: string) => void lines.push({ level: 'info', o: o as Record<string, unknown>, m }),
    warn: (o: object, m: string) => void lines.push({ level: 'warn', o: o as Record<string, unknown>, m }),
  };
}

/**
 * A fresh database of `databases` (or, with `sameAs`, a second server instance on that one), a clock
 * the test moves, and a mailer that records what it would send.
 */
async function fresh(databases: TestBackend, options: { mailer?: Mailer; sameAs?: TestDatabase } = {}) {
  const database = options.sameAs
    ? { db: await databases.open(options.sameAs.options), options: options.sameAs.options }
    : await databases.fresh();
  const db = database.db;
  const clock = { now: new Date('2025-03-01T12:00:00.000Z') };
  const now = () => clock.now;
  const ledger = new Ledger(db, { allowanceFloor: 7, clock: now });
  const sent: { to: string; code: string }[] = [];
  const mailer: Mailer = options.mailer ?? {
    kind: 'log',
    async sendSignInCode(to, code) {
      sent.push({ to, code });
    },
  };
  const log = captureLog();
  const signIn = new SignIn({ db, ledger, mailer, clock: now, log });
  const advance = (seconds: number) => {
    clock.now = new Date(clock.now.getTime() + seconds * 1000);
  };
  const lastCode = (): string => {
    const last = sent.at(-1);
    if (last === undefined) throw new Error('no code was mailed');
    return last.code;
  };
  return { database, db, ledger, signIn, sent, log, clock, now, advance, lastCode };
}

/** Another code than `code` (the next number, wrapping), so a "wrong" try is never right by chance. */
const wrong = (code: string, step = 1): string =>
  ((Number(code) + step) % 1_000_000).toString().padStart(6, '0');

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

/** The tests that are not about the database (mail, timing) run on SQLite only. */
const sqlite = useBackend('sqlite');

describe.each(BACKENDS)('on %s', (backend) => {
  const databases = useBackend(backend);

  describe('sign-in codes', () => {
    it('mails 6 digits and stores only their HMAC, never the code', async () => {
      const { database, db, signIn, sent, lastCode } = await fresh(databases);
      expect(await signIn.sendCode('  Alice@Example.COM ', '192.0.2.1', BROWSER)).toEqual({ ok: true });
      const code = lastCode();
      expect(code).toMatch(/^\d{6}$/);
      expect(sent).toEqual([{ to: 'alice@example.com', code }]);

      const rows = await db.selectFrom('sign_in_codes').selectAll().execute();
      expect(rows).toHaveLength(1);
      const row = rows[0];
      expect(row).toMatchObject({
        email: 'alice@example.com',
        ip: '192.0.2.1',
        attempts: 0,
        created_at: '2025-03-01T12:00:00.000Z',
        expires_at: '2025-03-01T12:10:00.000Z',
        used_at: null,
      });
      // The stored value is HMAC-SHA256(key, email:code) under the key in settings.
      const setting = await db
        .selectFrom('settings')
        .select('value')
        .where('name', '=', CODE_HMAC_KEY_SETTING)
        .executeTakeFirstOrThrow();
      const key = Buffer.from(setting.value, 'base64');
      expect(key).toHaveLength(32);
      expect(row?.code_hmac).toBe(
        createHmac('sha256', key).update(`alice@example.com:${code}`).digest('hex'),
      );
      for (const value of Object.values(row ?? {})) expect(String(value)).not.toContain(code);
      expect(await databases.storedAnywhere(database, code)).toBe(false);
    });

    it('codes are uniform-looking: always six digits, leading zeros kept', async () => {
      const { signIn, sent, advance } = await fresh(databases);
      for (let i = 0; i < 60; i++) {
        await signIn.sendCode(`user${i}@example.com`, `198.51.100.${i % 2}`, BROWSER);
        if (i % 20 === 19) advance(SEND_LIMITS.windowS);
      }
      expect(sent).toHaveLength(60);
      for (const { code } of sent) expect(code).toMatch(/^\d{6}$/);
      expect(new Set(sent.map((s) => s.code)).size).toBeGreaterThan(55);
    });

    it('creates the account at the first successful sign-in, and the code works once', async () => {
      const { signIn, ledger, lastCode } = await fresh(databases);
      await signIn.sendCode('bob@example.com', '192.0.2.1', BROWSER);
      expect(await ledger.accounts.accountByEmail('bob@example.com')).toBeUndefined();
      const code = lastCode();
      const first = await signIn.verify('Bob@Example.com', code, '192.0.2.1', BROWSER);
      const account = await ledger.accounts.accountByEmail('bob@example.com');
      expect(account).toBeDefined();
      expect(first).toEqual({ ok: true, accountId: account?.id });
      // Single use.
      expect(await signIn.verify('bob@example.com', code, '192.0.2.1', BROWSER)).toEqual({
        ok: false,
        reason: 'wrong_code',
      });
      // The next sign-in finds the same account.
      await signIn.sendCode('bob@example.com', '192.0.2.1', BROWSER);
      expect(await signIn.verify('bob@example.com', lastCode(), '192.0.2.1', BROWSER)).toEqual(first);
    });

    it('a code is valid for 10 minutes: 599 s later it works, 600 s later it does not', async () => {
      const { signIn, advance, lastCode } = await fresh(databases);
      await signIn.sendCode('carol@example.com', '192.0.2.1', BROWSER);
      const late = lastCode();
      advance(CODE_TTL_S);
      expect(await signIn.verify('carol@example.com', late, '192.0.2.1', BROWSER)).toEqual({
        ok: false,
        reason: 'wrong_code',
      });
      await signIn.sendCode('carol@example.com', '192.0.2.1', BROWSER);
      const inTime = lastCode();
      advance(CODE_TTL_S - 1);
      expect(await signIn.verify('carol@example.com', inTime, '192.0.2.1', BROWSER)).toMatchObject({
        ok: true,
      });
    });

    it('5 wrong tries burn the code; 4 do not', async () => {
      const { signIn, db, lastCode, log } = await fresh(databases);
      await signIn.sendCode('dave@example.com', '192.0.2.1', BROWSER);
      const code = lastCode();
      for (let i = 1; i <= MAX_TRIES_PER_CODE; i++) {
        expect(await signIn.verify('dave@example.com', wrong(code, i), '192.0.2.1', BROWSER)).toEqual({
          ok: false,
          reason: 'wrong_code',
        });
      }
      const row = await db.selectFrom('sign_in_codes').select('attempts').executeTakeFirstOrThrow();
      expect(row.attempts).toBe(MAX_TRIES_PER_CODE);
      expect(await signIn.verify('dave@example.com', code, '192.0.2.1', BROWSER)).toEqual({
        ok: false,
        reason: 'wrong_code',
      });
      expect(log.lines.some((l) => l.m.includes('burned'))).toBe(true);

      await signIn.sendCode('dave@example.com', '192.0.2.1', BROWSER);
      const next = lastCode();
      for (let i = 1; i < MAX_TRIES_PER_CODE; i++)
        await signIn.verify('dave@example.com', wrong(next, i), '192.0.2.1', BROWSER);
      expect(await signIn.verify('dave@example.com', next, '192.0.2.1', BROWSER)).toMatchObject({ ok: true });
    });

    it('malformed codes and invalid addresses are wrong codes; spaces inside a code are ignored', async () => {
      const { signIn, lastCode } = await fresh(databases);
      await signIn.sendCode('erin@example.com', '192.0.2.1', BROWSER);
      const code = lastCode();
      for (const bad of ['', '12345', 'abcdef', `${code}0`]) {
        expect(await signIn.verify('erin@example.com', bad, '192.0.2.1', BROWSER)).toEqual({
          ok: false,
          reason: 'wrong_code',
        });
      }
      expect(await signIn.verify('not an address', code, '192.0.2.1', BROWSER)).toEqual({
        ok: false,
        reason: 'wrong_code',
      });
      // Four malformed tries so far; the fifth try is the right code, typed with a space.
      expect(
        await signIn.verify('erin@example.com', `${code.slice(0, 3)} ${code.slice(3)}`, '192.0.2.1', BROWSER),
      ).toMatchObject({ ok: true });
    });

    it("a code is its session's: another session's new code or wrong tries leave it live, and cannot use it", async () => {
      const { signIn, lastCode, db } = await fresh(databases);
      await signIn.sendCode('olga@example.com', '192.0.2.1', BROWSER);
      const mine = lastCode();
      // Another browser asks for the same mailbox, under two spellings: it does not supersede mine.
      await signIn.sendCode('olga+x@example.com', '198.51.100.9', 'other-browser');
      await signIn.sendCode('Olga@example.com', '198.51.100.9', 'other-browser');
      const theirs = lastCode();
      // Its wrong tries, and my right code from it (or from no session), are wrong codes...
      for (let i = 1; i <= MAX_TRIES_PER_CODE; i++) {
        await signIn.verify('olga@example.com', wrong(theirs, i), '198.51.100.9', 'other-browser');
      }
      for (const session of ['other-browser', 'a-third-browser', undefined]) {
        expect(await signIn.verify('olga@example.com', mine, '198.51.100.9', session)).toEqual({
          ok: false,
          reason: 'wrong_code',
        });
      }
      // ...that burn only the other browser's newest code, never touching mine.
      const attempts = await db.selectFrom('sign_in_codes').select('attempts').orderBy('id').execute();
      expect(attempts.map((r) => r.attempts)).toEqual([0, 0, MAX_TRIES_PER_CODE]);
      expect(await signIn.verify('olga+phone@example.com', mine, '192.0.2.1', BROWSER)).toMatchObject({
        ok: true,
      });
    });

    it('only the newest code counts: sending a new one supersedes the older', async () => {
      const { signIn, lastCode } = await fresh(databases);
      await signIn.sendCode('frank@example.com', '192.0.2.1', BROWSER);
      const older = lastCode();
      await signIn.sendCode('frank@example.com', '192.0.2.1', BROWSER);
      const newer = lastCode();
      if (older !== newer) {
        expect(await signIn.verify('frank@example.com', older, '192.0.2.1', BROWSER)).toEqual({
          ok: false,
          reason: 'wrong_code',
        });
      }
      expect(await signIn.verify('frank@example.com', newer, '192.0.2.1', BROWSER)).toMatchObject({
        ok: true,
      });
    });

    it('two racing submissions of the right code: exactly one signs in', async () => {
      const { signIn, lastCode } = await fresh(databases);
      await signIn.sendCode('gina@example.com', '192.0.2.1', BROWSER);
      const code = lastCode();
      const results = await Promise.all([
        signIn.verify('gina@example.com', code, '192.0.2.1', BROWSER),
        signIn.verify('gina@example.com', code, '192.0.2.2', BROWSER),
      ]);
      expect(results.filter((r) => r.ok)).toHaveLength(1);
    });

    it('refuses the 6th code per address and client within 10 minutes, and sends again after the window', async () => {
      const { signIn, sent, db, advance } = await fresh(databases);
      for (let i = 0; i < SEND_LIMITS.perEmail; i++) {
        expect(await signIn.sendCode('hank@example.com', '203.0.113.9', `browser-${i}`)).toEqual({
          ok: true,
        });
        advance(10);
      }
      // Any spelling of the mailbox, from any browser of that client: the limit is per mailbox and client.
      expect(await signIn.sendCode('HANK+x@example.com', '203.0.113.9', 'browser-new')).toEqual({
        ok: false,
        reason: 'rate_limited',
      });
      expect(sent).toHaveLength(SEND_LIMITS.perEmail);
      expect(await db.selectFrom('sign_in_codes').select('id').execute()).toHaveLength(SEND_LIMITS.perEmail);
      // Another address is unaffected; so is the same address from another client.
      expect(await signIn.sendCode('ivy@example.com', '203.0.113.9', BROWSER)).toEqual({ ok: true });
      expect(await signIn.sendCode('hank@example.com', '192.0.2.1', BROWSER)).toEqual({ ok: true });
      // 600 s after the first code it has left the window; the others are still in it.
      advance(SEND_LIMITS.windowS - 10 * SEND_LIMITS.perEmail);
      expect(await signIn.sendCode('hank@example.com', '203.0.113.9', BROWSER)).toEqual({ ok: true });
      expect(await signIn.sendCode('hank@example.com', '203.0.113.9', BROWSER)).toEqual({
        ok: false,
        reason: 'rate_limited',
      });
    });

    it('refuses the 31st code per IP within 10 minutes', async () => {
      const { signIn, advance } = await fresh(databases);
      for (let i = 0; i < SEND_LIMITS.perIp; i++) {
        expect(await signIn.sendCode(`user${i}@example.com`, '192.0.2.7', BROWSER)).toEqual({ ok: true });
      }
      expect(await signIn.sendCode('one-more@example.com', '192.0.2.7', BROWSER)).toEqual({
        ok: false,
        reason: 'rate_limited',
      });
      expect(await signIn.sendCode('one-more@example.com', '192.0.2.8', BROWSER)).toEqual({ ok: true });
      advance(SEND_LIMITS.windowS);
      expect(await signIn.sendCode('another@example.com', '192.0.2.7', BROWSER)).toEqual({ ok: true });
    });

    it('refuses the 61st try per IP within 10 minutes, even with the right code, which stays usable', async () => {
      const { signIn, advance, lastCode } = await fresh(databases);
      await signIn.sendCode('jane@example.com', '192.0.2.1', BROWSER);
      const code = lastCode();
      for (let i = 0; i < TRY_LIMIT.perIp; i++) {
        expect(await signIn.verify(`nobody${i}@example.com`, '000000', '198.51.100.1', BROWSER)).toEqual({
          ok: false,
          reason: 'wrong_code',
        });
      }
      expect(await signIn.verify('jane@example.com', code, '198.51.100.1', BROWSER)).toEqual({
        ok: false,
        reason: 'rate_limited',
      });
      // The refused try did not touch the code: it works from another IP.
      expect(await signIn.verify('jane@example.com', code, '198.51.100.2', BROWSER)).toMatchObject({
        ok: true,
      });
      advance(TRY_LIMIT.windowS);
      expect(await signIn.verify('nobody@example.com', '000000', '198.51.100.1', BROWSER)).toEqual({
        ok: false,
        reason: 'wrong_code',
      });
    });

    it('an invalid address is refused with a clear error, and nothing is stored or sent', async () => {
      const { signIn, sent, db } = await fresh(databases);
      for (const bad of ['', 'no-at-sign', 'two words@example.com', `${'a'.repeat(250)}@example.com`]) {
        expect(isValidEmail(bad)).toBe(false);
        await expect(signIn.sendCode(bad, '192.0.2.1', BROWSER)).rejects.toThrow(InvalidEmailError);
      }
      await expect(signIn.sendCode('x', '192.0.2.1', BROWSER)).rejects.toThrow(
        'Enter a valid e-mail address.',
      );
      expect(isValidEmail(' Kim@Example.com ')).toBe(true);
      expect(sent).toHaveLength(0);
      expect(await db.selectFrom('sign_in_codes').select('id').execute()).toHaveLength(0);
    });

    it('two instances on one database share the HMAC key: a code sent by one verifies on the other', async () => {
      const first = await fresh(databases);
      const second = await fresh(databases, { sameAs: first.database });
      // Both make the key at once; one insert wins and both use it.
      await Promise.all([
        first.signIn.sendCode('lee@example.com', '192.0.2.1', BROWSER),
        second.signIn.sendCode('mia@example.com', '192.0.2.1', BROWSER),
      ]);
      const keys = await first.db.selectFrom('settings').selectAll().execute();
      expect(keys.map((k) => k.name)).toEqual([CODE_HMAC_KEY_SETTING]);
      await first.signIn.sendCode('lee@example.com', '192.0.2.1', BROWSER);
      expect(
        await second.signIn.verify('lee@example.com', first.lastCode(), '192.0.2.1', BROWSER),
      ).toMatchObject({
        ok: true,
      });
      expect(
        await first.signIn.verify('mia@example.com', second.lastCode(), '192.0.2.1', BROWSER),
      ).toMatchObject({
        ok: true,
      });
    });

    it('sends racing on two instances: still 5 codes per address and client', async () => {
      const first = await fresh(databases);
      const second = await fresh(databases, { sameAs: first.database });
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          (i % 2 ? first : second).signIn.sendCode(`race+${i}@example.com`, '192.0.2.1', `browser-${i}`),
        ),
      );
      expect(results.filter((r) => r.ok)).toHaveLength(SEND_LIMITS.perEmail);
      expect(await first.db.selectFrom('sign_in_codes').select('id').execute()).toHaveLength(
        SEND_LIMITS.perEmail,
      );
    });

    it('wrong tries racing on two instances: a code still takes at most 5, then is burned', async () => {
      const first = await fresh(databases);
      const second = await fresh(databases, { sameAs: first.database });
      await first.signIn.sendCode('guess@example.com', '192.0.2.1', BROWSER);
      const code = first.lastCode();
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          (i % 2 ? first : second).signIn.verify(
            'guess@example.com',
            wrong(code, i + 1),
            `198.51.100.${i}`,
            BROWSER,
          ),
        ),
      );
      expect(results.every((r) => !r.ok && r.reason === 'wrong_code')).toBe(true);
      const row = await first.db.selectFrom('sign_in_codes').select('attempts').executeTakeFirstOrThrow();
      expect(row.attempts).toBe(MAX_TRIES_PER_CODE);
      expect(await second.signIn.verify('guess@example.com', code, '192.0.2.1', BROWSER)).toEqual({
        ok: false,
        reason: 'wrong_code',
      });
    });
  });

  describe('sessions', () => {
    it('a session names its account; only the SHA-256 of its token is stored', async () => {
      const { database, db, ledger, now } = await fresh(databases);
      const account = await ledger.accounts.findOrCreateAccount('sam@example.com');
      const sessions = new Sessions(db, { clock: now });
      const token = await sessions.create(account.id);
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(await sessions.accountId(token)).toBe(account.id);
      const rows = await db.selectFrom('sessions').selectAll().execute();
      expect(rows).toEqual([
        {
          token_hash: createHash('sha256').update(token).digest('hex'),
          account_id: account.id,
          created_at: '2025-03-01T12:00:00.000Z',
          expires_at: '2025-03-31T12:00:00.000Z',
        },
      ]);
      expect(await databases.storedAnywhere(database, token)).toBe(false);
      // A fresh token every time (a new one at every sign-in).
      expect(await sessions.create(account.id)).not.toBe(token);
    });

    it('sign-out works at once, also for another instance on the same database', async () => {
      const first = await fresh(databases);
      const second = await fresh(databases, { sameAs: first.database });
      const account = await first.ledger.accounts.findOrCreateAccount('tia@example.com');
      const here = new Sessions(first.db, { clock: first.now });
      const there = new Sessions(second.db, { clock: second.now });
      const token = await here.create(account.id);
      const other = await here.create(account.id);
      expect(await there.accountId(token)).toBe(account.id);
      await there.destroy(token);
      expect(await here.accountId(token)).toBeUndefined();
      expect(await there.accountId(token)).toBeUndefined();
      // Only that session ended.
      expect(await here.accountId(other)).toBe(account.id);
      await here.destroy(undefined);
      await here.destroy('not a token');
    });

    it('expires after SESSION_TTL_S', async () => {
      const { db, ledger, now, advance } = await fresh(databases);
      const account = await ledger.accounts.findOrCreateAccount('uma@example.com');
      const sessions = new Sessions(db, { clock: now });
      const token = await sessions.create(account.id);
      advance(SESSION_TTL_S - 1);
      expect(await sessions.accountId(token)).toBe(account.id);
      advance(1);
      expect(await sessions.accountId(token)).toBeUndefined();
      // The next sign-in clears the expired row away.
      await sessions.create(account.id);
      expect(await db.selectFrom('sessions').select('token_hash').execute()).toHaveLength(1);
    });

    it('unknown and malformed tokens name nobody', async () => {
      const { db, ledger, now } = await fresh(databases);
      const account = await ledger.accounts.findOrCreateAccount('vic@example.com');
      const sessions = new Sessions(db, { clock: now });
      const token = await sessions.create(account.id);
      const hash = createHash('sha256').update(token).digest('hex');
      for (const bad of [undefined, '', 'abc', `${token}x`, token.slice(1), hash, `${token.slice(0, 42)}!`]) {
        expect(await sessions.accountId(bad)).toBeUndefined();
      }
      expect(await sessions.accountId('A'.repeat(43))).toBeUndefined();
    });
  });
});

describe('no account enumeration', () => {
  it('sendCode answers the same, in the same time, whether or not the address has an account', async () => {
    const log = captureLog();
    const mailer = createMailer({ smtpUrl: undefined, mailFrom: undefined, baseUrl: BASE_URL }, log);
    const { signIn, ledger, advance } = await fresh(sqlite, { mailer });
    await ledger.accounts.findOrCreateAccount('known@example.com');
    const known = 'known@example.com';
    const unknown = 'unknown@example.com';
    // Warm-up (HMAC key, prepared statements, JIT) outside the measurement.
    for (let i = 0; i < 3; i++) {
      await signIn.sendCode(`warm${i}@example.com`, '192.0.2.99', BROWSER);
    }
    const times: Record<string, number[]> = { [known]: [], [unknown]: [] };
    const answers: Record<string, unknown[]> = { [known]: [], [unknown]: [] };
    for (let run = 0; run < 30; run++) {
      // 150 s per pair keeps each address at 4 codes per window, well inside the send limit.
      advance(150);
      const order = run % 2 ? [known, unknown] : [unknown, known];
      for (const email of order) {
        const started = performance.now();
        answers[email]?.push(await signIn.sendCode(email, '192.0.2.50', BROWSER));
        times[email]?.push(performance.now() - started);
      }
    }
    expect(answers[known]).toEqual(answers[unknown]);
    expect(new Set(answers[known]?.map((a) => JSON.stringify(a)))).toEqual(new Set(['{"ok":true}']));
    const difference = Math.abs(median(times[known] ?? []) - median(times[unknown] ?? []));
    expect(difference).toBeLessThan(5);
    // Sending never created the account: that happens at the first successful sign-in only.
    expect(await ledger.accounts.accountByEmail(unknown)).toBeUndefined();
  });
});

describe('the sign-in mail', () => {
  const received: ParsedMail[] = [];
  const envelopes: { from: string; to: string[] }[] = [];
  let smtp: SMTPServer;
  let port = 0;

  beforeAll(async () => {
    smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      onData(stream, session, callback) {
        simpleParser(stream)
          .then((mail) => {
            received.push(mail);
            const from = session.envelope.mailFrom;
            envelopes.push({
              from: from ? from.address : '',
              to: session.envelope.rcptTo.map((r) => r.address),
            });
            callback();
          })
          .catch(callback);
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
    port = (smtp.server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => smtp.close(() => resolve()));
  });

  const waitForMail = async (count: number) => {
    for (let i = 0; i < 200 && received.length < count; i++) await new Promise((r) => setTimeout(r, 25));
    expect(received).toHaveLength(count);
    return received[count - 1] as ParsedMail;
  };

  it('goes over SMTP with the exact subject, the configured From, and the code as six digits', async () => {
    const log = captureLog();
    const mailer = createMailer(
      { smtpUrl: `smtp://127.0.0.1:${port}`, mailFrom: 'vidsheet <noreply@example.com>', baseUrl: BASE_URL },
      log,
    );
    expect(mailer.kind).toBe('smtp');
    expect(log.lines).toEqual([]);
    await mailer.sendSignInCode('olga@example.com', '042917');
    const mail = await waitForMail(1);
    expect(mail.subject).toBe(SIGN_IN_SUBJECT);
    expect(mail.subject).toBe('Your vidsheet sign-in code');
    expect(mail.from?.value).toEqual([{ name: 'vidsheet', address: 'noreply@example.com' }]);
    expect(envelopes[0]).toEqual({ from: 'noreply@example.com', to: ['olga@example.com'] });
    expect(mail.text?.match(/\b\d{6}\b/g)).toEqual(['042917']);
    expect(mail.text).toContain(`${BASE_URL}/keys`);
    await expect(mailer.sendSignInCode('olga@example.com', '12345')).rejects.toThrow('six digits');
  });

  it('sendCode does not wait for the mail; the mailed code signs in', async () => {
    const log = captureLog();
    const mailer = createMailer(
      { smtpUrl: `smtp://127.0.0.1:${port}`, mailFrom: 'vidsheet <noreply@example.com>', baseUrl: BASE_URL },
      log,
    );
    const { signIn } = await fresh(sqlite, { mailer });
    const before = received.length;
    expect(await signIn.sendCode('pat@example.com', '192.0.2.1', BROWSER)).toEqual({ ok: true });
    await signIn.settled();
    const mail = await waitForMail(before + 1);
    expect(mail.to && !Array.isArray(mail.to) ? mail.to.text : '').toBe('pat@example.com');
    const code = mail.text?.match(/\b\d{6}\b/)?.[0] ?? '';
    expect(await signIn.verify('pat@example.com', code, '192.0.2.1', BROWSER)).toMatchObject({ ok: true });
  });

  it('a failed delivery does not fail sendCode: it is logged', async () => {
    // A port that was just free: nothing listens there.
    const closed = new SMTPServer({ authOptional: true, logger: false });
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.server.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const log = captureLog();
    const mailer = createMailer(
      { smtpUrl: `smtp://127.0.0.1:${deadPort}`, mailFrom: 'noreply@example.com', baseUrl: BASE_URL },
      log,
    );
    const { signIn, log: signInLog } = await fresh(sqlite, { mailer });
    expect(await signIn.sendCode('quinn@example.com', '192.0.2.1', BROWSER)).toEqual({ ok: true });
    await signIn.settled();
    expect(signInLog.lines).toContainEqual(
      expect.objectContaining({ level: 'warn', m: 'sign-in code mail could not be delivered' }),
    );
  });

  it('without SMTP the code goes to the log, with a development-only warning at creation', async () => {
    const log = captureLog();
    const mailer = createMailer({ smtpUrl: undefined, mailFrom: undefined, baseUrl: BASE_URL }, log);
    expect(mailer.kind).toBe('log');
    expect(log.lines).toHaveLength(1);
    expect(log.lines[0]?.level).toBe('warn');
    expect(log.lines[0]?.m).toContain('development only');
    const { signIn } = await fresh(sqlite, { mailer });
    await signIn.sendCode('rae@example.com', '192.0.2.1', BROWSER);
    const line = log.lines.find((l) => l.m === LOG_CODE_MESSAGE);
    expect(line?.m).toBe('sign-in code (development only: no SMTP configured)');
    expect(line?.o).toEqual({ email: 'rae@example.com', code: expect.stringMatching(/^\d{6}$/) });
    expect(await signIn.verify('rae@example.com', String(line?.o.code), '192.0.2.1', BROWSER)).toMatchObject({
      ok: true,
    });
  });
});

describe('the session cookie', () => {
  it('cookie options: http-only, SameSite=Lax, path /, Secure exactly when the base URL is https', () => {
    expect(SESSION_COOKIE).toBe('vidsheet_session');
    expect(Sessions.cookieOptions('https://vidsheet.example.com')).toEqual({
      httpOnly: true,
      sameSite: 'lax',
      path: '/',
      secure: true,
      maxAge: SESSION_TTL_S,
    });
    expect(Sessions.cookieOptions('http://localhost:8080').secure).toBe(false);
  });
});
