/**
 * Sign-in by e-mail code (DESIGN §5 "Keys page"): 6 digits from a secure random source, valid 10
 * minutes, single use, stored only as an HMAC, at most 5 wrong tries per code; sending limited per
 * mailbox and client (so no one else can spend the owner's sends, DESIGN §5a "Sign-in cannot be
 * locked by others") and per client, submitting per client. Every limit is counted in the database,
 * not in memory, so it holds across server instances (DESIGN §8).
 *
 * No account enumeration: `sendCode` never looks accounts up (an account is created at the first
 * successful sign-in), so it does the same work and gives the same answer for every address; and it
 * does not wait for the mail server, so its time does not depend on where (or whether) mail goes.
 *
 * Whose code it is (DESIGN §5a "Sign-in cannot be locked by others"): a code belongs to the browser
 * that asked for it. `sendCode` takes that browser's sign-in session (a random token the keys page
 * keeps in a cookie, renewed at every send, see `newSignInSession`) and stores its SHA-256 with the
 * code; `verify` looks only at the newest code of the session presenting it. So another client never
 * touches the owner's code: asking a new code for the same mailbox (any spelling) leaves it live, and
 * wrong tries from elsewhere neither count against it nor burn it. Within one session the newest code
 * is the only one, and its 5 tries are the only ones.
 *
 * Over a day, sending new codes would renew those tries, so wrong codes are also counted per address,
 * client and UTC day, across codes (DESIGN §5a): after 20 from one client (IPv6 per /64), every try for
 * that address from that client is refused, the right code included, until 00:00 UTC; another client's
 * tries are not (DESIGN §5a "Sign-in cannot be locked by others": a correct, unexpired, unburned code is
 * never refused because of someone else's wrong ones). A session is free to make, so brute force stays
 * bounded by these per-client counts, not by sessions.
 *
 * Sending is limited per mailbox and client (5 per 10 minutes from one client address, IPv6 per /64)
 * and per client (30 per 10 minutes, whatever the mailbox): others cannot spend the owner's sends,
 * and no one client can mail any one mailbox more than 5 times in 10 minutes.
 *
 * An address is one mailbox by the one rule (src/core/mailbox.ts): the mailer is handed exactly the
 * address typed, normalised, while codes, the per-address send limit and the wrong-code count are kept
 * per mailbox key (DESIGN §5a "An account is a mailbox"), so `a+1@`, `a+2@`, ... from one client share
 * one count and a code mailed to any spelling signs in with any other spelling of that mailbox, to its
 * one account.
 */
