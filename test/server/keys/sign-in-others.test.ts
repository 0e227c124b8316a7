/**
 * Sign-in cannot be locked by others (DESIGN §5a), black-box: the built server, a real SMTP server in
 * this process, and browsers as clients from their own loopback addresses (the owner from one, the
 * attacker from another). Each attack the security review found is played in full, then the owner
 * signs in with the code in its mail, and gets a new code when it asks. Brute force stays bounded:
 * a client's wrong codes burn only its own code, and 20 of them a day lock only that client out.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_TRIES_PER_CODE, SEND_LIMITS, WRONG_CODES_PER_DAY } from '../../../src/server/keys/sign-in.js';
import { removeServerDirs, startServer, type TestServer } from '../../helpers/server.js';
import { useSmtp } from '../../helpers/smtp.js';
import { type Visitor, visitor } from '../../helpers/visitor.js';

const smtp = useSmtp();
let server: TestServer;
const visitors: Visitor[] = [];

beforeAll(async () => {
  server = await startServer({ VIDSHEET_SMTP_URL: smtp.url, VIDSHEET_MAIL_FROM: 'noreply@vidsheet.test' });
});
afterAll(async () => {
  await server?.stop();
  await Promise.all(visitors.map((v) => v.close()));
  removeServerDirs();
});

const WRONG_NOTICE = 'That code is not right, or it has expired. Check the newest mail, or send a new code.';
const SEND_LIMIT_NOTICE = 'Too many codes were asked for. Wait a few minutes, then try again.';
const DAILY_NOTICE = 'Too many wrong codes for this address today. Try again after 00:00 UTC.';

/** A browser on the keys page, connecting from the loopback address `from` (its client address). */
function browser(from: string) {
  const v = visitor({}, { from });
  visitors.push(v);
  return {
    /** POST "Send code"; when a code is sent, waits for its mail and returns the code too. */
    async ask(email: string): Promise<{ status: number; html: string; code?: string }> {
      const count = smtp.deliveries.length;
      const answer = await v.post(server.url, '/keys/code', { _csrf: (await v.get(server.url)).csrf, email });
      if (answer.status !== 200) return answer;
      const mail = await smtp.delivery(count);
      return { ...answer, code: mail.code };
    },
    async signIn(email: string, code: string) {
      return v.post(server.url, '/keys/sign-in', { _csrf: (await v.get(server.url)).csrf, email, code });
    },
    /** Whether this browser now sees the signed-in page. */
    async signedIn(): Promise<boolean> {
      return /Balance: \d+ credits/.test((await v.get(server.url)).html);
    },
  };
}

/** Another code than `code`, so a "wrong" try is never right by chance. */
const wrong = (code: string, step = 1) => ((Number(code) + step) % 1_000_000).toString().padStart(6, '0');

/** The owner signs in with `code`: a redirect to the signed-in page. */
async function expectSignsIn(owner: ReturnType<typeof browser>, email: string, code: string) {
  const answer = await owner.signIn(email, code);
  expect(answer.status, answer.html.match(/class="notice"[^>]*>([^<]*)/)?.[1]).toBe(303);
  expect(await owner.signedIn()).toBe(true);
}

