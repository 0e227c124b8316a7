/**
 * DESIGN §5a "Kept videos cost storage", "An account is a mailbox", "Sign-in cannot be locked by
 * others", on SQLite (sheets in the data directory) and on PostgreSQL + S3-compatible storage, through
 * the app in process (test/helpers/app.ts): `inject`, or a raw client on loopback where the test is
 * about what happens before or while a body arrives. Accounts are made through the ledger; sign-in
 * mail goes to a real SMTP server in this process on loopback. Client addresses behind the proxy rule
 * are loopback addresses in `X-Forwarded-For` (one trusted hop); IPv6 /64 grouping is covered where
 * addresses are plain strings (test/core/client-address.test.ts, test/server/keys/sign-in-limits.test.ts).
 */
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Migrator, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/server/config.js';
import { migrationProvider } from '../../src/server/db/migrations.js';
import { WRONG_CODES_PER_DAY } from '../../src/server/keys/sign-in.js';
import { inProcessApps } from '../helpers/app.js';
import { BACKENDS } from '../helpers/databases.js';
import { useSmtp } from '../helpers/smtp.js';
import { visitor } from '../helpers/visitor.js';

const KIB = 1024;
const BOUNDARY = 'vidsheet-accounts-boundary';
const head = (filename = 'clip.mp4') =>
  Buffer.from(
    `--${BOUNDARY}\r\ncontent-disposition: form-data; name="video"; filename="${filename}"\r\n` +
      'content-type: video/mp4\r\n\r\n',
  );
const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
/** A multipart body whose `video` part is `bytes` bytes (the probe stands in: content does not matter). */
const form = (bytes: number) => Buffer.concat([head(), Buffer.alloc(bytes, 0x2a), tail]);

const keep = (key: string, body: Buffer) => ({
  method: 'POST' as const,
  url: '/v1/videos',
  headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
  payload: body,
});

/**
 * A raw HTTP/1.1 upload on loopback: the headers, then `chunks` one at a time (chunked when no length
 * is declared) until the answer starts or they run out. Resolves with the answer and how many body
 * bytes had been written by then.
 */
async function rawUpload(
  base: string,
  key: string,
  options: { declaredLength?: number; chunks: Buffer[] },
): Promise<{ status: number; body: string; sent: number; total: number }> {
  const { port } = new URL(base);
  const socket = net.connect(Number(port), '127.0.0.1');
  await once(socket, 'connect');
  socket.on('error', () => {});
  let received = Buffer.alloc(0);
  socket.on('data', (data: Buffer) => {
    received = Buffer.concat([received, data]);
  });
  const answer = () => {
    const text = received.toString('latin1');
    const end = text.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end))?.[1] ?? Number.NaN);
    const body = received.subarray(end + 4);
    if (!(body.length >= length)) return undefined;
    return { status: Number(text.slice(9, 12)), body: body.subarray(0, length).toString('utf8') };
  };
  const chunked = options.declaredLength === undefined;
  socket.write(
    'POST /v1/videos HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
      `Authorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=${BOUNDARY}\r\n` +
      (chunked ? 'Transfer-Encoding: chunked\r\n' : `Content-Length: ${options.declaredLength}\r\n`) +
      '\r\n',
  );
  const total = options.chunks.reduce((sum, chunk) => sum + chunk.length, 0);
  let sent = 0;
  for (const chunk of options.chunks) {
    await sleep(10);
    if (answer() || socket.destroyed) break;
    socket.write(
      chunked
        ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')])
        : chunk,
    );
    sent += chunk.length;
  }
  if (chunked && sent === total && !socket.destroyed) socket.write('0\r\n\r\n');
  for (let i = 0; i < 500 && !answer(); i++) await sleep(10);
  socket.destroy();
  const got = answer();
  if (!got) throw new Error(`no answer: ${JSON.stringify(received.toString('latin1').slice(0, 200))}`);
  return { ...got, sent, total };
}

/** `form(bytes)` cut into 64 KiB chunks. */
const chunksOf = (body: Buffer) =>
  Array.from({ length: Math.ceil(body.length / (64 * KIB)) }, (_, i) =>
    body.subarray(i * 64 * KIB, (i + 1) * 64 * KIB),
  );

// A real SMTP server on loopback, recording every connection, envelope and code.
const smtp = useSmtp();
const nextDelivery = (index: number) => smtp.delivery(index);

