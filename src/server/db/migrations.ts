/**
 * Schema migrations, in code rather than files on disk, so the published package needs no migrations
 * directory and a bundler cannot lose one. Written with kysely's schema builder in types both SQLite and
 * PostgreSQL understand (`integer`, `text`; flags as 0/1; timestamps as ISO-8601 text), so the same
 * list migrates either database. Names sort in the order they must run; never edit a shipped one, add
 * the next.
 */
import {
  type ColumnDefinitionBuilder,
  type Kysely,
  type Migration,
  type MigrationProvider,
  SqliteAdapter,
  sql,
} from 'kysely';
import { mailboxKey } from '#vidsheet/core/mailbox.js';

/**
 * An auto-generated integer key. The one place the dialects need different DDL: SQLite's `autoincrement`
 * (ids never reused, even after a delete) against PostgreSQL's identity column.
 */
function idColumn(db: Kysely<unknown>): (col: ColumnDefinitionBuilder) => ColumnDefinitionBuilder {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  return (col) =>
    sqlite ? col.primaryKey().autoIncrement() : col.primaryKey().generatedByDefaultAsIdentity();
}

const initial: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('accounts')
      .addColumn('id', 'integer', idColumn(db))
      .addColumn('email', 'text', (col) => col.notNull().unique())
      .addColumn('balance', 'integer', (col) => col.notNull().defaultTo(0).check(sql`balance >= 0`))
      .addColumn('purchased', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('created_at', 'text', (col) => col.notNull())
      .execute();

    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'integer', idColumn(db))
      .addColumn('account_id', 'integer', (col) => col.notNull().references('accounts.id'))
      .addColumn('key_hash', 'text', (col) => col.notNull().unique())
      .addColumn('prefix', 'text', (col) => col.notNull())
      .addColumn('created_at', 'text', (col) => col.notNull())
      .addColumn('revoked_at', 'text')
      .execute();
    await db.schema.createIndex('api_keys_account').on('api_keys').column('account_id').execute();

    await db.schema
      .createTable('ledger')
      .addColumn('id', 'integer', idColumn(db))
      .addColumn('account_id', 'integer', (col) => col.notNull().references('accounts.id'))
      .addColumn('kind', 'text', (col) =>
        col.notNull().check(sql`kind in ('grant', 'allowance', 'purchase', 'charge', 'refund')`),
      )
      .addColumn('amount', 'integer', (col) => col.notNull())
      .addColumn('balance_after', 'integer', (col) => col.notNull())
      .addColumn('idempotency_key', 'text', (col) => col.notNull().unique())
      .addColumn('job_id', 'text')
      .addColumn('created_at', 'text', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('ledger_account').on('ledger').column('account_id').execute();

    await db.schema
      .createTable('jobs')
      .addColumn('job_id', 'text', (col) => col.primaryKey())
      .addColumn('account_id', 'integer', (col) => col.references('accounts.id'))
      .addColumn('surface', 'text', (col) => col.notNull().check(sql`surface in ('http', 'mcp')`))
      .addColumn('density', 'text', (col) => col.notNull())
      .addColumn('sheets', 'integer', (col) => col.notNull())
      .addColumn('credits', 'integer', (col) => col.notNull())
      .addColumn('refunded', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('state', 'text', (col) => col.notNull().check(sql`state in ('charged', 'done', 'failed')`))
      .addColumn('created_at', 'text', (col) => col.notNull())
      .addColumn('expires_at', 'text', (col) => col.notNull())
      .addColumn('swept_at', 'text')
      .execute();
    // The usage table reads an account's jobs newest first; the sweeper reads unswept jobs by expiry;
    // recovery at start reads jobs still `charged`.
    await db.schema
      .createIndex('jobs_account_created')
      .on('jobs')
      .columns(['account_id', 'created_at'])
      .execute();
    await db.schema
      .createIndex('jobs_unswept_expiry')
      .on('jobs')
      .column('expires_at')
      .where(sql.ref('swept_at'), 'is', null)
      .execute();
    await db.schema.createIndex('jobs_state').on('jobs').column('state').execute();
  },

  async down(db: Kysely<unknown>) {
    for (const table of ['jobs', 'ledger', 'api_keys', 'accounts'])
      await db.schema.dropTable(table).execute();
  },
};

/**
 * The anonymous remote lane's daily counters (DESIGN §5): one row per UTC day and counter key (a
 * subject's hash, a client IP, or `*` for the endpoint-wide ceiling). In the database, not in memory,
 * so the quota holds across server instances.
 */
