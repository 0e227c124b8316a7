/**
 * Signed-in browsers on the keys page (DESIGN §5). The cookie holds a random token; the database holds
 * only its SHA-256, so a copy of the database signs nobody in, and sign-out and expiry are rows in the
 * database rather than state in one process: they hold on every server instance at once.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Clock } from '../billing/ledger.js';
import { writeTransaction } from '../db/open.js';
import type { Database } from '../db/schema.js';

/** The cookie's name, shared by the routes that set, read and clear it. */
export const SESSION_COOKIE = 'vidsheet_session';

/** A fixed lifetime from sign-in (not sliding), long enough that a regular user rarely signs in again. */
export const SESSION_TTL_S = 30 * 24 * 3600;

/** 32 random bytes in base64url, no padding: exactly 43 characters from this alphabet. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

const hashToken = (token: string): string => createHash('sha256').update(token).digest('hex');

export class Sessions {
  readonly #db: Kysely<Database>;
  readonly #clock: Clock;

  /** Every timestamp comes from `clock`, so tests can step past the TTL. */
  constructor(db: Kysely<Database>, options: { clock: Clock }) {
    this.#db = db;
    this.#clock = options.clock;
  }

  /**
   * A new random token (32 bytes, base64url); only its SHA-256 hex is stored. Called at every sign-in,
   * so a session id planted before sign-in (session fixation) never becomes a signed-in one. Expired
   * rows are removed here too, so the table does not grow without bound.
   */
  async create(accountId: number): Promise<string> {
    const token = randomBytes(32).toString('base64url');
    const now = this.#clock();
    const nowText = now.toISOString();
    await writeTransaction(this.#db, async (trx) => {
      await trx.deleteFrom('sessions').where('expires_at', '<=', nowText).execute();
      await trx
        .insertInto('sessions')
        .values({
          token_hash: hashToken(token),
          account_id: accountId,
          created_at: nowText,
          expires_at: new Date(now.getTime() + SESSION_TTL_S * 1000).toISOString(),
        })
        .execute();
    });
    return token;
  }

  /** The account id of a live session, or undefined (unknown, expired, or malformed token). */
  async accountId(token: string | undefined): Promise<number | undefined> {
    if (token === undefined || !TOKEN_PATTERN.test(token)) return undefined;
    const row = await this.#db
      .selectFrom('sessions')
      .select('account_id')
      .where('token_hash', '=', hashToken(token))
      .where('expires_at', '>', this.#clock().toISOString())
      .executeTakeFirst();
    return row?.account_id;
  }

  /** Sign-out: the token stops working at once, everywhere (its row is gone, not flagged in memory). */
  async destroy(token: string | undefined): Promise<void> {
    if (token === undefined || !TOKEN_PATTERN.test(token)) return;
    const tokenHash = hashToken(token);
    await writeTransaction(this.#db, (trx) =>
      trx.deleteFrom('sessions').where('token_hash', '=', tokenHash).execute(),
    );
  }

  /**
   * The session cookie's name for a base URL: `__Host-vidsheet_session` when it is https (DESIGN §5a),
   * so the browser keeps it Secure, on path /, and settable by this very host only (no sibling
   * subdomain can plant a session); plain `vidsheet_session` over http, where browsers refuse the prefix.
   */
  static cookieName(baseUrl: string): string {
    return new URL(baseUrl).protocol === 'https:' ? `__Host-${SESSION_COOKIE}` : SESSION_COOKIE;
  }

  /**
   * Cookie options for a base URL: httpOnly (no script reads the token), sameSite 'lax' (not sent on
   * cross-site posts), path '/', secure whenever the public address is https, maxAge SESSION_TTL_S
   * (seconds, as @fastify/cookie expects).
   */
  static cookieOptions(baseUrl: string): {
    httpOnly: true;
    sameSite: 'lax';
    path: '/';
    secure: boolean;
    maxAge: number;
  } {
    return {
      httpOnly: true,
      sameSite: 'lax',
      path: '/',
      secure: new URL(baseUrl).protocol === 'https:',
      maxAge: SESSION_TTL_S,
    };
  }
}
