/**
 * The keys page's per-IP limits count a client by its address key (DESIGN §5, §5a): an IPv6 client
 * is its /64, an IPv4-mapped address its IPv4 address. Fake addresses only (the SignIn class on a real
 * SQLite database, no traffic): hopping through the addresses of one /64 buys no more codes or tries.
 */
import { describe, expect, it } from 'vitest';
import { Ledger } from '../../../src/server/billing/ledger.js';
import type { Mailer } from '../../../src/server/keys/mail.js';
import { SEND_LIMITS, SignIn, TRY_LIMIT } from '../../../src/server/keys/sign-in.js';
import { useBackend } from '../../helpers/databases.js';

const databases = useBackend('sqlite');

/** One browser's sign-in session: the tests here ask and check codes from the same browser. */
const BROWSER = 'browser-session-1';

async function fresh() {
  const { db } = await databases.fresh();
  const clock = () => new Date('2025-03-01T12:00:00.000Z');
  const ledger = new Ledger(db, { allowanceFloor: 7, clock });
  const sent: string[] = [];
  const mailer: Mailer = {
    kind: 'log',
    async sendSignInCode(to) {
      sent.push(to);
    },
  };
  const log = { info() {}, warn() {} };
  return { signIn: new SignIn({ db, ledger, mailer, clock, log }), sent };
}

/** The n-th address inside 2001:db8:5:6::/64 (each one a different full address). */
const inOne64 = (n: number) => `2001:db8:5:6:${(n % 0xffff).toString(16)}:0:0:${(n + 1).toString(16)}`;

describe('sign-in limits per client address', () => {
  it('codes sent from every address of one /64 share its send limit; the next /64 is another client', async () => {
    const { signIn, sent } = await fresh();
    for (let i = 0; i < SEND_LIMITS.perIp; i++) {
      expect(await signIn.sendCode(`person${i}@example.com`, inOne64(i), BROWSER)).toEqual({ ok: true });
    }
    expect(await signIn.sendCode('one-more@example.com', inOne64(999), BROWSER)).toEqual({
      ok: false,
      reason: 'rate_limited',
    });
    expect(await signIn.sendCode('one-more@example.com', '2001:db8:5:7::1', BROWSER)).toEqual({ ok: true });
    await signIn.settled();
    expect(sent).toHaveLength(SEND_LIMITS.perIp + 1);
  });

  it('an IPv4-mapped address is its IPv4 address for the send limit', async () => {
    const { signIn } = await fresh();
    for (let i = 0; i < SEND_LIMITS.perIp; i++) {
      const address = i % 2 ? '192.0.2.60' : '::ffff:192.0.2.60';
      expect((await signIn.sendCode(`mapped${i}@example.com`, address, BROWSER)).ok).toBe(true);
    }
    expect(await signIn.sendCode('last@example.com', '::FFFF:c000:023c', BROWSER)).toEqual({
      ok: false,
      reason: 'rate_limited',
    });
    expect((await signIn.sendCode('last@example.com', '192.0.2.61', BROWSER)).ok).toBe(true);
  });

  it('tries submitted from every address of one /64 share its try limit', async () => {
    const { signIn } = await fresh();
    // A new mailbox for every try, so only the per-client limit is in play (a mailbox has its own
    // daily wrong-code limit, which would otherwise stop these tries first).
    for (let i = 0; i < TRY_LIMIT.perIp; i++) {
      expect(await signIn.verify(`try${i}@example.com`, '000000', inOne64(i), BROWSER)).toEqual({
        ok: false,
        reason: 'wrong_code',
      });
    }
    expect(await signIn.verify('next@example.com', '000000', inOne64(12345), BROWSER)).toEqual({
      ok: false,
      reason: 'rate_limited',
    });
    expect(await signIn.verify('next@example.com', '000000', '2001:db8:5:7::1', BROWSER)).toEqual({
      ok: false,
      reason: 'wrong_code',
    });
  });
});