const anonymousLane: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('anonymous_usage')
      .addColumn('day', 'text', (col) => col.notNull())
      .addColumn('counter', 'text', (col) => col.notNull())
      .addColumn('jobs', 'integer', (col) => col.notNull().check(sql`jobs >= 0`))
      .addPrimaryKeyConstraint('anonymous_usage_pk', ['day', 'counter'])
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('anonymous_usage').execute();
  },
};

/**
 * The keys page (DESIGN §5, §7): e-mail sign-in codes (only their HMAC), sign-in attempts per IP,
 * sessions (only the token's hash, so sign-out and expiry hold on every instance), Stripe Checkout
 * sessions with the pack they sell, and the webhook events already applied. `settings` keeps the
 * server's own secret (the code HMAC key), made once and shared by every instance.
 */
const keysPage: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('settings')
      .addColumn('name', 'text', (col) => col.primaryKey())
      .addColumn('value', 'text', (col) => col.notNull())
      .execute();
    await db.schema
      .createTable('sign_in_codes')
      .addColumn('id', 'integer', idColumn(db))
      .addColumn('email', 'text', (col) => col.notNull())
      .addColumn('code_hmac', 'text', (col) => col.notNull())
      .addColumn('ip', 'text', (col) => col.notNull())
      .addColumn('attempts', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('created_at', 'text', (col) => col.notNull())
      .addColumn('expires_at', 'text', (col) => col.notNull())
      .addColumn('used_at', 'text')
      .execute();
    await db.schema
      .createIndex('sign_in_codes_email')
      .on('sign_in_codes')
      .columns(['email', 'created_at'])
      .execute();
    await db.schema
      .createIndex('sign_in_codes_ip')
      .on('sign_in_codes')
      .columns(['ip', 'created_at'])
      .execute();
    await db.schema
      .createTable('sign_in_tries')
      .addColumn('id', 'integer', idColumn(db))
      .addColumn('ip', 'text', (col) => col.notNull())
      .addColumn('created_at', 'text', (col) => col.notNull())
      .execute();
    await db.schema
      .createIndex('sign_in_tries_ip')
      .on('sign_in_tries')
      .columns(['ip', 'created_at'])
      .execute();
    await db.schema
      .createTable('sessions')
      .addColumn('token_hash', 'text', (col) => col.primaryKey())
      .addColumn('account_id', 'integer', (col) => col.notNull().references('accounts.id'))
      .addColumn('created_at', 'text', (col) => col.notNull())
      .addColumn('expires_at', 'text', (col) => col.notNull())
      .execute();
    await db.schema
      .createTable('checkout_sessions')
      .addColumn('session_id', 'text', (col) => col.primaryKey())
      .addColumn('account_id', 'integer', (col) => col.notNull().references('accounts.id'))
      .addColumn('pack', 'text', (col) => col.notNull())
      .addColumn('credits', 'integer', (col) => col.notNull())
      .addColumn('created_at', 'text', (col) => col.notNull())
      .addColumn('completed_at', 'text')
      .execute();
    await db.schema
      .createTable('stripe_events')
      .addColumn('event_id', 'text', (col) => col.primaryKey())
      .addColumn('received_at', 'text', (col) => col.notNull())
      .execute();
  },
  async down(db: Kysely<unknown>) {
    for (const table of [
      'stripe_events',
      'checkout_sessions',
      'sessions',
      'sign_in_tries',
      'sign_in_codes',
      'settings',
    ])
      await db.schema.dropTable(table).execute();
  },
};

/**
 * Which server instance runs a job: several instances share one database, and at start each one
 * refunds only the jobs it left running, never those another instance is still working on.
 */
const jobOwner: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('jobs').addColumn('instance', 'text').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('jobs').dropColumn('instance').execute();
  },
};

/**
 * Sign-in's daily limit per address (DESIGN §5a): wrong codes counted per address and UTC day, across
 * codes and IPs. Code rows live only 10 minutes and tries are counted per IP, so neither can hold it.
 */
const signInWrongCodes: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('sign_in_wrong_codes')
      .addColumn('day', 'text', (col) => col.notNull())
      .addColumn('email', 'text', (col) => col.notNull())
      .addColumn('wrong', 'integer', (col) => col.notNull().check(sql`wrong >= 0`))
      .addPrimaryKeyConstraint('sign_in_wrong_codes_pk', ['day', 'email'])
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('sign_in_wrong_codes').execute();
  },
};

/**
 * Kept videos (DESIGN §9): one row per video, its owner, lifetime and probe facts. The account's live
 * videos are counted for the cap; the sweeper reads unswept ones by expiry or deletion.
 */
