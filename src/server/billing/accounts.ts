/**
 * Accounts and their API keys (spec "Account, credits and keys"): an account per mailbox (DESIGN §5a
 * "An account is a mailbox"), and keys stored only as their SHA-256 and a short prefix.
 *
 * Which account an address names: the row whose `email` is exactly that spelling, else the row that
 * holds its mailbox key. The first finds the rows from before mailbox keys that collided with an older
 * row of their mailbox (left as they were, so their owners keep them); the second makes every other
 * spelling of a mailbox (`a+x@`, `a.b@gmail.com`) open that mailbox's one account. A new account is
 * made only when neither exists, and `accounts.mailbox` is unique, so no new colliding account can be.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Kysely, UpdateQueryBuilder, UpdateResult } from 'kysely';
import { mailboxKey, normalizeMailbox } from '#vidsheet/core/mailbox.js';
import { serializeOn } from '../db/open.js';
import type { Database } from '../db/schema.js';
import { type Account, type Books, positiveInteger, required, toAccount } from './books.js';

export interface KeyInfo {
  id: number;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}

/** Spec: `vs_live_` followed by 40 hex characters (lowercase, as minted). */
export const KEY_PATTERN = /^vs_live_[0-9a-f]{40}$/;
const KEY_PREFIX_LENGTH = 12;

type KeyUpdate = UpdateQueryBuilder<Database, 'api_keys', 'api_keys', UpdateResult>;

/**
 * The one spelling of an address the accounts table holds (the mailbox rule, src/core/mailbox.ts), or a
 * clear Error when it is not one mailbox. Sign-in and the operator commands go through here too.
 */
export function normalizeEmail(email: string): string {
  const normalized = normalizeMailbox(email);
  if (normalized === undefined) throw new Error(`not an e-mail address: ${JSON.stringify(email)}`);
  return normalized;
}

/** Only this is stored for a key, so a copy of the database cannot be used to call the API. */
export const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');

export class Accounts {
  constructor(private readonly books: Books) {}

  /**
   * Signing in and operator commands name accounts by address: the account of that spelling or of its
   * mailbox (see above); the first use of a mailbox creates its account, under the spelling typed.
   */
  async findOrCreateAccount(email: string): Promise<Account> {
    const address = normalizeEmail(email);
    const mailbox = mailboxOf(address);
    return this.books.write(async (trx) => {
      // Two spellings of one new mailbox signing in at once (on any instance) make one account.
      await serializeOn(trx, `accounts:mailbox:${mailbox}`);
      const found = await accountNamed(trx, address, mailbox);
      if (found) return found;
      await trx
        .insertInto('accounts')
        .values({ email: address, mailbox, created_at: this.books.now() })
        .onConflict((oc) => oc.doNothing())
        .execute();
      return required(await accountNamed(trx, address, mailbox), `account ${address}`);
    });
  }

  /** The account an address names (its spelling's, else its mailbox's), or undefined. */
  async accountByEmail(email: string): Promise<Account | undefined> {
    const address = normalizeEmail(email);
    return accountNamed(this.books.db, address, mailboxOf(address));
  }

  async accountById(id: number): Promise<Account | undefined> {
    positiveInteger(id, 'account id');
    const row = await this.books.db
      .selectFrom('accounts')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toAccount(row);
  }

  /**
   * Mints `vs_live_` + 40 lowercase hex (160 random bits) and stores only its SHA-256 and its prefix.
   * The key itself is returned once and exists nowhere else afterwards.
   */
  async createKey(accountId: number): Promise<{ key: string; prefix: string; createdAt: string }> {
    positiveInteger(accountId, 'account id');
    const key = `vs_live_${randomBytes(20).toString('hex')}`;
    const prefix = key.slice(0, KEY_PREFIX_LENGTH);
    const createdAt = this.books.now();
    await this.books.write(async (trx) => {
      await this.books.lockAccount(trx, accountId);
      await trx
        .insertInto('api_keys')
        .values({ account_id: accountId, key_hash: hashKey(key), prefix, created_at: createdAt })
        .execute();
    });
    return { key, prefix, createdAt };
  }

  /**
   * The account a bearer key belongs to, or undefined for anything that is not a live key: wrong shape
   * (checked before hashing, so junk costs nothing), unknown, or revoked (effective at once).
   */
  async accountForKey(key: string): Promise<Account | undefined> {
    if (typeof key !== 'string' || !KEY_PATTERN.test(key)) return undefined;
    const row = await this.books.db
      .selectFrom('api_keys')
      .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
      .selectAll('accounts')
      .where('api_keys.key_hash', '=', hashKey(key))
      .where('api_keys.revoked_at', 'is', null)
      .executeTakeFirst();
    return row && toAccount(row);
  }

  /** Revokes by the full key (operator command); false when it is unknown or already revoked. */
  async revokeKey(key: string): Promise<boolean> {
    if (typeof key !== 'string' || !KEY_PATTERN.test(key)) return false;
    return this.#revoke((qb) => qb.where('key_hash', '=', hashKey(key)));
  }

  /** Revokes by id for the keys page, which knows keys only by id; a key of another account is left alone. */
  async revokeKeyById(accountId: number, keyId: number): Promise<boolean> {
    positiveInteger(accountId, 'account id');
    positiveInteger(keyId, 'key id');
    return this.#revoke((qb) => qb.where('id', '=', keyId).where('account_id', '=', accountId));
  }

  /** Every key of the account, revoked ones included, oldest first. */
  async listKeys(accountId: number): Promise<KeyInfo[]> {
    positiveInteger(accountId, 'account id');
    const rows = await this.books.db
      .selectFrom('api_keys')
      .select(['id', 'prefix', 'created_at', 'revoked_at'])
      .where('account_id', '=', accountId)
      .orderBy('id')
      .execute();
    return rows.map((row) => ({
      id: row.id,
      prefix: row.prefix,
      createdAt: row.created_at,
      revokedAt: row.revoked_at,
    }));
  }

  /** Marks the one live key `which` selects revoked now; false when there is none. */
  #revoke(which: (update: KeyUpdate) => KeyUpdate): Promise<boolean> {
    const now = this.books.now();
    return this.books.write(async (trx) => {
      const result = await which(trx.updateTable('api_keys').set({ revoked_at: now }))
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    });
  }
}

/** The mailbox key of an address already normalised (so it is one mailbox and has a key). */
const mailboxOf = (address: string): string => mailboxKey(address) ?? address;

/** The row spelled exactly `address`, else the one holding `mailbox` (at most one of each). */
async function accountNamed(
  db: Kysely<Database>,
  address: string,
  mailbox: string,
): Promise<Account | undefined> {
  const rows = await db
    .selectFrom('accounts')
    .selectAll()
    .where((eb) => eb.or([eb('email', '=', address), eb('mailbox', '=', mailbox)]))
    .execute();
  const row = rows.find((r) => r.email === address) ?? rows.find((r) => r.mailbox === mailbox);
  return row && toAccount(row);
}
