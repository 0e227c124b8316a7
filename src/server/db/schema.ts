/**
 * The server's tables as kysely sees them. The types are written for both dialects the server speaks
 * (SQLite, PostgreSQL): integers for money and flags (booleans are 0/1), and every
 * timestamp as ISO-8601 UTC text from the application's clock, which sorts correctly as text and
 * never depends on a database's own notion of "now".
 */
import type { Generated } from 'kysely';

/** One row per e-mail address; `balance` is kept in the same transaction as the ledger entry that moves it. */
export interface AccountsTable {
  id: Generated<number>;
  /** Trimmed and lowercased, so one person cannot end up with two accounts by capitalisation. */
  email: string;
  /**
   * The mailbox key of `email` (src/core/mailbox.ts), unique: no new account for a mailbox that has
   * one. Null only on rows from before it that collided with an older row of the same mailbox (they
   * are left as they were, found by their exact `email`).
   */
  mailbox: string | null;
  /** Credits; a CHECK keeps it from ever going below zero, whatever the code does. */
  balance: Generated<number>;
  /** 1 once any purchase was applied: such an account never receives the free allowance again. */
  purchased: Generated<number>;
  created_at: string;
}

/** API keys by hash only (spec: "Only its SHA-256 hash is stored"); a lost key cannot be recovered. */
export interface ApiKeysTable {
  id: Generated<number>;
  account_id: number;
  /** SHA-256 hex of the whole key. */
  key_hash: string;
  /** The first 12 characters (`vs_live_3f9a`), enough to tell keys apart on a page, useless to an attacker. */
  prefix: string;
  created_at: string;
  revoked_at: string | null;
}

export type LedgerKind = 'grant' | 'allowance' | 'purchase' | 'charge' | 'refund';

/** Append-only: every change of a balance is one row here, so the sum of `amount` always equals the balance. */
export interface LedgerTable {
  id: Generated<number>;
  account_id: number;
  kind: LedgerKind;
  /** Signed: charges are negative. */
  amount: number;
  balance_after: number;
  /**
   * Unique: what makes a purchase, a refund or a day's allowance happen at most once, enforced by the
   * database rather than by a check in code that two writers could both pass.
   */
  idempotency_key: string;
  job_id: string | null;
  created_at: string;
}

export type JobState = 'charged' | 'done' | 'failed';

/** Every hosted or remote job: the usage table of its account and the registry of its sheet URLs. */
export interface JobsTable {
  job_id: string;
  /** Null for the anonymous remote lane. */
  account_id: number | null;
  surface: 'http' | 'mcp';
  density: string;
  sheets: number;
  /** Credits charged (0 on the anonymous lane). */
  credits: number;
  refunded: Generated<number>;
  /** `charged` until the job ends; a row still `charged` at start was left by a crash. */
  state: JobState;
  created_at: string;
  /** When the job's sheets expire: their URLs answer 404 from then on, even before the sweeper ran. */
  expires_at: string;
  swept_at: string | null;
  /** The server instance whose worker runs the job (null for rows from before it was recorded). */
  instance: string | null;
}

/** Jobs taken on the anonymous remote lane, per UTC day and counter key (`*` is the whole endpoint). */
export interface AnonymousUsageTable {
  /** `YYYY-MM-DD`, UTC, from the application's clock. */
  day: string;
  counter: string;
  jobs: number;
}

/** Server-wide values made once (e.g. `code_hmac_key`), shared by every instance. */
export interface SettingsTable {
  name: string;
  value: string;
}

/** A sign-in code, stored only as an HMAC; single use (`used_at`), at most 5 wrong tries. */
export interface SignInCodesTable {
  id: Generated<number>;
  /**
   * The mailbox key of the address it was mailed to (like accounts.mailbox): every spelling of one
   * mailbox shares its codes and send limit, whichever spelling the mail went to.
   */
  email: string;
  code_hmac: string;
  /** Who asked for it (send limits per IP). */
  ip: string;
  /**
   * SHA-256 of the sign-in session (browser) that asked for it: only that session can use or burn it.
   * Null on codes from before migration 0008, which no session can use (they expire within 10 minutes).
   */
  session_hash: string | null;
  attempts: Generated<number>;
  created_at: string;
  expires_at: string;
  used_at: string | null;
}

/** One row per code submitted, for the per-IP limit on tries. */
export interface SignInTriesTable {
  id: Generated<number>;
  ip: string;
  created_at: string;
}

/**
 * Wrong codes submitted for one mailbox from one client in one UTC day, across codes (DESIGN §5a: at
 * most 20 per address and client, so another client's wrong tries never lock the owner out).
 */
export interface SignInWrongTriesTable {
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  /** Like accounts.mailbox. */
  mailbox: string;
  /** The client's address key (src/core/client-address.ts: IPv6 per /64). */
  client: string;
  wrong: number;
}

/** A signed-in browser: the cookie holds the token, the database only its SHA-256. */
export interface SessionsTable {
  token_hash: string;
  account_id: number;
  created_at: string;
  expires_at: string;
}

/** A Stripe Checkout Session we created, and the pack it sells (credited once, on its webhook). */
export interface CheckoutSessionsTable {
  session_id: string;
  account_id: number;
  pack: string;
  credits: number;
  created_at: string;
  completed_at: string | null;
}

/** Webhook events already applied (a replay changes nothing). */
export interface StripeEventsTable {
  event_id: string;
  received_at: string;
}

/**
 * A kept video (DESIGN §9): the upload's file in the sheet storage under `videos/<video_id>/`, and the
 * probe's facts, so a zoom neither downloads (the instance's cache) nor probes it again.
 */
export interface VideosTable {
  /** 128 random bits, base64url. */
  video_id: string;
  account_id: number;
  /** The upload's own file name (results name the input by it). */
  input: string;
  /** The stored file's name under `videos/<video_id>/` (the server's own, e.g. `upload.mp4`). */
  file_name: string;
  bytes: number;
  /** Clip duration in whole ms, as the probe established it. */
  duration_ms: number;
  /** The probe's facts as JSON (engine ProbeInfo), handed to every zoom instead of a new probe. */
  probe: string;
  created_at: string;
  expires_at: string;
  /** Set by `DELETE`: from then on the video is gone for every instance, whatever the sweeper did. */
  deleted_at: string | null;
  /** Set by the one sweeper that deleted its file (after expiry or `DELETE`). */
  swept_at: string | null;
}

export interface Database {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  ledger: LedgerTable;
  jobs: JobsTable;
  anonymous_usage: AnonymousUsageTable;
  settings: SettingsTable;
  sign_in_codes: SignInCodesTable;
  sign_in_tries: SignInTriesTable;
  sign_in_wrong_tries: SignInWrongTriesTable;
  sessions: SessionsTable;
  checkout_sessions: CheckoutSessionsTable;
  stripe_events: StripeEventsTable;
  videos: VideosTable;
}
