/**
 * The ledger: accounts and keys, credits, and the job registry (DESIGN §5 "Credits", spec "Account,
 * credits and keys"), three parts over one database and one clock (books.ts).
 *
 * Money rules live in the database rather than in process memory, so they hold for an admin command
 * writing beside the server and for several servers sharing one PostgreSQL (DESIGN §8):
 * - every balance change is an append-only ledger entry written in the same transaction, so the sum
 *   of an account's entries always equals its balance;
 * - the debit is one conditional statement that cannot take a balance below zero (and a CHECK backs it);
 * - "exactly once" (a purchase per payment session, a refund per job, the allowance per UTC day) is a
 *   unique idempotency key on the ledger, not a check in code that two writers could both pass;
 * - every timestamp and every day comes from the injected clock, never from the database's `now`.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { Accounts } from './accounts.js';
import { Books, type Clock } from './books.js';
import { Credits } from './credits.js';
import { JobRegistry } from './job-registry.js';

export { hashKey, KEY_PATTERN, normalizeEmail } from './accounts.js';
export { type Account, type Clock, MAX_CREDITS, type Surface } from './books.js';

export class Ledger {
  readonly accounts: Accounts;
  readonly credits: Credits;
  readonly jobs: JobRegistry;

  /**
   * `allowanceFloor`: the balance a never-purchased account is raised to once per UTC day (spec: 7).
   * `instance` names the server instance whose worker runs the jobs this ledger charges: at start,
   * an instance refunds only the jobs it left running (several instances share one database).
   */
  constructor(db: Kysely<Database>, options: { allowanceFloor: number; clock?: Clock; instance?: string }) {
    const books = new Books(db, options.clock ?? (() => new Date()), options.instance ?? null);
    this.accounts = new Accounts(books);
    this.credits = new Credits(books, options.allowanceFloor);
    this.jobs = new JobRegistry(books, this.credits);
  }
}
