/** What the app is built from: every stateful part is made by server.ts (or a test) and passed in. */

import type { AnonymousLane } from './billing/anonymous-lane.js';
import type { Clock, Ledger } from './billing/ledger.js';
import type { Payments } from './billing/payments.js';
import type { ServerConfig } from './config.js';
import type { Admission } from './hosted/admission.js';
import type { HostedJobs } from './hosted/jobs.js';
import type { Mailer } from './keys/mail.js';
import type { Sessions } from './keys/sessions.js';
import type { SignIn } from './keys/sign-in.js';
import type { SheetStorage } from './storage/storage.js';

export interface ServerDeps {
  config: ServerConfig;
  ledger: Ledger;
  storage: SheetStorage;
  admission: Admission;
  jobs: HostedJobs;
  /** The remote endpoint's anonymous daily quota. */
  anonymous: AnonymousLane;
  /** The keys page: browser sessions, e-mail sign-in, mail, Stripe payments. */
  sessions: Sessions;
  signIn: SignIn;
  mailer: Mailer;
  payments: Payments;
  /** Resolves when the database answers (health check). */
  checkDatabase: () => Promise<void>;
  clock: Clock;
  version: string;
}