describe('nothing another client does keeps the owner from signing in', () => {
  it("another client asking a code for the same mailbox (another spelling, or the same) leaves the owner's code working", async () => {
    const owner = browser('127.0.0.21');
    const attacker = browser('127.0.0.22');
    const email = 'supersede@example.com';
    const mine = await owner.ask(email);
    expect(mine.status).toBe(200);
    // The attacker asks for the same mailbox, under another spelling and the owner's own.
    for (const spelling of ['supersede+x@example.com', email]) {
      const theirs = await attacker.ask(spelling);
      expect(theirs.status).toBe(200);
      expect(theirs.code).not.toBe(mine.code);
    }
    await expectSignsIn(owner, email, mine.code as string);
    // And the owner gets a new code when it asks, which signs in too.
    const again = await owner.ask(email);
    expect(again.status).toBe(200);
    await expectSignsIn(owner, email, again.code as string);
  });

  it("another client's 5 wrong codes for the owner's address do not burn the owner's code", async () => {
    const owner = browser('127.0.0.23');
    const attacker = browser('127.0.0.24');
    const email = 'burn@example.com';
    const mine = await owner.ask(email);
    expect(mine.status).toBe(200);
    const code = mine.code as string;
    for (let i = 1; i <= MAX_TRIES_PER_CODE; i++) {
      const answer = await attacker.signIn(email, wrong(code, i));
      expect(answer.status).toBe(422);
      expect(answer.html).toContain(WRONG_NOTICE);
    }
    // Even the right code, from the browser that did not ask for it, is only a wrong code there.
    const stolen = await attacker.signIn(email, code);
    expect(stolen.status).toBe(422);
    expect(stolen.html).toContain(WRONG_NOTICE);
    expect(await attacker.signedIn()).toBe(false);
    await expectSignsIn(owner, email, code);
    const again = await owner.ask(email);
    expect(again.status).toBe(200);
    await expectSignsIn(owner, email, again.code as string);
  });

  it("another client spending the mailbox's sends (+tag spellings) does not keep the owner from getting a code", async () => {
    const owner = browser('127.0.0.25');
    const attacker = browser('127.0.0.26');
    const email = 'exhaust@example.com';
    const before = smtp.deliveries.length;
    for (let i = 0; i < SEND_LIMITS.perEmail; i++) {
      expect((await attacker.ask(`exhaust+a${i}@example.com`)).status).toBe(200);
    }
    // The attacker's own sends to this mailbox are used up...
    const refused = await attacker.ask(`exhaust+a${SEND_LIMITS.perEmail}@example.com`);
    expect(refused.status).toBe(429);
    expect(refused.html).toContain(SEND_LIMIT_NOTICE);
    expect(smtp.deliveries.length - before).toBe(SEND_LIMITS.perEmail);
    // ...the owner's are not: its code comes, and signs in.
    const mine = await owner.ask(email);
    expect(mine.status).toBe(200);
    await expectSignsIn(owner, email, mine.code as string);
  });
});

describe('brute force stays bounded per client', () => {
  it("a client's wrong codes burn its own code, and its 20th wrong code of the day locks it out, not the owner", async () => {
    const owner = browser('127.0.0.27');
    const attacker = browser('127.0.0.28');
    const email = 'guess@example.com';
    // The owner's code, asked before the attack, stays live through it.
    const mine = await owner.ask(email);
    expect(mine.status).toBe(200);

    // The attacker asks codes of its own (it reads them from the mail here, to know what "wrong" is),
    // and each is burned by its 5 wrong tries: the right one is refused afterwards.
    let wrongSoFar = 0;
    while (wrongSoFar + MAX_TRIES_PER_CODE < WRONG_CODES_PER_DAY) {
      const theirs = (await attacker.ask(email)).code as string;
      for (let i = 1; i <= MAX_TRIES_PER_CODE; i++) {
        expect((await attacker.signIn(email, wrong(theirs, i))).status).toBe(422);
      }
      wrongSoFar += MAX_TRIES_PER_CODE;
      const burned = await attacker.signIn(email, theirs);
      expect(burned.status).toBe(422);
      expect(burned.html).toContain(WRONG_NOTICE);
      wrongSoFar += 1; // the burned code, right as it is, was one more wrong code
    }
    // Wrong codes with no code of its own count too, up to 20 today.
    while (wrongSoFar < WRONG_CODES_PER_DAY) {
      expect((await attacker.signIn(email, '000000')).status).toBe(422);
      wrongSoFar += 1;
    }
    // From now on this client is refused unchecked, its own right code included.
    const last = (await attacker.ask(email)).code as string;
    const locked = await attacker.signIn(email, last);
    expect(locked.status).toBe(429);
    expect(locked.html).toContain(DAILY_NOTICE);
    expect(await attacker.signedIn()).toBe(false);

    // The owner's code was never touched.
    await expectSignsIn(owner, email, mine.code as string);
  });
});
