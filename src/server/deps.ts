/** What the app is built from: every stateful part is made by server.ts (or a test) and passed in. */
import type { Admission } from './admission.js';
import type { AnonymousLane } from './billing/anonymous-lane.js';
import type { Clock, Ledger } from './billing/ledger.js';
import type { ServerConfig } from './config.js';
import type { HostedJobs } from './jobs.js';
import type { SheetStorage } from './storage/storage.js';

export interface ServerDeps {
  config: ServerConfig;
  ledger: Ledger;
  storage: SheetStorage;
  admission: Admission;
  jobs: HostedJobs;
  /** The remote endpoint's anonymous daily quota. */
  anonymous: AnonymousLane;
  clock: Clock;
  version: string;
}