import { createHash, createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import { addressKey } from '#vidsheet/core/client-address.js';
import { mailboxKey, normalizeMailbox } from '#vidsheet/core/mailbox.js';
import { excerpt } from '#vidsheet/core/redact.js';
import type { Clock, Ledger } from '../billing/ledger.js';
import { serializeOn, writeTransaction } from '../db/open.js';
import type { Database } from '../db/schema.js';
import type { Mailer, MailLog } from './mail.js';

/** How long a code is valid (DESIGN §5: 10 minutes). */
export const CODE_TTL_S = 600;
/** Wrong tries that burn a code (DESIGN §5). */
export const MAX_TRIES_PER_CODE = 5;
/**
 * Codes sent within a sliding window (DESIGN §5): `perEmail` per mailbox from one client (IPv6 per
 * /64), so nobody else can spend the owner's sends; `perIp` per client, whatever the mailbox.
 */
export const SEND_LIMITS = { perEmail: 5, perIp: 30, windowS: 600 } as const;
/** Codes submitted per IP within a sliding window (DESIGN §5), whatever the address. */
export const TRY_LIMIT = { perIp: 60, windowS: 600 } as const;
/** Wrong codes per address and client per UTC day, across codes (DESIGN §5a). */
export const WRONG_CODES_PER_DAY = 20;

/** The `settings` row holding the HMAC key (base64 of 32 random bytes), shared by every instance. */
export const CODE_HMAC_KEY_SETTING = 'code_hmac_key';

export type SendResult = { ok: true } | { ok: false; reason: 'rate_limited' };
/**
 * `rate_limited`: the IP's try limit (over in minutes); `address_limited`: the wrong codes this client
 * sent for this address today (over at 00:00 UTC).
 */
export type VerifyResult =
  | { ok: true; accountId: number }
  | { ok: false; reason: 'wrong_code' | 'rate_limited' | 'address_limited' };

/**
 * Thrown by `sendCode` for something that is not an e-mail address. Its `message` is a fixed sentence
 * the route can show on the form as it is (it never echoes the input, so it needs no escaping).
 */
export class InvalidEmailError extends Error {
  constructor() {
    super('Enter a valid e-mail address.');
    this.name = 'InvalidEmailError';
  }
}

/** Whether the address is one mailbox (src/core/mailbox.ts, the spelling accounts use); for form checks. */
export const isValidEmail = (email: string): boolean => normalizeMailbox(email) !== undefined;

/**
 * A new sign-in session: 32 random bytes, base64url. The keys page gives one to the browser at every
 * "Send code" (in a cookie living as long as a code), so a code can be checked only from the browser
 * that asked for it, and a session planted before that is never the one that holds a code.
 */
export const newSignInSession = (): string => randomBytes(32).toString('base64url');

/** What the database keeps of a sign-in session: its SHA-256, so a copy of it can try no code. */
const sessionHash = (session: string): string =>
  createHash('sha256').update(`sign-in:${session}`).digest('hex');

const CODE_PATTERN = /^\d{6}$/;
const KEY_BYTES = 32;

export class SignIn {
  readonly #db: Kysely<Database>;
  readonly #ledger: Ledger;
  readonly #mailer: Mailer;
  readonly #clock: Clock;
  readonly #log: MailLog;
  #key: Promise<Buffer> | undefined;
  readonly #deliveries = new Set<Promise<void>>();

  /** `clock` stamps every row (ISO text, compared as text), so tests can step through the windows. */
  constructor(deps: { db: Kysely<Database>; ledger: Ledger; mailer: Mailer; clock: Clock; log: MailLog }) {
    this.#db = deps.db;
    this.#ledger = deps.ledger;
    this.#mailer = deps.mailer;
    this.#clock = deps.clock;
    this.#log = deps.log;
  }

  /**
   * Makes a 6-digit code (crypto.randomInt, zero-padded), stores HMAC-SHA256(key, normalizedEmail + ':'
   * + code), and starts mailing it. Same result whether or not an account exists (no account is looked
   * up or created here). The code belongs to `session` (the asking browser's sign-in session, from
   * `newSignInSession`): only that session can use or burn it, and codes other sessions hold stay as
   * they are. Resolves once the code is stored and delivery has started, without waiting for the mail
   * server (a failed delivery is logged); a refused send stores and mails nothing.
   * Throws InvalidEmailError for something that is not an e-mail address.
   */
  async sendCode(email: string, address: string, session: string): Promise<SendResult> {
    const ip = addressKey(address); // the per-IP limits count IPv6 per /64
    const normalized = normalizeMailbox(email);
    const mailbox = mailboxKey(email);
    if (normalized === undefined || mailbox === undefined) throw new InvalidEmailError();
    const key = await this.#hmacKey();
    const code = randomInt(0, 1_000_000).toString().padStart(6, '0');
    const codeHmac = hmac(key, mailbox, code).toString('hex');
    const now = this.#clock();
    const nowText = now.toISOString();
    const windowStart = shift(now, -SEND_LIMITS.windowS);
    const stored = await writeTransaction(this.#db, async (trx) => {
      // Two instances sending to the same address or for the same IP at once count one after the other.
      await serializeOn(trx, emailLock(mailbox), ipLock(ip));
      // Rows older than both the window and a code's lifetime count for nothing any more.
      await trx
        .deleteFrom('sign_in_codes')
        .where('created_at', '<=', shift(now, -Math.max(SEND_LIMITS.windowS, CODE_TTL_S)))
        .execute();
      // Per mailbox from this client only: another client's sends never use up the owner's.
      const byEmail = await countSince(trx, { email: mailbox, ip }, windowStart);
      const byIp = await countSince(trx, { ip }, windowStart);
      if (byEmail >= SEND_LIMITS.perEmail || byIp >= SEND_LIMITS.perIp) return false;
      await trx
        .insertInto('sign_in_codes')
        .values({
          email: mailbox,
          code_hmac: codeHmac,
          ip,
          session_hash: sessionHash(session),
          created_at: nowText,
          expires_at: shift(now, CODE_TTL_S),
        })
        .execute();
      return true;
    });
    if (!stored) {
      this.#log.warn({ ip }, 'sign-in code refused: send limit reached');
      return { ok: false, reason: 'rate_limited' };
    }
    this.#deliver(normalized, code);
    return { ok: true };
  }

  /**
   * Checks a code against the newest code that `session` asked for that e-mail's mailbox, which must
   * still be live (unused, not expired, fewer than 5 wrong tries); codes other sessions asked for are
   * never looked at, so nothing another client submits can use, count against or burn them (no session,
   * or one that asked for no code, is simply a wrong code). Every call counts against the IP's try
   * limit; a wrong code also counts against that code (the 5th wrong try burns it). On success the code is marked used (in the
   * same transaction as the check, so two racing submissions cannot both win), the account is created
   * if needed (`ledger.findOrCreateAccount`) and its id returned. Every failure is 'wrong_code' (expired,
   * burned, used, superseded, malformed and wrong are not told apart: an attacker learns nothing), except
   * the per-IP try limit and the address's daily limit. Every wrong code for an address counts against
   * that address and this client for the UTC day (live code or not: the answer is the same either
   * way); once they have 20, each try for it from this client is refused unchecked, while another
   * client's right code still works. An invalid address is simply a wrong code: there can be no code
   * for it (and no address to count against).
   */
  async verify(
    email: string,
    code: string,
    address: string,
    session: string | undefined,
  ): Promise<VerifyResult> {
    const ip = addressKey(address); // the per-IP limits count IPv6 per /64
    const normalized = normalizeMailbox(email);
    const mailbox = mailboxKey(email);
    const submitted = code.replace(/\s+/g, '');
    const key = await this.#hmacKey();
    // Computed whatever the input, so a malformed submission takes the same path as a wrong one.
    const candidate = hmac(key, mailbox ?? '', submitted);
    const now = this.#clock();
    const nowText = now.toISOString();
    const windowStart = shift(now, -TRY_LIMIT.windowS);
    const day = nowText.slice(0, 10);
    const outcome = await writeTransaction(this.#db, async (trx) => {
      // Tries from one IP are counted, and one address's code checked and marked, one at a time, so two
      // racing submissions cannot both use a code or both pass a limit (on every instance).
      await serializeOn(trx, ipLock(ip), ...(mailbox === undefined ? [] : [emailLock(mailbox)]));
      await trx.deleteFrom('sign_in_tries').where('created_at', '<=', windowStart).execute();
      const tries = await trx
        .selectFrom('sign_in_tries')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('ip', '=', ip)
        .where('created_at', '>', windowStart)
        .executeTakeFirst();
      // A refused try is not recorded: the limit is "60 checked tries per window", not a lockout that
      // every further attempt extends.
      if (Number(tries?.n ?? 0) >= TRY_LIMIT.perIp) return 'rate_limited' as const;
      await trx.insertInto('sign_in_tries').values({ ip, created_at: nowText }).execute();
      if (mailbox === undefined) return 'wrong_code' as const;
      // Past days count for nothing any more.
      await trx.deleteFrom('sign_in_wrong_tries').where('day', '<', day).execute();
      // This client's wrong codes for this mailbox only: nobody else's tries can lock it out.
      const wrongToday = await trx
        .selectFrom('sign_in_wrong_tries')
        .select('wrong')
        .where('day', '=', day)
        .where('mailbox', '=', mailbox)
        .where('client', '=', ip)
        .executeTakeFirst();
      if ((wrongToday?.wrong ?? 0) >= WRONG_CODES_PER_DAY) return 'address_limited' as const;
      const countWrong = () =>
        trx
          .insertInto('sign_in_wrong_tries')
          .values({ day, mailbox, client: ip, wrong: 1 })
          .onConflict((oc) =>
            oc
              .columns(['day', 'mailbox', 'client'])
              .doUpdateSet((eb) => ({ wrong: eb('sign_in_wrong_tries.wrong', '+', 1) })),
          )
          .execute();
      // Only this session's newest code: another client's guesses never reach the owner's code.
      const row =
        session === undefined
          ? undefined
          : await trx
              .selectFrom('sign_in_codes')
              .select(['id', 'code_hmac', 'attempts', 'expires_at', 'used_at'])
              .where('email', '=', mailbox)
              .where('session_hash', '=', sessionHash(session))
              .orderBy('created_at', 'desc')
              .orderBy('id', 'desc')
              .limit(1)
              .executeTakeFirst();
      const live =
        row !== undefined &&
        row.used_at === null &&
        row.expires_at > nowText &&
        row.attempts < MAX_TRIES_PER_CODE;
      if (!live) {
        await countWrong();
        return 'wrong_code' as const;
      }
      const stored = Buffer.from(row.code_hmac, 'hex');
      const matches =
        CODE_PATTERN.test(submitted) &&
        stored.length === candidate.length &&
        timingSafeEqual(stored, candidate);
      if (!matches) {
        await countWrong();
        await trx
          .updateTable('sign_in_codes')
          .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
          .where('id', '=', row.id)
          .execute();
        if (row.attempts + 1 >= MAX_TRIES_PER_CODE) {
          this.#log.warn({ email: excerpt(normalized), ip }, 'sign-in code burned: too many wrong tries');
        }
        return 'wrong_code' as const;
      }
      await trx.updateTable('sign_in_codes').set({ used_at: nowText }).where('id', '=', row.id).execute();
      return 'ok' as const;
    });
    if (outcome === 'rate_limited') {
      this.#log.warn({ ip }, 'sign-in try refused: try limit reached');
      return { ok: false, reason: 'rate_limited' };
    }
    if (outcome === 'address_limited') {
      this.#log.warn(
        { email: excerpt(normalized), ip },
        'sign-in try refused: wrong codes for this address today',
      );
      return { ok: false, reason: 'address_limited' };
    }
    if (outcome === 'wrong_code' || normalized === undefined) return { ok: false, reason: 'wrong_code' };
    // After the commit: the ledger takes its own write transaction (they do not nest). Should this fail,
    // the code is spent and the person asks for a new one; nothing half-made is left behind.
    const account = await this.#ledger.accounts.findOrCreateAccount(normalized);
    return { ok: true, accountId: account.id };
  }

  /**
   * Resolves when every mail delivery started so far has finished, delivered or failed (failures are
   * already logged): for a clean shutdown, and for tests that wait for the mail.
   */
  async settled(): Promise<void> {
    while (this.#deliveries.size > 0) await Promise.all(this.#deliveries);
  }

  /** Starts the delivery and returns at once; its end (either way) is only logged. */
  #deliver(email: string, code: string): void {
    const delivery = (async () => this.#mailer.sendSignInCode(email, code))().then(
      () => undefined,
      (error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        this.#log.warn({ email: excerpt(email), error: message }, 'sign-in code mail could not be delivered');
      },
    );
    this.#deliveries.add(delivery);
    void delivery.finally(() => this.#deliveries.delete(delivery));
  }

  /** The HMAC key, read (or made, by whichever instance comes first) once and then kept in memory. */
  #hmacKey(): Promise<Buffer> {
    this.#key ??= loadHmacKey(this.#db).catch((error: unknown) => {
      this.#key = undefined;
      throw error;
    });
    return this.#key;
  }
}