it('VIDSHEET_VIDEO_QUOTA_MB: 1024 by default, and what is configured', () => {
  expect(loadConfig({}).videoQuotaMb).toBe(1024);
  expect(loadConfig({ VIDSHEET_VIDEO_QUOTA_MB: '3' }).videoQuotaMb).toBe(3);
  expect(() => loadConfig({ VIDSHEET_VIDEO_QUOTA_MB: '0' })).toThrow(
    /VIDSHEET_VIDEO_QUOTA_MB must be an integer/,
  );
});

describe.each(BACKENDS)('on %s', (backend) => {
  const apps = inProcessApps(backend);

  describe('kept videos cost storage', () => {
    const QUOTA = '{"error":"video_quota","max_mb":1}';
    const env = { VIDSHEET_VIDEO_QUOTA_MB: '1', VIDSHEET_MAX_VIDEOS: '5' };

    it('a paying account keeps videos within the quota; one more past it is 409, before or while its body arrives, and nothing is kept', async () => {
      const a = await apps.build({ env });
      const paying = await a.account('payer@example.com', { purchase: 30 });
      // Two of 400 KiB: within 1 MB, past the allowance's one video, as before for paying accounts.
      for (let i = 0; i < 2; i++) {
        const res = await a.app.inject(keep(paying.key, form(400 * KIB)));
        expect(res.statusCode, res.body).toBe(201);
      }
      expect(await a.registry.usage(paying.id)).toEqual({ count: 2, bytes: 800 * KIB });
      const kept = await a.keptFiles();
      expect(kept).toHaveLength(2);
      const balance = (await a.ledger.accounts.accountById(paying.id))?.balance;

      // Declared: 50 MB announced, not one body byte sent.
      const base = await a.listen();
      const declared = await rawUpload(base, paying.key, { declaredLength: 50 * 1024 * KIB, chunks: [] });
      expect([declared.status, declared.body]).toEqual([409, QUOTA]);

      // As it streams: within the size cap and announced within the framing slack, but 400 KiB more
      // is past the 224 KiB left; answered part-way through.
      const body = form(400 * KIB);
      const third = await rawUpload(base, paying.key, {
        declaredLength: body.length,
        chunks: chunksOf(body),
      });
      expect([third.status, third.body]).toEqual([409, QUOTA]);
      expect(third.sent).toBeGreaterThan(224 * KIB);
      // Chunked, no length at all: 2 MiB offered, refused once the bytes left are crossed.
      const streamed = await rawUpload(base, paying.key, { chunks: chunksOf(form(2048 * KIB)) });
      expect([streamed.status, streamed.body]).toEqual([409, QUOTA]);
      expect(streamed.sent).toBeLessThan(streamed.total);

      // Nothing kept, nothing charged, nothing left in work/.
      expect(await a.registry.usage(paying.id)).toEqual({ count: 2, bytes: 800 * KIB });
      expect((await a.keptFiles()).sort()).toEqual(kept.sort());
      expect((await a.ledger.accounts.accountById(paying.id))?.balance).toBe(balance);
      expect(a.workLeft()).toEqual([]);

      // Counted once more as the row is written, for uploads of one account finishing together.
      const late = {
        accountId: paying.id,
        input: 'late.mp4',
        fileName: 'upload.mp4',
        durationMs: 1000,
        probe: {},
      };
      const limits = { maxVideos: 5, maxBytes: 1024 * KIB };
      expect(await a.registry.add({ ...late, videoId: 'late-one', bytes: 225 * KIB }, 60, limits)).toEqual({
        refused: 'bytes',
      });
      expect(
        await a.registry.add({ ...late, videoId: 'late-two', bytes: 1 }, 60, { ...limits, maxVideos: 2 }),
      ).toEqual({ refused: 'count' });

      // One that fits still does; another account has a quota of its own.
      expect((await a.app.inject(keep(paying.key, form(200 * KIB)))).statusCode).toBe(201);
      const other = await a.account('other@example.com', { grant: 5 });
      expect((await a.app.inject(keep(other.key, form(900 * KIB)))).statusCode).toBe(201);
    });

    it('an account that lives on the allowance keeps 1 video; a grant or a purchase lifts that', async () => {
      const a = await apps.build({ env });
      const free = await a.account('free@example.com');
      expect(await a.ledger.credits.livesOnAllowance(free.id)).toBe(true);
      expect((await a.app.inject(keep(free.key, form(10 * KIB)))).statusCode).toBe(201);
      // Refused unread: a 50 MB body announced, nothing sent, the count answers first.
      const base = await a.listen();
      const second = await rawUpload(base, free.key, { declaredLength: 50 * 1024 * KIB, chunks: [] });
      expect([second.status, second.body]).toEqual([409, '{"error":"too_many_videos","max_videos":1}']);
      expect(await a.registry.usage(free.id)).toEqual({ count: 1, bytes: 10 * KIB });

      // A day's allowance taken is still living on it.
      await a.ledger.credits.charge({
        accountId: free.id,
        jobId: 'allowance-job',
        price: 1,
        surface: 'http',
        density: '3x3',
        sheets: 1,
        ttlSeconds: 60,
      });
      expect(await a.ledger.credits.livesOnAllowance(free.id)).toBe(true);
      // An operator grant makes it an account like any other (DESIGN: "never an operator grant").
      await a.ledger.credits.grant(free.id, 1);
      expect(await a.ledger.credits.livesOnAllowance(free.id)).toBe(false);
      expect((await a.app.inject(keep(free.key, form(10 * KIB)))).statusCode).toBe(201);

      const buyer = await a.account('buyer@example.com', { purchase: 30 });
      expect(await a.ledger.credits.livesOnAllowance(buyer.id)).toBe(false);
    });
  });

  describe('an account is a mailbox', () => {
    it('every spelling of one mailbox opens its one account, with one daily allowance', async () => {
      const a = await apps.build();
      const { accounts, credits } = a.ledger;
      const first = await accounts.findOrCreateAccount('a+x@example.com');
      for (const spelling of ['a@example.com', 'A+other@Example.com', 'a+@example.com']) {
        expect((await accounts.findOrCreateAccount(spelling)).id, spelling).toBe(first.id);
        expect((await accounts.accountByEmail(spelling))?.id, spelling).toBe(first.id);
      }
      // The account keeps the spelling it was made with.
      expect((await accounts.accountById(first.id))?.email).toBe('a+x@example.com');
      const gmail = await accounts.findOrCreateAccount('jane.doe@gmail.com');
      expect((await accounts.findOrCreateAccount('janedoe+x@gmail.com')).id).toBe(gmail.id);
      expect((await accounts.findOrCreateAccount('J.A.N.E.D.O.E@GMAIL.COM')).id).toBe(gmail.id);
      // Not merged: dots elsewhere, googlemail.com with gmail.com, `-` tags.
      const distinct = ['a.x@example.com', 'janedoe@googlemail.com', 'a-x@example.com'];
      for (const spelling of distinct)
        expect((await accounts.findOrCreateAccount(spelling)).id, spelling).not.toBe(first.id);
      expect((await accounts.findOrCreateAccount('janedoe@googlemail.com')).id).not.toBe(gmail.id);
      const rows = await a.db.selectFrom('accounts').select('id').execute();
      expect(rows).toHaveLength(2 + distinct.length);

      // Racing spellings of a new mailbox make one account.
      const raced = await Promise.all(
        ['r+1@example.com', 'r+2@example.com', 'r@example.com', 'R+3@example.com'].map((e) =>
          accounts.findOrCreateAccount(e),
        ),
      );
      expect(new Set(raced.map((account) => account.id)).size).toBe(1);

      // One allowance a day for the mailbox, whichever spelling's key asks.
      const charge = async (email: string, jobId: string) =>
        credits.charge({
          accountId: (await accounts.findOrCreateAccount(email)).id,
          jobId,
          price: 7,
          surface: 'http',
          density: '6x6',
          sheets: 1,
          ttlSeconds: 60,
        });
      expect(await charge('a+x@example.com', 'j1')).toMatchObject({ ok: true, allowance: 7 });
      expect(await charge('a+y@example.com', 'j2')).toEqual({ ok: false, balance: 0, allowance: 0 });
    });

    it('signing in with any spelling opens the mailbox’s account; the mail goes to the address typed', async () => {
      const a = await apps.build({ smtpUrl: smtp.url });
      const base = await a.listen();
      const owner = await a.ledger.accounts.findOrCreateAccount('owner@example.com');
      const v = visitor();
      const before = smtp.deliveries.length;
      const sent = await v.post(base, '/keys/code', {
        _csrf: (await v.get(base)).csrf,
        email: 'Owner+Work@example.com',
      });
      expect(sent.status).toBe(200);
      const mail = await nextDelivery(before);
      expect(mail.rcpt).toEqual(['owner+work@example.com']);
      // The code came to the mailbox; it signs in under another spelling of it.
      const csrf = /name="_csrf" value="([^"]+)"/.exec(sent.html)?.[1] ?? '';
      const signedIn = await v.post(base, '/keys/sign-in', {
        _csrf: csrf,
        email: 'owner@example.com',
        code: mail.code,
      });
      expect(signedIn.status).toBe(303);
      const sessions = await a.db.selectFrom('sessions').select('account_id').execute();
      expect(sessions).toEqual([{ account_id: owner.id }]);
      expect(await a.db.selectFrom('accounts').select('id').execute()).toHaveLength(1);
    });

    it('rows from before that share a mailbox are left as they are; no new one joins them', async () => {
      const a = await apps.build();
      const migrator = new Migrator({ db: a.db, provider: migrationProvider });
      expect((await migrator.migrateTo('0006_videos')).error).toBeUndefined();
      const at = new Date().toISOString();
      for (const email of [
        'a+old@example.com',
        'a@example.com',
        'x.y@gmail.com',
        'xy+z@gmail.com',
        'solo@example.com',
      ])
        await sql`insert into accounts (email, created_at) values (${email}, ${at})`.execute(a.db);
      expect((await migrator.migrateToLatest()).error).toBeUndefined();

      const rows = await a.db
        .selectFrom('accounts')
        .select(['id', 'email', 'mailbox'])
        .orderBy('id')
        .execute();
      // The oldest row of a mailbox holds it; the younger ones keep their spelling and no key.
      expect(rows.map((r) => [r.email, r.mailbox])).toEqual([
        ['a+old@example.com', 'a@example.com'],
        ['a@example.com', null],
        ['x.y@gmail.com', 'xy@gmail.com'],
        ['xy+z@gmail.com', null],
        ['solo@example.com', 'solo@example.com'],
      ]);
      const id = (email: string) => rows.find((r) => r.email === email)?.id;
      const { accounts } = a.ledger;
      // Each old row by its own spelling; every other spelling opens the mailbox's holder.
      expect((await accounts.findOrCreateAccount('a@example.com')).id).toBe(id('a@example.com'));
      expect((await accounts.findOrCreateAccount('a+old@example.com')).id).toBe(id('a+old@example.com'));
      expect((await accounts.findOrCreateAccount('a+new@example.com')).id).toBe(id('a+old@example.com'));
      expect((await accounts.accountByEmail('xy+z@gmail.com'))?.id).toBe(id('xy+z@gmail.com'));
      expect((await accounts.accountByEmail('x.y+other@gmail.com'))?.id).toBe(id('x.y@gmail.com'));
      expect(await a.db.selectFrom('accounts').select('id').execute()).toHaveLength(5);
      // The database itself refuses a second row for a mailbox.
      await expect(
        sql`insert into accounts (email, mailbox, created_at) values ('a+dup@example.com', 'a@example.com', ${at})`.execute(
          a.db,
        ),
      ).rejects.toThrow();
    });
  });

  describe('sign-in cannot be locked by others', () => {
    it("20 wrong codes from client A lock A out; client B's correct code still signs in", async () => {
      const a = await apps.build({ smtpUrl: smtp.url, env: { VIDSHEET_TRUST_PROXY: '1' } });
      const base = await a.listen();
      const email = 'locked@example.com';
      const attacker = visitor({ 'x-forwarded-for': '127.0.0.9' });
      const owner = visitor({ 'x-forwarded-for': '127.0.0.10' });
      const submit = async (who: typeof owner, code: string) =>
        who.post(base, '/keys/sign-in', { _csrf: (await who.get(base)).csrf, email, code });
      const sendCode = async (who: typeof owner) => {
        const count = smtp.deliveries.length;
        const sent = await who.post(base, '/keys/code', { _csrf: (await who.get(base)).csrf, email });
        expect(sent.status).toBe(200);
        return (await nextDelivery(count)).code;
      };
      // The attacker never received a code: 20 guesses, none right.
      for (let i = 0; i < WRONG_CODES_PER_DAY; i++) {
        const answer = await submit(attacker, String(100000 + i));
        expect(answer.status).toBe(422);
      }
      const rows = await a.db.selectFrom('sign_in_wrong_tries').select(['client', 'wrong']).execute();
      expect(rows).toEqual([{ client: '127.0.0.9', wrong: WRONG_CODES_PER_DAY }]);
      // The owner asks for a code and signs in with it.
      const code = await sendCode(owner);
      const signedIn = await submit(owner, code);
      expect(signedIn.status).toBe(303);
      expect(owner.cookie('vidsheet_session')).toBeDefined();
      // The attacker stays locked, even with a right code of its own.
      const theirs = await sendCode(attacker);
      const refused = await submit(attacker, theirs);
      expect(refused.status).toBe(429);
      expect(refused.html).toContain(
        'Too many wrong codes for this address today. Try again after 00:00 UTC.',
      );
      expect(attacker.cookie('vidsheet_session')).toBeUndefined();
    });
  });
});