const videos: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('videos')
      .addColumn('video_id', 'text', (col) => col.primaryKey())
      .addColumn('account_id', 'integer', (col) => col.notNull().references('accounts.id'))
      .addColumn('input', 'text', (col) => col.notNull())
      .addColumn('file_name', 'text', (col) => col.notNull())
      .addColumn('bytes', 'integer', (col) => col.notNull())
      .addColumn('duration_ms', 'integer', (col) => col.notNull())
      .addColumn('probe', 'text', (col) => col.notNull())
      .addColumn('created_at', 'text', (col) => col.notNull())
      .addColumn('expires_at', 'text', (col) => col.notNull())
      .addColumn('deleted_at', 'text')
      .addColumn('swept_at', 'text')
      .execute();
    await db.schema
      .createIndex('videos_account')
      .on('videos')
      .columns(['account_id', 'expires_at'])
      .execute();
    await db.schema
      .createIndex('videos_unswept')
      .on('videos')
      .column('expires_at')
      .where(sql.ref('swept_at'), 'is', null)
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('videos').execute();
  },
};

/**
 * DESIGN §5a "An account is a mailbox", "Sign-in cannot be locked by others".
 *
 * `accounts.mailbox`: the mailbox key (src/core/mailbox.ts) of the account's address, unique, so no two
 * accounts can be made for one mailbox from now on. Existing rows are filled by the same rule, in id
 * order, and left as they are when they collide: the oldest row of a mailbox holds its key, a younger
 * one keeps `mailbox` null (a unique index admits any number of nulls on both databases) and is still
 * found by its own exact spelling, its keys and sessions untouched. So nobody loses an account, and
 * every spelling not already an account of its own opens the mailbox's oldest one.
 *
 * `sign_in_wrong_tries`: the daily wrong-code count per mailbox and client (IPv6 per /64), replacing
 * `sign_in_wrong_codes` (per address across clients, which let anyone lock an address out). Those rows
 * hold at most one day's counts and cannot be split by client, so they are dropped, not copied.
 */
const mailboxes: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('accounts').addColumn('mailbox', 'text').execute();
    const { rows } = await sql<{
      id: number;
      email: string;
    }>`select id, email from accounts order by id`.execute(db);
    const taken = new Set<string>();
    for (const row of rows) {
      const mailbox = mailboxKey(row.email);
      if (mailbox === undefined || taken.has(mailbox)) continue;
      taken.add(mailbox);
      await sql`update accounts set mailbox = ${mailbox} where id = ${row.id}`.execute(db);
    }
    await db.schema.createIndex('accounts_mailbox').on('accounts').column('mailbox').unique().execute();

    await db.schema
      .createTable('sign_in_wrong_tries')
      .addColumn('day', 'text', (col) => col.notNull())
      .addColumn('mailbox', 'text', (col) => col.notNull())
      .addColumn('client', 'text', (col) => col.notNull())
      .addColumn('wrong', 'integer', (col) => col.notNull().check(sql`wrong >= 0`))
      .addPrimaryKeyConstraint('sign_in_wrong_tries_pk', ['day', 'mailbox', 'client'])
      .execute();
    await db.schema.dropTable('sign_in_wrong_codes').execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('sign_in_wrong_tries').execute();
    await signInWrongCodes.up(db);
    await db.schema.dropIndex('accounts_mailbox').execute();
    await db.schema.alterTable('accounts').dropColumn('mailbox').execute();
  },
};

/**
 * DESIGN §5a "Sign-in cannot be locked by others": a code belongs to the browser that asked for it.
 * `sign_in_codes.session_hash` is the SHA-256 of that browser's sign-in session; codes already stored
 * keep null, which no session matches (they were at most 10 minutes from expiring anyway). The index
 * serves the one lookup by mailbox and session, and the send limit by mailbox and client.
 */
const codeSessions: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('sign_in_codes').addColumn('session_hash', 'text').execute();
    await db.schema
      .createIndex('sign_in_codes_session')
      .on('sign_in_codes')
      .columns(['email', 'session_hash', 'created_at'])
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropIndex('sign_in_codes_session').execute();
    await db.schema.alterTable('sign_in_codes').dropColumn('session_hash').execute();
  },
};

/** Every migration by name; kysely's Migrator runs the missing ones in name order. */
export const migrationProvider: MigrationProvider = {
  async getMigrations() {
    return {
      '0001_initial': initial,
      '0002_anonymous_lane': anonymousLane,
      '0003_keys_page': keysPage,
      '0004_job_owner': jobOwner,
      '0005_sign_in_wrong_codes': signInWrongCodes,
      '0006_videos': videos,
      '0007_mailboxes': mailboxes,
      '0008_sign_in_code_sessions': codeSessions,
    };
  },
};