/**
 * Insert-or-ignore and then read back: two instances starting together both end up with the one key
 * that won the insert, so a code sent through one verifies on the other.
 */
async function loadHmacKey(db: Kysely<Database>): Promise<Buffer> {
  const read = (conn: Kysely<Database>) =>
    conn.selectFrom('settings').select('value').where('name', '=', CODE_HMAC_KEY_SETTING).executeTakeFirst();
  let row = await read(db);
  if (row === undefined) {
    row = await writeTransaction(db, async (trx) => {
      await trx
        .insertInto('settings')
        .values({ name: CODE_HMAC_KEY_SETTING, value: randomBytes(KEY_BYTES).toString('base64') })
        .onConflict((oc) => oc.column('name').doNothing())
        .execute();
      return read(trx);
    });
  }
  const key = row === undefined ? undefined : Buffer.from(row.value, 'base64');
  if (key?.length !== KEY_BYTES) {
    throw new Error(`settings.${CODE_HMAC_KEY_SETTING} is not a base64 ${KEY_BYTES}-byte key`);
  }
  return key;
}

const hmac = (key: Buffer, email: string, code: string): Buffer =>
  createHmac('sha256', key).update(`${email}:${code}`).digest();

/** `serializeOn` keys: writers concerning one address, or one IP, wait for each other. */
const emailLock = (email: string): string => `sign-in:email:${email}`;
const ipLock = (ip: string): string => `sign-in:ip:${ip}`;

/** The clock's time moved by `seconds`, as the ISO text every timestamp column holds. */
const shift = (now: Date, seconds: number): string => new Date(now.getTime() + seconds * 1000).toISOString();

/** Codes sent since `since` from one client (`ip`), to one mailbox when `email` is given. */
async function countSince(
  trx: Kysely<Database>,
  by: { ip: string; email?: string },
  since: string,
): Promise<number> {
  let query = trx
    .selectFrom('sign_in_codes')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('ip', '=', by.ip)
    .where('created_at', '>', since);
  if (by.email !== undefined) query = query.where('email', '=', by.email);
  const row = await query.executeTakeFirst();
  return Number(row?.n ?? 0);
}
